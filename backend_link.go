package checkpoint

import "context"

// Linker is implemented by a Backend whose child stores (see Backend.Sub)
// can share an object's bytes instead of copying them, as hard links do in
// a local directory. Sessions.Fork links the checkpoints it takes from the
// source session where the new session's child store is a Linker or wraps
// one (see storage.As: linking only shares bytes the backend holds), and
// copies them otherwise (and wherever Link fails for another reason than a
// missing object): checkpoints are never modified, so sharing them is safe.
type Linker interface {
	// Link makes the object name of src appear under the same name in the
	// receiver, sharing its bytes. src must be a child store of the same
	// parent as the receiver, got from that parent's Sub, or a
	// storage.Wrapper of one; for any other src, Link returns an error
	// wrapping errors.ErrUnsupported. If name
	// exists in the receiver, Link returns an error wrapping ErrExists and
	// changes nothing; a name missing in src is an error wrapping
	// fs.ErrNotExist. When Link returns nil the new name is durable
	// (unless the backend was opened with NoSync); when it fails, nothing
	// is left under name in the receiver. It creates the receiver's child
	// store if that does not exist yet.
	Link(ctx context.Context, src Backend, name string) (Object, error)
}

// ChildRemover is implemented by a Backend whose child stores exist apart
// from their objects, as a local directory's subdirectories do: an empty
// one is still there. Sessions removes, through it, the empty child store
// a failed creation leaves, and the staging directories of roots written
// by earlier releases, through the root's Backend or the one it wraps (see
// storage.As). On object storage a child store that holds no
// object does not exist, and nothing needs removing.
type ChildRemover interface {
	// RemoveChild removes the child store name if it holds nothing, and
	// makes the removal durable (unless NoSync). A child that does not
	// exist is not an error; one that holds anything is left as it is,
	// and RemoveChild returns an error wrapping ErrExists. A name in the
	// receiver that is not a child store (a file, a symbolic link) is left
	// as it is too, and is an error wrapping ErrInvalid.
	RemoveChild(ctx context.Context, name string) error
}
