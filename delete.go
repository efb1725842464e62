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

// DeleteExact removes exactly the checkpoint that info describes, as
// returned by List, Save or SaveFrom, and syncs the directory; any other
// checkpoint of its step (another kind, another compression) stays. Use it
// where a step may hold checkpoints of other writers or kinds that Delete
// would remove with it. If the file no longer holds that checkpoint (it was
// removed, or holds one saved since), the result is ErrNotFound and
// nothing is removed; info's file must be a checkpoint name of the store's
// layout (else ErrInvalid). A checkpoint whose header could not be read
// (Format 0 in List) is matched by its file name and size, as long as its
// header still does not read.
func (s *Store[T]) DeleteExact(ctx context.Context, info Info) error {
	const op = "delete"
	if err := checkStep(info.Step); err != nil {
		return s.failed(stepError(op, info.Step, s.dir, err))
	}
	name := info.Name()
	want, ok := s.cfg.layout.parse(name)
	if !ok {
		return s.failed(stepError(op, info.Step, info.Location, fmt.Errorf("%w: %q is not a checkpoint name of this store", ErrInvalid, name)))
	}
	if err := s.beginWrite(ctx); err != nil {
		return s.failed(stepError(op, info.Step, s.dir, err))
	}
	err := func() error {
		entries, err := s.scan(ctx, func(fn fileName) bool { return fn == want })
		if err != nil {
			return err
		}
		for _, e := range s.fill(ctx, entries) {
			if e.name != name {
				continue
			}
			same := e.hErr == nil && e.h.Step == info.Step && e.h.Time.Equal(info.Time)
			if info.Format == 0 {
				// A header that did not read: the file must still be
				// that one, unreadable and of the size it had, not a
				// checkpoint saved at its name since (a save moves a
				// damaged file aside).
				same = e.hErr != nil && e.obj.Size == info.Size
			}
			if !same {
				break // the file holds another checkpoint now
			}
			return s.remove(ctx, name)
		}
		return ErrNotFound
	}()
	s.forgetRemoved() // Append lists the store again
	s.endWrite()
	if err != nil {
		return s.failed(stepError(op, info.Step, s.path(name), err))
	}
	return nil
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
