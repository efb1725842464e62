//go:build windows

package dirstore

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// lockRangeLow and lockRangeHigh give the byte range locked: the first
// byte. Windows locks ranges,
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
