package s3store

import (
	"fmt"
	"os"
	"time"

	"github.com/gocheckpoint/checkpoint"
)

// An Option configures a Backend (see New).
type Option interface{ apply(*config) error }

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// DefaultLeaseTTL is the lease's expiry when LeaseTTL is not given.
const DefaultLeaseTTL = 30 * time.Second

type config struct {
	ttl time.Duration
	// pageSize is ListObjectsV2's MaxKeys: 0 leaves the server's default
	// (1,000 on AWS); tests set it small to cross many pages cheaply.
	pageSize int32
	// maxSize is the largest object Create and Replace write: MaxObjectSize;
	// tests lower it.
	maxSize int64
	// maxLease is the largest lease object read: maxLeaseSize; tests
	// lower it.
	maxLease int64
	// spoolDir is SpoolDir's directory ("" is os.TempDir()); spoolMem is
	// how many bytes an upload holds in memory before it spools to a file.
	spoolDir string
	spoolMem int
	// createTemp creates the spool's file (os.CreateTemp; tests fail it).
	createTemp func(dir, pattern string) (*os.File, error)
}

// minLeaseTTL is the shortest TTL LeaseTTL takes.
const minLeaseTTL = time.Second

// LeaseTTL sets how long the single-writer lease lives without a renewal
// (default DefaultLeaseTTL, at least one second). The holder writes d in
// the lease, renews it every third of d, and counts it valid until d minus
// a tenth after the start of its last successful renewal; a contender takes
// it over only after it has seen the lease unchanged for d by its own
// clock. So a writer that died is replaced after about d to 2d, and a
// writer that cannot reach the server for about d loses the lease. A
// contender judges each lease by the d its holder wrote, not by its own
// (a lease without one: DefaultLeaseTTL), so processes sharing a store
// may use different TTLs, and the command-line tool judges a writer's
// lease by the writer's.
func LeaseTTL(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < minLeaseTTL {
			return fmt.Errorf("s3store: lease TTL %v is shorter than one second: %w", d, checkpoint.ErrInvalid)
		}
		c.ttl = d
		return nil
	})
}

// maxObjectSize lowers the size limit of Create and Replace (tests).
func maxObjectSize(n int64) Option {
	return optionFunc(func(c *config) error { c.maxSize = n; return nil })
}

// listPageSize sets ListObjectsV2's MaxKeys (tests cross pages with few
// objects).
func listPageSize(n int32) Option {
	return optionFunc(func(c *config) error { c.pageSize = n; return nil })
}

// maxLeaseBytes lowers the largest lease object read (tests).
func maxLeaseBytes(n int64) Option {
	return optionFunc(func(c *config) error { c.maxLease = n; return nil })
}

// SpoolDir sets the directory of the temporary files Create, Replace and
// Rename spool an object to once it is larger than DefaultSpoolMemory
// bytes (default: os.TempDir()). The directory must exist and hold the
// largest checkpoint written (up to MaxObjectSize). A spool file is named
// ".checkpoint-s3-spool-*", holds one object until its PutObject has
// answered, and is removed on every path: at once where the system lets
// an open file be removed (POSIX; Windows may refuse), so that not even a
// killed process leaves it behind; otherwise when the PUT is done. A directory
// that cannot be written, or that fills up, fails the write with an error
// naming it, and nothing is published.
func SpoolDir(dir string) Option {
	return optionFunc(func(c *config) error {
		if dir == "" {
			return fmt.Errorf("s3store: empty spool directory: %w", checkpoint.ErrInvalid)
		}
		c.spoolDir = dir
		return nil
	})
}

// spoolMemory sets how many bytes an upload holds in memory before it
// spools to a file (tests).
func spoolMemory(n int) Option {
	return optionFunc(func(c *config) error { c.spoolMem = n; return nil })
}

// spoolCreate replaces os.CreateTemp for the spool's file (tests).
func spoolCreate(f func(dir, pattern string) (*os.File, error)) Option {
	return optionFunc(func(c *config) error { c.createTemp = f; return nil })
}
