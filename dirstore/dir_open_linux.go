//go:build linux

package dirstore

import (
	"github.com/gocheckpoint/checkpoint/internal/names"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gocheckpoint/checkpoint/storage"
)

// openFile opens name in the directory for reading, as openRegular does,
// in fewer system calls: the first List of a store opens every checkpoint
// of the directory, and at 10,000 files the system calls are most of its
// cost. openRegular (through os.Root, which follows a symbolic link inside
// the directory, and an os.File of a non-blocking descriptor, which the
// runtime tries to add to its poller) costs an openat, an epoll_ctl, an
// fstat, and an lstat beforehand to refuse symbolic links.
// Here, for a plain name, one openat relative to the directory's
// descriptor with O_NOFOLLOW (a symbolic link fails with ELOOP: refused,
// never followed; a name of one component cannot leave the directory),
// O_NONBLOCK (a named pipe does not block the open), and an fstat; the
// descriptor is read and closed directly. Any other name goes through the
// root.
func (d *dirBackend) openFile(root *os.Root, name string) (io.ReadCloser, fs.FileInfo, error) {
	dir, err := d.dirFile(root)
	if err != nil || name == "" || name == "." || name == ".." || !names.Plain(name) {
		return openRegular(root, name)
	}
	conn, err := dir.SyscallConn()
	if err != nil {
		return openRegular(root, name)
	}
	var fd int
	// Control holds the directory's descriptor open during the call,
	// whatever a concurrent Close does.
	cerr := conn.Control(func(dirfd uintptr) {
		for {
			fd, err = syscall.Openat(int(dirfd), name, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
			if err != syscall.EINTR {
				return
			}
		}
	})
	if cerr != nil {
		return openRegular(root, name) // closed meanwhile: the root says so
	}
	if err == syscall.ELOOP {
		return nil, nil, storage.NotRegular(name, fs.ModeSymlink)
	}
	if err != nil {
		return nil, nil, &fs.PathError{Op: "openat", Path: name, Err: err}
	}
	fi := &fdStat{name: name}
	if err := syscall.Fstat(fd, &fi.st); err != nil {
		syscall.Close(fd)
		return nil, nil, &fs.PathError{Op: "fstat", Path: name, Err: err}
	}
	if !fi.Mode().IsRegular() {
		syscall.Close(fd)
		return nil, nil, storage.NotRegular(name, fi.Mode())
	}
	return &fdFile{fd: fd, name: name}, fi, nil
}

// dirFile returns root's directory, opening it once: it stays open with
// root (Close closes both).
func (d *dirBackend) dirFile(root *os.Root) (*os.File, error) {
	if f := d.dirf.Load(); f != nil && d.root.Load() == root {
		return f, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.root.Load() != root {
		return nil, fs.ErrClosed // closed or reopened meanwhile: use root
	}
	if f := d.dirf.Load(); f != nil {
		return f, nil
	}
	f, err := root.Open(".")
	if err != nil {
		return nil, err
	}
	d.dirf.Store(f)
	return f, nil
}

// fdFile reads a regular file by its descriptor.
type fdFile struct {
	fd   int
	name string
}

func (f *fdFile) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		n, err := syscall.Read(f.fd, p)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return 0, &fs.PathError{Op: "read", Path: f.name, Err: err}
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func (f *fdFile) ReadAt(p []byte, off int64) (int, error) {
	read := 0
	for read < len(p) {
		n, err := syscall.Pread(f.fd, p[read:], off+int64(read))
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return read, &fs.PathError{Op: "pread", Path: f.name, Err: err}
		case n == 0:
			return read, io.EOF
		}
		read += n
	}
	return read, nil
}

func (f *fdFile) Close() error {
	if f.fd < 0 {
		return fs.ErrClosed
	}
	err := syscall.Close(f.fd)
	f.fd = -1
	if err != nil {
		return &fs.PathError{Op: "close", Path: f.name, Err: err}
	}
	return nil
}

// fdStat is the fs.FileInfo of an fstat, as os.File.Stat makes it.
type fdStat struct {
	name string
	st   syscall.Stat_t
}

func (s *fdStat) Name() string       { return s.name }
func (s *fdStat) Size() int64        { return s.st.Size }
func (s *fdStat) ModTime() time.Time { return time.Unix(s.st.Mtim.Unix()) }
func (s *fdStat) IsDir() bool        { return s.Mode().IsDir() }
func (s *fdStat) Sys() any           { return &s.st }

func (s *fdStat) Mode() fs.FileMode {
	m := fs.FileMode(s.st.Mode & 0o777)
	switch s.st.Mode & syscall.S_IFMT {
	case syscall.S_IFBLK:
		m |= fs.ModeDevice
	case syscall.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFDIR:
		m |= fs.ModeDir
	case syscall.S_IFIFO:
		m |= fs.ModeNamedPipe
	case syscall.S_IFLNK:
		m |= fs.ModeSymlink
	case syscall.S_IFSOCK:
		m |= fs.ModeSocket
	}
	if s.st.Mode&syscall.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if s.st.Mode&syscall.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if s.st.Mode&syscall.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// lstat returns what root.Lstat(name) does, for a plain name in one
// fstatat relative to the directory's descriptor: a first List with the
// header index stats every checkpoint of the directory and reads none, and
// the root's path walk and its FileInfo cost a third as much as the
// system call. Any other name goes through the root.
func (d *dirBackend) lstat(root *os.Root, name string) (fs.FileInfo, error) {
	dir, err := d.dirFile(root)
	if err != nil || name == "" || name == "." || name == ".." || !names.Plain(name) {
		return root.Lstat(name)
	}
	conn, err := dir.SyscallConn()
	if err != nil {
		return root.Lstat(name)
	}
	var st unix.Stat_t
	cerr := conn.Control(func(dirfd uintptr) {
		for {
			err = unix.Fstatat(int(dirfd), name, &st, unix.AT_SYMLINK_NOFOLLOW)
			if err != unix.EINTR {
				return
			}
		}
	})
	if cerr != nil {
		return root.Lstat(name) // closed meanwhile: the root says so
	}
	if err != nil {
		return nil, &fs.PathError{Op: "lstat", Path: name, Err: err}
	}
	fi := &fdStat{name: name}
	fi.st.Dev, fi.st.Ino, fi.st.Mode, fi.st.Size = st.Dev, st.Ino, st.Mode, st.Size
	fi.st.Mtim = syscall.Timespec(st.Mtim)
	fi.st.Ctim = syscall.Timespec(st.Ctim)
	return fi, nil
}
