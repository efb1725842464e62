//go:build !(linux || android || openbsd || dragonfly || solaris || illumos || darwin || ios || freebsd || netbsd)

package checkpoint

import "io/fs"

// changeTime returns 0: these systems (Windows, Plan 9, AIX, wasm) give no
// inode change time through fs.FileInfo, and the header cache relies on
// the file's identity, size and modification time alone.
func changeTime(fs.FileInfo) int64 { return 0 }

// fileID returns 0, 0 where the file's stat gives no inode (Windows: a
// replaced file is told apart by its size and times).
func fileID(fs.FileInfo) (dev, ino uint64) { return 0, 0 }
