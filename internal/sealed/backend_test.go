package sealed_test

import (
	"testing"

	"filippo.io/age"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/internal/platformtest"
	"github.com/gocheckpoint/checkpoint/internal/sealed"
)

func testKeys(t testing.TB) *sealed.Keys {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	k, err := sealed.NewKeys(id, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// A sealing backend keeps the whole Backend contract of the backend it
// wraps: sizes are those of what was written, and every other promise holds
// through the encryption.
func TestSealedBackendKeepsTheContract(t *testing.T) {
	t.Parallel()
	k := testKeys(t)
	t.Run("Mem", func(t *testing.T) {
		t.Parallel()
		backendtest.Run(t, func(t *testing.T) backendtest.Opener {
			m := backendtest.NewMem(backendtest.MemLocal())
			return func() (checkpoint.Backend, error) {
				b, err := m.Open()
				if err != nil {
					return nil, err
				}
				return sealed.Wrap(b, k), nil
			}
		})
	})
	t.Run("MemRemote", func(t *testing.T) {
		t.Parallel()
		backendtest.Run(t, func(t *testing.T) backendtest.Opener {
			m := backendtest.NewMem()
			return func() (checkpoint.Backend, error) {
				b, err := m.Open()
				if err != nil {
					return nil, err
				}
				return sealed.Wrap(b, k), nil
			}
		})
	})
	t.Run("Dir", func(t *testing.T) {
		t.Parallel()
		var opts []backendtest.Option
		if platformtest.UnderWine() {
			// Wine 8 renames nothing over an open file (see dirstore's
			// own contract test).
			opts = append(opts, backendtest.ReplaceWaitsForReaders())
		}
		backendtest.Run(t, func(t *testing.T) backendtest.Opener {
			dir := t.TempDir()
			return func() (checkpoint.Backend, error) {
				b, err := dirstore.Open(dir, dirstore.NoSync())
				if err != nil {
					return nil, err
				}
				return sealed.Wrap(b, k), nil
			}
		}, opts...)
	})
}

// A sealing backend runs the sessions suite.
func TestSealedBackendRunsSessions(t *testing.T) {
	t.Parallel()
	k := testKeys(t)
	backendtest.RunSessions(t, func(t *testing.T) checkpoint.Backend {
		b, err := dirstore.Open(t.TempDir(), dirstore.NoSync())
		if err != nil {
			t.Fatal(err)
		}
		return sealed.Wrap(b, k)
	})
}
