//go:build !linux

package dirstore

import (
	"context"
	"os"

	"github.com/gocheckpoint/checkpoint/storage"
)

// lockHolder cannot tell who holds a lock on this platform.
func lockHolder(*os.Root, string) int { return 0 }

// LockState cannot tell whether a writer holds the lock on this platform
// without taking it, which would make a writer starting meanwhile fail
// with ErrLocked (see storage.LockProber).
func (d *dirBackend) LockState(context.Context) (storage.LockState, int) {
	return storage.LockUnknown, 0
}
