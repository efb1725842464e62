package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// WaitLock makes opening a writer (Open, OpenBackend, OpenSessionStore,
// ResumeLatestSession) wait up to d for the writer lock while another
// writer holds it, instead of failing at once: the open retries the lock
// (Backend.Lock) with a backoff that starts at a millisecond and grows to
// at most 100 ms, and returns as soon as it holds the lock. If the lock is
// still held after d, the open fails with the last refusal, an error
// wrapping ErrLocked that names the holder where the backend knows it
// (on Linux, the process that holds a directory; on S3, the lease's
// holder). An open that has a context (ResumeLatestSession) stops waiting
// when it is done and returns its error.
//
// On a directory the lock is free once its writer closes or its process
// dies. On S3 (package s3store) it is free once the lease is released, or
// once it has expired: a lease whose writer died is taken over one to two
// lease TTLs after it was last renewed, so wait at least twice the TTL to
// outlast a dead writer. Each attempt is bounded by what is left of d; if
// d ends before the first attempt could tell whether the lock is held (on
// S3, a read of the lease slower than d), one more attempt, of at most a
// second, tells.
//
// WaitLock(0), the default, refuses at once; a negative d is ErrInvalid.
// ReadOnly stores take no lock and do not wait.
func WaitLock(d time.Duration) Option {
	return optionFunc(func(c *config) { c.waitLock = d })
}

// Bounds of the backoff between two attempts at a held lock.
const (
	lockRetryMin = time.Millisecond
	lockRetryMax = 100 * time.Millisecond
)

// lockTell bounds the one attempt at the lock that a wait makes after its
// end when its first attempt could not tell whether the lock is held.
const lockTell = time.Second

// lock takes b's writer lock, waiting up to wait while another writer
// holds it (see WaitLock). Only ErrLocked is retried: any other error
// (a closed or read-only backend, an I/O error) is returned at once.
func lock(ctx context.Context, b Backend, wait time.Duration) (func() error, error) {
	if wait <= 0 {
		return b.Lock(ctx)
	}
	parent := ctx
	ctx, cancel := context.WithTimeoutCause(ctx, wait, errWaitedOut)
	defer cancel()
	var refused error // the last ErrLocked, which names the holder
	for delay := lockRetryMin; ; delay = min(2*delay, lockRetryMax) {
		unlock, err := b.Lock(ctx)
		switch {
		case err == nil:
			return unlock, nil
		case errors.Is(err, ErrLocked):
			refused = err
		case refused != nil && ctx.Err() != nil:
			// The wait ended within an attempt (which a backend
			// reports as the context's error): the lock's holder is
			// the answer.
		case refused == nil && context.Cause(ctx) == errWaitedOut:
			// The wait ended before the first attempt could tell
			// whether the lock is held (on S3, a read of the lease
			// slower than the wait): one more attempt, bounded by
			// lockTell, tells, so that a short wait still ends in
			// ErrLocked naming the holder.
			tctx, tcancel := context.WithTimeout(parent, lockTell)
			unlock, terr := b.Lock(tctx)
			tcancel()
			switch {
			case terr == nil:
				return unlock, nil
			case errors.Is(terr, ErrLocked):
				return nil, waitedError(ctx, wait, terr)
			}
			return nil, err
		default:
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, waitedError(ctx, wait, refused)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, waitedError(ctx, wait, refused)
		case <-t.C:
		}
	}
}

// errWaitedOut is the cause of the end of a wait for the lock that lasted
// the whole of WaitLock's bound.
var errWaitedOut = errors.New("waited out")

// waitedError is the error of a wait for the lock that ended with ctx:
// refused, the last refusal, after the whole wait; the caller's context's
// error (with refused) if that ended first.
func waitedError(ctx context.Context, wait time.Duration, refused error) error {
	if cause := context.Cause(ctx); cause != errWaitedOut {
		return fmt.Errorf("wait for the writer lock: %w (%w)", cause, refused)
	}
	return fmt.Errorf("still locked after waiting %v: %w", wait, refused)
}
