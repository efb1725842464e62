//go:build windows

package main

import (
	"time"

	"golang.org/x/sys/windows"
)

// replaceDurably writes data to name in dir as renameio does on other
// systems (renameio does not write files on Windows): a temporary file in
// dir, fsync, rename over name.
func replaceDurably(dir, name string, data []byte) error {
	return floorWrite(dir, name, data)
}

// syncDir does nothing: Windows has no directory fsync.
func syncDir(string) error { return nil }

// processCPU returns the CPU time, user and system, that every thread of
// this process has used so far.
func processCPU() (time.Duration, error) {
	var creation, exit, kernel, user windows.Filetime
	if err := windows.GetProcessTimes(windows.CurrentProcess(), &creation, &exit, &kernel, &user); err != nil {
		return 0, err
	}
	// A Filetime counts 100 ns intervals.
	ticks := func(f windows.Filetime) int64 { return int64(f.HighDateTime)<<32 | int64(f.LowDateTime) }
	return time.Duration((ticks(kernel) + ticks(user)) * 100), nil
}
