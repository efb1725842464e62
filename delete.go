package checkpoint

import (
	"context"
	"fmt"
	"slices"
)

// Delete removes every checkpoint of step (of any kind, including the rolling
// file if it holds that step) and syncs the directory. A step with no
// checkpoint is ErrNotFound.
func (s *Store[T]) Delete(ctx context.Context, step int64) error {
	return s.deleteWhere(ctx, "delete", step, func(Kind) bool { return true })
}

func (s *Store[T]) deleteWhere(ctx context.Context, op string, step int64, kind func(Kind) bool) error {
	if err := checkStep(step); err != nil {
		return s.failed(stepError(op, step, s.dir, err))
	}
	if err := s.beginWrite(ctx); err != nil {
		return s.failed(stepError(op, step, s.dir, err))
	}
	err := s.deleteLocked(ctx, step, kind)
	s.forgetRemoved() // Append lists the store again
	s.endWrite()
	if err != nil {
		return s.failed(stepError(op, step, s.dir, err))
	}
	return nil
}

func (s *Store[T]) deleteLocked(ctx context.Context, step int64, kind func(Kind) bool) error {
	entries, err := s.stepEntries(ctx, step)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		if kind(e.h.Kind) {
			names = append(names, e.name)
		}
	}
	if len(names) == 0 {
		return ErrNotFound
	}
	return s.remove(ctx, names...)
}

// Truncate removes every checkpoint whose step is after step, of any kind
// (the rolling file too, if it holds a later step), and returns what it
// removed, newest first. It is how a host rewrites history: after restoring
// step 5 of 9, Truncate(ctx, 5) makes room to save steps 6 to 9 again. To keep
// the old history, fork the session instead (Sessions.Fork). No retention
// rule protects a checkpoint from Truncate, and a step with nothing after it
// is not an error: Truncate returns no Info.
//
// Files are removed newest first, and the directory is synced after each
// removal, so that a crash or power cut midway leaves a store whose
// checkpoints are a prefix of the old history, every file whole and no step
// missing below the newest; calling Truncate again finishes the job. A
// rolling file whose header cannot be read is left alone, since its step is
// unknown.
func (s *Store[T]) Truncate(ctx context.Context, step int64) ([]Info, error) {
	if err := checkStep(step); err != nil {
		return nil, s.failed(stepError("truncate", step, s.dir, err))
	}
	if err := s.beginWrite(ctx); err != nil {
		return nil, s.failed(stepError("truncate", step, s.dir, err))
	}
	removed, err := s.truncateLocked(ctx, step)
	s.forgetRemoved() // Append lists the store again
	s.endWrite()
	if err != nil {
		return removed, s.failed(stepError("truncate", step, s.dir, err))
	}
	return removed, nil
}

func (s *Store[T]) truncateLocked(ctx context.Context, step int64) ([]Info, error) {
	entries, err := s.scan(ctx, func(fn fileName) bool { return fn.kind == KindRolling || fn.step > step })
	if err != nil {
		return nil, err
	}
	entries = slices.DeleteFunc(s.fill(ctx, entries), func(e entry) bool {
		return e.fn.kind == KindRolling && e.hErr != nil || e.h.Step <= step
	})
	sortEntries(entries)
	slices.Reverse(entries)
	var removed []Info
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		if err := s.remove(ctx, e.name); err != nil {
			return removed, fmt.Errorf("remove %s: %w", e.name, err)
		}
		removed = append(removed, s.info(e.name, e.fn, e.size, e.h))
	}
	return removed, nil
}
