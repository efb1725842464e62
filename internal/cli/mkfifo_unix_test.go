//go:build unix

package cli

import "golang.org/x/sys/unix"

// mkfifo makes a named pipe at path.
func mkfifo(path string) error { return unix.Mkfifo(path, 0o644) }
