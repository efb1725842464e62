//go:build !windows

package main

import (
	"os"
	"path/filepath"
	"syscall"
	"time"

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

// processCPU returns the CPU time, user and system, that every thread of
// this process has used so far, and whether it could be read.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
