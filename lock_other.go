//go:build !unix && !windows

package checkpoint

import (
	"errors"
	"fmt"
	"os"
)

// lockDir is not implemented on this platform: a writer cannot be opened,
// because two writers could not be kept apart. ReadOnly stores work.
func lockDir(*os.Root) (*os.File, error) {
	return nil, fmt.Errorf("writer lock: %w on this platform; open the store with ReadOnly", errors.ErrUnsupported)
}

// lockFile is not implemented on this platform either.
func lockFile(*os.Root, string) (*os.File, error) {
	return nil, fmt.Errorf("lock: %w on this platform", errors.ErrUnsupported)
}

func unlockDir(f *os.File) error { return f.Close() }
