package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// retention is the set of retention rules a store applies. A checkpoint
// survives if any rule keeps it; with no rule set nothing is removed.
type retention struct {
	last   int           // KeepLast: the newest n
	every  int64         // KeepEvery: steps that are multiples of every
	within time.Duration // KeepWithin: saved less than within ago
	per    time.Duration // KeepOnePer: the newest of each period
	kinds  []Kind        // PruneKinds: kinds subject to the rules besides KindStep
}

// active reports whether any rule is set.
func (r retention) active() bool {
	return r.last > 0 || r.every > 0 || r.within > 0 || r.per > 0
}

func (r retention) validate() error {
	switch {
	case r.last < 0:
		return fmt.Errorf("%w: KeepLast(%d): the count must be 0 (no rule) or positive", ErrInvalid, r.last)
	case r.every < 0:
		return fmt.Errorf("%w: KeepEvery(%d): the interval must be 0 (no rule) or positive", ErrInvalid, r.every)
	case r.within < 0:
		return fmt.Errorf("%w: KeepWithin(%s): the duration must be 0 (no rule) or positive", ErrInvalid, r.within)
	case r.per < 0:
		return fmt.Errorf("%w: KeepOnePer(%s): the period must be 0 (no rule) or positive", ErrInvalid, r.per)
	}
	for _, k := range r.kinds {
		if k != KindFinal && k != KindError {
			return fmt.Errorf("%w: PruneKinds(%q): only %q and %q checkpoints can be made prunable (step checkpoints always are, the rolling file never)", ErrInvalid, k, KindFinal, KindError)
		}
	}
	return nil
}

// prunable reports whether checkpoints of kind k are subject to the rules.
func (r retention) prunable(k Kind) bool {
	return k == KindStep || slices.Contains(r.kinds, k)
}

// victims returns, from entries sorted by sortEntries, the ones no rule
// keeps at time now, oldest first. Only checkpoints of a prunable kind whose
// header was read take part: a file that cannot be read is never counted
// and never removed.
func (r retention) victims(entries []entry, now time.Time) []entry {
	if !r.active() {
		return nil
	}
	var counted []entry
	for _, e := range entries {
		if e.hErr == nil && r.prunable(e.fn.kind) {
			counted = append(counted, e)
		}
	}
	keep := make([]bool, len(counted))
	for i := max(0, len(counted)-r.last); r.last > 0 && i < len(counted); i++ {
		keep[i] = true
	}
	newestOfPeriod := make(map[time.Time]int)
	for i, e := range counted {
		if r.every > 0 && e.h.Step%r.every == 0 {
			keep[i] = true
		}
		if r.within > 0 && now.Sub(e.h.Time) < r.within {
			keep[i] = true // a time after now is within too
		}
		if r.per > 0 {
			newestOfPeriod[e.h.Time.UTC().Truncate(r.per)] = i // sorted: the last one wins
		}
	}
	for _, i := range newestOfPeriod {
		keep[i] = true
	}
	var out []entry
	for i, e := range counted {
		if !keep[i] {
			out = append(out, e)
		}
	}
	return out
}

// Prune applies the store's retention rules now and returns the checkpoints
// it removed, oldest first. With no rule configured it removes nothing.
//
// Pruning removes files one at a time, oldest first, and syncs the directory
// at the end. A crash midway leaves some of the files it meant to remove;
// every file left is whole, and no file a rule keeps is ever touched. If a
// removal fails, Prune goes on with the others and returns what it removed
// together with the error.
func (s *Store[T]) Prune(ctx context.Context) ([]Info, error) {
	if err := s.beginWrite(ctx); err != nil {
		return nil, s.failed(opError("prune", s.dir, err))
	}
	removed, err := s.pruneLocked(ctx)
	s.endWrite()
	s.prunedReport(removed)
	return removed, s.failed(err)
}

// PruneDryRun returns the checkpoints Prune would remove now, oldest first,
// and removes nothing. It works on a ReadOnly store, so a tool can preview
// what a running writer's rules will do; the writer may of course save or
// prune meanwhile.
func (s *Store[T]) PruneDryRun(ctx context.Context) ([]Info, error) {
	if err := s.begin(ctx); err != nil {
		return nil, s.failed(opError("prune dry run", s.dir, err))
	}
	defer s.ops.Done()
	victims, err := s.pruneVictims(ctx)
	if err != nil {
		return nil, s.failed(opError("prune dry run", s.dir, err))
	}
	return s.infos(victims), nil
}

// pruneLocked applies the retention rules; it runs under the write lock,
// after each save and from Prune.
func (s *Store[T]) pruneLocked(ctx context.Context) ([]Info, error) {
	victims, err := s.pruneVictims(ctx)
	if err != nil {
		return nil, opError("prune", s.dir, err)
	}
	if len(victims) == 0 {
		return nil, nil
	}
	// Remove oldest first, then sync the directory once. A removal that
	// fails does not stop the others, and what was removed is reported
	// even then.
	names := make([]string, len(victims))
	for i, e := range victims {
		names[i] = e.name
	}
	gone, err := s.removeReporting(names)
	var removed []Info
	for i, e := range victims {
		if gone[i] {
			removed = append(removed, s.info(e.name, e.fn, e.size, e.h))
		}
	}
	if err != nil {
		return removed, opError("prune", s.dir, err)
	}
	return removed, nil
}

// pruneVictims returns the entries the rules would remove now, oldest first,
// sparing the safety net (see spared).
func (s *Store[T]) pruneVictims(ctx context.Context) ([]entry, error) {
	if !s.cfg.retain.active() {
		return nil, nil
	}
	entries, err := s.scan(nil)
	if err != nil {
		return nil, err
	}
	entries = s.fill(entries)
	sortEntries(entries)
	var now time.Time
	if s.cfg.retain.within > 0 {
		now = s.cfg.now()
	}
	victims := s.cfg.retain.victims(entries, now)
	if len(victims) == 0 {
		return nil, nil
	}
	keep := s.spared(ctx, entries)
	return slices.DeleteFunc(victims, func(e entry) bool { return slices.Contains(keep, e.name) }), nil
}

// spared returns the names no rule may remove, from sorted entries: the
// newest checkpoint that loads, which Latest would resume from, and the
// newest that loads and is not an error checkpoint, which LatestClean would
// resume from. Keeping only the first would let an error checkpoint saved
// last make every clean one removable. A newer checkpoint that cannot be
// checked here (larger than the read limit, compressed with parameters
// this store does not decode) may be good: it is spared too, and the
// search goes on past it.
func (s *Store[T]) spared(ctx context.Context, entries []entry) []string {
	var keep []string
	found := false // the newest checkpoint that loads is kept
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		if found && e.fn.kind == KindError {
			continue
		}
		loads, unchecked := s.loadable(ctx, e)
		if unchecked {
			keep = append(keep, e.name)
			continue
		}
		if !loads {
			continue
		}
		keep = append(keep, e.name)
		found = true
		if e.fn.kind != KindError {
			return keep
		}
	}
	return keep
}

// loadable reports whether e counts as a checkpoint that loads for the
// safety net, trusting files this store wrote or verified, and whether it
// could not be checked here (it may load with a larger read limit).
// Anything but proven damage or a state that does not decode (a permission
// error, a cancelled ctx) counts as loading: pruning must not guess.
func (s *Store[T]) loadable(ctx context.Context, e entry) (loads, unchecked bool) {
	if e.hErr != nil {
		return false, false
	}
	if e.verified {
		return true, false
	}
	_, _, err := s.loadEntry(ctx, "prune", e, false)
	if errors.Is(err, errTooLarge) || errors.Is(err, errUnsupported) {
		return false, true
	}
	return err == nil || !errors.Is(err, ErrCorrupt), false
}
