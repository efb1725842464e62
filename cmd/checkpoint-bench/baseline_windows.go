//go:build windows

package main

import "time"

// replaceDurably writes data to name in dir as renameio does on other
// systems (renameio does not write files on Windows): a temporary file in
// dir, fsync, rename over name.
func replaceDurably(dir, name string, data []byte) error {
	return floorWrite(dir, name, data)
}

// syncDir does nothing: Windows has no directory fsync.
func syncDir(string) error { return nil }

// processCPU reports that it reads no CPU time: Windows counts a
// process's CPU in ticks of about 15.6 ms (GetProcessTimes), too coarse
// for rounds of a few hundred milliseconds.
func processCPU() (time.Duration, bool) { return 0, false }
