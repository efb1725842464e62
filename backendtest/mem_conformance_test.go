package backendtest_test

import (
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest"
)

// The crash model's backend keeps the whole contract, so that what the
// power-cut tests find of a store on it holds of a store on any backend.
func TestMemConforms(t *testing.T) {
	backendtest.Run(t, func(t *testing.T) backendtest.Opener {
		return backendtest.NewMem().Open
	}, backendtest.RewriteInPlace(backendtest.MemRewrite))
}

func TestMemRunsSessions(t *testing.T) {
	backendtest.RunSessions(t, func(t *testing.T) checkpoint.Backend {
		b, err := backendtest.NewMem().Open()
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}
