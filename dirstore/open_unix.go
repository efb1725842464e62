//go:build unix

package dirstore

import (
	"os"
	"syscall"
)

// openForRead opens name in root read-only without blocking: O_NONBLOCK
// makes the open of a named pipe with no writer return at once instead of
// waiting for one (openRegular then refuses it). For a regular file the
// flag changes nothing, so it is left set.
func openForRead(root *os.Root, name string) (*os.File, error) {
	return root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
