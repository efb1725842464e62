package dirstore

import (
	"os"

	"github.com/gocheckpoint/checkpoint/storage"
)

// SetFault sets the fault seam of b, a backend of Open, and of its child
// stores (see fileIO.fault), for the package's external tests, which
// drive a store through it: fault is asked before each point inside one
// write of the directory, and an error it returns is that point's failure.
func SetFault(b storage.Backend, fault func(point, name string) error) {
	b.(*dirBackend).fault = fault
}

// HeldLock returns the files of the writer lock that b, a backend of Open,
// holds (the lock file, and the directory where it is locked too), or nil.
func HeldLock(b storage.Backend) []*os.File {
	d := b.(*dirBackend)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.lock == nil {
		return nil
	}
	held := []*os.File{d.lock.file}
	if d.lock.dir != nil {
		held = append(held, d.lock.dir)
	}
	return held
}

// LockFile takes the lock of the file name in dir as the writer lock takes
// its lock file, for a test that plays a process of the legacy sessions
// protocol; the lock is released by UnlockFile.
func LockFile(dir, name string) (*os.File, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return lockFile(root, name)
}

// UnlockFile releases the lock of LockFile and closes the file.
var UnlockFile = unlockFile

// OpenForRead opens the file name in root for reading as the directory's
// reads open it (without blocking, sharing deletion on Windows).
var OpenForRead = openForRead
