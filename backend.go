package checkpoint

import "github.com/gocheckpoint/checkpoint/storage"

// Backend is where a store keeps its bytes; its contract is storage.Backend's.
type Backend = storage.Backend

// Object describes one object of a Backend (see storage.Object).
type Object = storage.Object

// NoObject is the ifVersion that makes Backend.Replace write only if there
// is no object under the name.
//
// Deprecated: use storage.NoObject: it is for those who write a Backend,
// not for a store's users.
const NoObject = storage.NoObject
