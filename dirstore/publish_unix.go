//go:build !windows

package dirstore

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"
)

// createTemp creates a new temporary file for name in root, with renameio:
// tempPrefix(name) + random digits, created exclusively, with filePerm less
// the umask. It returns the open file and its name in root.
func createTemp(root *os.Root, name string) (*os.File, string, error) {
	// renameio names the temporary file "." + the base of the path it is
	// given + random digits: given name+tempMarker, that is tempPrefix(name)
	// and digits. The path is used for nothing else.
	pf, err := renameio.NewPendingFile(name+tempMarker, renameio.WithRoot(root), renameio.WithPermissions(filePerm))
	if err != nil {
		return nil, "", err
	}
	// The file is published by writeFile, not by renameio: only the
	// temporary file is used.
	return pf.File, filepath.Base(pf.Name()), nil
}

// publishNew gives the complete temporary file tmp the name name with a hard
// link, which fails with fs.ErrExist instead of replacing. tmp stays (moved
// is false): the caller removes it.
func publishNew(root *os.Root, tmp, name string) (moved bool, err error) {
	return false, root.Link(tmp, name)
}

// renameFile renames old to new in root, replacing new atomically.
func renameFile(root *os.Root, old, new string) error {
	return root.Rename(old, new)
}

// removeFile removes name from root.
func removeFile(root *os.Root, name string) error {
	return root.Remove(name)
}

// syncDir fsyncs the directory of root, making entries created, renamed or
// removed in it durable. renameio does not do this; without it a power cut
// can lose a published name.
func syncDir(root *os.Root) error {
	d, err := root.Open(".")
	if err != nil {
		return fmt.Errorf("open directory for sync: %w", err)
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return fmt.Errorf("sync directory: %w", err)
	}
	return d.Close()
}

// syncPath fsyncs the directory dir.
func syncPath(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return d.Close()
}
