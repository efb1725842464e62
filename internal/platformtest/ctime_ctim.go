//go:build linux || android || openbsd || dragonfly || solaris || illumos

package platformtest

import (
	"io/fs"
	"syscall"
)

// ChangeTime returns the inode change time of fi in nanoseconds, or 0 if
// fi does not carry it.
func ChangeTime(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ctim.Nano()
	}
	return 0
}
