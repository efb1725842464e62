// Package inject wraps a storage.Backend so that a test can make any of
// its operations fail, or do something of its own first (pause, put a file
// in the way), in the style of pebble's errorfs: the faults live in the
// wrapper, never in the backend's or the store's configuration.
//
// Package backendtest exports the same as backendtest.Inject; this package
// imports nothing of the store, so that the store's own tests can use it.
package inject

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/gocheckpoint/checkpoint/storage"
)

// Kind is the kind of a Backend operation.
type Kind int

// The operations Wrap reports, one for each method of storage.Backend and
// of its optional interfaces (Close is not reported).
const (
	Create      Kind = iota + 1 // Backend.Create, and storage.GroupCommitter's CreateUncommitted (Op.Unsynced)
	Replace                     // Backend.Replace, and storage.Unsynced's ReplaceUnsynced (Op.Unsynced)
	Open                        // Backend.Open
	Stat                        // Backend.Stat
	List                        // Backend.List
	Remove                      // one name of Backend.Remove, or of storage.Unsynced's RemoveUnsynced (Op.Unsynced)
	Rename                      // Backend.Rename
	Lock                        // Backend.Lock
	Sub                         // Backend.Sub
	Children                    // Backend.Children
	RemoveTemps                 // storage.TempCleaner's RemoveTemps
	Commit                      // storage.GroupCommitter's Commit
)

var kindNames = [...]string{"", "Create", "Replace", "Open", "Stat", "List", "Remove", "Rename", "Lock", "Sub", "Children", "RemoveTemps", "Commit"}

// String returns the name of the method, such as "Create".
func (k Kind) String() string {
	if k <= 0 || int(k) >= len(kindNames) {
		return "Kind(?)"
	}
	return kindNames[k]
}

// Op is one operation on a wrapped backend, as the fault function sees it.
type Op struct {
	Kind Kind
	// Store is where the operation happens: Locate("") of the backend it
	// is called on (a child store's for an operation on a child).
	Store string
	// Name is the object (for Sub, the child store) the operation
	// concerns: for Rename its source; "" for List, Lock, Children,
	// RemoveTemps and Commit.
	Name string
	// To is Rename's destination.
	To string
	// Names are the names a Commit makes durable.
	Names []string
	// Unsynced reports a Replace or Remove without durability (see
	// storage.Unsynced), or a Create whose name waits for a Commit (see
	// storage.GroupCommitter).
	Unsynced bool
}

// Wrap returns b with fault asked before each operation: an error fault
// returns is the operation's, and the operation does not reach b. For
// Remove, fault is asked for each name: a name it fails is not removed and
// not gone, and the others are removed (as the contract of Remove says of
// a removal that fails). A nil error lets the operation through, after
// whatever fault did (fault may block, or change the storage behind b).
//
// The wrapper keeps b's contract and is described as b (it is a
// storage.Wrapper): a store treats it as it treats b. It implements
// storage.Unsynced, storage.GroupCommitter and storage.TempCleaner,
// passing them to b where b implements them (and otherwise doing the
// synced operation, committing nothing, or removing nothing). A child store (Sub) of the wrapper is b's child wrapped with
// the same fault. fault must be safe for concurrent use.
func Wrap(b storage.Backend, fault func(op Op) error) storage.Backend {
	return &backend{b: b, fault: fault}
}

type backend struct {
	b     storage.Backend
	fault func(op Op) error
}

func (w *backend) at(op Op) error {
	op.Store = w.b.Locate("")
	return w.fault(op)
}

// Unwrap returns the wrapped backend (see storage.Wrapper).
func (w *backend) Unwrap() storage.Backend { return w.b }

func (w *backend) Create(ctx context.Context, name string, write func(io.Writer) error) (storage.Object, error) {
	if err := w.at(Op{Kind: Create, Name: name}); err != nil {
		return storage.Object{}, err
	}
	return w.b.Create(ctx, name, write)
}

func (w *backend) Replace(ctx context.Context, name, ifVersion string, write func(io.Writer) error) (storage.Object, error) {
	if err := w.at(Op{Kind: Replace, Name: name}); err != nil {
		return storage.Object{}, err
	}
	return w.b.Replace(ctx, name, ifVersion, write)
}

// ReplaceUnsynced is b's ReplaceUnsynced, or its Replace where b has none.
func (w *backend) ReplaceUnsynced(ctx context.Context, name string, write func(io.Writer) error) (storage.Object, error) {
	if err := w.at(Op{Kind: Replace, Name: name, Unsynced: true}); err != nil {
		return storage.Object{}, err
	}
	if u, ok := w.b.(storage.Unsynced); ok {
		return u.ReplaceUnsynced(ctx, name, write)
	}
	return w.b.Replace(ctx, name, "", write)
}

// CreateUncommitted is b's CreateUncommitted, or its Create where b has
// none.
func (w *backend) CreateUncommitted(ctx context.Context, name string, write func(io.Writer) error) (storage.Object, error) {
	if err := w.at(Op{Kind: Create, Name: name, Unsynced: true}); err != nil {
		return storage.Object{}, err
	}
	if g, ok := w.b.(storage.GroupCommitter); ok {
		return g.CreateUncommitted(ctx, name, write)
	}
	return w.b.Create(ctx, name, write)
}

// Commit is b's Commit; where b has none, every Create was durable
// already, and it does nothing. A failure fault injects takes names back
// (removes them from b), as a Commit that fails does.
func (w *backend) Commit(ctx context.Context, names ...string) error {
	if err := w.at(Op{Kind: Commit, Names: names}); err != nil {
		if len(names) > 0 {
			if _, rerr := w.b.Remove(context.WithoutCancel(ctx), names...); rerr != nil {
				err = errors.Join(err, fmt.Errorf("take back: %w", rerr))
			}
		}
		return err
	}
	if g, ok := w.b.(storage.GroupCommitter); ok {
		return g.Commit(ctx, names...)
	}
	return nil
}

func (w *backend) Open(ctx context.Context, name string) (io.ReadCloser, storage.Object, error) {
	if err := w.at(Op{Kind: Open, Name: name}); err != nil {
		return nil, storage.Object{}, err
	}
	return w.b.Open(ctx, name)
}

func (w *backend) Stat(ctx context.Context, name string) (storage.Object, error) {
	if err := w.at(Op{Kind: Stat, Name: name}); err != nil {
		return storage.Object{}, err
	}
	return w.b.Stat(ctx, name)
}

func (w *backend) List(ctx context.Context) ([]storage.Object, error) {
	if err := w.at(Op{Kind: List}); err != nil {
		return nil, err
	}
	return w.b.List(ctx)
}

func (w *backend) Remove(ctx context.Context, names ...string) ([]bool, error) {
	return w.remove(names, false, func(names []string) ([]bool, error) { return w.b.Remove(ctx, names...) })
}

// RemoveUnsynced is b's RemoveUnsynced, or its Remove where b has none.
func (w *backend) RemoveUnsynced(ctx context.Context, names ...string) ([]bool, error) {
	return w.remove(names, true, func(names []string) ([]bool, error) {
		if u, ok := w.b.(storage.Unsynced); ok {
			return u.RemoveUnsynced(ctx, names...)
		}
		return w.b.Remove(ctx, names...)
	})
}

// remove asks fault for each name, and removes those it lets through with
// do.
func (w *backend) remove(names []string, unsynced bool, do func([]string) ([]bool, error)) ([]bool, error) {
	gone := make([]bool, len(names))
	var errs []error
	pass := make([]string, 0, len(names))
	at := make([]int, 0, len(names)) // pass[k] is names[at[k]]
	for i, n := range names {
		if err := w.at(Op{Kind: Remove, Name: n, Unsynced: unsynced}); err != nil {
			errs = append(errs, err)
			continue
		}
		pass = append(pass, n)
		at = append(at, i)
	}
	if len(pass) > 0 {
		g, err := do(pass)
		for k, i := range at {
			if k < len(g) {
				gone[i] = g[k]
			}
		}
		errs = append(errs, err)
	}
	return gone, errors.Join(errs...)
}

func (w *backend) Rename(ctx context.Context, from, to string) error {
	if err := w.at(Op{Kind: Rename, Name: from, To: to}); err != nil {
		return err
	}
	return w.b.Rename(ctx, from, to)
}

func (w *backend) Lock(ctx context.Context) (func() error, error) {
	if err := w.at(Op{Kind: Lock}); err != nil {
		return nil, err
	}
	return w.b.Lock(ctx)
}

// RemoveTemps is b's RemoveTemps; where b has none, it removes nothing.
func (w *backend) RemoveTemps(ctx context.Context, ours func(final string, legacy bool) bool) ([]string, error) {
	if err := w.at(Op{Kind: RemoveTemps}); err != nil {
		return nil, err
	}
	if tc, ok := w.b.(storage.TempCleaner); ok {
		return tc.RemoveTemps(ctx, ours)
	}
	return nil, ctx.Err()
}

// LockState is b's LockState; where b has none, LockUnknown. It is no
// operation of the fault function's.
func (w *backend) LockState(ctx context.Context) (storage.LockState, int) {
	if p, ok := w.b.(storage.LockProber); ok {
		return p.LockState(ctx)
	}
	return storage.LockUnknown, 0
}

func (w *backend) Sub(ctx context.Context, name string, create bool) (storage.Backend, error) {
	if err := w.at(Op{Kind: Sub, Name: name}); err != nil {
		return nil, err
	}
	c, err := w.b.Sub(ctx, name, create)
	if err != nil {
		return nil, err
	}
	return &backend{b: c, fault: w.fault}, nil
}

func (w *backend) Children(ctx context.Context) ([]string, error) {
	if err := w.at(Op{Kind: Children}); err != nil {
		return nil, err
	}
	return w.b.Children(ctx)
}

func (w *backend) Locate(name string) string { return w.b.Locate(name) }

func (w *backend) Close() error { return w.b.Close() }
