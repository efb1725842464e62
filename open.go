package checkpoint

import (
	"fmt"
	"io/fs"
	"os"

	"github.com/gocheckpoint/checkpoint/storage"
)

// errNotRegular marks a path in a store that is not a regular file (a
// directory, a named pipe, a device, a socket): storage.ErrNotRegular.
var errNotRegular = storage.ErrNotRegular

// openRegular opens name inside root for reading and returns the file and
// its Stat. It never blocks: a named pipe with no writer would make a plain
// open wait forever, so the per-OS openForRead opens without waiting, and
// anything that is not a regular file is then refused with an error
// wrapping errNotRegular that says what it is.
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
		return nil, nil, notRegular(name, fi.Mode())
	}
	return f, fi, nil
}

// notRegular is the error for name, of mode, found where a regular file
// must be.
func notRegular(name string, mode fs.FileMode) error {
	return &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w: %s", errNotRegular, fileType(mode))}
}

// fileType names the type of a file that is not a regular file.
func fileType(mode fs.FileMode) string {
	switch t := mode.Type(); {
	case t&fs.ModeDir != 0:
		return "a directory"
	case t&fs.ModeSymlink != 0:
		return "a symbolic link"
	case t&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case t&fs.ModeSocket != 0:
		return "a socket"
	case t&fs.ModeDevice != 0:
		return "a device"
	default:
		return "an irregular file"
	}
}
