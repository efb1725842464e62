package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gocheckpoint/checkpoint/storage"
)

// asyncQueue holds the saves of an Async store that are encoded but not yet
// published, and the failures of published ones not yet returned by Flush
// or Close.
//
// The jobs are published in batches, one batch at a time: every job
// waiting when a batch is taken, oldest first (see publishBatchLocked: on a
// backend that can, their names are made durable together). The store's
// goroutine publishes whenever there is a job; a caller that has to wait
// for the queue (a Save finding it full, Flush, Close, another write)
// publishes the next batch itself if nobody else is publishing. So no
// caller ever depends on the store's goroutine, which may be running a
// hook that calls the store.
type asyncQueue struct {
	limit int

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced when a field below changes
	jobs     []*saveJob    // waiting, oldest first
	busy     bool          // a batch has been taken and is being published
	current  []*saveJob    // that batch, while busy
	queued   uint64        // jobs ever queued
	finished uint64        // jobs ever published or failed, in queue order
	failures []error       // background failures not yet returned by Flush or Close, the first maxFailures
	more     int           // how many more failed, not kept
	toSave   int           // how many of failures a Save has returned already
	moreSave int           // how many of more a Save has returned already
	closed   bool          // Close has begun: no more jobs
	stop     bool          // the store's goroutine returns once there is no job
	worker   uint64        // the store's goroutine (see goid); 0 until it runs
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

// take removes every waiting job, as one batch for publishing. The caller
// holds q.mu, a job is waiting and no other batch is being published.
func (q *asyncQueue) take() []*saveJob {
	batch := slices.Clone(q.jobs)
	clear(q.jobs)
	q.jobs = q.jobs[:0]
	q.busy, q.current = true, batch
	q.broadcast()
	return batch
}

// takeFailures returns the failures not yet returned by Flush or Close, as
// one error wrapping ErrAsync (nil if none), and forgets them. The caller
// holds q.mu.
func (q *asyncQueue) takeFailures() error {
	err := asyncFailure(q.failures, q.more)
	q.failures, q.more, q.toSave, q.moreSave = nil, 0, 0, 0
	return err
}

// newFailures returns the failures that no Save has returned yet, as one
// error wrapping ErrAsync (nil if none). Flush and Close still return them.
// The caller holds q.mu.
func (q *asyncQueue) newFailures() error {
	err := asyncFailure(q.failures[q.toSave:], q.more-q.moreSave)
	q.toSave, q.moreSave = len(q.failures), q.more
	return err
}

// record keeps the failure of a background save for Save, Flush and Close
// to return. A host that never calls Flush while every save fails (a full
// disk) must not run out of memory: past maxFailures, failures are only
// counted. The caller holds q.mu.
func (q *asyncQueue) record(err error) {
	if len(q.failures) < maxFailures {
		q.failures = append(q.failures, err)
	} else {
		q.more++
	}
}

// maxFailures bounds the background failures an Async store keeps.
const maxFailures = 64

// asyncFailure returns background failures as one error that wraps ErrAsync
// and each of errs, and whose text starts with the steps that failed; more
// failed besides errs, and were not kept.
func asyncFailure(errs []error, more int) error {
	if len(errs) == 0 && more == 0 {
		return nil
	}
	var steps []string
	for _, err := range errs {
		if e := (*Error)(nil); errors.As(err, &e) && e.HasStep {
			steps = append(steps, strconv.FormatInt(e.Step, 10))
		}
	}
	which := "step " + strings.Join(steps, ", ")
	if len(steps) > 1 {
		which = "steps " + strings.Join(steps, ", ")
	}
	if more > 0 {
		which += fmt.Sprintf(" and %d more", more)
	}
	if len(errs) == 0 { // all of them were counted only
		return fmt.Errorf("checkpoint: %w: %d more saves, past the first %d failures kept", ErrAsync, more, maxFailures)
	}
	if len(errs) == 1 {
		return fmt.Errorf("checkpoint: %w: %s: %w", ErrAsync, which, errs[0])
	}
	return fmt.Errorf("checkpoint: %w: %s: %w", ErrAsync, which, errors.Join(errs...))
}

// enqueue queues j and returns the Info of the checkpoint it will write. It
// waits while the queue is full. If background saves have failed since a
// Save last returned their failures, it queues j all the same and returns
// the Info together with those failures (see asyncFailure).
func (s *Store[T]) enqueue(ctx context.Context, j *saveJob) (Info, error) {
	j.op = "async " + j.op
	info, err, _ := s.enqueueAt(ctx, j, nil)
	return info, err
}

// enqueueAt is enqueue for a job whose step pick chooses, if pick is not
// nil (j.op says "async" already): it runs under the queue's lock, once there is room, so that the
// step it takes is in queue order. If pick reports false, nothing is
// queued and enqueueAt reports false: the caller finds out what pick needs
// and calls again. Whatever j's step, it is counted for Append (see
// appendCounter).
func (s *Store[T]) enqueueAt(ctx context.Context, j *saveJob, pick func() (int64, bool, error)) (Info, error, bool) {
	q := s.async
	// The caller's cancellation must not stop a save it was told is queued.
	j.ctx = context.WithoutCancel(ctx)
	name := s.cfg.layout.format(j.fn)
	fail := func(err error) (Info, error, bool) {
		s.codec.PutBuffer(j.state)
		if pick != nil { // no step was taken: name the store
			return Info{}, s.failed(opError(j.op, s.dir, err)), true
		}
		return Info{}, s.failed(stepError(j.op, j.fn.step, s.path(name), err)), true
	}
	if err := s.await(ctx, func() bool { return q.closed || len(q.jobs) < q.limit }, nil); err != nil {
		return fail(err)
	}
	if q.closed {
		q.mu.Unlock()
		return fail(ErrClosed)
	}
	if pick != nil {
		step, ok, err := pick()
		if err != nil {
			q.mu.Unlock()
			return fail(err)
		}
		if !ok {
			q.mu.Unlock()
			return Info{}, nil, false
		}
		j.fn.step = step
		name = s.cfg.layout.format(j.fn)
	} else {
		s.next.saw(j.fn.step)
	}
	// The save time is taken in queue order, so later saves sort after.
	var behind time.Time
	j.time, behind = s.saveTime(j.fn.step, false)
	q.jobs = append(q.jobs, j)
	q.queued++
	q.broadcast()
	failures := q.newFailures() // reported to the hooks when they happened
	q.mu.Unlock()
	s.clockBehind(j.time, behind)
	h := header{Format: formatVersion, Schema: s.cfg.schema.Version, Step: j.fn.step, Kind: j.fn.kind, Time: j.time, Meta: j.meta, Metrics: j.metrics}
	return s.info(name, j.fn, 0, h), failures, true
}

// Flush waits until every save queued before the call (with Async) is
// published. It returns the failure of every background save that failed
// since the last Flush, in one error that wraps ErrAsync and each failure
// and names the failed steps, even if a Save returned it already: when
// Flush returns nil, every state whose Save returned nil or an ErrAsync
// error is published. (The hooks of the last one may still be running on the
// store's goroutine when Flush returns.) A store without Async has nothing
// to wait for. If ctx ends first, Flush returns its error and the saves go
// on in the background; their failures stay for the next Flush. After
// Close, Flush returns ErrClosed.
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
// next Flush or Close (and Save) to return.
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
			batch := q.take()
			q.mu.Unlock()
			rs := s.publishQueued(batch)
			if held != nil {
				*held = append(*held, rs...)
			} else {
				for _, r := range rs {
					s.report(r)
				}
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

// publishQueued publishes a batch taken from the queue and records how
// each of its jobs went. The caller runs the hooks, in the batch's order.
func (s *Store[T]) publishQueued(batch []*saveJob) []saveReport {
	s.wmu.Lock()
	rs := s.publishBatchLocked(batch)
	s.wmu.Unlock()
	for _, j := range batch {
		s.codec.PutBuffer(j.state)
	}
	q := s.async
	q.mu.Lock()
	q.busy, q.current = false, nil
	q.finished += uint64(len(batch))
	for _, r := range rs {
		if r.err != nil {
			q.record(r.err)
		}
	}
	q.broadcast()
	q.mu.Unlock()
	return rs
}

// publishBatchLocked publishes the jobs of batch, in order, and returns a
// report for each. On a backend that is a storage.GroupCommitter (the
// local directory), a batch of more than one job is a group commit: each
// step or error checkpoint is written, synced and published by
// CreateUncommitted, then one Commit makes their names durable together,
// where a Create would pay a directory sync for each; only then is any of
// them cached, counted, pruned after or reported (OnSave), so that the
// store's promises are those of a save made alone: a checkpoint is
// reported saved, and older ones pruned, only once it is durable. A job
// that fails (its name taken, its write failing) fails alone, as it would
// alone; a Commit that fails fails every job it was to make durable, and
// takes back their names (none was reported saved). A rolling checkpoint
// is replaced, durably, in its turn. The caller holds the write lock.
func (s *Store[T]) publishBatchLocked(batch []*saveJob) []saveReport {
	rs := make([]saveReport, len(batch))
	gc, ok := s.b.(storage.GroupCommitter) // never a wrapped one's: see storage.As
	if !ok || len(batch) == 1 {
		for i, j := range batch {
			rs[i] = s.publishLocked(j)
		}
		return rs
	}
	// The names first, in order; then the files of distinct names are
	// written and synced at once; then, in order, the rolling
	// checkpoints, and the saves whose name was taken (a step queued
	// twice, or a file put there meanwhile) as each would alone.
	//
	// Each file is still fsynced before it is published: that is what
	// makes it whole or absent after a power cut, and only the directory
	// sync is shared. Concurrent fsyncs cost less than the same fsyncs in
	// turn: ext4 with a journal and XFS make them one journal commit (one
	// log force) where they overlap, and ext4 without a journal, which
	// writes each file's blocks itself, shares the disk's cache flushes.
	// syncfs(2) would write back every dirty file of the file system,
	// other programs' too, and sync_file_range(2) makes nothing durable
	// (no metadata, no cache flush): neither is used (see BENCHMARKS.md).
	ws := make([]written, len(batch))
	errs := make([]error, len(batch))
	together := make(map[string]int, len(batch)) // name -> the job written together
	for i, j := range batch {
		ws[i] = s.nameLocked(j)
		if _, taken := together[ws[i].name]; ws[i].err == nil && j.fn.kind != KindRolling && !taken {
			together[ws[i].name] = i
		}
	}
	var wg sync.WaitGroup
	for _, i := range together {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws[i].o, errs[i] = gc.CreateUncommitted(batch[i].ctx, ws[i].name, ws[i].write)
		}()
	}
	wg.Wait()
	var names []string
	for i, j := range batch {
		w := &ws[i]
		if w.err != nil {
			continue
		}
		if k, ok := together[w.name]; ok && k == i {
			switch err := errs[i]; {
			case err == nil:
				names = append(names, w.name)
				continue
			case !errors.Is(err, ErrExists): // never written twice (see rule 9 of DESIGN.md)
				w.err = stepError(j.op, j.fn.step, s.path(w.name), err)
				continue
			}
		}
		*w = s.createLocked(j, *w, gc.CreateUncommitted) // a rolling one is replaced
		if w.err == nil && j.fn.kind != KindRolling {
			names = append(names, w.name)
		}
	}
	var commitErr error
	if len(names) > 0 {
		commitErr = gc.Commit(batch[len(batch)-1].ctx, names...)
	}
	for i, j := range batch {
		w := ws[i]
		switch {
		case w.err != nil:
			rs[i] = saveReport{err: w.err}
		case commitErr != nil && j.fn.kind != KindRolling:
			rs[i] = saveReport{err: stepError(j.op, j.fn.step, s.path(w.name), fmt.Errorf("commit: %w", commitErr))}
		default:
			rs[i] = s.finishLocked(j, w)
		}
	}
	return rs
}

// publishInBackground is the store's goroutine: it publishes queued saves
// and runs their hooks until Close stops it.
func (s *Store[T]) publishInBackground() {
	q := s.async
	defer close(q.exited)
	q.mu.Lock()
	q.worker = goid()
	for {
		if len(q.jobs) > 0 && !q.busy {
			batch := q.take()
			q.mu.Unlock()
			for _, r := range s.publishQueued(batch) {
				s.report(r)
			}
			q.mu.Lock()
			continue
		}
		if q.stop && len(q.jobs) == 0 {
			q.mu.Unlock()
			return
		}
		q.wait(nil)
	}
}

// stopAsync publishes what is still queued and tells the store's goroutine
// to stop. It returns the failures not yet returned by Flush and the
// reports of the saves it published, whose hooks the caller runs once the
// store is closed. The queue refuses new jobs already, and no operation is
// in flight.
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
	q.mu.Unlock()
	return held, failures
}

// awaitWorker waits until the store's goroutine has returned, and so has
// finished the hooks it was running, unless the caller is that goroutine:
// a hook that calls Close cannot wait for itself (the goroutine returns as
// soon as the hook does, since nothing is queued any more).
func (s *Store[T]) awaitWorker() {
	q := s.async
	if q == nil {
		return
	}
	q.mu.Lock()
	worker := q.worker
	q.mu.Unlock()
	if goid() != worker {
		<-q.exited
	}
}

// goid returns the ID of the calling goroutine, from the first line of its
// stack trace ("goroutine 18 [running]:"). Go offers nothing else to tell
// whether Close was called by a hook running on the store's own goroutine,
// which must not wait for itself, or by any other, which must wait for that
// goroutine's hooks. It is called once per store and once per Close.
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, _ := strconv.ParseUint(string(b), 10, 64)
	return id
}
