//go:build linux

package dirstore

import (
	"context"
	"encoding/binary"
	"io/fs"
	"os"
	"syscall"
)

// scanBuffer is the size of the buffer ScanNames reads directory entries
// into: about 800 names of 20 bytes per system call.
const scanBuffer = 32 << 10

// ScanNames calls f with each name of the directory but "." and "..",
// as List would return them (see listing.Scanner): it reads the entries
// with getdents64 into a buffer of its own, through a descriptor of the
// directory opened for this scan (a listing's offset is its own, whatever
// other scans run), and makes no string of a name.
func (d *dirBackend) ScanNames(ctx context.Context, f func(name []byte)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	root, err := d.existing()
	if root == nil {
		return err
	}
	fd, err := d.openDirAgain(root)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	buf := make([]byte, scanBuffer)
	for {
		n, err := syscall.Getdents(fd, buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return &fs.PathError{Op: "getdents", Path: d.dir, Err: err}
		}
		if n <= 0 {
			return nil
		}
		if err := eachDirent(buf[:n], f); err != nil {
			return &fs.PathError{Op: "getdents", Path: d.dir, Err: err}
		}
	}
}

// openDirAgain opens the directory of root anew, relative to its
// descriptor, for a read of its entries from the start.
func (d *dirBackend) openDirAgain(root *os.Root) (int, error) {
	dir, err := d.dirFile(root)
	if err != nil {
		return -1, err
	}
	conn, err := dir.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	// Control holds the directory's descriptor open during the call,
	// whatever a concurrent Close does.
	cerr := conn.Control(func(dirfd uintptr) {
		for {
			fd, err = syscall.Openat(int(dirfd), ".", syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
			if err != syscall.EINTR {
				return
			}
		}
	})
	if cerr != nil {
		return -1, fs.ErrClosed
	}
	if err != nil {
		return -1, &fs.PathError{Op: "openat", Path: d.dir, Err: err}
	}
	return fd, nil
}

// direntName is the offset of the name in a linux_dirent64, after its
// inode (8 bytes), offset (8), record length (2) and type (1).
const direntName = 19

// eachDirent calls f with the name of each entry of buf, a getdents64
// result, but "." and ".." and entries of inode 0 (removed, as
// os.File.Readdirnames skips them). A record that does not fit is
// syscall.EINVAL: the kernel never writes one.
func eachDirent(buf []byte, f func(name []byte)) error {
	for len(buf) > 0 {
		if len(buf) < direntName {
			return syscall.EINVAL
		}
		reclen := int(binary.NativeEndian.Uint16(buf[16:18]))
		if reclen < direntName || reclen > len(buf) {
			return syscall.EINVAL
		}
		rec := buf[:reclen]
		buf = buf[reclen:]
		if binary.NativeEndian.Uint64(rec[0:8]) == 0 {
			continue
		}
		name := rec[direntName:]
		for i, c := range name {
			if c == 0 {
				name = name[:i]
				break
			}
		}
		if len(name) == 0 || string(name) == "." || string(name) == ".." {
			continue
		}
		f(name)
	}
	return nil
}
