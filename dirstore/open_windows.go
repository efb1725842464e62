//go:build windows

package dirstore

import "os"

// openForRead opens name in root read-only, sharing delete access: while a
// reader (this process or another) has a checkpoint open, a writer can
// still prune it or replace the rolling file. Windows refuses to remove or
// rename a file that is open without FILE_SHARE_DELETE; os.Root opens with
// it (and os.Open does not, so no read in a store goes through os.Open).
// Windows has no FIFOs in a directory, so nothing here can block.
func openForRead(root *os.Root, name string) (*os.File, error) {
	return root.Open(name)
}
