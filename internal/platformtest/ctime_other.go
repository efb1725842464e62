//go:build !(linux || android || openbsd || dragonfly || solaris || illumos || darwin || ios || freebsd || netbsd)

package platformtest

import "io/fs"

// ChangeTime returns 0: these systems (Windows, Plan 9, AIX, wasm) give no
// inode change time through fs.FileInfo.
func ChangeTime(fs.FileInfo) int64 { return 0 }
