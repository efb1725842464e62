//go:build !unix && !windows

package dirstore

import (
	"errors"
	"fmt"
	"os"
)

// tryLock is not implemented on this platform: a writer cannot be opened,
// because two writers could not be kept apart. ReadOnly stores work.
func tryLock(*os.File) (bool, error) {
	return false, fmt.Errorf("%w on this platform", errors.ErrUnsupported)
}

func unlock(*os.File) error { return nil }
