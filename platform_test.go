package checkpoint

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// skipOnWindows skips t on Windows, saying why the test cannot mean anything
// there (file modes, running as another user, FIFOs, signals). Every other
// test runs on Windows too.
func skipOnWindows(t testing.TB, why string) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("not on Windows: " + why)
	}
}

// skipUnderWine skips t when its Windows binary runs under Wine, for a
// reason that real Windows does not have; why names the Wine limitation.
// The test still runs on real Windows.
func skipUnderWine(t testing.TB, why string) {
	t.Helper()
	if underWine() {
		t.Skip("not under Wine: " + why)
	}
}

// canSymlink reports whether symbolic links can be made here, by making
// one: Windows makes them only with Developer Mode or administrator rights,
// and Wine 8 reports a link as made but makes none.
func canSymlink(t testing.TB) bool {
	t.Helper()
	dir := t.TempDir()
	link := filepath.Join(dir, "link")
	if err := os.Symlink(dir, link); err != nil {
		return false
	}
	fi, err := os.Lstat(link)
	return err == nil && fi.Mode()&fs.ModeSymlink != 0
}

// requireSymlinks skips t where canSymlink is false.
func requireSymlinks(t testing.TB) {
	t.Helper()
	if !canSymlink(t) {
		t.Skip("no symbolic links can be made here (Windows without Developer Mode or administrator rights, or Wine)")
	}
}
