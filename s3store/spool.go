package s3store

import (
	"bytes"
	"crypto/md5"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
)

// DefaultSpoolMemory is how many bytes of an object Create and Replace hold
// in memory before they spool it to a temporary file (see SpoolDir).
const DefaultSpoolMemory = 4 << 20

// spool holds the bytes of one object until its PutObject: in memory up to
// a threshold, then in a temporary file, so that the memory an upload
// takes does not depend on the object's size while the PUT's body stays
// seekable and of known length (the SDK signs it, computes its checksum
// and sends it again on a retry by seeking back). It sums the bytes' MD5
// as they come (the ETag of a single PUT, which landed compares).
//
// The temporary file is removed when the spool is closed, on every path;
// where the system allows it (POSIX systems), it is removed as soon as it is
// created, so that not even a process killed mid-upload leaves it behind.
type spool struct {
	dir    string // "" is os.TempDir()
	memMax int
	create func(dir, pattern string) (*os.File, error)

	mem     []byte // the bytes while they fit in memMax; cap(mem) <= memMax
	f       *os.File
	removed bool // f's name is already gone
	n       int64
	sum     hash.Hash
}

func newSpool(cfg config) *spool {
	create := cfg.createTemp
	if create == nil {
		create = os.CreateTemp
	}
	return &spool{dir: cfg.spoolDir, memMax: cfg.spoolMem, create: create, sum: md5.New()}
}

// Write appends p, moving what is in memory to a temporary file when p
// would take it past the threshold.
func (s *spool) Write(p []byte) (int, error) {
	if s.f == nil && len(s.mem)+len(p) > s.memMax {
		if err := s.spill(); err != nil {
			return 0, err
		}
	}
	var n int
	var err error
	if s.f != nil {
		n, err = s.f.Write(p)
		if err != nil {
			err = fmt.Errorf("spool to %s: %w", s.f.Name(), err)
		}
	} else {
		if need := len(s.mem) + len(p); need > cap(s.mem) {
			// Doubling, but never past memMax: the memory stage holds
			// at most memMax bytes of capacity.
			grown := make([]byte, len(s.mem), min(max(2*cap(s.mem), need, 4096), s.memMax))
			copy(grown, s.mem)
			s.mem = grown
		}
		s.mem = append(s.mem, p...)
		n = len(p)
	}
	s.sum.Write(p[:n])
	s.n += int64(n)
	return n, err
}

// spill creates the temporary file and moves the memory's bytes to it.
func (s *spool) spill() error {
	f, err := s.create(s.dir, ".checkpoint-s3-spool-*")
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	s.f = f
	// Unlinked at once where an open file can be (POSIX); Windows may keep
	// the name until close.
	s.removed = os.Remove(f.Name()) == nil
	if _, err := f.Write(s.mem); err != nil {
		return fmt.Errorf("spool to %s: %w", f.Name(), err)
	}
	s.mem = nil
	return nil
}

// body returns a reader of the spooled bytes, seekable, from the start.
func (s *spool) body() io.ReadSeeker {
	if s.f == nil {
		return bytes.NewReader(s.mem)
	}
	return io.NewSectionReader(s.f, 0, s.n)
}

// size is the number of bytes spooled.
func (s *spool) size() int64 { return s.n }

// md5 returns the MD5 of the bytes spooled.
func (s *spool) md5() []byte { return s.sum.Sum(nil) }

// Close releases the memory and closes and removes the temporary file.
func (s *spool) Close() error {
	s.mem = nil
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	if !s.removed {
		if rerr := os.Remove(s.f.Name()); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
	}
	s.f = nil
	return err
}
