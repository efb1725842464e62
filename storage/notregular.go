package storage

import (
	"fmt"
	"io/fs"
)

// NotRegular returns the error for the object name, of mode, found where a
// regular one must be: an *fs.PathError of the operation "open" on name,
// wrapping ErrNotRegular, whose text says what the object is ("a
// directory", "a named pipe (FIFO)", ...).
func NotRegular(name string, mode fs.FileMode) error {
	return &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w: %s", ErrNotRegular, fileType(mode))}
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
