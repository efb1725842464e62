package dirstore

import (
	"io/fs"
	"os"

	"github.com/gocheckpoint/checkpoint/storage"
)

// openRegular opens name inside root for reading and returns the file and
// its Stat. It never blocks: a named pipe with no writer would make a plain
// open wait forever, so the per-OS openForRead opens without waiting, and
// anything that is not a regular file is then refused with an error
// wrapping storage.ErrNotRegular that says what it is (storage.NotRegular).
func openRegular(root *os.Root, name string) (*os.File, fs.FileInfo, error) {
	f, err := openForRead(root, name)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, storage.NotRegular(name, fi.Mode())
	}
	return f, fi, nil
}
