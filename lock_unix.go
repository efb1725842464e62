//go:build unix

package checkpoint

import (
	"errors"
	"os"
	"syscall"
)

// lockDir takes the writer's lock on root: an exclusive flock on a lock file
// in the directory. The kernel releases it when the process dies, so a crash
// never leaves a stale lock. flock locks belong to the open file, so a second
// Open in the same process is refused as well.
func lockDir(root *os.Root) (*os.File, error) {
	return lockFile(root, lockName)
}

// lockFile takes an exclusive flock on the file name in root, creating it if
// needed, without waiting: a lock held elsewhere is ErrLocked.
func lockFile(root *os.Root, name string) (*os.File, error) {
	f, err := root.OpenFile(name, os.O_RDWR|os.O_CREATE, filePerm)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrLocked
		}
		return nil, err
	}
	return f, nil
}

// unlockDir releases the lock. The lock file stays: removing it would let a
// third writer lock a different file than the second one waits on.
//
// The lock is released explicitly before the file is closed: a flock
// belongs to the open file, which a process forked by another goroutine
// shares until it execs (the descriptor is close-on-exec, not closed at
// fork), so a Close alone could leave the store locked for a moment after
// Close returned, and an Open right after it would fail with ErrLocked.
func unlockDir(f *os.File) error {
	var err error
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	return errors.Join(err, f.Close())
}
