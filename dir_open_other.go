//go:build !linux

package checkpoint

import (
	"io"
	"io/fs"
	"os"
)

// openFile opens name in the directory for reading (see openRegular).
func (d *dirBackend) openFile(root *os.Root, name string) (io.ReadCloser, fs.FileInfo, error) {
	return openRegular(root, name)
}
