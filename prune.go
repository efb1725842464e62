package checkpoint

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/gocheckpoint/checkpoint/storage"
)

// retention is the set of retention rules a store applies. A checkpoint
// survives if any rule keeps it; with no rule set nothing is removed.
type retention struct {
	last   int           // KeepLast: the newest n
	every  int64         // KeepMultiplesOf: steps that are multiples of every
	within time.Duration // KeepWithin: saved less than within ago
	per    time.Duration // KeepOnePer: the newest of each period
	best   []bestRule    // KeepBest: the best by a metric
	kinds  []Kind        // PruneKinds: kinds subject to the rules besides KindStep
}

// bestRule is one KeepBest rule.
type bestRule struct {
	n      int
	metric string
	goal   Goal
}

// active reports whether any rule is set.
func (r retention) active() bool {
	return r.last > 0 || r.every > 0 || r.within > 0 || r.per > 0 || len(r.best) > 0
}

func (r retention) validate() error {
	switch {
	case r.last < 0:
		return fmt.Errorf("%w: KeepLast(%d): the count must be 0 (no rule) or positive", ErrInvalid, r.last)
	case r.every < 0:
		return fmt.Errorf("%w: KeepMultiplesOf(%d): the interval must be 0 (no rule) or positive", ErrInvalid, r.every)
	case r.within < 0:
		return fmt.Errorf("%w: KeepWithin(%s): the duration must be 0 (no rule) or positive", ErrInvalid, r.within)
	case r.per < 0:
		return fmt.Errorf("%w: KeepOnePer(%s): the period must be 0 (no rule) or positive", ErrInvalid, r.per)
	}
	for _, b := range r.best {
		rule := fmt.Sprintf("KeepBest(%d, %q, %v)", b.n, b.metric, b.goal)
		if b.n < 1 {
			return fmt.Errorf("%w: %s: the count must be at least 1", ErrInvalid, rule)
		}
		if err := checkMetricName(b.metric); err != nil {
			return fmt.Errorf("%s: %w", rule, err)
		}
		if b.goal != Minimize && b.goal != Maximize {
			return fmt.Errorf("%w: %s: the goal must be Minimize or Maximize", ErrInvalid, rule)
		}
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
// keeps at time now, oldest first, and the protectors: the kept entries
// whose presence makes those victims removable (KeepLast's newest n, for
// KeepOnePer the newest of each period a victim is in, KeepBest's best n
// of each rule and its newest final checkpoint; KeepMultiplesOf and
// KeepWithin keep a checkpoint for what it is, whatever else exists, and
// KeepBest the one resumed from, by its name). ranked names KeepBest's
// best, the protectors whose metrics decide which others are victims.
// Only checkpoints of a prunable kind whose header was read take part: a
// file that cannot be read is never counted and never removed.
func (r retention) victims(entries []entry, now time.Time, resumed string) (victims, protectors []entry, ranked map[string]bool) {
	if !r.active() {
		return nil, nil, nil
	}
	var counted []entry
	for _, e := range entries {
		if e.hErr == nil && r.prunable(e.fn.kind) {
			counted = append(counted, e)
		}
	}
	keep := make([]bool, len(counted))
	newest := max(0, len(counted)-r.last)
	for i := newest; r.last > 0 && i < len(counted); i++ {
		keep[i] = true
	}
	period := func(e entry) time.Time { return e.h.Time.UTC().Truncate(r.per) }
	newestOfPeriod := make(map[time.Time]int)
	for i, e := range counted {
		if r.every > 0 && e.h.Step%r.every == 0 {
			keep[i] = true
		}
		if r.within > 0 && now.Sub(e.h.Time) < r.within {
			keep[i] = true // a time after now is within too
		}
		if r.per > 0 {
			newestOfPeriod[period(e)] = i // sorted: the last one wins
		}
	}
	for _, i := range newestOfPeriod {
		keep[i] = true
	}
	var best []int // KeepBest's best, of every rule
	final := -1    // the newest final checkpoint, with KeepBest
	for _, b := range r.best {
		best = append(best, b.best(counted)...)
	}
	if len(r.best) > 0 {
		for i, e := range counted {
			if e.fn.kind == KindFinal {
				final = i // sorted: the last one wins
			}
			if e.name == resumed && resumed != "" {
				keep[i] = true
			}
		}
	}
	for _, i := range best {
		keep[i] = true
	}
	if final >= 0 {
		keep[final] = true
	}
	for i, e := range counted {
		if !keep[i] {
			victims = append(victims, e)
		}
	}
	if len(victims) == 0 {
		return nil, nil, nil
	}
	if r.last > 0 {
		protectors = append(protectors, counted[newest:]...)
	}
	for _, i := range best {
		if ranked == nil {
			ranked = make(map[string]bool)
		}
		ranked[counted[i].name] = true
		protectors = append(protectors, counted[i])
	}
	if final >= 0 {
		protectors = append(protectors, counted[final])
	}
	if r.per > 0 {
		seen := make(map[time.Time]bool)
		for _, v := range victims {
			if p := period(v); !seen[p] {
				seen[p] = true
				protectors = append(protectors, counted[newestOfPeriod[p]])
			}
		}
	}
	return victims, protectors, ranked
}

// best returns the indices in counted, sorted by sortEntries, of the b.n
// checkpoints with the best finite value of b.metric; of equal values the
// newer (later in counted) is better. A checkpoint without the metric, or
// with a value that is NaN or infinite (which no store writes: see
// WithMetric), is never among them.
func (b bestRule) best(counted []entry) []int {
	var ranked []int
	for i, e := range counted {
		if v, ok := e.h.Metrics[b.metric]; ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
			ranked = append(ranked, i)
		}
	}
	slices.SortStableFunc(ranked, func(i, j int) int {
		vi, vj := counted[i].h.Metrics[b.metric], counted[j].h.Metrics[b.metric]
		if b.goal == Maximize {
			vi, vj = vj, vi
		}
		return cmp.Or(cmp.Compare(vi, vj), cmp.Compare(j, i))
	})
	return ranked[:min(b.n, len(ranked))]
}

// Prune applies the store's retention rules now and returns the checkpoints
// it removed, oldest first. With no rule configured it removes only error
// checkpoints that a clean checkpoint superseded (see SaveError).
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
	removed, err := s.pruneLocked(ctx, "", time.Time{})
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
	victims, _, err := s.pruneVictims(ctx, false, s.cfg.retain)
	if err != nil {
		return nil, s.failed(opError("prune dry run", s.dir, err))
	}
	return s.infos(victims), nil
}

// pruneLocked applies the retention rules; it runs under the write lock,
// after each save (saved is the name the save wrote, at its save time) and
// from Prune (saved is "").
//
// After a save, in the steady state, it prunes from the header cache
// without reading the directory, and removes without syncing the directory
// (see pruneFromCache): the save's own directory sync is the only one.
func (s *Store[T]) pruneLocked(ctx context.Context, saved string, at time.Time) ([]Info, error) {
	return s.pass(ctx, saved, at, s.cfg.retain)
}

// pass is pruneLocked with the rules r. Without rules only superseded
// error checkpoints go, and what the writer knows of them (s.errs) spares
// most passes their listing: after a save that cannot supersede any error
// checkpoint known to be there, nothing is listed; otherwise names are
// listed first, and headers read only if error checkpoints are named.
func (s *Store[T]) pass(ctx context.Context, saved string, at time.Time, r retention) ([]Info, error) {
	if !r.active() {
		if saved != "" && !s.errs.supersedable(at) {
			return nil, nil
		}
		if saved == "" || !s.errs.known {
			has, err := s.hasErrorCheckpoint(ctx, saved != "")
			if err != nil {
				s.errs.known = false
				return nil, opError("prune", s.dir, err)
			}
			if !has {
				s.errs.known, s.errs.oldest = true, time.Time{}
				return nil, nil
			}
		}
	}
	var entries []entry
	var victims []entry
	cached := false
	if saved != "" && s.scanned {
		victims, entries, cached = s.pruneFromCache(ctx, saved, r)
	}
	if !cached {
		var err error
		if victims, entries, err = s.pruneVictims(ctx, true, r); err != nil {
			s.errs.known = false
			return nil, opError("prune", s.dir, err)
		}
	}
	if len(victims) == 0 {
		s.errs.learn(entries, nil)
		return nil, nil
	}
	// Remove oldest first, then (but from the cache) sync the directory
	// once. A removal that fails does not stop the others, and what was
	// removed is reported even then.
	names := make([]string, len(victims))
	for i, e := range victims {
		names[i] = e.name
	}
	var gone []bool
	var err error
	// From the cache, right after a save, the removals need no sync of
	// their own (see pruneFromCache): a backend that can skip it does.
	if lazy, ok := s.b.(storage.Unsynced); ok && cached {
		gone, err = lazy.RemoveUnsynced(ctx, names...)
	} else {
		gone, err = s.b.Remove(ctx, names...)
	}
	s.unlisted(names, gone)
	s.errs.learn(entries, func(name string) bool {
		i := slices.Index(names, name)
		return i >= 0 && gone[i]
	})
	var removed []Info
	for i, e := range victims {
		if gone[i] {
			// A file that could not be removed stays in the cache: the
			// next save's prune tries it again.
			s.forget(e.name)
			removed = append(removed, s.info(e.name, e.fn, e.size, e.h))
		}
	}
	if err != nil {
		return removed, opError("prune", s.dir, err)
	}
	return removed, nil
}

// pruneFromCache returns the entries the rules r would remove now, oldest
// first, judged from the header cache alone, the entries it judged, and
// whether it could judge.
// It runs after a save, under the write lock, once a full scan (s.scanned)
// has put every checkpoint of the directory in the cache; since then the
// cache has learnt every checkpoint this store wrote and forgotten every one
// it removed. A file someone else added since is unknown here: it is never
// removed and counts toward no rule, so the rules keep more, never less.
// What the cache knows may be stale the other way (a file removed or
// replaced by hand), so every victim and every protector (the checkpoints
// whose presence makes the victims removable, and the safety net) is looked
// at again: if any is no longer the file the cache describes, the cache
// cannot judge, and the caller scans the directory. The exception is saved,
// the checkpoint the save before this prune wrote: the cache has its
// Version from a stat made after it was published, under the same lock.
//
// Why the removals need no directory sync of their own: the new checkpoint is
// durable before anything is removed (its Create returned only once the
// directory was synced), and so is every protector, which the cache knew
// before that sync: a checkpoint this store wrote was synced by its own save,
// one found by the full scan by the sync of any save since. A power cut then
// leaves the new checkpoint, every protector and any subset of the victims:
// each victim was removable given the protectors alone, so whichever removals
// were lost, no checkpoint a rule keeps, nor the newest good one (nor the
// newest good one that is not an error checkpoint) is gone. A lost removal
// only brings its file back, and the full scan of the next Open prunes it
// again. A crash of the program loses no removal at all: the kernel has made
// it. (Prune, and the first prune after Open, which scan the directory, still
// sync it once at the end.)
func (s *Store[T]) pruneFromCache(ctx context.Context, saved string, r retention) (victims, entries []entry, ok bool) {
	s.mu.Lock()
	entries = make([]entry, 0, len(s.headers))
	for name, c := range s.headers {
		fn, ok := s.cfg.layout.parse(name)
		if !ok {
			continue
		}
		e := entry{name: name, fn: fn, obj: c.obj, size: c.obj.Size, h: c.h, verified: c.verified, indexed: c.indexed}
		if c.err != nil {
			e.setUnreadable(c.err, c.obj)
		}
		entries = append(entries, e)
	}
	s.mu.Unlock()
	victims, protectors, entries, moved := s.judge(ctx, entries, r)
	if moved {
		return nil, nil, false
	}
	looked := make(map[string]bool, len(protectors)+len(victims))
	for _, e := range slices.Concat(protectors, victims) {
		if looked[e.name] { // a protector twice: newest good, newest clean
			continue
		}
		looked[e.name] = true
		if !s.stillCached(ctx, e.name, saved) {
			return nil, nil, false
		}
	}
	return victims, entries, true
}

// stillCached reports whether name is still the object whose header the
// cache holds (the same Version). The object saved was just written, and
// is taken as cached if its Version is known.
func (s *Store[T]) stillCached(ctx context.Context, name, saved string) bool {
	s.mu.Lock()
	c, ok := s.headers[name]
	s.mu.Unlock()
	switch {
	case !ok:
		return false
	case s.listed != nil: // see remote
		_, ok := s.listed[name]
		return ok
	case name == saved:
		return c.obj.Version != ""
	}
	o, err := s.b.Stat(ctx, name)
	return err == nil && c.obj.Version == o.Version
}

// hasErrorCheckpoint reports whether the directory holds a file named as
// an error checkpoint: without retention rules, the only kind a pass can
// remove. It reads names only; after a save (afterSave) on a remote
// backend, where the writer keeps what its Open listed up to date (see
// listed), it asks the backend nothing.
func (s *Store[T]) hasErrorCheckpoint(ctx context.Context, afterSave bool) (bool, error) {
	if afterSave && s.listed != nil {
		for name := range s.listed {
			if fn, ok := s.cfg.layout.parse(name); ok && fn.kind == KindError {
				return true, nil
			}
		}
		return false, nil
	}
	ns, _, err := s.names(ctx, func(fn fileName) bool { return fn.kind == KindError })
	return len(ns) > 0, err
}

// pruneVictims returns the entries a pass with the rules r would remove
// now, oldest first, sparing the safety net (see spared), from a scan of
// the directory, and the entries it judged. The writer (writer) records
// that the cache now holds every checkpoint.
func (s *Store[T]) pruneVictims(ctx context.Context, writer bool, r retention) (victims, entries []entry, err error) {
	if !r.active() && !writer {
		// (A writer's pass has looked already.)
		if has, err := s.hasErrorCheckpoint(ctx, false); err != nil || !has {
			return nil, nil, err
		}
	}
	if entries, err = s.scanAll(ctx); err != nil {
		return nil, nil, err
	}
	if writer {
		s.scanned = true
	}
	victims, _, entries, _ = s.judge(ctx, entries, r)
	return victims, entries, nil
}

// judge sorts entries and applies the rules r to them now: it returns the
// victims, oldest first, sparing the safety net (see spared), and their
// protectors (see victims), the safety net among them, and entries as
// judged. Error checkpoints that a clean checkpoint superseded are victims
// whatever the rules (see supersedes); the clean checkpoint that supersedes
// them is a protector.
//
// Every header a removal is decided on is one read from its file, never a
// cached one alone: the header index (see indexName) is written by whatever
// program last closed a store, and a save time it gives decides which
// checkpoint of a step was saved last and whether a clean checkpoint was
// saved after an error checkpoint. So the headers the cache has from the
// index (those of files this store neither wrote, loaded nor read) are
// read again from their files: every victim's (a
// header read per removal), and those of the protectors whose save times
// decide a victim's fate, a protector of a victim's step or of a period of
// KeepOnePer, and those of KeepBest's best, whose metrics do. The headers
// of an error checkpoint removed by supersession and of the clean
// checkpoint that supersedes it are read again always (supersession is
// rare: one header each). A header that disagrees with the one judged
// replaces it (in the cache too) and the entries are judged again; each
// header is read again once a call at most, so this ends.
//
// What the other entries' headers say cannot make a victim of a checkpoint
// that the true headers keep, nor take the safety net (see spared) from
// the newest checkpoints: steps come from the names, so a KeepLast
// protector of another step than every victim is of a later one whatever
// its save time, and KeepMultiplesOf and KeepWithin judge a checkpoint by
// its own header. A checkpoint is KeepBest's victim only if n checkpoints
// whose metrics were read from their files beat it; its newest final
// checkpoint is found by the names (a step has one at most), and the one
// resumed from is known by its name. (What such a protector's index line may still do is count a file
// whose header is damaged toward KeepLast: the rule then keeps one older
// checkpoint fewer, never the newest good one, which the safety net loads.)
// The protectors of a store's steady state are checkpoints it saved, which
// are read again never: a save after Open reads at most one header more
// per removal.
//
// moved reports that a file read again is no longer the object judged (its
// Version changed, or it is gone): it is judged as it is now, and a caller
// that judged from the cache alone scans the directory instead.
func (s *Store[T]) judge(ctx context.Context, entries []entry, r retention) (victims, protectors, judged []entry, moved bool) {
	var read map[string]bool // the names read again
	for {
		var pair, ranked map[string]bool
		victims, protectors, pair, ranked = s.judgeOnce(ctx, entries, r)
		var at map[string]int // entries' indices by name, once one is read
		var gone []int
		changed := false
		var victimSteps map[int64]bool
		if len(victims) > 0 {
			victimSteps = make(map[int64]bool)
			for _, v := range victims {
				victimSteps[v.h.Step] = true
			}
		}
		for k, e := range slices.Concat(victims, protectors) {
			// A protector's own save time decides a victim's fate when
			// it orders the two within a step, or dates a period; its
			// metrics do when it is one of KeepBest's best.
			decides := k < len(victims) || victimSteps[e.h.Step] || r.per > 0 || e.fn.kind == KindRolling || ranked[e.name]
			if read[e.name] || !(e.indexed && !e.verified && decides || pair[e.name]) {
				continue
			}
			if read == nil {
				read = make(map[string]bool)
			}
			read[e.name] = true
			fresh, ok, same := s.reread(ctx, e)
			if same {
				continue
			}
			changed = true
			if !ok || otherVersion(fresh.obj, e.obj) {
				moved = true
			}
			if at == nil {
				at = make(map[string]int, len(entries))
				for i := range entries {
					at[entries[i].name] = i
				}
			}
			if !ok {
				gone = append(gone, at[e.name])
				continue
			}
			entries[at[e.name]] = fresh
		}
		if !changed {
			return victims, protectors, entries, moved
		}
		if len(gone) > 0 {
			slices.Sort(gone)
			for k := len(gone) - 1; k >= 0; k-- {
				entries = slices.Delete(entries, gone[k], gone[k]+1)
			}
		}
	}
}

// reread reads e's header from its file again. same reports that the file
// is the object e describes (as far as its Version tells) with the header
// judged; otherwise fresh is e as the file now is, read afresh and cached,
// and ok is false if the file is gone.
func (s *Store[T]) reread(ctx context.Context, e entry) (fresh entry, ok, same bool) {
	h, o, err := s.readHeaderFile(ctx, e.name, e.fn)
	if err == nil && !otherVersion(o, e.obj) && h.Step == e.h.Step && h.Kind == e.h.Kind && h.Time.Equal(e.h.Time) && maps.Equal(h.Metrics, e.h.Metrics) {
		return e, true, true
	}
	if gone(err) {
		s.forget(e.name)
		return entry{}, false, false
	}
	fresh = entry{name: e.name, fn: e.fn, obj: e.obj, size: e.size}
	fresh.h, err = s.header(ctx, &fresh)
	switch {
	case gone(err):
		s.forget(e.name)
		return entry{}, false, false
	case err != nil:
		fresh.setUnreadable(err, fresh.obj) // counted by no rule, removed by none
	case fresh.fn.kind == KindRolling:
		fresh.fn.step = fresh.h.Step
	}
	return fresh, true, false
}

// otherVersion reports whether a and b are known to be different objects.
func otherVersion(a, b Object) bool {
	return a.Version != "" && b.Version != "" && a.Version != b.Version
}

// judgeOnce is one judgement of judge, on the headers entries hold; ranked
// names KeepBest's best (see victims), and pair names the error
// checkpoints it removes by supersession and the clean checkpoint that
// supersedes them.
func (s *Store[T]) judgeOnce(ctx context.Context, entries []entry, r retention) (victims, protectors []entry, pair, ranked map[string]bool) {
	sortEntries(entries)
	var now time.Time
	if r.within > 0 {
		now = s.cfg.now()
	}
	s.mu.Lock()
	resumed := s.resumed
	s.mu.Unlock()
	victims, protectors, ranked = r.victims(entries, now, resumed)
	superseding := errorBeforeClean(entries)
	if len(victims) == 0 && !superseding {
		return nil, nil, nil, nil
	}
	keep, clean := s.spared(ctx, entries, superseding)
	if n := len(victims); clean >= 0 {
		for _, e := range entries[:clean] {
			if supersedes(entries[clean], e) {
				if pair == nil {
					pair = map[string]bool{entries[clean].name: true}
				}
				pair[e.name] = true
				if !slices.ContainsFunc(victims[:n], func(v entry) bool { return v.name == e.name }) {
					victims = append(victims, e)
				}
			}
		}
		if len(victims) > n {
			sortEntries(victims) // removed oldest first
		}
	}
	victims = slices.DeleteFunc(victims, func(e entry) bool { return slices.Contains(keep, e.name) })
	if len(victims) == 0 {
		return nil, nil, nil, nil
	}
	for _, e := range entries {
		if slices.Contains(keep, e.name) {
			protectors = append(protectors, e)
		}
	}
	return victims, protectors, pair, ranked
}

// supersedes reports whether clean, a clean checkpoint that loads, supersedes
// e, an entry sorted before it: e is an error checkpoint saved before clean.
//
// An error checkpoint records that its step failed. A clean checkpoint
// (a step, final or rolling one) saved after it, of the same step or of
// any later step, proves the run got past the failure: Latest resumes
// from it, never from the error checkpoint, so the failure needs no
// redoing and the record no keeping. That holds however the loop got
// there (a redone step saved by Tick to the rolling file only, with
// SaveEvery(n); a resume from LatestClean that replayed past the step) and
// wherever it was killed (before or after a ClearError it meant to call).
// A clean checkpoint saved before the error one supersedes nothing: not one
// of the same step (the step saved, then a failure after it), nor one of a
// later step (a run gone back to an earlier step without Truncate that
// failed there), nor, therefore, anything when an error checkpoint has just
// been saved. "Saved after" compares save times, which grow within a store
// (see saveTime); a clock stepped back far makes a later save look older,
// which keeps an error checkpoint. (Only a run gone back to an earlier step
// below checkpoints stamped by a clock that ran far ahead would see its new
// error checkpoint superseded by them.)
//
// Until the clean checkpoint loads, read whole, verified and decoded into T
// by the pass that removes the error checkpoint (see spared), the error
// checkpoint stays (one this store saved was durable before any prune):
// the failure's evidence is never removed on the strength of a file that
// may not be there after a power cut, may be damaged, or holds a state T
// cannot decode. Both save times are read from the files themselves (see
// judge). An error checkpoint whose header does not read is left alone,
// like any such file.
func supersedes(clean, e entry) bool {
	return e.fn.kind == KindError && e.hErr == nil && clean.h.Time.After(e.h.Time)
}

// errorBeforeClean reports whether sorted entries hold an error checkpoint
// with a clean one after it, saved after it: only then can an error
// checkpoint be superseded, and is the safety net worth finding (it may
// load files).
func errorBeforeClean(entries []entry) bool {
	var oldest time.Time // the oldest error checkpoint's save time so far
	seen := false
	for _, e := range entries {
		switch {
		case e.hErr != nil:
		case e.fn.kind == KindError:
			if !seen || e.h.Time.Before(oldest) {
				oldest = e.h.Time
			}
			seen = true
		case seen && e.h.Time.After(oldest):
			return true
		}
	}
	return false
}

// spared returns the names no rule may remove, from sorted entries: the
// newest checkpoint that loads, which Latest would resume from, and the
// newest that loads and is not an error checkpoint, which LatestClean would
// resume from. Keeping only the first would let an error checkpoint saved
// last make every clean one removable. A newer checkpoint that cannot be
// checked here (larger than the read limit, compressed with parameters
// this store does not decode) may be good: it is spared too, and the
// search goes on past it.
//
// With superseding (an error checkpoint has a clean one saved after it: see
// errorBeforeClean), clean is the index in entries of the newest clean
// checkpoint, which supersedes the error checkpoints before it, or -1 if it
// did not load here and now. A checkpoint this store wrote or verified
// counts as loading for the safety net, but that is no proof its state
// decodes into T (encoding/json writes some states it cannot read back,
// an interface field's value among them), and Latest passes over one that
// does not decode to the error checkpoint before it: so that one is loaded
// whole, at most once a call. If the load fails, nothing is superseded,
// and the search for the safety net goes on past it. Without superseding,
// clean is -1.
func (s *Store[T]) spared(ctx context.Context, entries []entry, superseding bool) (keep []string, clean int) {
	found := false // the newest checkpoint that loads is kept
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		if found && e.fn.kind == KindError {
			continue
		}
		now := superseding && e.fn.kind != KindError
		loads, proven, unchecked := s.loadable(ctx, e, now)
		if unchecked {
			keep = append(keep, e.name)
			continue
		}
		if !loads {
			if now {
				superseding = false // it supersedes nothing, nor does any older one
			}
			continue
		}
		keep = append(keep, e.name)
		found = true
		if e.fn.kind != KindError {
			if !now || !proven {
				return keep, -1 // it may be good: it supersedes nothing
			}
			return keep, i
		}
	}
	return keep, -1
}

// loadable reports whether e counts as a checkpoint that loads for the
// safety net, trusting files this store wrote or verified unless now,
// whether it was proven to (it was read whole and verified: now, if now,
// or before), and whether it could not be checked here (it may load with a
// larger read limit or decoder). Only a header that does not read or an
// ErrCorrupt load (proven damage, a state that does not decode into T)
// disqualifies it; anything else counts as loading (a permission error, a
// cancelled ctx, and ErrNewerSchema or ErrMigration, where Latest stops):
// pruning must not guess. Only a proven load supersedes an error
// checkpoint; a byte payload's ErrPayloadMismatch is one (loadEntry returns
// it only once the payload has been read to its end and verified).
func (s *Store[T]) loadable(ctx context.Context, e entry, now bool) (loads, proven, unchecked bool) {
	if e.hErr != nil {
		return false, false, false
	}
	if e.verified && !now {
		return true, true, false
	}
	_, _, err := s.loadEntry(ctx, "prune", e, false)
	if errors.Is(err, errTooLarge) || errors.Is(err, errUnsupported) {
		return false, false, true
	}
	proven = err == nil || errors.Is(err, ErrPayloadMismatch)
	return proven || !errors.Is(err, ErrCorrupt), proven, false
}

// errorWatch is what a writer knows of the error checkpoints that a clean
// checkpoint saved later could supersede: those whose header reads (see
// supersedes). A torn error checkpoint is superseded by nothing, so it
// never calls for a pass; Prune, which always lists, still judges it.
//
// It is learnt from each pass's entries (and, on a remote backend, from
// the listing of Open when it names no error checkpoint), and kept up to
// date by the writer's own saves. Until it is known, a pass lists the
// names first. Files added by hand since are not in it: they wait for
// Prune, or for the next Open.
type errorWatch struct {
	known bool
	// oldest is the oldest save time among those error checkpoints; zero
	// if there are none. A clean save at a time not after it supersedes
	// none of them, and needs no pass.
	oldest time.Time
	// clean is the newest save time of a clean checkpoint this writer
	// saved: Close runs a pass if it may supersede one (see Close).
	clean time.Time
}

// saved notes a checkpoint of kind saved at t.
func (w *errorWatch) saved(kind Kind, t time.Time) {
	switch {
	case kind != KindError:
		if t.After(w.clean) {
			w.clean = t
		}
	case w.known && (w.oldest.IsZero() || t.Before(w.oldest)):
		w.oldest = t
	}
}

// supersedable reports whether a clean checkpoint saved at t may supersede
// an error checkpoint: whether a pass could remove one.
func (w errorWatch) supersedable(t time.Time) bool {
	return !w.known || !w.oldest.IsZero() && t.After(w.oldest)
}

// learn sets what w knows from the entries a pass judged, less those it
// removed (gone, if not nil).
func (w *errorWatch) learn(entries []entry, gone func(name string) bool) {
	w.known, w.oldest = true, time.Time{}
	for _, e := range entries {
		if e.fn.kind != KindError || e.hErr != nil || gone != nil && gone(e.name) {
			continue
		}
		if w.oldest.IsZero() || e.h.Time.Before(w.oldest) {
			w.oldest = e.h.Time
		}
	}
}
