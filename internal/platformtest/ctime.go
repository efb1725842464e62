package platformtest

import (
	"github.com/gocheckpoint/checkpoint/internal/fileid"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// ChangeTimeTickLimit bounds how long a test touches a file until its inode
// change time moves. Where the file system stamps change times from a
// coarse clock (Linux without multigrain timestamps, and file systems
// without them), two changes within one tick leave the same change time;
// tests that need a change to be seen touch the file until its change time
// moves instead of sleeping.
const ChangeTimeTickLimit = 10 * time.Second

// RewriteInPlace writes p over the file at path without a new inode and
// restores its modification time, as cp -p over it would, touching it
// until its inode change time differs from the one it had before, so that
// the rewrite is visible in its Version even where change times are coarse.
// Where the system gives no change time (ChangeTime returns 0), it writes
// and restores once.
func RewriteInPlace(t testing.TB, path string, p []byte) {
	t.Helper()
	was, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, p, 0); err != nil {
		t.Fatal(err)
	}
	TouchUntil(t, path, was.ModTime(), func(now os.FileInfo) bool {
		return ChangeTime(was) == 0 || ChangeTime(now) != ChangeTime(was)
	})
}

// PassChangeTimeOf returns once a change made now to a file of the file
// system of dir gets a later change time than the file at path has, so
// that a hard link to it, a chmod or a rewrite would be visible in its
// Version. It touches a probe file of its own in dir.
func PassChangeTimeOf(t testing.TB, path, dir string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	probe := filepath.Join(dir, "ctime-probe")
	if err := os.WriteFile(probe, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	at := time.Unix(0, 0)
	TouchUntil(t, probe, at, func(now os.FileInfo) bool {
		return ChangeTime(fi) == 0 || ChangeTime(now) > ChangeTime(fi)
	})
}

// TouchUntil sets the times of the file at path to at until done says
// the file's state is what the caller waits for, failing t if it is not
// after ChangeTimeTickLimit.
func TouchUntil(t testing.TB, path string, at time.Time, done func(os.FileInfo) bool) {
	t.Helper()
	deadline := time.Now().Add(ChangeTimeTickLimit)
	for {
		if err := os.Chtimes(path, at, at); err != nil {
			t.Fatal(err)
		}
		now, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if done(now) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the inode change time of %s did not move in %v of touching it", path, ChangeTimeTickLimit)
		}
	}
}

// ChangeTime returns the inode change time of fi in nanoseconds, or 0
// where the system does not give it (see fileid.ChangeTime).
func ChangeTime(fi os.FileInfo) int64 { return fileid.ChangeTime(fi) }
