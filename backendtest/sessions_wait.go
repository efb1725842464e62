package backendtest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
)

// lockWatch is a root of sessions whose child stores report each refused
// Lock on refused, so that a test knows a writer is waiting for the lock
// without sleeping.
type lockWatch struct {
	checkpoint.Backend
	refused chan<- error
}

func (b *lockWatch) Sub(ctx context.Context, name string, create bool) (checkpoint.Backend, error) {
	c, err := b.Backend.Sub(ctx, name, create)
	if err != nil {
		return nil, err
	}
	return &lockWatch{Backend: c, refused: b.refused}, nil
}

func (b *lockWatch) Lock(ctx context.Context) (func() error, error) {
	unlock, err := b.Backend.Lock(ctx)
	if err != nil {
		select {
		case b.refused <- err:
		default:
		}
	}
	return unlock, err
}

// A writer opened with WaitLock waits while another writer holds the
// session, and gets it as soon as that writer closes; with a short wait it
// gives up with ErrLocked; without WaitLock it is refused at once.
func testBackendWaitLockWaitsForTheWriter(t *testing.T, w workers) {
	ctx := context.Background()
	r1 := w.open(t)
	_, err := r1.Create(ctx, "a", nil)
	req.NoError(t, err)
	first, err := checkpoint.OpenSessionStore[int](r1, "a")
	req.NoError(t, err)
	_, err = first.Save(ctx, 1, 1)
	req.NoError(t, err)

	refused := make(chan error, 1)
	root := &lockWatch{Backend: w.root(t, false), refused: refused}
	r2 := w.openOn(t, root)

	_, err = checkpoint.OpenSessionStore[int](r2, "a")
	req.ErrorIs(t, err, checkpoint.ErrLocked, "without WaitLock the second writer is refused")
	<-refused
	_, err = checkpoint.OpenSessionStore[int](r2, "a", checkpoint.WaitLock(20*time.Millisecond))
	req.ErrorIs(t, err, checkpoint.ErrLocked, "a wait shorter than the first writer's life ends in ErrLocked")
	<-refused

	type opened struct {
		st  *checkpoint.Store[int]
		err error
	}
	done := make(chan opened, 1)
	go func() {
		st, err := checkpoint.OpenSessionStore[int](r2, "a", checkpoint.WaitLock(time.Minute))
		done <- opened{st, err}
	}()
	<-refused // the second writer found the lock held and waits
	select {
	case o := <-done:
		t.Fatalf("the second writer did not wait for the first: %v", o.err)
	default:
	}
	req.NoError(t, first.Close())
	o := <-done
	req.NoError(t, o.err, "the waiting writer gets the session once the first closes")
	info, err := o.st.Append(ctx, 2)
	req.NoError(t, err)
	req.Equal(t, int64(2), info.Step, "the waiting writer appends after the first writer's step")
	req.NoError(t, o.st.Close())
}

// Append saves at the step after the newest checkpoint of the session,
// whoever wrote it, in a session opened for each call; concurrent Appends
// of one writer take distinct steps.
func testBackendAppendTakesTheNextStep(t *testing.T, w workers) {
	ctx := context.Background()
	r := w.open(t)
	_, err := r.Create(ctx, "a", nil)
	req.NoError(t, err)
	for want := int64(1); want <= 3; want++ {
		st, err := checkpoint.OpenSessionStore[int](r, "a")
		req.NoError(t, err)
		info, err := st.Append(ctx, int(want))
		req.NoError(t, err)
		req.Equal(t, want, info.Step, "Append in a session opened per call")
		req.NoError(t, st.Close())
	}
	st, err := checkpoint.OpenSessionStore[int](r, "a")
	req.NoError(t, err)
	defer st.Close()
	const n = 8
	steps := make([]int64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			info, err := st.Append(ctx, i)
			steps[i], errs[i] = info.Step, err
		})
	}
	wg.Wait()
	seen := map[int64]bool{}
	for i := range n {
		req.NoError(t, errs[i])
		if steps[i] < 4 || steps[i] >= 4+n || seen[steps[i]] {
			t.Fatalf("concurrent Appends took steps %v; want each of 4 to %d once", steps, 3+n)
		}
		seen[steps[i]] = true
	}
	infos, err := st.List(ctx)
	req.NoError(t, err)
	req.Equal(t, 3+n, len(infos), "every Append published its own checkpoint")
}
