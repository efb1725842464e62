package checkpoint

import "context"

// The names below are deprecated in favour of names that say what they are
// for; each keeps working as its doc says.

// Every sets the interval of Tick.
//
// Deprecated: use SaveEvery, which says that it decides what is saved (the
// Keep rules decide what is kept).
func Every(n int64) Option { return SaveEvery(n) }

// KeepEvery keeps every checkpoint whose step is a multiple of k.
//
// Deprecated: use KeepMultiplesOf, whose name says that k is a step.
func KeepEvery(k int64) Option { return KeepMultiplesOf(k) }

// LoadInfo loads exactly the checkpoint that info describes.
//
// Deprecated: use LoadExact.
func (s *Store[T]) LoadInfo(ctx context.Context, info Info) (T, Info, error) {
	return s.LoadExact(ctx, info)
}

// Dir returns where the store is.
//
// Deprecated: use Location; on object storage it is a URL, not a directory.
func (s *Store[T]) Dir() string { return s.Location() }

// Dir returns where the root is.
//
// Deprecated: use Location; on object storage it is a URL, not a directory.
func (r *Sessions) Dir() string { return r.Location() }

// OpenSession opens the store of session id.
//
// Deprecated: use OpenSessionStore, whose name tells it from OpenSessions.
func OpenSession[T any](r *Sessions, id string, opts ...Option) (*Store[T], error) {
	return OpenSessionStore[T](r, id, opts...)
}

// ResumeSession opens the store of the most recently active session.
//
// Deprecated: use ResumeLatestSession.
func ResumeSession[T any](ctx context.Context, r *Sessions, opts ...Option) (*Store[T], Session, error) {
	return ResumeLatestSession[T](ctx, r, opts...)
}

// OpenDir opens the directory dir as a Backend, with the ReadOnly and
// NoSync among opts; the other options are checked and ignored.
//
// Deprecated: use dirstore.Open, whose options are the ones the directory
// reads.
func OpenDir(dir string, opts ...Option) (Backend, error) {
	b, _, err := openDirWithOptions("open", dir, opts)
	return b, err
}
