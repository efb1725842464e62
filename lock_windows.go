//go:build windows

package checkpoint

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// lockDir takes the writer's lock on root: an exclusive LockFileEx lock on a
// lock file in the directory (see lockFile).
func lockDir(root *os.Root) (*os.File, error) {
	return lockFile(root, lockName)
}

// lockFile takes an exclusive lock on the file name in root, creating it if
// needed, without waiting: a lock held elsewhere is ErrLocked. As flock on
// Unix, the lock belongs to the open handle, so a second Open in the same
// process is refused too, and Windows releases it when the process dies.
func lockFile(root *os.Root, name string) (*os.File, error) {
	f, err := root.OpenFile(name, os.O_RDWR|os.O_CREATE, filePerm)
	if err != nil {
		return nil, err
	}
	ok, err := tryLock(f)
	if err != nil || !ok {
		f.Close()
		if err == nil {
			err = ErrLocked
		}
		return nil, err
	}
	return f, nil
}

// unlockDir releases the lock and closes the file. The lock file stays:
// removing it would let a third writer lock a different file than the
// second one waits on.
func unlockDir(f *os.File) error {
	return errors.Join(unlock(f), f.Close())
}

// lockRange is the byte range locked: the first byte. Windows locks ranges,
// and a range may lie past the end of the file, so the lock file stays
// empty. Only the lock is ever taken on it, never a read or a write, which
// a locked range would refuse to other handles.
const lockRangeLow, lockRangeHigh = 1, 0

// tryLock takes an exclusive lock on f without waiting. It returns false
// and no error when another handle, in this process or another, holds it.
func tryLock(f *os.File) (bool, error) {
	var ol windows.Overlapped // offset 0
	err := windows.LockFileEx(windows.Handle(f.Fd()),
		windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY,
		0, lockRangeLow, lockRangeHigh, &ol)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return false, nil
	}
	if err != nil {
		return false, &os.PathError{Op: "LockFileEx", Path: f.Name(), Err: err}
	}
	return true, nil
}

// unlock releases the lock tryLock took. Closing the handle releases it
// too, but Windows says when only loosely; unlocking first frees it at once.
func unlock(f *os.File) error {
	var ol windows.Overlapped
	if err := windows.UnlockFileEx(windows.Handle(f.Fd()), 0, lockRangeLow, lockRangeHigh, &ol); err != nil {
		return &os.PathError{Op: "UnlockFileEx", Path: f.Name(), Err: err}
	}
	return nil
}
