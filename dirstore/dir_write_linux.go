//go:build linux

package dirstore

import (
	"errors"
	"github.com/gocheckpoint/checkpoint/internal/names"
	"io/fs"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// writeFile writes name in the directory as writeFile in publish.go does,
// with fdOps on the directory's descriptor for a plain name (any other name
// goes through root). Where rootOps costs a save of a small state about 20
// system calls, fdOps costs 7 (openat, write, fsync, close, renameat2,
// fsync of the directory, and the caller's fstatat): os.Root resolves every
// name on its own, an os.File of a new descriptor is registered with the
// runtime's poller (fcntl, epoll_ctl), the envelope's parts are three
// writes, and a hard link then an unlink publish what one renameat2 with
// RENAME_NOREPLACE does.
func (d *dirBackend) writeFile(root *os.Root, name string, write writeTo, replace bool, o fileIO) (n int64, err error) {
	d.writing.RLock() // Close waits for the write
	defer d.writing.RUnlock()
	ops := d.ops(root, name)
	if _, ok := ops.(fdOps); ok && !o.noSync {
		o.spare = &d.spare
	}
	return writeFile(ops, name, write, replace, o)
}

// commitNames is commitNames of publish.go, on the directory's descriptor.
func (d *dirBackend) commitNames(root *os.Root, names []string, o fileIO) error {
	d.writing.RLock() // Close waits for the commit
	defer d.writing.RUnlock()
	return commitNames(d.ops(root, names...), names, o)
}

// ops returns the dirOps of the directory for an operation on ns:
// fdOps if every one is a plain name (see names.Plain), else rootOps. The
// caller holds d.writing for reading while it uses them, so that Close
// waits for it.
func (d *dirBackend) ops(root *os.Root, ns ...string) dirOps {
	dir, err := d.dirFile(root)
	if err != nil {
		return rootOps{root}
	}
	for _, name := range ns {
		if !names.Plain(name) {
			return rootOps{root}
		}
	}
	conn, err := dir.SyscallConn()
	if err != nil {
		return rootOps{root}
	}
	return fdOps{dir: conn, path: d.dir, prefix: d.prefix, linkOnly: &d.linkOnly}
}

// fdOps are dirOps by system calls relative to an open directory's
// descriptor, for plain names only (see names.Plain): such a name cannot
// leave the directory, and every call refuses to follow a symbolic link.
// The backend's Close waits for a write (see dirBackend.writing); each call
// also holds the descriptor open for its system call, and fails with
// fs.ErrClosed once it is closed.
type fdOps struct {
	dir      syscall.RawConn
	path     string       // the directory, as errors name it
	prefix   string       // path as Locate joins it with a name
	linkOnly *atomic.Bool // renameat2 was refused here: publish by hard link
}

// at runs f, a system call on the directory's descriptor, retrying it
// while it fails with EINTR (as package os does). A closed directory is
// fs.ErrClosed. (openFile and lstat, which a List calls for every file,
// call Control on the RawConn SyscallConn has just returned instead: the
// compiler then knows its type, and their closures are not allocated.)
func (d fdOps) at(f func(dirfd int) error) error {
	var err error
	if cerr := d.dir.Control(func(fd uintptr) {
		for {
			if err = f(int(fd)); err != unix.EINTR {
				return
			}
		}
	}); cerr != nil {
		return fs.ErrClosed
	}
	return err
}

func (d fdOps) createTemp(name string) (tempFile, string, error) {
	var err error
	// The digits are random; a name that exists (a stale temporary file
	// with the same digits) is only ever skipped, never opened.
	for range 8 {
		tmp := tempName(name)
		var fd int
		err = d.at(func(dirfd int) (err error) {
			fd, err = unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, filePerm)
			return err
		})
		if err == nil {
			return &fdTemp{fd: fd, name: d.prefix + tmp}, tmp, nil
		}
		if err != unix.EEXIST {
			break
		}
	}
	return nil, "", &fs.PathError{Op: "openat", Path: d.prefix + tempPrefix(name), Err: err}
}

// publishNew renames tmp to name with RENAME_NOREPLACE, which fails with
// EEXIST instead of replacing. If renameat2 fails otherwise (a file system
// without RENAME_NOREPLACE, such as some FUSE and network ones, says
// EINVAL; a kernel before 3.15 ENOSYS; a sandbox's system call filter
// EPERM), a hard link does the same, and tmp stays for the caller to
// remove; the directory's later saves then link at once.
func (d fdOps) publishNew(tmp, name string) (moved bool, err error) {
	var renameErr error // a failure of renameat2 other than a refusal
	if !d.linkOnly.Load() {
		err = d.at(func(dirfd int) error { return unix.Renameat2(dirfd, tmp, dirfd, name, unix.RENAME_NOREPLACE) })
		switch err {
		case nil:
			return true, nil
		case unix.EEXIST, fs.ErrClosed:
			return false, &os.LinkError{Op: "renameat2", Old: d.prefix + tmp, New: d.prefix + name, Err: err}
		case unix.EINVAL, unix.ENOSYS, unix.EOPNOTSUPP, unix.EPERM:
			d.linkOnly.Store(true)
		default:
			renameErr = &os.LinkError{Op: "renameat2", Old: d.prefix + tmp, New: d.prefix + name, Err: err}
		}
	}
	err = d.at(func(dirfd int) error { return unix.Linkat(dirfd, tmp, dirfd, name, 0) })
	if err != nil {
		if renameErr != nil {
			// renameat2's error says what is wrong (a full disk, a
			// missing temporary file); the link's only that it failed
			// too.
			return false, renameErr
		}
		return false, &os.LinkError{Op: "linkat", Old: d.prefix + tmp, New: d.prefix + name, Err: err}
	}
	return false, nil
}

// makeSpare opens a file with no name in the directory (O_TMPFILE; see
// spareTemp).
func (d fdOps) makeSpare() (tempFile, error) {
	var fd int
	err := d.at(func(dirfd int) (err error) {
		fd, err = unix.Openat(dirfd, ".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, filePerm)
		return err
	})
	if err != nil {
		return nil, &fs.PathError{Op: "openat O_TMPFILE", Path: d.path, Err: err}
	}
	return &fdTemp{fd: fd, name: d.path}, nil
}

// nameSpare links the spare f, a file of makeSpare, into the directory
// under a temporary name for name, through /proc/self/fd (a link by the
// descriptor itself, AT_EMPTY_PATH, needs a capability). Where /proc is no
// procfs (a chroot), the path may be another file: the naming is refused
// before any link (errNotProcfs), and should /proc change between that
// check and the link, the name is checked to be the spare's, and another
// file's unlinked again (errNotTheSpare). The name's modification time is
// set to now, as a creation's would be.
func (d fdOps) nameSpare(f tempFile, name string) (string, error) {
	return d.nameSpareAt("/proc/self/fd/", f, name)
}

// nameSpareAt is nameSpare through proc, the directory of the process's
// descriptors.
func (d fdOps) nameSpareAt(proc string, f tempFile, name string) (string, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(proc, &st); err != nil {
		return "", &fs.PathError{Op: "statfs", Path: proc, Err: err}
	}
	if st.Type != unix.PROC_SUPER_MAGIC {
		return "", &fs.PathError{Op: "statfs", Path: proc, Err: errNotProcfs}
	}
	return d.nameSpareVia(proc, f, name)
}

// nameSpareVia is nameSpareAt without the check that proc is on a procfs.
func (d fdOps) nameSpareVia(proc string, f tempFile, name string) (string, error) {
	t := f.(*fdTemp)
	if t.fd < 0 {
		return "", fs.ErrClosed
	}
	var own unix.Stat_t
	if err := unix.Fstat(t.fd, &own); err != nil {
		return "", &fs.PathError{Op: "fstat", Path: d.path, Err: err}
	}
	from := proc + strconv.Itoa(t.fd)
	var err error
	for range 8 {
		tmp := tempName(name)
		err = d.at(func(dirfd int) error {
			return unix.Linkat(unix.AT_FDCWD, from, dirfd, tmp, unix.AT_SYMLINK_FOLLOW)
		})
		if err == unix.EEXIST {
			continue
		}
		if err != nil {
			break
		}
		var st unix.Stat_t
		err = d.at(func(dirfd int) error { return unix.Fstatat(dirfd, tmp, &st, unix.AT_SYMLINK_NOFOLLOW) })
		if err == nil && (st.Dev != own.Dev || st.Ino != own.Ino) {
			err = errNotTheSpare
		}
		if err == nil {
			// The spare's modification time is when it was made; a
			// file's is when it was written, which for an empty one is
			// when it was created: now.
			err = d.at(func(dirfd int) error {
				return unix.UtimesNanoAt(dirfd, tmp, []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_NOW}}, unix.AT_SYMLINK_NOFOLLOW)
			})
		}
		if err != nil {
			// Not proven the spare's: the name goes again.
			_ = d.remove(tmp)
			return "", &os.LinkError{Op: "linkat", Old: from, New: d.prefix + tmp, Err: err}
		}
		t.name = d.prefix + tmp
		return tmp, nil
	}
	return "", &os.LinkError{Op: "linkat", Old: from, New: d.prefix + tempPrefix(name), Err: err}
}

// errNotTheSpare is a naming of a spare that linked another file, though
// /proc was a procfs when checked: it has changed since.
var errNotTheSpare = errors.New("the linked file is not the spare: /proc has changed")

// errNotProcfs is a naming of a spare refused before any link: /proc is no
// procfs, so its fd/N may be another file.
var errNotProcfs = errors.New("not a procfs: a spare is not named through it")

// refusal reports whether err, of makeSpare or nameSpare, says that the
// system makes or names no spare here: a file system or kernel without
// O_TMPFILE, no /proc or a /proc that is no procfs, a sandbox that refuses
// the calls.
func (d fdOps) refusal(err error) bool {
	for _, e := range []error{errNotProcfs, errNotTheSpare, unix.EOPNOTSUPP, unix.EISDIR, unix.EINVAL, unix.ENOENT, unix.ENOSYS, unix.EPERM, unix.EACCES, unix.EXDEV} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func (d fdOps) rename(old, new string) error {
	if err := d.at(func(dirfd int) error { return unix.Renameat(dirfd, old, dirfd, new) }); err != nil {
		return &os.LinkError{Op: "renameat", Old: d.prefix + old, New: d.prefix + new, Err: err}
	}
	return nil
}

func (d fdOps) remove(name string) error {
	if err := d.at(func(dirfd int) error { return unix.Unlinkat(dirfd, name, 0) }); err != nil {
		return &fs.PathError{Op: "unlinkat", Path: d.prefix + name, Err: err}
	}
	return nil
}

func (d fdOps) syncDir() error {
	if err := d.at(unix.Fsync); err != nil {
		return &fs.PathError{Op: "fsync", Path: d.path, Err: err}
	}
	return nil
}

// fdTempBuffer is the size of an fdTemp's buffer: a small checkpoint (the
// envelope's header, state and trailer) is written in one system call.
const fdTempBuffer = 64 << 10

var fdTempBuffers = sync.Pool{New: func() any { b := make([]byte, 0, fdTempBuffer); return &b }}

// fdTemp is a temporary file written by its descriptor, through a buffer
// taken from fdTempBuffers at the first Write and returned at Close.
type fdTemp struct {
	fd   int // -1 once closed
	name string
	buf  *[]byte
}

func (f *fdTemp) Write(p []byte) (int, error) {
	if f.fd < 0 {
		return 0, fs.ErrClosed
	}
	if f.buf == nil {
		f.buf = fdTempBuffers.Get().(*[]byte)
	}
	b := *f.buf
	if len(b)+len(p) > cap(b) {
		if err := f.flush(); err != nil {
			return 0, err
		}
		b = *f.buf
		if len(p) >= cap(b) {
			if err := f.writeAll(p); err != nil {
				return 0, err
			}
			return len(p), nil
		}
	}
	*f.buf = append(b, p...)
	return len(p), nil
}

// Flush writes what the buffer holds: writeFile calls it once the
// contents are written, so that a full disk is a write's error.
func (f *fdTemp) Flush() error {
	if f.fd < 0 {
		return fs.ErrClosed
	}
	return f.flush()
}

// flush writes what the buffer holds.
func (f *fdTemp) flush() error {
	if f.buf == nil || len(*f.buf) == 0 {
		return nil
	}
	err := f.writeAll(*f.buf)
	*f.buf = (*f.buf)[:0]
	return err
}

func (f *fdTemp) writeAll(p []byte) error {
	for len(p) > 0 {
		n, err := unix.Write(f.fd, p)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &fs.PathError{Op: "write", Path: f.name, Err: err}
		}
		if n == 0 {
			return &fs.PathError{Op: "write", Path: f.name, Err: errors.New("wrote nothing")}
		}
		p = p[n:]
	}
	return nil
}

func (f *fdTemp) Sync() error {
	if f.fd < 0 {
		return fs.ErrClosed
	}
	if err := f.flush(); err != nil {
		return err
	}
	err := unix.Fsync(f.fd)
	for err == unix.EINTR { // retried, as package os does
		err = unix.Fsync(f.fd)
	}
	if err != nil {
		return &fs.PathError{Op: "fsync", Path: f.name, Err: err}
	}
	return nil
}

// Close writes what the buffer holds and closes the file; an error of
// either is Close's.
func (f *fdTemp) Close() error {
	if f.fd < 0 {
		return fs.ErrClosed
	}
	err := f.flush()
	// close is not retried on EINTR: the descriptor is gone either way.
	if cerr := unix.Close(f.fd); cerr != nil && err == nil {
		err = &fs.PathError{Op: "close", Path: f.name, Err: cerr}
	}
	f.fd = -1
	if f.buf != nil { // never grown past fdTempBuffer: see Write
		*f.buf = (*f.buf)[:0]
		fdTempBuffers.Put(f.buf)
		f.buf = nil
	}
	return err
}
