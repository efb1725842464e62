package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"unicode/utf8"
)

// Due reports whether Tick would save a numbered checkpoint for step under the
// interval set by SaveEvery.
func (s *Store[T]) Due(step int64) bool {
	return s.cfg.every > 0 && step >= 0 && step%s.cfg.every == 0
}

// Tick is the call a loop makes at the end of every step. When the step is
// Due it saves it like Save and returns saved=true. Otherwise, with
// WithRolling, it replaces the rolling file with this step and returns
// saved=true and an Info of KindRolling; without it, it does nothing and
// returns saved=false. With Async, an error wrapping ErrAsync comes with
// saved=true: it reports earlier saves, and this one was queued (see Save).
// opts (WithMeta, WithMetric) apply to whichever file it writes, the
// rolling file included.
func (s *Store[T]) Tick(ctx context.Context, step int64, state T, opts ...SaveOption) (info Info, saved bool, err error) {
	if s.Due(step) {
		info, err = s.Save(ctx, step, state, opts...)
	} else if s.cfg.rolling {
		info, err = s.save(ctx, "tick", step, KindRolling, state, saveOptions(opts), nil)
	} else {
		return Info{}, false, nil
	}
	// With Async, an ErrAsync error is another save's: this one is queued.
	return info, err == nil || errors.Is(err, ErrAsync), err
}

// SaveFinal saves the checkpoint of a run's last step, whatever the interval.
// It is kept by every retention rule. A step may have both a step and a final
// checkpoint; a second final checkpoint of the same step is ErrExists.
//
// SaveFinal, SaveError and SaveOnPanic are the saves a program makes as it
// stops, often because its context was just cancelled (a signal, a
// deadline), so they do not give up when ctx is done: they save anyway. A
// closed store still refuses them. opts (WithMeta, WithMetric) apply as
// to Save.
func (s *Store[T]) SaveFinal(ctx context.Context, step int64, state T, opts ...SaveOption) (Info, error) {
	return s.save(context.WithoutCancel(ctx), "save final", step, KindFinal, state, saveOptions(opts), nil)
}

// SaveError saves an error checkpoint: state as it was when step failed
// (keep partial output in it) and a record of cause: its message, the types
// in its chain, the step and the time, returned in Info.Error. It never
// replaces a checkpoint: beside a clean checkpoint of the same step it is a
// file of its own, and a second failure of the same step is saved as the next
// attempt (prefix_<step>.error-2.json, ...).
//
// An error checkpoint stays until a clean checkpoint (step, final or
// rolling) saved after it, of the same step or a later one, supersedes it:
// then the run is past the failure, Latest resumes from the clean one, and
// the store removes the error checkpoint at its next retention pass (after
// the next step or final save, at a writer's Close, or on Prune), whatever
// the retention rules, even with none. Never before: the clean checkpoint
// must be durable and load, so the failure's record stays findable while
// Latest could still resume from it. A loop therefore needs no ClearError,
// and a kill at any instant (before the redone step is saved, between that
// save and a ClearError) leaves either the error checkpoint Latest resumes
// from or a clean checkpoint that supersedes it; one between a save and its
// pass leaves the removal to the next writer's save or Close. Without
// PruneKinds(KindError), the rules never remove an error checkpoint that is
// not superseded. To keep the record of a failure, copy it out: Hooks.OnSave
// gets the error checkpoint's Info, Info.Error included, as it is saved.
//
// The record keeps the first 32 KiB of the message (and SaveOnPanic's, 64 KiB
// of the stack) and marks the cut, so that the header stays small enough
// for List to read.
// Like SaveFinal, it saves even when ctx is done: the failure being recorded
// is often that cancellation. opts (WithMeta, WithMetric) apply as to Save.
func (s *Store[T]) SaveError(ctx context.Context, step int64, state T, cause error, opts ...SaveOption) (Info, error) {
	return s.save(context.WithoutCancel(ctx), "save error", step, KindError, state, saveOptions(opts), s.errorRecord(step, cause))
}

// SaveOnPanic saves an error checkpoint if the goroutine is panicking, then
// panics again with the same value. It must be deferred directly:
//
//	defer store.SaveOnPanic(ctx, func() (int64, State) { return step, state })
//
// current is called only on a panic, so it returns the step and state as they
// are then. The error record holds the panic value, Panic=true and the stack.
// If the save fails, the failure is logged and reported to Hooks.OnError and
// the original panic goes on.
func (s *Store[T]) SaveOnPanic(ctx context.Context, current func() (int64, T)) {
	r := recover()
	if r == nil {
		return
	}
	stack := string(debug.Stack())
	step, state := current()
	rec := s.errorRecord(step, panicError{r})
	rec.Panic, rec.Stack = true, stack
	if err, ok := r.(error); ok {
		rec.Types = errorTypes(err)
	} else {
		rec.Types = []string{fmt.Sprintf("%T", r)}
	}
	// save has reported any failure; the panic matters more.
	s.save(context.WithoutCancel(ctx), "save on panic", step, KindError, state, saveConfig{}, rec)
	panic(r)
}

// An error record's text is bounded, so that the header of every file the
// library writes fits in what List reads of it (maxHeaderSize), with meta
// (maxMetaSize) beside it, even if every byte needs JSON's longest escape
// (six bytes): 6*(32+64) KiB + 64 types of at most 256 bytes + meta stays
// under 1 MiB. A longer text keeps its beginning and ends with a marker.
const (
	maxErrorMessage = 32 << 10
	maxErrorStack   = 64 << 10
	maxErrorType    = 256
	maxErrorTypes   = 64
)

// boundedRecord returns rec with its texts truncated to the bounds above.
func boundedRecord(rec *ErrorRecord) *ErrorRecord {
	b := *rec
	b.Message = truncateText(b.Message, maxErrorMessage)
	b.Stack = truncateText(b.Stack, maxErrorStack)
	if len(b.Types) > 0 {
		b.Types = make([]string, 0, min(len(rec.Types), maxErrorTypes))
		for _, t := range rec.Types[:min(len(rec.Types), maxErrorTypes)] {
			b.Types = append(b.Types, truncateText(t, maxErrorType))
		}
	}
	return &b
}

// truncateText returns s if it has at most n bytes, else its first n bytes
// or fewer (never splitting a UTF-8 sequence) and a marker that says how
// long s was.
func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "... [truncated: " + strconv.Itoa(len(s)) + " bytes in all]"
}

// panicError carries a panic value as an error for its message.
type panicError struct{ v any }

func (p panicError) Error() string { return fmt.Sprint(p.v) }

func (s *Store[T]) errorRecord(step int64, cause error) *ErrorRecord {
	rec := &ErrorRecord{Step: step, Time: s.cfg.now().UTC(), Types: errorTypes(cause)}
	if cause == nil {
		rec.Message = "no cause given"
	} else {
		rec.Message = cause.Error()
	}
	return rec
}

// errorTypes lists the dynamic types in err's chain, depth first, outermost
// first, following both Unwrap() error and Unwrap() []error.
func errorTypes(err error) []string {
	var types []string
	var walk func(error)
	walk = func(e error) {
		if e == nil || len(types) >= maxErrorTypes {
			return
		}
		types = append(types, fmt.Sprintf("%T", e))
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		}
	}
	walk(err)
	return types
}

// LatestClean is Latest for a resume that must not start from an error
// checkpoint: it returns the newest step, final or rolling checkpoint that
// loads.
func (s *Store[T]) LatestClean(ctx context.Context) (T, Info, error) {
	v, info, err := s.latest(ctx, "latest clean", func(fn fileName) bool { return fn.kind != KindError })
	if err == nil {
		s.loaded(info)
	}
	return v, info, err
}

// ClearError removes the error checkpoints of step (every attempt) now,
// leaving its other checkpoints alone. A loop need not call it: the store
// removes an error checkpoint by itself once a clean checkpoint supersedes
// it (see SaveError). Call it to drop the record sooner, say to give up on
// a step instead of redoing it (then Latest resumes from the newest
// checkpoint before it). A step with no error checkpoint left, such as one
// the store has removed already, is no error: ClearError is idempotent, so
// a program that calls it after redoing a step may call it again after a
// crash.
func (s *Store[T]) ClearError(ctx context.Context, step int64) error {
	err := s.deleteWhere(ctx, "clear error", step, func(k Kind) bool { return k == KindError })
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}
