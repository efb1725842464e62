package storage

import (
	"context"
	"io"
)

// The optional interfaces below say what differs between storages beyond
// the contract of Backend. A store asks for them by interface, never by a
// backend's type (see As for wrappers); backendtest checks each property
// for every backend that claims it.

// Traits describes what a backend's operations cost, and so what a store
// may trust. The zero Traits describe object storage.
type Traits struct {
	// Local reports that the backend's operations are system calls on this
	// machine, not requests: a Stat or an Open is cheap enough to make before
	// every save, List may read names only (see Backend.List), and anyone
	// with access to the machine may change an object behind the backend at
	// any time (a user, another program). A writer on a Local backend asks it
	// (Stat) before each save whether the name is free and whether what it
	// cached still holds, and reads ahead what may spare it reads (the
	// store's header index). A writer on a backend that is not Local, where
	// each call is a request, trusts what it listed when it opened and what
	// it wrote and removed since (it holds the lock: no other writer's object
	// is visible), and sees an object put in its way by anything else when a
	// write runs into it.
	Local bool
}

// Describer is a Backend that says what its Traits are. A Backend that
// implements neither Describer nor Wrapper has the zero Traits.
type Describer interface {
	Backend
	// Traits returns the backend's Traits. It is the same for every call
	// and for every child store (Backend.Sub) of the backend.
	Traits() Traits
}

// Wrapper is a Backend built on another one, which it passes every call
// to, changed or not (a fault injector, a tracer, a cache). A wrapper that
// passes its calls through behaves as the backend it wraps: it has its
// Traits (see TraitsOf), and a store takes from the wrapped backend the
// optional operations the wrapper does not implement, as As says.
type Wrapper interface {
	Backend
	// Unwrap returns the wrapped backend.
	Unwrap() Backend
}

// As returns b as a T, or, if b is not a T, the first backend that b
// wraps (through Wrapper's Unwrap, one layer after another) that is, and
// whether it found one. A wrapper's own implementation of T always wins
// over the wrapped backend's.
//
// A store looks up through As only the optional operations that move or
// remove bytes the backend already holds, or only read its state:
// TempCleaner, TempNamer, LockProber, Describer (see TraitsOf), and the
// session root's Linker and ChildRemover; a wrapper that does not
// implement them would otherwise leave a crashed save's temporary files,
// or a session root's leftovers, for ever. It never looks up through As
// an operation that writes new bytes (Unsynced, GroupCommitter): such an
// operation is taken from the outermost backend only, so that a wrapper
// that changes what is written (an encrypting wrapper) is never bypassed;
// a wrapper without it gets the plain, synced operation.
func As[T any](b Backend) (T, bool) {
	for b != nil {
		if t, ok := b.(T); ok {
			return t, true
		}
		w, ok := b.(Wrapper)
		if !ok {
			break
		}
		b = w.Unwrap()
	}
	var zero T
	return zero, false
}

// TraitsOf returns the Traits of b: b.Traits() if b is a Describer,
// otherwise, if b is a Wrapper, those of the backend it wraps (see As),
// otherwise the zero Traits.
func TraitsOf(b Backend) Traits {
	if d, ok := As[Describer](b); ok {
		return d.Traits()
	}
	return Traits{}
}

// Unsynced is a Backend whose changes can skip being made durable when
// they return, for a caller that needs them atomic and visible but not
// durable at once: the local directory, whose fsyncs cost more than some
// writes are worth. A store uses it for its header index (whatever a power
// cut leaves of it is checked entry by entry) and for the removals a
// pruning makes after a save (the next sync of the directory, or none,
// makes them durable; a file a power cut brings back is pruned again).
//
// Each method keeps every promise of its synced counterpart but
// durability: the change is atomic, visible to Open and List in every
// process when the method returns, and survives the writer's crash; a
// power cut or an operating-system crash may undo it. After one, a name
// written by ReplaceUnsynced may hold the old object, the new one, or a
// torn or empty one (the directory skips the file's fsync as well), so a
// caller checks what it reads back: the store's index is checksummed entry
// by entry. A name removed by RemoveUnsynced holds the old object or
// nothing. A backend whose every change is
// durable when it returns (object storage) has no need to implement it.
// A store never takes it from the backend a Wrapper wraps (see As).
type Unsynced interface {
	Backend
	// ReplaceUnsynced is Replace(ctx, name, "", write) without the
	// durability.
	ReplaceUnsynced(ctx context.Context, name string, write func(io.Writer) error) (Object, error)
	// RemoveUnsynced is Remove(ctx, names...) without the durability.
	RemoveUnsynced(ctx context.Context, names ...string) (gone []bool, err error)
}

// TempCleaner is a Backend that writes through temporary objects of its
// own (a local directory's temporary files, renamed into place when
// whole), which a crash can leave behind. The backend names its
// temporary objects so that it can tell them from any object a user may
// keep (a name no Create of a plain name makes by accident), and removes
// them when asked: only the writer that holds the lock may ask, since a
// write under way has one. A store takes it from the backend a Wrapper
// wraps (see As).
type TempCleaner interface {
	Backend
	// RemoveTemps removes the temporary objects the backend's writes left
	// behind, and returns their names. For each one it finds, it asks
	// ours with the name of the object the write was publishing (final)
	// and whether the temporary name is of an older naming that a user's
	// object could share (legacy: the caller should accept it only for
	// names it is sure to own); it removes only those ours accepts, and
	// never an object that is not a regular one. A removal that fails
	// does not stop the others.
	RemoveTemps(ctx context.Context, ours func(final string, legacy bool) bool) (removed []string, err error)
}

// A LockState says whether a backend's writer lock is held (see
// LockProber).
type LockState int

const (
	// LockUnknown means the backend cannot tell without taking the lock.
	LockUnknown LockState = iota
	// LockNotSeen means the backend shows no holder of the lock. That is
	// no proof that none exists: Linux's /proc/locks leaves out the locks
	// of processes in other PID namespaces (a writer in another container
	// sharing the directory) and of other hosts on a network file system.
	LockNotSeen
	// LockHeld means a writer, of this process or another, holds the lock.
	LockHeld
)

// LockProber is a Backend that can tell whether its writer lock (see
// Backend.Lock) is held without taking it, which would make a writer
// starting meanwhile fail with ErrLocked: the local directory on Linux. A
// store takes it from the backend a Wrapper wraps (see As).
type LockProber interface {
	Backend
	// LockState returns whether the lock is held and, when it is held
	// and the backend can tell, by which process (else 0). It never says
	// LockNotSeen of a lock that a handle of this process holds.
	LockState(ctx context.Context) (state LockState, holder int)
}

// TempNamer is a TempCleaner that tells its temporary objects by their
// names alone, for a caller that lists them without removing them (a
// store's Leftovers, DetectLayouts, Sessions' cleanup of a session's
// metadata).
type TempNamer interface {
	TempCleaner
	// TempOf reports whether name is that of a temporary object of the
	// backend's writes, and if so returns the name of the object the
	// write was publishing (final) and whether name is of an older naming
	// that a user's object could share (legacy), as RemoveTemps asks ours.
	TempOf(name string) (final string, legacy, ok bool)
}

// TempOf reports whether name is a temporary object of b's writes (see
// TempNamer): b.TempOf(name) if b is a TempNamer, otherwise, if b is a
// Wrapper, that of the backend it wraps (a name says the same whoever
// asks), otherwise false: a backend that names no temporary objects
// writes none.
func TempOf(b Backend, name string) (final string, legacy, ok bool) {
	for b != nil {
		switch v := b.(type) {
		case TempNamer:
			return v.TempOf(name)
		case Wrapper:
			b = v.Unwrap()
		default:
			return "", false, false
		}
	}
	return "", false, false
}

// Linker is implemented by a Backend whose child stores (see Backend.Sub)
// can share an object's bytes instead of copying them, as hard links do in
// a local directory. Sessions.Fork links the checkpoints it takes from the
// source session where the new session's child store is a Linker or wraps
// one (see As), and copies them otherwise (and wherever Link fails for
// another reason than a missing object): checkpoints are never modified,
// so sharing them is safe.
type Linker interface {
	// Link makes the object name of src appear under the same name in the
	// receiver, sharing its bytes. src must be a child store of the same
	// parent as the receiver, got from that parent's Sub, or a Wrapper of
	// one; for any other src, Link returns an error wrapping
	// errors.ErrUnsupported. If name exists in the receiver, Link returns an
	// error wrapping ErrExists and changes nothing; a name missing in src is
	// an error wrapping fs.ErrNotExist. When Link returns nil the new name is
	// durable (unless the backend was opened with NoSync); when it fails,
	// nothing is left under name in the receiver. It creates the receiver's
	// child store if that does not exist yet.
	Link(ctx context.Context, src Backend, name string) (Object, error)
}

// ChildRemover is implemented by a Backend whose child stores exist apart
// from their objects, as a local directory's subdirectories do: an empty
// one is still there. Sessions removes, through it, the empty child store
// a failed creation leaves, and the staging directories of roots written
// by earlier releases, through the root's Backend or the one it wraps (see
// As). On object storage a child store that holds no object does not
// exist, and nothing needs removing.
type ChildRemover interface {
	// RemoveChild removes the child store name if it holds nothing, and
	// makes the removal durable (unless NoSync). A child that does not
	// exist is not an error; one that holds anything is left as it is,
	// and RemoveChild returns an error wrapping ErrExists. A name in the
	// receiver that is not a child store (a file, a symbolic link) is left
	// as it is too, and is an error wrapping ErrInvalid.
	RemoveChild(ctx context.Context, name string) error
}

// GroupCommitter is a Backend that can publish several new objects and
// make their names durable together, once: the local directory, where
// making a new name durable costs a directory fsync, and one fsync makes
// every name published before it durable. An Async store publishes the
// saves it finds queued together this way (each file written and synced,
// then one Commit for all), instead of paying a directory fsync for each.
// A backend whose every Create is durable on its own (object storage: each
// PUT is) has no need to implement it. A store never takes it from the
// backend a Wrapper wraps (see As): it writes new bytes.
type GroupCommitter interface {
	Backend
	// CreateUncommitted is Create without the durability of the new name:
	// the object's bytes are made durable before it is published (unless
	// NoSync), and when it returns nil the object is whole, visible to
	// Open and List in every process, and survives the writer's crash; a
	// power cut before a Commit of it returns nil may take the name away,
	// leaving nothing under it, never a torn or empty object. A failure
	// leaves nothing under name, as Create's does.
	CreateUncommitted(ctx context.Context, name string, write func(io.Writer) error) (Object, error)
	// Commit makes durable the names that CreateUncommitted published
	// (with one sync of the directory, which makes every earlier change of
	// its entries durable too). When it returns nil, every one of names
	// survives a power cut (unless NoSync). When it fails, none of them
	// may be trusted to: Commit takes each one back (removes it), as a
	// Create whose directory sync fails takes back its name, and returns
	// an error that says why it failed and, if a name could not be taken
	// back, which one.
	Commit(ctx context.Context, names ...string) error
}
