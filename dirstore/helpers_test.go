package dirstore

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint/internal/platformtest"
	"github.com/gocheckpoint/checkpoint/internal/testkit"
)

// What the tests need to know of the platform (see package platformtest).
var (
	skipOnWindows  = platformtest.SkipOnWindows
	rewriteInPlace = platformtest.RewriteInPlace
)

// dirNames returns the names in a directory, sorted.
var dirNames = testkit.DirNames

// writeString is a write function of a Backend that writes s.
func writeString(s string) func(w io.Writer) error {
	return func(w io.Writer) error {
		_, err := io.WriteString(w, s)
		return err
	}
}

// touch writes a small file of each name in dir.
func touch(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o644))
	}
}
