//go:build !linux

package dirstore

import "os"

// writeFile writes name in the directory as writeFile in publish.go does,
// through root (Linux has a faster one).
func (d *dirBackend) writeFile(root *os.Root, name string, write writeTo, replace bool, o fileIO) (int64, error) {
	return writeFile(rootOps{root}, name, write, replace, o)
}

// commitNames is commitNames of publish.go, through root.
func (d *dirBackend) commitNames(root *os.Root, names []string, o fileIO) error {
	return commitNames(rootOps{root}, names, o)
}

// ops returns the dirOps of the directory: rootOps (Linux has faster
// ones).
func (d *dirBackend) ops(root *os.Root, _ ...string) dirOps {
	return rootOps{root}
}
