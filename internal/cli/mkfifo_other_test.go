//go:build !unix

package cli

import "errors"

// mkfifo makes a named pipe at path: not here.
func mkfifo(string) error { return errors.ErrUnsupported }
