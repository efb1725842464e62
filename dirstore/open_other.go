//go:build !unix && !windows

package dirstore

import "os"

// openForRead opens name in root read-only. These systems have no named
// pipes in a directory that an open could wait on.
func openForRead(root *os.Root, name string) (*os.File, error) {
	return root.Open(name)
}
