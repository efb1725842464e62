package backendtest_test

import (
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest"
)

// memFlavours are the two kinds of storage a Mem models: object storage,
// and a local directory, with the optional interfaces of package storage.
var memFlavours = []struct {
	name string
	opts []backendtest.MemOption
}{
	{"Remote", nil},
	{"Local", []backendtest.MemOption{backendtest.MemLocal()}},
}

// The crash model's backend keeps the whole contract, in both flavours
// (the remote one with a lease, as s3store's), so that what the power-cut
// tests find of a store on it holds of a store on any backend.
func TestMemConforms(t *testing.T) {
	for _, f := range memFlavours {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			opts, run := f.opts, []backendtest.Option{backendtest.RewriteInPlace(backendtest.MemRewrite)}
			if f.name == "Remote" {
				opts = append(opts, backendtest.MemLease(leaseTTL))
				run = append(run, backendtest.LeaseTTL(leaseTTL))
			}
			backendtest.Run(t, func(t *testing.T) backendtest.Opener {
				return backendtest.NewMem(opts...).Open
			}, run...)
		})
	}
}

func TestMemRunsSessions(t *testing.T) {
	for _, f := range memFlavours {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			backendtest.RunSessions(t, func(t *testing.T) checkpoint.Backend {
				b, err := backendtest.NewMem(f.opts...).Open()
				if err != nil {
					t.Fatal(err)
				}
				return b
			})
		})
	}
}
