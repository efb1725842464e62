// Package einostore keeps the checkpoints of CloudWeGo Eino graphs
// (compose.CheckPointStore) in a checkpoint store: each Set is one atomic,
// durable, checksummed checkpoint, and Get returns the newest one that
// verifies, so that a run interrupted by Eino, a crash or a kill -9 resumes
// from its last checkpoint in any process.
//
// A Store is a root of sessions (checkpoint.Sessions): each checkpoint ID is
// one session, whose checkpoints are Eino's byte payloads (format 3, see
// checkpoint.Store.SaveFrom), one per Set, numbered in the order they were
// set. The root is a local directory (New) or any checkpoint.Backend, such
// as an S3 prefix of package s3store (NewOnBackend).
//
//	store, err := einostore.New("runs", checkpoint.KeepLast(3))
//	if err != nil { ... }
//	defer store.Close()
//	runnable, err := graph.Compile(ctx, compose.WithCheckPointStore(store), ...)
//	out, err := runnable.Invoke(ctx, in, compose.WithCheckPointID(runID))
package einostore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/gocheckpoint/checkpoint"
)

// DefaultLockWait is how long Set, Get and Delete wait for the writer lock of a
// checkpoint ID that another goroutine or process holds, when their context
// has no deadline.
const DefaultLockWait = time.Minute

// Store is a compose.CheckPointStore on a checkpoint root: a directory
// (New) or a checkpoint.Backend (NewOnBackend). Its Get and Set have the
// interface's signatures (its tests check that it implements it); the
// package itself does not import Eino.
//
// Guarantees:
//
//   - Set publishes the checkpoint atomically and, unless checkpoint.NoSync
//     was given, durably before it returns nil: a kill -9 or a power cut at
//     any instant leaves the ID with its earlier checkpoints and either none
//     or all of the new one. An existing checkpoint is never modified.
//   - Get returns exactly the bytes of one Set of that ID (the newest whose
//     checksum verifies), never a torn value and never another ID's.
//   - Concurrent Sets of one ID, from goroutines of one Store or from
//     different processes on one root, are serialised by the ID's writer
//     lock: each waits for the lock (see DefaultLockWait) instead of
//     failing, and the one that returns last is the one Get returns. A Get
//     takes the lock too, so it returns the value of the last Set before
//     it. Calls on different IDs run in parallel.
//
// A Store is safe for concurrent use by multiple goroutines.
type Store struct {
	sessions *checkpoint.Sessions

	mu       sync.RWMutex // held for reading by every call, for writing by Close
	closed   bool
	closing  chan struct{} // closed by Close: stops lock waits
	closeErr error

	idMu  sync.Mutex
	idLks map[string]*idLock // in-process queue per ID, before the writer lock
}

type idLock struct {
	sem  chan struct{}
	refs int
}

// New opens (creating it durably if needed) the root directory dir of a
// Store. opts apply to the store of every checkpoint ID, as with
// checkpoint.OpenSessions: retention rules (checkpoint.KeepLast and the
// others) apply to each ID's history on its own; compression
// (checkpoint.Zstd, checkpoint.Gzip), checkpoint.NoSync, checkpoint.WithMaxReadSize,
// hooks and a logger apply as they do to any store. Without a retention
// rule every checkpoint of an ID is kept until Delete.
func New(dir string, opts ...checkpoint.Option) (*Store, error) {
	r, err := checkpoint.OpenSessions(dir, opts...)
	if err != nil {
		return nil, fmt.Errorf("einostore: open %s: %w", dir, err)
	}
	return newStore(r), nil
}

// NewOnBackend opens a Store on b, such as an S3 prefix
// (s3store), with opts as for New. The Store owns b from then on: Close
// closes it, and so does a failed NewOnBackend.
func NewOnBackend(b checkpoint.Backend, opts ...checkpoint.Option) (*Store, error) {
	r, err := checkpoint.OpenSessionsBackend(b, opts...)
	if err != nil {
		return nil, fmt.Errorf("einostore: open: %w", err)
	}
	return newStore(r), nil
}

func newStore(r *checkpoint.Sessions) *Store {
	return &Store{sessions: r, closing: make(chan struct{}), idLks: map[string]*idLock{}}
}

// Location returns where the root is: its directory, or a URL such as
// s3://bucket/prefix/.
func (s *Store) Location() string { return s.sessions.Location() }

// Sessions returns the root, for tools: List shows every checkpoint ID
// (Session.ID) with its number of checkpoints and last save; PruneIdle
// removes the IDs of runs idle for longer than a duration. The Store
// still owns it: do not close it.
func (s *Store) Sessions() *checkpoint.Sessions { return s.sessions }

// Get returns the newest checkpoint of checkPointID that verifies, with
// true. An ID that has no checkpoint (never Set, or deleted) is
// (nil, false, nil), which tells Eino to start a new run.
//
// Damaged checkpoints (a bad checksum, a truncated file) are skipped, and
// the newest older one that verifies is returned. If every checkpoint of
// the ID is damaged, Get returns an error wrapping checkpoint.ErrCorrupt,
// never (nil, false, nil): a run must not silently start again from
// scratch. Other failures (a read error, checkpoint.ErrInvalid for an ID
// that cannot name a session, checkpoint.ErrClosed) are errors too.
//
// Get holds the ID's writer lock while it reads, waiting for it as Set
// does, so that no Set or retention pass runs meanwhile: what it returns
// is the last value set before it, never an older one whose successor a
// concurrent prune removed while it was being read. On a root opened with
// checkpoint.ReadOnly, Get takes no lock (it cannot): a Set of another
// process that prunes meanwhile may then make it fail or return an older
// value; use ReadOnly to inspect a root no one writes to.
func (s *Store) Get(ctx context.Context, checkPointID string) ([]byte, bool, error) {
	if err := s.enter(); err != nil {
		return nil, false, opErr("get", checkPointID, err)
	}
	defer s.mu.RUnlock()
	if err := checkpoint.ValidSessionID(checkPointID); err != nil {
		return nil, false, opErr("get", checkPointID, err)
	}
	var data []byte
	found := true
	err := s.withID(ctx, checkPointID, false, func(st *checkpoint.Store[[]byte]) error {
		r, info, err := st.LatestPayload(ctx)
		if err != nil {
			return err
		}
		// The size is exact for a plain file (-1 when compressed): then
		// the payload is read into one buffer of its size. The reader
		// returns io.EOF only once the checksum verified.
		var buf bytes.Buffer
		if info.PayloadSize >= 0 && info.PayloadSize < 1<<30 {
			buf.Grow(int(info.PayloadSize) + bytes.MinRead)
		}
		_, err = buf.ReadFrom(r)
		if cerr := r.Close(); err == nil {
			err = cerr
		}
		data = buf.Bytes()
		return err
	})
	if errors.Is(err, checkpoint.ErrNotFound) {
		// No session, or a session with no checkpoint (a first Set that
		// failed, or was killed, between creating it and publishing).
		data, found, err = nil, false, nil
	}
	if err != nil {
		return nil, false, opErr("get", checkPointID, err)
	}
	return data, found, nil
}

// Set saves checkPoint as the newest checkpoint of checkPointID, creating
// the ID on its first Set, and returns once it is published (durably,
// unless checkpoint.NoSync): from then on Get returns it, or the checkpoint
// of a later Set. The retention rules given to New then prune the ID's
// older checkpoints.
//
// Set holds the ID's writer lock while it writes, waiting for it while
// another Set or Delete of the ID (in this process or another) holds it,
// until ctx is done or, if ctx has no deadline, for DefaultLockWait; then
// it fails with an error wrapping checkpoint.ErrLocked. An empty checkPoint
// (Eino never sets one) and an ID that cannot name a session (see
// checkpoint.ValidSessionID: empty, not UTF-8, over 1024 bytes) are
// checkpoint.ErrInvalid, and nothing is written. checkPoint is not
// retained after Set returns.
func (s *Store) Set(ctx context.Context, checkPointID string, checkPoint []byte) error {
	if err := s.enter(); err != nil {
		return opErr("set", checkPointID, err)
	}
	defer s.mu.RUnlock()
	if err := checkpoint.ValidSessionID(checkPointID); err != nil {
		return opErr("set", checkPointID, err)
	}
	if len(checkPoint) == 0 {
		return opErr("set", checkPointID, fmt.Errorf("%w: an empty checkpoint", checkpoint.ErrInvalid))
	}
	err := s.withID(ctx, checkPointID, true, func(st *checkpoint.Store[[]byte]) error {
		_, err := st.AppendFrom(ctx, func(w io.Writer) error {
			_, err := w.Write(checkPoint)
			return err
		})
		return err
	})
	if err != nil {
		return opErr("set", checkPointID, err)
	}
	return nil
}

// Delete removes checkPointID and every checkpoint of it, such as a run
// that finished: Get then returns (nil, false, nil). Deleting an ID that
// has no checkpoint is no error. It waits for the ID's writer lock as Set
// does. A crash during Delete leaves the ID either whole or out of sight
// (see checkpoint.Sessions.Delete). Out of sight, Get reports it as not
// found; the next Delete or Set of the ID finishes the removal (a Set then
// starts the ID afresh).
func (s *Store) Delete(ctx context.Context, checkPointID string) error {
	if err := s.enter(); err != nil {
		return opErr("delete", checkPointID, err)
	}
	defer s.mu.RUnlock()
	if err := checkpoint.ValidSessionID(checkPointID); err != nil {
		return opErr("delete", checkPointID, err)
	}
	if err := s.queue(ctx, checkPointID); err != nil {
		return opErr("delete", checkPointID, err)
	}
	defer s.unqueue(checkPointID)
	err := s.retryLocked(ctx, func() error {
		err := s.sessions.Delete(ctx, checkPointID)
		if errors.Is(err, checkpoint.ErrNotFound) {
			return nil
		}
		return err
	})
	if err != nil {
		return opErr("delete", checkPointID, err)
	}
	return nil
}

// Close waits for the calls in flight (a call waiting for the ID's
// writer lock gives up at once, with checkpoint.ErrClosed), then closes the
// root: for New, releases the directory; for NewOnBackend, closes the
// Backend. Checkpoints already set stay; later calls return an error
// wrapping checkpoint.ErrClosed. Every call to Close returns the result of
// the first.
func (s *Store) Close() error {
	s.idMu.Lock()
	select {
	case <-s.closing:
	default:
		close(s.closing)
	}
	s.idMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		if err := s.sessions.Close(); err != nil {
			s.closeErr = fmt.Errorf("einostore: close: %w", err)
		}
	}
	return s.closeErr
}

func (s *Store) enter() error {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return checkpoint.ErrClosed
	}
	return nil
}

// withID calls f with the store of id, opened as its writer (on a
// ReadOnly root, as a reader), after the calls of this Store on id before
// it: it waits for them, then for a writer of another process (see
// retryLocked). With create, a missing session is created; without, it is
// ErrNotFound.
func (s *Store) withID(ctx context.Context, id string, create bool, f func(*checkpoint.Store[[]byte]) error) error {
	if err := s.queue(ctx, id); err != nil {
		return err
	}
	defer s.unqueue(id)
	var st *checkpoint.Store[[]byte]
	halfway := 0
	err := s.retryLocked(ctx, func() error {
		var err error
		st, err = checkpoint.OpenSessionStore[[]byte](s.sessions, id)
		if create && errors.Is(err, checkpoint.ErrNotFound) {
			// The first Set of id (or a Delete ran between a Create
			// and the open: Create again).
			_, err = s.sessions.Create(ctx, id, nil)
			if err == nil || errors.Is(err, checkpoint.ErrExists) {
				st, err = checkpoint.OpenSessionStore[[]byte](s.sessions, id)
			}
			if errors.Is(err, checkpoint.ErrNotFound) {
				// Taken but not there: a crash interrupted a Delete of
				// it, which Sessions.Delete finishes (changing nothing
				// otherwise), or another process is creating it: wait
				// for it.
				if derr := s.sessions.Delete(ctx, id); derr == nil {
					return fmt.Errorf("%w: %w", errHalfway, err) // create again
				} else if !errors.Is(derr, checkpoint.ErrNotFound) {
					return derr
				}
				if halfway++; halfway < maxHalfway {
					return fmt.Errorf("%w: %w", errHalfway, err)
				}
				return fmt.Errorf("%w: the ID is taken but holds no session, and no Delete of it was interrupted", checkpoint.ErrExists)
			}
		}
		return err
	})
	if err != nil {
		return err
	}
	err = f(st)
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	return err
}

// queue waits until no other call of this Store on id is under way (or
// ctx is done, or the Store closes), so that the calls of one process wait
// for each other in order instead of polling the writer lock. The caller
// calls unqueue when done.
func (s *Store) queue(ctx context.Context, id string) error {
	s.idMu.Lock()
	l := s.idLks[id]
	if l == nil {
		l = &idLock{sem: make(chan struct{}, 1)}
		s.idLks[id] = l
	}
	l.refs++
	s.idMu.Unlock()

	ctx, cancel := waitContext(ctx)
	defer cancel()
	select {
	case l.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		s.release(id, l)
		return waitError(ctx)
	case <-s.closing:
		s.release(id, l)
		return checkpoint.ErrClosed
	}
}

func (s *Store) unqueue(id string) {
	s.idMu.Lock()
	l := s.idLks[id]
	s.idMu.Unlock()
	<-l.sem
	s.release(id, l)
}

// errHalfway is a session whose creation another process has begun and
// not yet finished; withID waits for it maxHalfway attempts at most.
var errHalfway = errors.New("session being created")

const maxHalfway = 30 // about 2 s of retryLocked's backoff

// retryLocked calls f until it returns anything but checkpoint.ErrLocked
// (a writer of another process holds the ID) or errHalfway, or ctx is done, or the Store
// closes, with a backoff from 1 ms to 100 ms. The last ErrLocked is
// returned, joined with why the wait ended.
func (s *Store) retryLocked(ctx context.Context, f func() error) error {
	ctx, cancel := waitContext(ctx)
	defer cancel()
	delay := time.Millisecond
	for {
		err := f()
		if !errors.Is(err, checkpoint.ErrLocked) && !errors.Is(err, errHalfway) {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, waitError(ctx))
		case <-s.closing:
			t.Stop()
			return errors.Join(err, checkpoint.ErrClosed)
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}

func waitContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, DefaultLockWait, errWaitedTooLong)
}

var errWaitedTooLong = fmt.Errorf("%w: waited %v for the writer lock", checkpoint.ErrLocked, DefaultLockWait)

func waitError(ctx context.Context) error {
	if c := context.Cause(ctx); c != nil {
		return c
	}
	return ctx.Err()
}

func opErr(op, id string, err error) error {
	return fmt.Errorf("einostore: %s checkpoint %q: %w", op, id, err)
}

func (s *Store) release(id string, l *idLock) {
	s.idMu.Lock()
	l.refs--
	if l.refs == 0 {
		delete(s.idLks, id)
	}
	s.idMu.Unlock()
}
