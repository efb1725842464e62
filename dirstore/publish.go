package dirstore

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/gocheckpoint/checkpoint/storage"
)

// The publish protocol: how a file comes to exist whole under its name, or
// not at all, in the directory. Create and Replace (writeFile) go through
// it top to bottom; Rename (moveNew) takes steps 4 and 5.
//
//  1. Create a temporary file in the same directory, exclusively, named
//     tempPrefix(name) and random digits (createTemp; temp.go): no other
//     file's name, and what RemoveTemps removes, for the next holder of
//     the writer lock, should a crash leave it. Where the directory's last
//     write was large (fileIO.ahead), the file is created on a goroutine
//     while the write function runs, which writes into memory until it
//     exists (pendingTemp; pending.go). On Linux, where creating a file
//     is dear (spareMin), a durable write of a directory that holds its
//     lock takes instead a file the last writes made while they waited
//     for their fsyncs, a file with no name yet, and links it under the
//     temporary name (spareTemp; spare.go).
//  2. Write the bytes, flush them, and fsync the file (unless NoSync;
//     the next write's spare is started here).
//  3. Close it.
//  4. Publish it under name without ever replacing (publishNew): on
//     Linux, for a plain name, a rename with RENAME_NOREPLACE; elsewhere,
//     and where the file system refuses that, a hard link, after which the
//     temporary name is removed; on a Windows volume without hard links
//     (FAT32, exFAT), a move that fails if name exists. A name that exists
//     is ErrExists and stays as it was. A Replace instead renames over
//     name (a reader sees the old file or the new one), after a
//     conditional Replace has checked, last, that the file there is still
//     the one it expects.
//  5. Fsync the directory (unless NoSync; Windows has no directory
//     fsync), so that the new name survives a power cut. If that fails, a
//     new name is taken back (removed) and the write fails: a write never
//     reports success for a name a power cut may take. A
//     CreateUncommitted stops before this step; its Commit takes it for
//     every name published so (commitNames), with one fsync, and takes
//     them all back if it fails.
//
// A crash at any instant leaves no file at name, or a whole one, and at
// worst a temporary file. With NoSync the steps are the same less the
// fsyncs: the publication is atomic for every process and survives the
// writer's crash, not a power cut. The fault points of the test seam
// (fileIO.fault) are named after the steps: "create", "write", "sync",
// "close", "publish", "dirsync". The platforms' system calls are in
// publish_unix.go and publish_windows.go, and, for Linux's calls on the
// directory's descriptor, in dir_write_linux.go.

// writeFile writes a new file called name in dir by the publish protocol
// above, and returns the number of bytes written. Unless replace, it never
// replaces an existing file: if name exists it returns an error wrapping
// ErrExists and leaves that file untouched. With replace, it renames over
// an existing file atomically (a store writes only the rolling checkpoint
// and side files this way).
func writeFile(dir dirOps, name string, write writeTo, replace bool, o fileIO) (n int64, err error) {
	// With o.ahead the file is created beside the write function, which
	// may still be encoding (see pendingTemp); the write then goes to it.
	// A spare the directory's last writes made (see spareTemp) is taken
	// at once. With o.ahead, one still being made is taken, or without
	// one the file created, beside the write function; without o.ahead,
	// before it.
	defer o.spare.begin()()
	ready, making := o.spare.state()
	p := startTemp(func() (tempFile, string, error) {
		if err := o.at("create", name); err != nil {
			return nil, "", err
		}
		if f, tmp, ok := o.spare.take(dir, name); ok {
			return f, tmp, nil
		}
		if o.spare == nil {
			return dir.createTemp(name)
		}
		began := time.Now()
		f, tmp, err := dir.createTemp(name)
		if err == nil {
			o.spare.created(time.Since(began))
		}
		return f, tmp, err
	}, o.ahead && (making || !ready))
	if !o.ahead {
		if _, _, err := p.created(); err != nil {
			return 0, fmt.Errorf("create temporary file: %w", err)
		}
	}
	published := false
	defer func() {
		if published {
			return
		}
		f, tmp, cerr := p.settle(true)
		if cerr != nil {
			return // no file
		}
		// A close error after a failure adds nothing; the file may
		// already be closed.
		_ = f.Close()
		if rerr := dir.remove(tmp); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = errors.Join(err, fmt.Errorf("remove temporary file: %w", rerr))
		}
	}()
	// The writer buffers what needs buffering (a compressor's output); the
	// temporary file of fdOps gathers a small file's writes into one.
	cw := &countingWriter{w: p}
	if err := o.at("write", name); err != nil {
		return 0, fmt.Errorf("write temporary file: %w", err)
	}
	werr := write(cw)
	f, tmp, cerr := p.settle(werr != nil)
	switch {
	case cerr != nil && cerr != errAbandoned:
		// The function may have failed at a Write that waited for
		// this creation: the creation's failure is the one to report.
		err := fmt.Errorf("create temporary file: %w", cerr)
		if werr != nil && !errors.Is(werr, cerr) {
			err = errors.Join(err, fmt.Errorf("write temporary file: %w", werr))
		}
		return 0, err
	case werr != nil:
		return 0, fmt.Errorf("write temporary file: %w", werr)
	}
	if err := p.file(); err != nil {
		return 0, fmt.Errorf("write temporary file: %w", err)
	}
	if b, ok := f.(interface{ Flush() error }); ok {
		if err := b.Flush(); err != nil {
			return 0, fmt.Errorf("write temporary file: %w", err)
		}
	}
	if !o.noSync {
		if err := o.at("sync", name); err != nil {
			return 0, fmt.Errorf("sync temporary file: %w", err)
		}
		// The next write's file is made while this one waits for the
		// disk.
		o.spare.fill(dir)
		if err := f.Sync(); err != nil {
			return 0, fmt.Errorf("sync temporary file: %w", err)
		}
	}
	if err := o.at("close", name); err != nil {
		return 0, fmt.Errorf("close temporary file: %w", err)
	}
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("close temporary file: %w", err)
	}
	if err := o.at("publish", name); err != nil {
		return 0, fmt.Errorf("publish: %w", err)
	}
	if replace {
		if o.unchanged != nil {
			if err := o.unchanged(); err != nil {
				return 0, err
			}
		}
		// Rename over name: a reader sees the old file or the new one.
		if err := dir.rename(tmp, name); err != nil {
			return 0, fmt.Errorf("publish: %w", err)
		}
		published = true
	} else {
		moved, err := dir.publishNew(tmp, name)
		if err != nil {
			if errors.Is(err, fs.ErrExist) {
				return 0, storage.ErrExists
			}
			return 0, fmt.Errorf("publish: %w", err)
		}
		published = true
		if !moved {
			// The checkpoint is whole under its name. Should the
			// temporary name fail to go, the next Open removes it;
			// failing the save here would report a checkpoint that
			// exists as not saved.
			_ = dir.remove(tmp)
		}
	}
	if o.noSync || o.uncommitted && !replace {
		return cw.n, nil
	}
	err = o.at("dirsync", name)
	if err == nil {
		err = dir.syncDir()
	}
	if err != nil {
		// The save failed, so it must not look done: a new name whose
		// directory entry may not be durable is taken back. A replaced
		// file cannot be restored; the failure is reported either way.
		if !replace {
			if rerr := dir.remove(name); rerr != nil {
				err = errors.Join(err, fmt.Errorf("take back %s: %w", name, rerr))
			}
		}
		return 0, fmt.Errorf("sync directory: %w", err)
	}
	return cw.n, nil
}

// commitNames makes the new names names, which writeFile published
// uncommitted, durable with one fsync of dir (step 5 of the protocol for
// them all). If the fsync fails, it takes each name back (removes it) and
// fails: none of them may survive a power cut. The fault point is
// "dirsync", with the name "".
func commitNames(dir dirOps, names []string, o fileIO) error {
	if o.noSync {
		return nil
	}
	err := o.at("dirsync", "")
	if err == nil {
		err = dir.syncDir()
	}
	if err == nil {
		return nil
	}
	errs := []error{fmt.Errorf("sync directory: %w", err)}
	for _, name := range names {
		if rerr := dir.remove(name); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("take back %s: %w", name, rerr))
		}
	}
	return errors.Join(errs...)
}

// moveNew renames from to to in dir without ever replacing a file: if to
// exists, or another writer creates it first, it returns an error wrapping
// ErrExists and changes nothing. It publishes as a save does (publishNew:
// a rename that refuses to replace, or a hard link), and where that was a
// link, removes from; should that removal fail, to is taken back, so that
// the file is under one name or the other.
func moveNew(dir dirOps, from, to string) error {
	moved, err := dir.publishNew(from, to)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%w: %w", storage.ErrExists, err)
	}
	if err != nil || moved {
		return err
	}
	if err := dir.remove(from); err != nil {
		if rerr := dir.remove(to); rerr != nil {
			err = errors.Join(err, fmt.Errorf("take back %s: %w", to, rerr))
		}
		return err
	}
	return nil
}

// filePerm is the permission of new checkpoint and side files, before umask.
const filePerm = 0o644

// dirPerm is the permission of new directories, before umask.
const dirPerm = 0o755

// writeTo streams a file's contents.
type writeTo func(w io.Writer) error

// fileIO says how files are written and removed: durably (fsync) or not
// (NoSync), and, in tests, at which point an operation fails.
type fileIO struct {
	noSync bool
	// ahead makes a write create its temporary file on a goroutine of its
	// own while the write function runs (see pendingTemp), rather than
	// before it: the directory sets it where its last write was large
	// (aheadMin), whose write function (encoding, compressing) runs long
	// enough for the goroutine to start.
	ahead bool
	// uncommitted makes a write of a new name skip the directory's fsync
	// (step 5), which commitNames makes for several (CreateUncommitted).
	uncommitted bool
	// fault, if set, is asked before each point inside one write of the
	// directory ("create", "write", "sync", "close", "publish", "dirsync")
	// and of a Rename ("quarantine", before the move), and an error it
	// returns is that point's failure: the directory's own test seam, set
	// by tests only (dirBackend.fault), never by an option. A fault of a
	// whole Backend operation (a removal, a Create) is injected by wrapping
	// the backend instead (backendtest.Inject).
	fault func(point, name string) error
	// unchanged, if set, is called by a replace just before it publishes
	// (the rename over the name), after the temporary file is written,
	// synced and closed: an error it returns fails the write, as is, and
	// the temporary file is removed. A conditional Replace checks there
	// that the file is still the one it expects.
	unchanged func() error
	// spare, if set, holds the directory's spare files (see spareTemp): a
	// durable write takes one rather than create its file, and makes the
	// next ones while it waits for its fsync.
	spare *spareTemp
}

// syncDir fsyncs root's directory unless noSync, failing where the seam says.
func (o fileIO) syncDir(root *os.Root) error {
	if o.noSync {
		return nil
	}
	if err := o.at("dirsync", ""); err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	return syncDir(root)
}

// at returns the injected failure of the operation at point on name, if any.
func (o fileIO) at(point, name string) error {
	if o.fault == nil {
		return nil
	}
	return o.fault(point, name)
}

// dirOps are the operations on one directory that writeFile is made of.
// rootOps does them through an os.Root, on every platform; on Linux the
// directory backend does them with system calls on the directory's open
// descriptor (fdOps in dir_write_linux.go), which a save of a small state
// makes several times fewer of.
type dirOps interface {
	// createTemp creates a new temporary file for name (tempPrefix(name)
	// and random digits), exclusively, and returns it and its name.
	createTemp(name string) (tempFile, string, error)
	// publishNew gives tmp the name name, or fails with fs.ErrExist if
	// name exists; moved is false if tmp stays (a hard link).
	publishNew(tmp, name string) (moved bool, err error)
	// rename renames old to new, replacing new atomically.
	rename(old, new string) error
	// remove removes the file name.
	remove(name string) error
	// syncDir fsyncs the directory.
	syncDir() error
}

// tempFile is a temporary file being written. Close after a failed Write
// or Sync may return any error; it is called again after a failure, which
// must do nothing.
type tempFile interface {
	io.Writer
	Sync() error
	Close() error
}

// rootOps are dirOps through an os.Root.
type rootOps struct{ root *os.Root }

func (r rootOps) createTemp(name string) (tempFile, string, error) {
	f, tmp, err := createTemp(r.root, name)
	if err != nil {
		return nil, "", err
	}
	return f, tmp, nil
}

func (r rootOps) publishNew(tmp, name string) (bool, error) { return publishNew(r.root, tmp, name) }
func (r rootOps) rename(old, new string) error              { return renameFile(r.root, old, new) }
func (r rootOps) remove(name string) error                  { return removeFile(r.root, name) }
func (r rootOps) syncDir() error                            { return syncDir(r.root) }

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
