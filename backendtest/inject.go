package backendtest

import (
	"github.com/gocheckpoint/checkpoint/backendtest/inject"
	"github.com/gocheckpoint/checkpoint/storage"
)

// Op is one operation on a backend wrapped by Inject (see inject.Op).
type Op = inject.Op

// OpKind is the kind of an Op: the Backend method called (see inject.Kind).
type OpKind = inject.Kind

// The kinds of Op, one for each method of storage.Backend and of its
// optional interfaces.
const (
	OpCreate      = inject.Create
	OpReplace     = inject.Replace
	OpOpen        = inject.Open
	OpStat        = inject.Stat
	OpList        = inject.List
	OpRemove      = inject.Remove
	OpRename      = inject.Rename
	OpLock        = inject.Lock
	OpSub         = inject.Sub
	OpChildren    = inject.Children
	OpRemoveTemps = inject.RemoveTemps
)

// Inject returns b with fault asked before each operation, in the style of
// pebble's errorfs: an error fault returns fails the operation, which does
// not reach b. It is inject.Wrap; see there for Remove, child stores and
// the optional interfaces. A store opened on the wrapper behaves as on b.
func Inject(b storage.Backend, fault func(op Op) error) storage.Backend {
	return inject.Wrap(b, fault)
}
