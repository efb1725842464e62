// Package dirstore is the local directory as a storage.Backend: the storage
// of checkpoint.Open, which opens it with Open. Each object is a file in
// the directory, written to a temporary file and published whole without
// replacing an existing file, and a child store (Backend.Sub) is a
// subdirectory. The platform code of the directory (Linux's system calls
// on the directory's descriptor, the Windows file sharing and
// LockFileEx, the inode change times of each system) is this package's.
//
// Use it to run the backend conformance suite (package backendtest) on the
// local directory, or to wrap the directory in a Backend of your own and
// open a store on it with checkpoint.OpenBackend.
package dirstore

import (
	"context"
	"errors"
	"fmt"
	"github.com/gocheckpoint/checkpoint/internal/fileid"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gocheckpoint/checkpoint/storage"
)

// dirBackend is the local directory as a Backend, as Open describes it.
// The Linux system calls on the directory's descriptor are in
// dir_open_linux.go and dir_write_linux.go, the publish protocol in
// publish.go, the writer lock in lock.go.
type dirBackend struct {
	dir      string
	prefix   string // dir as Locate joins it with a name
	readOnly bool
	noSync   bool
	// fault is the test seam of the fault points inside one write (see
	// fileIO.fault); nil outside tests. A child (Sub) shares its parent's.
	fault func(point, name string) error

	// For a child (Sub) whose directory may not exist yet, root is nil
	// until the child's first write creates it or a read finds it.
	parent *dirBackend
	name   string

	mu sync.Mutex
	// root and dirf are set under mu and read without it (every Stat of
	// a List's workers reads them).
	root atomic.Pointer[os.Root]
	dirf atomic.Pointer[os.File] // root's directory, opened by dirFile for the system calls on it (Linux)
	lock *writerLock             // while Lock holds it
	// writing is held for reading by each write on the directory's
	// descriptor (Linux) and by each Rename (every platform), and taken by
	// Close, which so waits for them: no such write goes on once Close has
	// released the lock.
	writing sync.RWMutex
	// linkOnly records that renameat2 was refused in the directory:
	// saves publish by hard link (Linux, see fdOps.publishNew).
	//lint:ignore U1000 used on Linux only
	linkOnly atomic.Bool
	// lastWrite is the size of the directory's last write: from
	// aheadMin bytes, the next creates its temporary file beside its
	// write function (see fileIO.ahead).
	lastWrite atomic.Int64
	// spare holds the files the next durable writes start from, made
	// while the last ones waited for their fsyncs (Linux; see spareTemp).
	spare spareTemp
}

// An Option configures Open.
type Option func(*options)

type options struct {
	readOnly bool
	noSync   bool
}

// ReadOnly opens the directory for reading only: Open creates nothing (a
// missing directory is an error wrapping storage.ErrNotFound), and every
// write, removal, rename and Lock returns storage.ErrReadOnly.
func ReadOnly() Option { return func(o *options) { o.readOnly = true } }

// NoSync skips every fsync: of the files written, of the directory after
// each change, and of the parents Open creates. A change is still atomic
// and visible to every process when it returns, and survives the
// writer's crash; a power cut or an operating-system crash may undo it.
func NoSync() Option { return func(o *options) { o.noSync = true } }

// Open opens the directory dir as a storage.Backend: the storage of
// checkpoint.Open, which is checkpoint.OpenBackend on it. It creates dir
// and its missing parents (durably, unless NoSync) unless ReadOnly is
// given, in which case a missing dir is an error wrapping
// storage.ErrNotFound. An empty dir ("") is an error wrapping
// storage.ErrInvalid. Every error of Open is an *fs.PathError of the
// operation "open" on dir.
//
// Files are written to a temporary name, fsynced and published without
// replacing an existing file, and the directory is fsynced after each
// change unless NoSync: a crash at any instant leaves no file at a name or
// a whole one, and at worst a temporary file that the next holder of the
// writer lock removes (storage.TempCleaner). The writer lock
// (Backend.Lock) is a lock on the file LockName and, where the system
// allows, on the directory itself. Every
// file operation goes through an os.Root opened on dir (on Linux, for a
// plain name, a system call relative to the directory's descriptor that
// does not follow a symbolic link): no name reaches outside it.
//
// The backend is a storage.Describer (Traits().Local), a
// storage.Unsynced, a storage.TempCleaner and a storage.TempNamer, a
// storage.Linker, a storage.ChildRemover and a storage.LockProber (which
// can name the holder of the lock on Linux only). A store treats a
// storage.Wrapper of the directory as the directory it wraps (see
// storage.As).
//
// An Object's Version is the file's device and inode, size, modification
// time and inode change time, so a file rewritten in place by another
// program gets a new one. Windows' file information has no inode change
// time: there a rewrite in place that keeps the size and restores the
// modification time keeps the Version (a store's header cache may then
// list the old header; loading a checkpoint verifies it whole regardless).
//
// The backend's Close waits for a Rename under way, and for a Create or
// Replace (on Linux, where they are system calls on the directory's
// descriptor; elsewhere such a write fails at its next step): once Close
// has released the writer lock, no write of the backend goes on.
func Open(dir string, opts ...Option) (storage.Backend, error) {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	d, err := openDirBackend(dir, o.readOnly, o.noSync)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	return d, nil
}

// openDirBackend is the one constructor of the directory backend: it
// creates dir unless readOnly (durably unless noSync) and opens it as an
// os.Root. A missing dir is ErrNotFound.
func openDirBackend(dir string, readOnly, noSync bool) (*dirBackend, error) {
	if dir == "" {
		return nil, fmt.Errorf("%w: empty directory name (use \".\" for the current directory)", storage.ErrInvalid)
	}
	if !readOnly {
		mkdir := mkdirDurable
		if noSync {
			mkdir = func(dir string) error { return os.MkdirAll(dir, dirPerm) }
		}
		if err := mkdir(dir); err != nil {
			return nil, err
		}
	}
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() { // os.OpenRoot would block on a named pipe
		return nil, fmt.Errorf("%w: %s is not a directory (%v)", storage.ErrInvalid, dir, fi.Mode().Type())
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("%w: %w", storage.ErrNotFound, err)
		}
		return nil, err
	}
	d := &dirBackend{dir: dir, prefix: pathPrefix(dir), readOnly: readOnly, noSync: noSync}
	d.root.Store(root)
	return d, nil
}

// Traits says that the directory is Local (see storage.Traits).
func (d *dirBackend) Traits() storage.Traits { return storage.Traits{Local: true} }

// aheadNext reports whether the directory's next write creates its
// temporary file ahead (fileIO.ahead): whether its last write was of
// aheadMin bytes or more.
func (d *dirBackend) aheadNext() bool { return d.lastWrite.Load() >= aheadMin }

func (d *dirBackend) io() fileIO { return fileIO{noSync: d.noSync, fault: d.fault} }

// opened returns the directory's root, opening a child's directory if it
// exists by now, or, with create, creating it. A child's directory that does
// not exist is fs.ErrNotExist.
func (d *dirBackend) opened(create bool) (*os.Root, error) {
	if root := d.root.Load(); root != nil {
		return root, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if root := d.root.Load(); root != nil {
		return root, nil
	}
	if d.parent == nil {
		return nil, fs.ErrClosed
	}
	proot, err := d.parent.opened(create)
	if err != nil {
		return nil, err
	}
	root, err := openChild(proot, d.name, d.dir, create)
	if errors.Is(err, fs.ErrNotExist) && create {
		err = proot.Mkdir(d.name, dirPerm)
		if err == nil || errors.Is(err, fs.ErrExist) {
			if err = d.parent.io().syncDir(proot); err == nil {
				root, err = openChild(proot, d.name, d.dir, create)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	d.root.Store(root)
	return root, nil
}

// openChild opens the subdirectory name of proot (at path) as an os.Root,
// never anything else: a symbolic link, a named pipe (on which an open
// blocks) or a file there is an error wrapping ErrExists if the child was
// to be created, ErrInvalid otherwise.
func openChild(proot *os.Root, name, path string, create bool) (*os.Root, error) {
	fi, err := proot.Lstat(name)
	if err == nil && !fi.IsDir() {
		err = storage.ErrInvalid
		if create {
			err = storage.ErrExists
		}
		err = fmt.Errorf("%w: %s is not a directory (%v)", err, path, fi.Mode().Type())
	}
	if err != nil {
		return nil, err
	}
	root, err := proot.OpenRoot(name)
	if err != nil {
		return nil, err
	}
	// What was opened must be what Lstat saw: OpenRoot follows a symbolic
	// link put there meanwhile (fileid.ID is zero where the system has
	// none).
	if cur, err := root.Stat("."); err != nil || !sameID(cur, fi) {
		root.Close()
		return nil, errors.Join(fmt.Errorf("%w: %s was replaced while it was opened", storage.ErrInvalid, path), err)
	}
	return root, nil
}

// sameID reports whether a and b have the same fileid.ID.
func sameID(a, b fs.FileInfo) bool {
	ad, ai := fileid.ID(a)
	bd, bi := fileid.ID(b)
	return ad == bd && ai == bi
}

func (d *dirBackend) Create(ctx context.Context, name string, write func(io.Writer) error) (storage.Object, error) {
	return d.write(ctx, name, false, "", write, d.io())
}

func (d *dirBackend) Replace(ctx context.Context, name, ifVersion string, write func(io.Writer) error) (storage.Object, error) {
	return d.write(ctx, name, true, ifVersion, write, d.io())
}

// ReplaceUnsynced is an unconditional Replace without the file's and the
// directory's syncs (see storage.Unsynced).
func (d *dirBackend) ReplaceUnsynced(ctx context.Context, name string, write func(io.Writer) error) (storage.Object, error) {
	o := d.io()
	o.noSync = true
	return d.write(ctx, name, true, "", write, o)
}

// CreateUncommitted is Create without the directory's fsync: the file's
// bytes are synced before it is published, and its name is made durable
// by a Commit (see storage.GroupCommitter).
func (d *dirBackend) CreateUncommitted(ctx context.Context, name string, write func(io.Writer) error) (storage.Object, error) {
	o := d.io()
	o.uncommitted = true
	return d.write(ctx, name, false, "", write, o)
}

// Commit makes the names CreateUncommitted published durable with one
// fsync of the directory, or takes them all back (see
// storage.GroupCommitter). It ignores ctx: once names are published, a
// Commit that did not take its step would leave them neither durable nor
// taken back.
func (d *dirBackend) Commit(_ context.Context, names ...string) error {
	for _, name := range names {
		if err := plainName(name); err != nil {
			return err
		}
	}
	if d.readOnly {
		return storage.ErrReadOnly
	}
	root, err := d.existing()
	if err != nil || root == nil { // nothing was published in a child not written yet
		return err
	}
	return d.commitNames(root, names, d.io())
}

// plainName refuses a name that is not one of the backend's flat
// namespace: a name with a path in it would reach a child store.
func plainName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\") {
		return fmt.Errorf("%w: %q is not a plain name", storage.ErrInvalid, name)
	}
	return nil
}

// mayWrite returns why d may not change the files names now: ctx is done,
// a name is not a plain name, or d is read-only.
func (d *dirBackend) mayWrite(ctx context.Context, names ...string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, name := range names {
		if err := plainName(name); err != nil {
			return err
		}
	}
	if d.readOnly {
		return storage.ErrReadOnly
	}
	return nil
}

func (d *dirBackend) write(ctx context.Context, name string, replace bool, ifVersion string, write func(io.Writer) error, o fileIO) (storage.Object, error) {
	if err := d.mayWrite(ctx, name); err != nil {
		return storage.Object{}, err
	}
	root, err := d.opened(true)
	if err != nil {
		return storage.Object{}, err
	}
	if replace && ifVersion != "" {
		// The writer lock keeps other stores out; this catches a file
		// changed by hand, or another program, since the store saw it:
		// before the write, so that a mismatch costs none, and again
		// just before the rename publishes, so that a change made while
		// the new bytes were written and synced is not overwritten.
		unchanged := func() error {
			cur, err := d.Stat(ctx, name)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				if ifVersion != storage.NoObject {
					return fmt.Errorf("%w: %s is gone", storage.ErrConflict, name)
				}
			case err != nil:
				return err
			case cur.Version != ifVersion:
				return fmt.Errorf("%w: %s was changed since the store last saw it", storage.ErrConflict, name)
			}
			return nil
		}
		if err := unchanged(); err != nil {
			return storage.Object{}, err
		}
		o.unchanged = unchanged
	}
	checked := func(w io.Writer) error {
		if err := write(w); err != nil {
			return err
		}
		return ctx.Err()
	}
	o.ahead = d.aheadNext()
	n, err := d.writeFile(root, name, checked, replace, o)
	if err != nil {
		return storage.Object{}, err
	}
	d.lastWrite.Store(n)
	fi, err := d.lstat(root, name)
	if err != nil {
		// Published and durable all the same: a failure here must not
		// report it as not written. Its Version is unknown.
		return storage.Object{Name: name, Size: -1}, nil
	}
	return objectOf(name, fi), nil
}

func (d *dirBackend) Open(ctx context.Context, name string) (io.ReadCloser, storage.Object, error) {
	if err := ctx.Err(); err != nil {
		return nil, storage.Object{}, err
	}
	if err := plainName(name); err != nil {
		return nil, storage.Object{}, err
	}
	root, err := d.opened(false)
	if err != nil {
		return nil, storage.Object{}, err
	}
	f, fi, err := d.openFile(root, name)
	if err != nil {
		return nil, storage.Object{}, err
	}
	return f, objectOf(name, fi), nil
}

func (d *dirBackend) Stat(ctx context.Context, name string) (storage.Object, error) {
	if err := ctx.Err(); err != nil {
		return storage.Object{}, err
	}
	if err := plainName(name); err != nil {
		return storage.Object{}, err
	}
	root, err := d.opened(false)
	if err != nil {
		return storage.Object{}, err
	}
	fi, err := d.lstat(root, name)
	if err != nil {
		return storage.Object{}, err
	}
	return objectOf(name, fi), nil
}

// existing returns the directory's root, or nil for a child whose
// directory its first write has not made yet: such a child is empty.
func (d *dirBackend) existing() (*os.Root, error) {
	root, err := d.opened(false)
	if errors.Is(err, fs.ErrNotExist) && d.parent != nil {
		return nil, nil
	}
	return root, err
}

// List reads the directory's names only: statting each would cost more
// than the read. Subdirectories are among them; Stat tells them apart.
func (d *dirBackend) List(ctx context.Context) ([]storage.Object, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	root, err := d.existing()
	if root == nil {
		return nil, err
	}
	names, err := readNames(root)
	if err != nil {
		return nil, err
	}
	objs := make([]storage.Object, len(names))
	for i, n := range names {
		objs[i] = storage.Object{Name: n, Size: -1}
	}
	return objs, nil
}

func (d *dirBackend) Remove(ctx context.Context, names ...string) ([]bool, error) {
	return d.remove(ctx, names, d.io())
}

// RemoveUnsynced is Remove without the directory sync (see
// storage.Unsynced).
func (d *dirBackend) RemoveUnsynced(ctx context.Context, names ...string) ([]bool, error) {
	o := d.io()
	o.noSync = true
	return d.remove(ctx, names, o)
}

func (d *dirBackend) remove(ctx context.Context, names []string, o fileIO) ([]bool, error) {
	gone := make([]bool, len(names))
	if err := ctx.Err(); err != nil {
		return gone, err
	}
	if d.readOnly {
		return gone, storage.ErrReadOnly
	}
	// An invalid name is an error of its own; the others are removed.
	var errs []error
	valid := make([]string, 0, len(names))
	at := make([]int, 0, len(names)) // valid[k] is names[at[k]]
	for i, name := range names {
		if err := plainName(name); err != nil {
			errs = append(errs, err)
			continue
		}
		valid = append(valid, name)
		at = append(at, i)
	}
	root, err := d.existing()
	if err != nil {
		return gone, errors.Join(append(errs, err)...)
	}
	if root == nil { // a child not written yet holds nothing
		for _, i := range at {
			gone[i] = true
		}
		return gone, errors.Join(errs...)
	}
	removed, err := removeNames(root, o, valid)
	for k, i := range at {
		gone[i] = removed[k]
	}
	return gone, errors.Join(append(errs, err)...)
}

func (d *dirBackend) Rename(ctx context.Context, from, to string) error {
	if err := d.mayWrite(ctx, from, to); err != nil {
		return err
	}
	root, err := d.opened(false)
	if err != nil {
		return err
	}
	o := d.io()
	if err := o.at("quarantine", from); err != nil {
		return err
	}
	// Published as a save publishes, never replacing: a file another
	// program creates at to meanwhile is left as it is (ErrExists).
	d.writing.RLock() // Close waits for the move
	err = moveNew(d.ops(root, from, to), from, to)
	d.writing.RUnlock()
	if err != nil {
		return err
	}
	return o.syncDir(root)
}

// Lock takes the directory's writer lock (see writerLock).
func (d *dirBackend) Lock(ctx context.Context) (func() error, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if d.readOnly {
		return nil, storage.ErrReadOnly
	}
	root, err := d.opened(true)
	if err != nil {
		return nil, err
	}
	l, err := lockDir(root)
	if err != nil {
		if errors.Is(err, storage.ErrLocked) {
			err = lockedError(root, LockName, err)
		}
		return nil, err
	}
	d.mu.Lock()
	d.lock = l
	d.mu.Unlock()
	if !d.noSync {
		d.spare.start()
	}
	return func() error {
		d.spare.stop()
		d.mu.Lock()
		d.lock = nil
		d.mu.Unlock()
		return l.release()
	}, nil
}

// RemoveTemps removes the temporary files that the backend's writes left
// behind (see storage.TempCleaner): regular files named as tempName names
// them (a dot, the final name, tempMarker, random digits), and, as legacy,
// a dot, the final name and random digits (the older naming, without the
// marker).
func (d *dirBackend) RemoveTemps(ctx context.Context, ours func(final string, legacy bool) bool) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if d.readOnly {
		return nil, storage.ErrReadOnly
	}
	root, err := d.existing()
	if root == nil {
		return nil, err
	}
	return removeStaleTemps(root, ours, d.io())
}

func (d *dirBackend) Sub(ctx context.Context, name string, create bool) (storage.Backend, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := plainName(name); err != nil {
		return nil, err
	}
	c := &dirBackend{dir: filepath.Join(d.dir, name), readOnly: d.readOnly, noSync: d.noSync, fault: d.fault, parent: d, name: name}
	c.prefix = pathPrefix(c.dir)
	if create {
		if d.readOnly {
			return nil, storage.ErrReadOnly
		}
		if _, err := c.opened(true); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (d *dirBackend) Children(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	root, err := d.existing()
	if root == nil {
		return nil, err
	}
	ents, err := readDir(root)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// pathPrefix returns what Locate puts before a file name in dir.
func pathPrefix(dir string) string {
	dir = filepath.Clean(dir)
	switch {
	case dir == ".":
		return ""
	case os.IsPathSeparator(dir[len(dir)-1]):
		return dir // the root directory
	}
	return dir + string(filepath.Separator)
}

func (d *dirBackend) Locate(name string) string {
	if name == "" {
		return d.dir
	}
	return d.prefix + name // filepath.Join(d.dir, name), for a plain name
}

func (d *dirBackend) Close() error {
	d.writing.Lock()
	defer d.writing.Unlock()
	d.spare.stop()
	d.mu.Lock()
	defer d.mu.Unlock()
	var lerr error
	if d.lock != nil { // held, and never unlocked: release it with the directory
		lerr = d.lock.release()
		d.lock = nil
	}
	if f := d.dirf.Swap(nil); f != nil {
		f.Close()
	}
	root := d.root.Swap(nil) // a top-level backend stays closed; a child opens again
	if root == nil {
		return lerr
	}
	return errors.Join(lerr, root.Close())
}

// objectOf describes the file name by its Lstat. The version is the file's
// identity (device and inode, where the system has them), size,
// modification time and inode change time: a file replaced, or rewritten
// in place even with its size and modification time restored (cp -p, rsync
// -t, a restore from backup), gets a new one. A conditional Replace
// compares all of it, so anything that changes the inode change time
// without touching the bytes (chmod, a hard link made or removed) is a
// conflict too: the contract allows a needless conflict, never a missed
// one.
//
// The limits: where Lstat carries no inode change time (Windows, Plan 9,
// AIX, wasm: see ctime_other.go), a rewrite in place that keeps the size
// and restores the modification time keeps the Version. Where the file
// system stamps times from a coarse clock (Linux before multigrain
// timestamps, 6.13, gives the tick of a few milliseconds), a rewrite
// within the same tick as the file's last change does too.
func objectOf(name string, fi fs.FileInfo) storage.Object {
	dev, ino := fileid.ID(fi)
	b := make([]byte, 0, 64)
	b = strconv.AppendUint(b, dev, 16)
	b = append(b, ':')
	b = strconv.AppendUint(b, ino, 16)
	b = append(b, ';')
	b = strconv.AppendInt(b, fi.Size(), 16)
	b = append(b, ':')
	b = strconv.AppendInt(b, fi.ModTime().UnixNano(), 16)
	b = append(b, ':')
	b = strconv.AppendInt(b, fileid.ChangeTime(fi), 16)
	return storage.Object{Name: name, Size: fi.Size(), Version: string(b), ModTime: fi.ModTime(), Mode: fi.Mode().Type()}
}
