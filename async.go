package checkpoint

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// asyncQueue holds the saves of an Async store that are encoded but not yet
// published, and the failures of published ones not yet returned.
//
// One job is published at a time, oldest first. The store's goroutine
// publishes whenever there is a job; a caller that has to wait for the
// queue (a Save finding it full, Flush, Close, another write) publishes the
// next job itself if nobody else is publishing. So no caller ever depends on
// the store's goroutine, which may be running a hook that calls the store.
type asyncQueue struct {
	limit int

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced when a field below changes
	jobs     []*saveJob    // waiting, oldest first
	busy     bool          // a job has been taken and is being published
	inHook   bool          // the store's goroutine is running a save's hooks
	queued   uint64        // jobs ever queued
	finished uint64        // jobs ever published or failed, in queue order
	failures []error       // background failures not yet returned
	closed   bool          // Close has begun: no more jobs
	stop     bool          // the store's goroutine returns once there is no job
	exited   chan struct{}
}

func newAsyncQueue(limit int) *asyncQueue {
	return &asyncQueue{limit: limit, changed: make(chan struct{}), exited: make(chan struct{})}
}

// broadcast wakes everyone waiting for a change. The caller holds q.mu.
func (q *asyncQueue) broadcast() {
	close(q.changed)
	q.changed = make(chan struct{})
}

// wait unlocks q.mu, waits for a change or for done to close, and relocks
// after a change, reporting true; if done closed first, it returns false
// without the lock. The caller holds q.mu. (sync.Cond cannot wait for a
// context.)
func (q *asyncQueue) wait(done <-chan struct{}) bool {
	ch := q.changed
	q.mu.Unlock()
	select {
	case <-ch:
		q.mu.Lock()
		return true
	case <-done:
		return false
	}
}

// refuse makes the queue take no more jobs: Close has begun.
func (q *asyncQueue) refuse() {
	q.mu.Lock()
	q.closed = true
	q.broadcast()
	q.mu.Unlock()
}

// take removes the oldest job for publishing. The caller holds q.mu, a job
// is waiting and no other is being published.
func (q *asyncQueue) take() *saveJob {
	j := q.jobs[0]
	q.jobs = slices.Delete(q.jobs, 0, 1)
	q.busy = true
	q.broadcast()
	return j
}

// takeFailures returns the failures not yet returned, joined, and forgets
// them. The caller holds q.mu.
func (q *asyncQueue) takeFailures() error {
	var err error
	switch len(q.failures) {
	case 0:
	case 1:
		err = q.failures[0]
	default:
		err = errors.Join(q.failures...)
	}
	q.failures = nil
	return err
}

// enqueue queues j and returns the Info of the checkpoint it will write. It
// waits while the queue is full. If a background save has failed, it
// returns that failure and does not queue j.
func (s *Store[T]) enqueue(ctx context.Context, j *saveJob) (Info, error) {
	q := s.async
	j.op = "async " + j.op
	// The caller's cancellation must not stop a save it was told is queued.
	j.ctx = context.WithoutCancel(ctx)
	name := s.cfg.layout.format(j.fn)
	fail := func(err error) (Info, error) {
		s.codec.putBuffer(j.state)
		return Info{}, s.failed(stepError(j.op, j.fn.step, s.path(name), err))
	}
	if err := s.await(ctx, func() bool { return q.closed || len(q.failures) > 0 || len(q.jobs) < q.limit }, nil); err != nil {
		return fail(err)
	}
	if q.closed {
		q.mu.Unlock()
		return fail(ErrClosed)
	}
	if len(q.failures) > 0 {
		failures := q.takeFailures()
		q.mu.Unlock()
		s.codec.putBuffer(j.state)
		return Info{}, failures // reported when they happened
	}
	// The save time is taken in queue order, so later saves sort after.
	var behind time.Time
	j.time, behind = s.saveTime(j.fn.step, false)
	q.jobs = append(q.jobs, j)
	q.queued++
	q.broadcast()
	q.mu.Unlock()
	s.clockBehind(j.time, behind)
	h := header{Format: formatVersion, Schema: s.cfg.schema.version, Step: j.fn.step, Kind: j.fn.kind, Time: j.time, Meta: j.meta}
	return s.info(name, j.fn, 0, h), nil
}

// Flush waits until every save queued before the call (with Async) is
// published, and returns the failures of background saves not yet
// returned, if any. (The hooks of the last one may still be running on the
// store's goroutine when Flush returns.) A store without Async has nothing
// to wait for. If ctx ends first, Flush returns its error and the saves go
// on in the background. After Close, Flush returns ErrClosed.
func (s *Store[T]) Flush(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return opError("flush", s.dir, err)
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return s.failed(opError("flush", s.dir, ErrClosed))
	}
	q := s.async
	if q == nil {
		return nil
	}
	if err := s.awaitQueued(ctx); err != nil {
		return s.failed(opError("flush", s.dir, err))
	}
	failures := q.takeFailures()
	q.mu.Unlock()
	return failures
}

// drain publishes every save queued before the call. Failures stay for the
// next Save, Flush or Close to return.
func (s *Store[T]) drain(ctx context.Context) error {
	if err := s.awaitQueued(ctx); err != nil {
		return err
	}
	s.async.mu.Unlock()
	return nil
}

// awaitQueued is await until every save queued before the call is
// published (or has failed).
func (s *Store[T]) awaitQueued(ctx context.Context) error {
	q := s.async
	q.mu.Lock()
	target := q.queued
	q.mu.Unlock()
	return s.await(ctx, func() bool { return q.finished >= target }, nil)
}

// await waits until ready holds, publishing queued saves itself while
// nobody else is publishing one, and returns with q.mu held; or returns
// ctx's error, without the lock, if ctx ends first. ready runs with q.mu
// held. The hooks of the saves it publishes run at once, outside every
// lock, or are appended to held if held is not nil.
func (s *Store[T]) await(ctx context.Context, ready func() bool, held *[]saveReport) error {
	q := s.async
	q.mu.Lock()
	for !ready() {
		if err := ctx.Err(); err != nil {
			q.mu.Unlock()
			return err
		}
		if len(q.jobs) > 0 && !q.busy {
			j := q.take()
			q.mu.Unlock()
			r := s.publishQueued(j, false)
			if held != nil {
				*held = append(*held, r)
			} else {
				s.report(r)
			}
			q.mu.Lock()
			continue
		}
		if !q.wait(ctx.Done()) {
			return ctx.Err()
		}
	}
	return nil
}

// publishQueued publishes a job taken from the queue and records how it
// went. onWorker says the store's goroutine is the caller, which then runs
// the hooks.
func (s *Store[T]) publishQueued(j *saveJob, onWorker bool) saveReport {
	s.wmu.Lock()
	r := s.publishLocked(j)
	s.wmu.Unlock()
	s.codec.putBuffer(j.state)
	q := s.async
	q.mu.Lock()
	q.busy = false
	q.finished++
	if r.err != nil {
		q.failures = append(q.failures, r.err)
	}
	if onWorker {
		q.inHook = true // cleared by the goroutine after the hooks
	}
	q.broadcast()
	q.mu.Unlock()
	return r
}

// publishInBackground is the store's goroutine: it publishes queued saves
// until Close stops it.
func (s *Store[T]) publishInBackground() {
	q := s.async
	defer close(q.exited)
	q.mu.Lock()
	for {
		if len(q.jobs) > 0 && !q.busy {
			j := q.take()
			q.mu.Unlock()
			s.report(s.publishQueued(j, true))
			q.mu.Lock()
			q.inHook = false
			continue
		}
		if q.stop && len(q.jobs) == 0 {
			q.mu.Unlock()
			return
		}
		q.wait(nil)
	}
}

// stopAsync publishes what is still queued and stops the store's goroutine.
// It returns the failures not yet returned and the reports of the saves it
// published, whose hooks the caller runs once the store is closed. The
// queue refuses new jobs already, and no operation is in flight.
func (s *Store[T]) stopAsync() ([]saveReport, error) {
	q := s.async
	if q == nil {
		return nil, nil
	}
	var held []saveReport
	s.await(context.Background(), func() bool { return len(q.jobs) == 0 && !q.busy }, &held)
	q.stop = true
	q.broadcast()
	failures := q.takeFailures()
	// A hook that the goroutine is running may be the caller of Close: it
	// cannot be waited for. Nothing is queued, so it returns as soon as
	// the hook does.
	inHook := q.inHook
	q.mu.Unlock()
	if !inHook {
		<-q.exited
	}
	return held, failures
}
