//go:build unix

package dirstore

import (
	"errors"
	"os"
	"syscall"
)

// tryLock takes an exclusive flock on f without waiting, and reports false
// if another open file holds one. flock locks belong to the open file, so a
// second lock in the same process is refused as well.
func tryLock(f *os.File) (bool, error) {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.EWOULDBLOCK):
			return false, nil
		case !errors.Is(err, syscall.EINTR):
			return false, err
		}
	}
}

// unlock releases the flock on f. It is released explicitly before the
// file is closed: a flock belongs to the open file, which a process forked by
// another goroutine shares until it execs (the descriptor is close-on-exec,
// not closed at fork), so a close alone could leave the store locked for a
// moment after Close returned, and an Open right after it would fail with
// ErrLocked.
func unlock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
