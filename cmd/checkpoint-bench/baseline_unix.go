//go:build !windows

package main

import (
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"
)

// replaceDurably writes data to name in dir with renameio: a temporary file
// in dir, fsync, rename over name.
func replaceDurably(dir, name string, data []byte) error {
	pf, err := renameio.NewPendingFile(filepath.Join(dir, name),
		renameio.WithTempDir(dir), renameio.WithPermissions(0o644))
	if err != nil {
		return err
	}
	defer pf.Cleanup()
	if _, err := pf.Write(data); err != nil {
		return err
	}
	return pf.CloseAtomicallyReplace()
}

// syncDir fsyncs the directory dir.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
