package checkpoint

import (
	"context"
	"errors"
)

// KeepLast makes the store keep only the newest n step checkpoints (by step),
// removing older ones after each save once the new checkpoint is durable.
// Final and error checkpoints and the rolling file are always kept, a
// checkpoint whose header cannot be read is neither counted nor removed, and
// the newest checkpoint that loads is never removed. KeepLast(0), the
// default, keeps everything.
func KeepLast(n int) Option {
	return optionFunc(func(c *config) { c.keepLast = n })
}

// Prune applies the store's retention rules now and returns the checkpoints
// it removed. With no rule configured it removes nothing.
func (s *Store[T]) Prune(ctx context.Context) ([]Info, error) {
	if err := s.beginWrite(ctx); err != nil {
		return nil, s.failed(opError("prune", s.dir, err))
	}
	removed, err := s.pruneLocked(ctx)
	s.endWrite()
	s.prunedReport(removed)
	return removed, s.failed(err)
}

// pruneLocked applies the retention rules; it runs under the write lock,
// after each save and from Prune.
func (s *Store[T]) pruneLocked(ctx context.Context) ([]Info, error) {
	if s.cfg.keepLast == 0 {
		return nil, nil
	}
	entries, err := s.scan(nil)
	if err != nil {
		return nil, opError("prune", s.dir, err)
	}
	entries = s.fill(entries)
	sortEntries(entries)
	var counted []entry
	for _, e := range entries {
		if e.fn.kind == KindStep && e.hErr == nil {
			counted = append(counted, e)
		}
	}
	if len(counted) <= s.cfg.keepLast {
		return nil, nil
	}
	victims := counted[:len(counted)-s.cfg.keepLast]
	keep := s.newestLoadable(ctx, entries)
	var names []string
	var removed []Info
	for _, e := range victims {
		if e.name == keep {
			continue
		}
		names = append(names, e.name)
		removed = append(removed, s.info(e.name, e.fn, e.size, e.h))
	}
	if len(names) == 0 {
		return nil, nil
	}
	if err := s.remove(names...); err != nil {
		// Some files may be gone; report none as removed rather than guess.
		return nil, opError("prune", s.dir, err)
	}
	return removed, nil
}

// newestLoadable returns the name of the newest checkpoint among sorted
// entries that loads, trusting files this store wrote or verified.
func (s *Store[T]) newestLoadable(ctx context.Context, entries []entry) string {
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		if e.hErr != nil {
			continue
		}
		if e.verified {
			return e.name
		}
		if _, _, err := s.loadEntry(ctx, "prune", e, false); err == nil || !errors.Is(err, ErrCorrupt) {
			// Anything but proven damage (a permission error, a cancelled
			// ctx) protects the file: pruning must not guess.
			return e.name
		}
	}
	return ""
}
