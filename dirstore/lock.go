package dirstore

import (
	"errors"
	"fmt"
	"os"

	"github.com/gocheckpoint/checkpoint/storage"
)

// writerLock is the lock of a store's single writer: an exclusive lock on
// the lock file, which any version of this package takes, and on the
// store's directory itself where the operating system can lock one.
//
// The lock file alone can be defeated: if it is deleted or replaced while
// a writer holds it, a second writer creates and locks a new file and both
// write (and prune each other's checkpoints). The directory cannot be
// swapped under the writer: every file operation of the store goes through
// an os.Root opened on it, so the directory a writer locks is exactly the
// one it writes in, whatever becomes of its name or of the lock file.
type writerLock struct {
	file *os.File
	dir  *os.File // nil where the directory cannot be locked
}

// LockName is the name of the writer's lock file in the directory (see
// Backend.Lock). The leading dot keeps it out of every store's listing.
const LockName = ".checkpoint.lock"

// lockedError adds to err, an ErrLocked for the lock file name in root, the
// process that holds the lock (where the system says) and what a reader
// should do instead.
func lockedError(root *os.Root, name string, err error) error {
	holder := ""
	switch pid := lockHolder(root, name); {
	case pid == os.Getpid():
		holder = " (by this process: close the other Store first)"
	case pid > 0:
		holder = fmt.Sprintf(" (by process %d)", pid)
	}
	return fmt.Errorf("%w%s; to read the store beside its writer, open it with ReadOnly()", err, holder)
}

// maxLockTries bounds how often lockFile opens the lock file anew because
// the file it locked was no longer the one at the name.
const maxLockTries = 10

// lockDir takes the writer's lock of root without waiting: a lock held by
// another writer, in this process or another, is ErrLocked. The kernel
// releases it when the process dies, so a crash never leaves a stale lock.
func lockDir(root *os.Root) (*writerLock, error) {
	f, err := lockFile(root, LockName)
	if err != nil {
		if errors.Is(err, errors.ErrUnsupported) {
			return nil, fmt.Errorf("writer lock: %w; open the store with ReadOnly", err)
		}
		return nil, err
	}
	l := &writerLock{file: f}
	d, err := root.Open(".")
	if err != nil {
		l.release()
		return nil, fmt.Errorf("open directory to lock it: %w", err)
	}
	switch ok, err := tryLock(d); {
	case err != nil:
		// The file system or the operating system cannot lock a
		// directory (Linux's NFS client refuses it): the lock file,
		// checked by lockFile, is the lock.
		d.Close()
	case !ok:
		// Another writer holds the directory although the lock file was
		// free: the file was deleted or replaced under it.
		d.Close()
		l.release()
		return nil, fmt.Errorf("%w (its lock file %s was removed or replaced while it held it)", storage.ErrLocked, LockName)
	default:
		l.dir = d
	}
	return l, nil
}

// release releases the lock.
func (l *writerLock) release() error {
	var err error
	if l.dir != nil {
		err = unlockFile(l.dir)
	}
	return errors.Join(err, unlockFile(l.file))
}

// lockFile takes an exclusive lock on the file name in root, creating it if
// needed, without waiting: a lock held elsewhere is ErrLocked. Once it holds
// the lock, it checks that the file it locked is still the one at name: a
// file deleted or replaced between the open and the lock may be locked by
// nobody else while a new one at name is locked by another caller, so then
// it releases it and starts again. The file stays when the lock is
// released: removing it would let a third caller lock a different file
// than the second one waits on.
func lockFile(root *os.Root, name string) (*os.File, error) {
	for range maxLockTries {
		f, err := root.OpenFile(name, os.O_RDWR|os.O_CREATE, filePerm)
		if err != nil {
			if fi, lerr := root.Lstat(name); lerr == nil && !fi.Mode().IsRegular() {
				// A directory made there by hand, say.
				return nil, fmt.Errorf("%w: the lock file %s is not a regular file (%v); remove it: %w", storage.ErrInvalid, name, fi.Mode().Type(), err)
			}
			return nil, err
		}
		ok, err := tryLock(f)
		if err != nil || !ok {
			f.Close()
			if err == nil {
				err = storage.ErrLocked
			}
			return nil, err
		}
		same, err := atName(root, name, f)
		if err != nil {
			unlockFile(f)
			return nil, err
		}
		if same {
			return f, nil
		}
		unlockFile(f)
	}
	return nil, fmt.Errorf("%w: %s was removed or replaced each of the %d times it was locked", storage.ErrLocked, name, maxLockTries)
}

// atName reports whether f is the file at name in root, not a file that
// was removed or replaced since it was opened. A symbolic link at name is
// an error: the file it leads to is not the one at name, and the link
// could be pointed elsewhere.
func atName(root *os.Root, name string, f *os.File) (bool, error) {
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	ni, err := root.Lstat(name)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if ni.Mode()&os.ModeSymlink != 0 {
		return false, fmt.Errorf("%w: the lock file %s is a symbolic link; remove it", storage.ErrInvalid, name)
	}
	return os.SameFile(fi, ni), nil
}

// unlockFile releases a lock taken on f and closes f.
func unlockFile(f *os.File) error {
	return errors.Join(unlock(f), f.Close())
}
