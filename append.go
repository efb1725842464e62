package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
)

// Append saves state as Save does, at the step after the newest checkpoint
// of the store, and returns its Info: Info.Step says which step it took.
// "The newest" counts checkpoints of every kind: step, final and error
// checkpoints, and the rolling file (by the step in its header), whoever
// wrote them, this writer or one before it (the first Append of a writer
// lists the store once; later ones count from what it has saved). In a
// store with no checkpoint the step is 1, the step a loop resumes at when
// Latest finds nothing (info.Step + 1 of a zero Info): step 0 is left
// for a host's initial state, saved with Save, and Truncate(ctx, 0)
// removes every appended checkpoint.
//
// Append is atomic with respect to the other saves of this writer: two
// Appends, concurrent or not, never take the same step, and an Append and
// a Save of the same step never both succeed (the later one is ErrExists,
// as for two Saves). A step this writer saved or queued is counted at
// once, so an Append after Save(ctx, 9, ...) takes at least step 10, even
// with Async before the save is published. After Delete, Truncate or
// ClearError the writer lists the store again at its next Append, so that
// Append after Truncate(ctx, 5) takes step 6. A step whose Append failed
// is taken again by the next Append, except with Async, where a save that
// fails in the background leaves its step unused.
//
// With Async, Append returns once state is queued, as Save does: the step
// is taken in queue order, after every step queued before it, so it never
// takes the step of a save queued earlier; a Save of its step queued later
// fails in the background, with ErrExists (reported as ErrAsync).
//
// Every other rule is Save's: the options, the retention pass, the
// errors (an error before a step was taken, such as a state that cannot
// be encoded, names the store, not a step). A store whose newest step is
// the largest int64 has no step after it: Append is ErrInvalid.
func (s *Store[T]) Append(ctx context.Context, state T, opts ...SaveOption) (Info, error) {
	var sc saveConfig
	for _, o := range opts {
		if o != nil {
			o.applySave(&sc)
		}
	}
	// The state is encoded before the step is known: the largest step
	// gives the longest header for the read limit's check.
	j, err := s.prepare(ctx, "append", math.MaxInt64, KindStep, state, sc, nil, s.async != nil)
	if err != nil {
		return Info{}, s.failed(unstepped(err, s.dir))
	}
	if s.async != nil {
		return s.appendQueued(ctx, j)
	}
	defer s.codec.PutBuffer(j.state)
	return s.appendNow(ctx, j)
}

// appendNow publishes j, an Append's or AppendFrom's job, at the step
// after the store's newest, under the write lock.
func (s *Store[T]) appendNow(ctx context.Context, j *saveJob) (Info, error) {
	if err := s.beginWrite(ctx); err != nil {
		return Info{}, s.failed(opError("append", s.dir, err))
	}
	step, err := s.nextStepLocked(ctx, false)
	if err != nil {
		s.endWrite()
		return Info{}, s.failed(opError("append", s.dir, err))
	}
	j.fn.step = step
	r := s.publishLocked(j)
	s.endWrite()
	s.report(r)
	return r.info, r.err
}

// appendQueued queues j, an Append's job, at the next step (see
// enqueueAt).
func (s *Store[T]) appendQueued(ctx context.Context, j *saveJob) (Info, error) {
	j.op = "async " + j.op // once: enqueueAt may be called again
	for {
		if err := s.learnNewest(ctx); err != nil {
			s.codec.PutBuffer(j.state)
			return Info{}, s.failed(opError("append", s.dir, err))
		}
		info, err, ok := s.enqueueAt(ctx, j, s.next.take)
		if ok {
			return info, err
		}
		// A Truncate or Delete made the store be listed again.
	}
}

// learnNewest lists the store for Append, with Async, unless the writer
// knows its newest step already. It takes the write lock, not the queue:
// the saves queued meanwhile are counted already (see appendCounter).
func (s *Store[T]) learnNewest(ctx context.Context) error {
	if s.next.isKnown() {
		return nil
	}
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.ops.Done()
	if s.cfg.readOnly {
		return ErrReadOnly
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_, err := s.nextStepLocked(ctx, true)
	return err
}

// nextStepLocked returns the step after the newest, listing the store
// first if the writer does not know its newest step. The caller holds the
// write lock. With listOnly it only lists (see learnNewest).
func (s *Store[T]) nextStepLocked(ctx context.Context, listOnly bool) (int64, error) {
	if !s.next.isKnown() {
		gen := s.next.generation()
		ns, _, err := s.names(ctx, nil)
		if err != nil {
			return 0, fmt.Errorf("list the store for its newest step: %w", err)
		}
		var newest int64
		for _, n := range ns {
			if n.unknown != nil {
				return 0, fmt.Errorf("the rolling file's step, which may be the newest: %w", n.unknown)
			}
			newest = max(newest, n.fn.step)
		}
		s.next.learn(newest, gen)
	}
	if listOnly {
		return 0, nil
	}
	return s.next.peek()
}

// unstepped returns err, an *Error of a step that was never chosen (an
// Append's encoding), as an error of the store at dir.
func unstepped(err error, dir string) error {
	var e *Error
	if errors.As(err, &e) && e.HasStep {
		return opError(e.Op, dir, e.Err)
	}
	return err
}

// forgetRemoved tells the counter that checkpoints were removed (Delete,
// Truncate, ClearError): the next Append lists the store again, and still
// counts the steps of saves queued (Async) and not yet published, which
// no listing shows. The queue's lock is held throughout, so no Append
// queues in between.
func (s *Store[T]) forgetRemoved() {
	q := s.async
	if q == nil {
		s.next.forget(0)
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	var floor int64
	for _, j := range q.jobs {
		floor = max(floor, j.fn.step)
	}
	for _, j := range q.current {
		floor = max(floor, j.fn.step)
	}
	s.next.forget(floor)
}

// appendCounter is what a writer knows of the newest step of its store,
// for Append: top is at least the newest step of every checkpoint this
// writer saved (or, with Async, queued) and, once known, of every
// checkpoint the store held when it was last listed. Steps only raise it;
// Delete, Truncate and ClearError make it unknown (forget), and the next
// Append lists the store again. Its lock is taken last, under the
// store's write lock or the queue's.
type appendCounter struct {
	mu    sync.Mutex
	top   int64  // 0 before any checkpoint: the first step is 1
	known bool   // top counts the listing too
	gen   uint64 // counts forget: a listing begun before one is stale
}

// saw counts a step saved or queued by the writer.
func (c *appendCounter) saw(step int64) {
	c.mu.Lock()
	c.top = max(c.top, step)
	c.mu.Unlock()
}

// forget makes the newest step unknown, but for floor: checkpoints were
// removed, and floor is the newest step still queued to be published.
func (c *appendCounter) forget(floor int64) {
	c.mu.Lock()
	c.top, c.known = floor, false
	c.gen++
	c.mu.Unlock()
}

func (c *appendCounter) isKnown() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.known
}

func (c *appendCounter) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// learn counts newest, the newest step of a listing begun at generation
// gen, unless checkpoints were removed since.
func (c *appendCounter) learn(newest int64, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen == c.gen {
		c.top = max(c.top, newest)
		c.known = true
	}
}

// peek returns the step after the newest; the save that publishes it
// counts it (saw).
func (c *appendCounter) peek() (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.after()
}

// take returns the step after the newest and counts it at once, for a
// save queued in the order of its step; false if the newest step is not
// known.
func (c *appendCounter) take() (int64, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.known {
		return 0, false, nil
	}
	step, err := c.after()
	if err != nil {
		return 0, true, err
	}
	c.top = step
	return step, true, nil
}

func (c *appendCounter) after() (int64, error) {
	if c.top == math.MaxInt64 {
		return 0, fmt.Errorf("%w: the newest step is %d: no step comes after it", ErrInvalid, c.top)
	}
	return c.top + 1, nil
}
