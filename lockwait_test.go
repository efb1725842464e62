package checkpoint_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest"
	"github.com/gocheckpoint/checkpoint/backendtest/inject"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/stretchr/testify/require"
)

// lockCounter wraps b so that it counts the calls of Lock, and tells
// refused once the second begins: the first was refused (its writer is
// waiting) while the lock is held by another.
func lockCounter(b checkpoint.Backend, calls *atomic.Int32, refused chan<- struct{}) checkpoint.Backend {
	return inject.Wrap(b, func(op inject.Op) error {
		if op.Kind == inject.Lock && calls.Add(1) == 2 && refused != nil {
			close(refused)
		}
		return nil
	})
}

func openDirBackend(t *testing.T, dir string) checkpoint.Backend {
	t.Helper()
	b, err := dirstore.Open(dir, dirstore.NoSync())
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() }) // again, if a store owned it: Windows removes no open directory
	return b
}

// A second writer opened with WaitLock waits while the first holds the
// directory, and opens as soon as the first closes.
func TestWaitLockOpensOnceTheWriterCloses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	first := openStore[int](t, dir)
	_, err := first.Save(ctx, 1, 1)
	require.NoError(t, err)

	var calls atomic.Int32
	refused := make(chan struct{})
	type opened struct {
		st  *checkpoint.Store[int]
		err error
	}
	done := make(chan opened, 1)
	go func() {
		st, err := checkpoint.OpenBackend[int](lockCounter(openDirBackend(t, dir), &calls, refused), checkpoint.WaitLock(time.Minute))
		done <- opened{st, err}
	}()
	<-refused
	select {
	case o := <-done:
		t.Fatalf("the second writer opened while the first held the lock: %v", o.err)
	default:
	}
	require.NoError(t, first.Close())
	o := <-done
	require.NoError(t, o.err)
	defer o.st.Close()
	v, _, err := o.st.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, v)
	_, err = o.st.Save(ctx, 2, 2)
	require.NoError(t, err, "the waiting writer writes once it holds the lock")
}

// A wait that outlasts d ends in ErrLocked naming the holder, as an open
// without WaitLock does; without WaitLock (or with 0) the open is refused
// after one attempt.
func TestWaitLockTimesOutWithErrLockedNamingTheHolder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	openStore[int](t, dir)

	start := time.Now()
	_, err := checkpoint.Open[int](dir, checkpoint.NoSync(), checkpoint.WaitLock(30*time.Millisecond))
	require.ErrorIs(t, err, checkpoint.ErrLocked)
	require.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond, "the open waited its whole bound")
	require.ErrorContains(t, err, "checkpoint: open "+dir)
	require.ErrorContains(t, err, "still locked after waiting 30ms")
	if runtime.GOOS == "linux" {
		require.ErrorContains(t, err, "(by this process: close the other Store first)")
	}

	for _, opts := range [][]checkpoint.Option{nil, {checkpoint.WaitLock(0)}} {
		var calls atomic.Int32
		_, err := checkpoint.OpenBackend[int](lockCounter(openDirBackend(t, dir), &calls, nil), opts...)
		require.ErrorIs(t, err, checkpoint.ErrLocked)
		require.NotContains(t, err.Error(), "waiting")
		require.Equal(t, int32(1), calls.Load(), "without a wait the lock is tried once")
	}

	_, err = checkpoint.Open[int](dir, checkpoint.WaitLock(-time.Second))
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	require.ErrorContains(t, err, "WaitLock(-1s)")
}

// A wait ends early, with the context's error and the holder, when the
// context of the open (ResumeLatestSession's) is done.
func TestWaitLockEndsWithTheOpensContext(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	var calls atomic.Int32
	refused := make(chan struct{})
	r, err := checkpoint.OpenSessionsBackend(lockCounter(openDirBackend(t, dir), &calls, refused), checkpoint.NoSync())
	require.NoError(t, err)
	defer r.Close()
	s, err := r.New(ctx, nil)
	require.NoError(t, err)
	held, err := checkpoint.OpenSessionStore[int](r, s.ID)
	require.NoError(t, err)
	defer held.Close()
	calls.Store(0) // count the waiting writer's attempts only

	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		st, _, err := checkpoint.ResumeLatestSession[int](wctx, r, checkpoint.WaitLock(time.Minute))
		if st != nil {
			st.Close()
		}
		done <- err
	}()
	<-refused
	cancel()
	err = <-done
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, checkpoint.ErrLocked, "the error says who holds the lock")
}

// On object storage (backendtest.Mem with a lease) a waiting writer takes
// the lease once its holder releases it, or once a dead holder's lease has
// expired; without WaitLock it is refused while the lease lives.
func TestWaitLockOnALeaseWaitsForReleaseOrExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ttl = 250 * time.Millisecond // long enough to see the lease live before it expires
	m := backendtest.NewMem(backendtest.MemLease(ttl))
	open := func() checkpoint.Backend {
		b, err := m.Open()
		require.NoError(t, err)
		return b
	}

	first, err := checkpoint.OpenBackend[int](open())
	require.NoError(t, err)
	_, err = first.Save(ctx, 1, 1)
	require.NoError(t, err)
	var calls atomic.Int32
	refused := make(chan struct{})
	done := make(chan error, 1)
	var second *checkpoint.Store[int]
	go func() {
		var err error
		second, err = checkpoint.OpenBackend[int](lockCounter(open(), &calls, refused), checkpoint.WaitLock(time.Minute))
		done <- err
	}()
	<-refused
	require.NoError(t, first.Close())
	require.NoError(t, <-done, "a released lease is taken at once")
	info, err := second.Append(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, int64(2), info.Step)
	require.NoError(t, second.Close())

	// A holder that dies keeps its lease until it expires.
	dead := open()
	_, err = dead.Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, dead.Close()) // no unlock: the process died
	_, err = checkpoint.OpenBackend[int](open())
	require.ErrorIs(t, err, checkpoint.ErrLocked, "without WaitLock the live lease refuses at once")
	third, err := checkpoint.OpenBackend[int](open(), checkpoint.WaitLock(time.Minute))
	require.NoError(t, err, "WaitLock outlasts the dead holder's lease")
	defer third.Close()
	v, _, err := third.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, v)
}

// OpenBackendContext's context bounds the wait for the lock as WaitLock
// does: a wait it ends fails with the context's error and ErrLocked, and
// the open's backend is closed.
func TestOpenBackendContextEndsTheWaitForTheLock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	openStore[int](t, dir)

	var calls atomic.Int32
	refused := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	b := lockCounter(openDirBackend(t, dir), &calls, refused)
	go func() {
		_, err := checkpoint.OpenBackendContext[int](ctx, b, checkpoint.WaitLock(time.Minute))
		done <- err
	}()
	<-refused
	cancel()
	err := <-done
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, checkpoint.ErrLocked, "the error says who holds the lock")
	_, err = b.List(context.Background())
	require.Error(t, err, "the failed open closed its backend")
}

// slowFirstLock is a Backend whose first Lock takes longer than any wait
// (it returns when its context ends, as a slow request does) and whose
// later ones are refused, naming a holder.
type slowFirstLock struct {
	checkpoint.Backend
	calls atomic.Int32
}

func (b *slowFirstLock) Lock(ctx context.Context) (func() error, error) {
	if b.calls.Add(1) == 1 {
		<-ctx.Done()
		return nil, fmt.Errorf("read the lock: %w", ctx.Err())
	}
	return nil, fmt.Errorf("%w: held by the other writer", checkpoint.ErrLocked)
}

// A wait shorter than the first attempt at the lock (a slow read of an S3
// lease) still ends in ErrLocked naming the holder, not in the attempt's
// deadline error: one more attempt tells.
func TestWaitLockShorterThanOneAttemptEndsInErrLocked(t *testing.T) {
	t.Parallel()
	b := &slowFirstLock{Backend: openDirBackend(t, t.TempDir())}
	_, err := checkpoint.OpenBackend[int](b, checkpoint.WaitLock(20*time.Millisecond))
	require.ErrorIs(t, err, checkpoint.ErrLocked)
	require.ErrorContains(t, err, "held by the other writer")
	require.ErrorContains(t, err, "still locked after waiting 20ms")
	require.Equal(t, int32(2), b.calls.Load())
}
