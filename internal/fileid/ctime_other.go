//go:build !(linux || android || openbsd || dragonfly || solaris || illumos || darwin || ios || freebsd || netbsd)

package fileid

import "io/fs"

// ChangeTime returns 0: these systems (Windows, Plan 9, AIX, wasm) give no
// inode change time through fs.FileInfo, and a Version (objectOf) is the
// file's size and modification time alone (see ID): another file put
// in a checkpoint's place, or bytes rewritten in place, with the same size
// and modification time (a copy that keeps the time) is taken for the one
// whose header is cached until either changes, and a conditional Replace
// does not see the change. Loading a checkpoint reads and verifies it
// whole, whatever the cache says.
func ChangeTime(fs.FileInfo) int64 { return 0 }

// ID returns 0, 0 where the file's stat gives no inode (Windows: a
// replaced file is told apart by its size and times).
func ID(fs.FileInfo) (dev, ino uint64) { return 0, 0 }
