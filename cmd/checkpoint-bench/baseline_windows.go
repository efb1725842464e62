//go:build windows

package main

// replaceDurably writes data to name in dir as renameio does on other
// systems (renameio does not write files on Windows): a temporary file in
// dir, fsync, rename over name.
func replaceDurably(dir, name string, data []byte) error {
	return floorWrite(dir, name, data)
}

// syncDir does nothing: Windows has no directory fsync.
func syncDir(string) error { return nil }
