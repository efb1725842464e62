package checkpoint

import "github.com/gocheckpoint/checkpoint/storage"

// Linker is implemented by a Backend whose child stores can share an
// object's bytes instead of copying them.
//
// Deprecated: use storage.Linker.
type Linker = storage.Linker

// ChildRemover is implemented by a Backend whose child stores exist apart
// from their objects.
//
// Deprecated: use storage.ChildRemover.
type ChildRemover = storage.ChildRemover
