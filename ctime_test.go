package checkpoint

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Where the file system stamps inode change times from a coarse clock
// (Linux before multigrain timestamps, 6.13, and file systems without
// them: a tick of 1 to 10 ms), two changes within one tick leave the same
// change time. Tests that need a change to be seen touch a file until its
// change time moves, bounded by changeTimeTickLimit, instead of sleeping.
const changeTimeTickLimit = 10 * time.Second

// rewriteInPlace writes p over the file at path without a new inode and
// restores its modification time, as cp -p over it would, touching it
// until its inode change time differs from the one it had before, so that
// the rewrite is visible in its Version even where change times are coarse.
// Where the system gives no change time (changeTime returns 0), it writes
// and restores once.
func rewriteInPlace(t testing.TB, path string, p []byte) {
	t.Helper()
	was, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, p, 0); err != nil {
		t.Fatal(err)
	}
	touchUntil(t, path, was.ModTime(), func(now os.FileInfo) bool {
		return changeTime(was) == 0 || changeTime(now) != changeTime(was)
	})
}

// passChangeTimeOf returns once a change made now to a file of the file
// system of dir gets a later change time than the file at path has, so
// that a hard link to it, a chmod or a rewrite would be visible in its
// Version. It touches a probe file of its own in dir.
func passChangeTimeOf(t testing.TB, path, dir string) {
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
	touchUntil(t, probe, at, func(now os.FileInfo) bool {
		return changeTime(fi) == 0 || changeTime(now) > changeTime(fi)
	})
}

// touchUntil sets the times of the file at path to at until done says
// the file's state is what the caller waits for, failing t if it is not
// after changeTimeTickLimit.
func touchUntil(t testing.TB, path string, at time.Time, done func(os.FileInfo) bool) {
	t.Helper()
	deadline := time.Now().Add(changeTimeTickLimit)
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
			t.Fatalf("the inode change time of %s did not move in %v of touching it", path, changeTimeTickLimit)
		}
	}
}
