//go:build darwin || ios || freebsd || netbsd

package platformtest

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
