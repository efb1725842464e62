//go:build darwin || ios || freebsd || netbsd

package fileid

import (
	"io/fs"
	"syscall"
)

// ChangeTime returns the inode change time of fi in nanoseconds, or 0 if
// fi does not carry it.
func ChangeTime(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ctimespec.Nano()
	}
	return 0
}

// ID returns the device and inode of the file fi describes.
func ID(fi fs.FileInfo) (dev, ino uint64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), uint64(st.Ino)
	}
	return 0, 0
}
