// Package storage defines the contract between a checkpoint store and the
// place it keeps its bytes: Backend, the Object it describes, the sentinel
// errors a backend wraps, and the optional interfaces a backend may
// implement where storages differ. The store of package
// github.com/gocheckpoint/checkpoint speaks to storage through this
// contract only; package backendtest checks that an implementation keeps
// it.
//
// A Backend built on another (a Wrapper: a fault injector, a tracer) is
// treated as the backend it wraps, except where it says otherwise: see As
// for which optional operations a store takes from the wrapped backend.
package storage

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"time"
)

// Sentinel errors a Backend wraps (package checkpoint exports the same
// values under the same names, so errors.Is works with either).
var (
	// ErrNotFound: the storage itself does not exist (a directory opened
	// read-only that is not there).
	ErrNotFound = errors.New("checkpoint not found")
	// ErrExists: Create or Rename found an object under the name, and left
	// it unchanged.
	ErrExists = errors.New("checkpoint already exists")
	// ErrLocked: another writer holds the backend's lock (see
	// Backend.Lock).
	ErrLocked = errors.New("store is locked by another writer")
	// ErrReadOnly: a write was attempted on a backend opened read-only.
	ErrReadOnly = errors.New("store is read-only")
	// ErrInvalid: an argument was invalid, such as a name that is not
	// plain (see Backend).
	ErrInvalid = errors.New("invalid argument")
	// ErrConflict: a conditional write found another object than the one
	// it expected under its name (see Backend.Replace): another writer
	// changed it. Nothing was written.
	ErrConflict = errors.New("object changed by another writer")
	// ErrNotRegular: Open found something under the name that is not a
	// regular object (a directory, a named pipe, a device, a socket). It
	// is never proof that an object is damaged: nothing was read.
	ErrNotRegular = errors.New("not a regular file")
	// ErrUnavailable: the storage did not answer a request, or not in
	// full: a network error, a timeout, a body cut short, or a server
	// error that outlived the client's retries (object storage). Nothing
	// is known of the object: it is never proof that it is missing or
	// damaged, and the request may succeed if tried again.
	ErrUnavailable = errors.New("storage unavailable")
)

// Backend is where a store keeps its bytes: names, each holding one object
// (a file), written whole or not at all. A Store writes through a Backend
// and knows nothing of paths, fsync or HTTP; a Backend knows nothing of
// steps, JSON or retention. checkpoint.Open uses the local directory
// (package github.com/gocheckpoint/checkpoint/dirstore); the module
// github.com/gocheckpoint/checkpoint/s3store provides one for S3 and
// S3-compatible object storage; checkpoint.OpenBackend opens a store on
// any.
//
// The contract, which the package
// github.com/gocheckpoint/checkpoint/backendtest checks (an implementation
// should pass backendtest.Run):
//
//   - Names are plain: no slash or backslash, never "", "." or "..";
//     a backend refuses any other name (ErrInvalid), and may refuse more
//     (s3store takes [A-Za-z0-9._-] only; every name a store writes is
//     of these). A backend is one flat namespace; child stores (sessions)
//     are reached with Sub, and their objects are never the parent's.
//   - Create publishes a new object and never replaces one: of any number
//     of concurrent Creates of one name, in any number of processes,
//     exactly one succeeds and the others return an error wrapping
//     ErrExists, leaving the winner's bytes as they are. Replace swaps an
//     object atomically: a reader sees the old bytes or the new, never a
//     mix. When either returns nil the object is durable (unless the
//     backend was opened with NoSync) and visible to Open and List, in this
//     process and any other. When either fails, no partial object is
//     visible under name; a crash at any instant leaves the old object or
//     the new one, never a torn one.
//   - Every object a backend returns has a Version that changes whenever
//     other bytes are put under the name, by the backend or behind it (a
//     file rewritten in place, even with its size and modification time
//     kept); object storage may give identical bytes the same Version (an
//     S3 ETag is their MD5). A store caches what it read of an object and
//     trusts the cache while the Version is the same. A Version may change
//     when the bytes did not (a local file's on chmod): that costs a read
//     or a conflict, never a wrong answer. Where a platform cannot see a
//     change, the backend says so (see dirstore.Open).
//   - Errors wrap the package's sentinels where one applies (ErrExists,
//     ErrConflict, ErrLocked, ErrReadOnly), fs.ErrNotExist for a missing
//     name, and otherwise say what failed and where (Locate's form).
//   - A Backend is safe for concurrent use by multiple goroutines.
//
// What differs between storages beyond this contract is said by optional
// interfaces, which a store asks for and never a backend's type: Traits
// (through Describer, or the backend a Wrapper wraps), Unsynced,
// GroupCommitter, TempCleaner and LockProber. Traits.Local says how far a
// writer trusts what it listed and cached, and so which conflicts it sees
// only when a write runs into them: a Create that fails with ErrExists, or
// a Replace conditional on the Version the store last saw (NoObject if
// none) that fails with ErrConflict.
type Backend interface {
	// Create writes a new object called name with the bytes write
	// produces. If name exists, or another writer creates it first, it
	// returns an error wrapping ErrExists and the existing object is left
	// unchanged. A write error, or ctx ending, fails the Create and leaves
	// nothing under name. Create calls write at most once: a byte payload
	// streams from its host once and cannot be replayed (a backend that
	// retries an upload keeps what write produced, as s3store's spool
	// does).
	Create(ctx context.Context, name string, write func(io.Writer) error) (Object, error)

	// Replace writes the object name with the bytes write produces,
	// replacing any object there atomically. If ifVersion is not "", the
	// replacement happens only if the object's current Version is
	// ifVersion (or, if ifVersion is NoObject, only if there is no object):
	// otherwise it returns an error wrapping ErrConflict and changes
	// nothing. Backends that cannot make the check atomic (a local
	// directory, where the writer lock excludes other writers) make it
	// just before writing, so that a mismatch costs no write, and again
	// just before publishing: only a change in between the second check
	// and the publication is overwritten.
	Replace(ctx context.Context, name, ifVersion string, write func(io.Writer) error) (Object, error)

	// Open opens the object name for reading, as a stream that may be
	// closed before its end, and returns its Object (Name, Size and
	// Version all set) as it is at the opening. A missing name is an error
	// wrapping fs.ErrNotExist. A name that is not a regular object (a
	// directory, a named pipe, a device) is an error that says what it is;
	// Open never blocks on one.
	Open(ctx context.Context, name string) (io.ReadCloser, Object, error)

	// Stat returns the Object of name without reading it, or an error
	// wrapping fs.ErrNotExist. It does not follow a symbolic link: Mode
	// says what is there.
	Stat(ctx context.Context, name string) (Object, error)

	// List returns the objects in the backend, in no particular order,
	// whatever their names (a store picks its own by name). Where listing
	// does not tell an object's Size, Version and Mode (a local directory
	// reads names only, which is much cheaper than statting each file),
	// Size is -1 and Version "": Stat or Open tells them. A local
	// directory's List then includes its subdirectories (child stores)
	// and other non-regular entries, which Stat identifies; object
	// storage lists objects only. Either way, a name List returns that
	// Stat says is a regular object is not a child store.
	List(ctx context.Context) ([]Object, error)

	// Remove deletes names, and returns whether each is gone: a name that
	// is already missing is gone and not an error. A removal that fails
	// (an invalid name included) does not stop the others. Removals are
	// made durable together, once (one directory sync), unless NoSync (see
	// also Unsynced).
	Remove(ctx context.Context, names ...string) (gone []bool, err error)

	// Rename moves the object from to the name to, which must be free
	// (ErrExists otherwise): a store moves a damaged checkpoint aside this
	// way. It never replaces an object: one that another writer creates
	// at to while Rename runs is left as it is, and then either Rename or
	// that Create fails with ErrExists. On object storage it is a copy
	// followed by a delete, which a store may repeat after a crash between
	// the two.
	Rename(ctx context.Context, from, to string) error

	// Lock takes the backend's single-writer lock: only one writer, in any
	// process on any machine, holds it at a time. If another holds it,
	// Lock returns an error wrapping ErrLocked that says who, where the
	// backend knows. A backend that loses its lock while held (an expired
	// lease, see s3store) fails every later write with an error wrapping
	// ErrLocked, and never lets a write it makes after losing the lock be
	// listed or opened as the store's. unlock releases the lock; it is
	// called once, after the store's last write.
	Lock(ctx context.Context) (unlock func() error, err error)

	// Sub returns the backend of the child store called name (a session:
	// a subdirectory, or the key prefix name + "/"), with the same
	// settings. It creates nothing until the child's first write, unless
	// create is true: then the child exists at once (a subdirectory; on
	// object storage, a marker object, s3store's .checkpoint.store).
	Sub(ctx context.Context, name string, create bool) (Backend, error)

	// Children returns the names of the child stores (see Sub) that hold
	// an object, in no particular order, and may return ones that hold
	// none (an empty subdirectory).
	Children(ctx context.Context) ([]string, error)

	// Locate returns how a message names the object name: a path, or a URL
	// such as s3://bucket/prefix/name. Locate("") names the backend
	// itself (its directory, or bucket and prefix).
	Locate(name string) string

	// Close releases what the backend holds open (a directory handle, idle
	// connections). A store opened with checkpoint.OpenBackend owns its
	// backend and closes it in its Close.
	Close() error
}

// NoObject is the ifVersion that makes Backend.Replace write only if there
// is no object under the name.
const NoObject = "\x00none"

// Object describes one object of a Backend.
type Object struct {
	// Name is the object's name in its backend (not a path).
	Name string
	// Size in bytes, or -1 if the listing that returned the Object did not
	// say (see Backend.List).
	Size int64
	// Version identifies this content of the name (a local directory uses
	// the file's identity, size and times; S3 the ETag): see the contract
	// in Backend. "" if the listing did not say.
	Version string
	// ModTime is when the object was last written, by the backend's clock
	// (zero if the listing did not say).
	ModTime time.Time
	// Mode is the type of what is under the name, for a local directory
	// (a symbolic link, a named pipe, a directory); 0 for a regular
	// object and on object storage. It is known only when Version is:
	// a local directory's List reads names, not types.
	Mode fs.FileMode
}
