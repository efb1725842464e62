package backendtest_test

import (
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest"
)

// memFlavours are the two kinds of storage a Mem models: object storage,
// whose lock is a lease, and a local directory, with the optional
// interfaces of package storage.
var memFlavours = []struct {
	name string
	opts []backendtest.MemOption
	run  []backendtest.Option
}{
	{"Remote", []backendtest.MemOption{backendtest.MemLease(leaseTTL)}, []backendtest.Option{backendtest.LeaseTTL(leaseTTL)}},
	{"Local", []backendtest.MemOption{backendtest.MemLocal()}, nil},
}

// The crash model's backend keeps the whole contract, in both flavours,
// so that what the power-cut tests find of a store on it holds of a store
// on any backend.
func TestMemConforms(t *testing.T) {
	for _, f := range memFlavours {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			backendtest.Run(t, func(t *testing.T) backendtest.Opener {
				return backendtest.NewMem(f.opts...).Open
			}, append(f.run, backendtest.RewriteInPlace(backendtest.MemRewrite))...)
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
