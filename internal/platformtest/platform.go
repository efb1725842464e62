// Package platformtest holds what the tests of the checkpoint packages need
// to know of the platform they run on: what to skip where (Windows, Wine),
// symbolic links, FIFOs, running as another user, CPU time, and waiting
// for a file's inode change time to move. Tests only import it.
package platformtest

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// SkipOnWindows skips t on Windows, saying why the test cannot mean anything
// there (file modes, running as another user, FIFOs, signals). Every other
// test runs on Windows too.
func SkipOnWindows(t testing.TB, why string) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("not on Windows: " + why)
	}
}

// SkipUnderWine skips t when its Windows binary runs under Wine, for a
// reason that real Windows does not have; why names the Wine limitation.
// The test still runs on real Windows.
func SkipUnderWine(t testing.TB, why string) {
	t.Helper()
	if UnderWine() {
		t.Skip("not under Wine: " + why)
	}
}

// CanSymlink reports whether symbolic links can be made here, by making
// one: Windows makes them only with Developer Mode or administrator rights,
// and Wine 8 reports a link as made but makes none.
func CanSymlink(t testing.TB) bool {
	t.Helper()
	dir := t.TempDir()
	link := filepath.Join(dir, "link")
	if err := os.Symlink(dir, link); err != nil {
		return false
	}
	fi, err := os.Lstat(link)
	return err == nil && fi.Mode()&fs.ModeSymlink != 0
}

// RequireSymlinks skips t where CanSymlink is false.
func RequireSymlinks(t testing.TB) {
	t.Helper()
	if !CanSymlink(t) {
		t.Skip("no symbolic links can be made here (Windows without Developer Mode or administrator rights, or Wine)")
	}
}

// SkipUnlessLinux skips t elsewhere than on Linux, for tests written
// against Linux's file systems, /proc or its descriptor-based writer.
func SkipUnlessLinux(t testing.TB) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("proven on Linux only")
	}
}
