//go:build !linux

package dirstore

import (
	"io"
	"io/fs"
	"os"

	"github.com/gocheckpoint/checkpoint/storage"
)

// openFile opens name in the directory for reading, as openRegular does,
// but never through a symbolic link, which os.Root follows inside the
// directory: the first List opens names it has not stat'ed (see fill).
// Linux makes that one openat with O_NOFOLLOW (dir_open_linux.go); here an
// lstat comes first, as fill's stat did.
func (d *dirBackend) openFile(root *os.Root, name string) (io.ReadCloser, fs.FileInfo, error) {
	fi, err := root.Lstat(name)
	if err != nil {
		return nil, nil, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, nil, storage.NotRegular(name, fi.Mode())
	}
	return openRegular(root, name)
}

// lstat returns root.Lstat(name) (Linux has a faster one).
func (d *dirBackend) lstat(root *os.Root, name string) (fs.FileInfo, error) {
	return root.Lstat(name)
}
