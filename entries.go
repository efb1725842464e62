package checkpoint

import (
	"cmp"
	"context"
	"errors"
	"io/fs"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gocheckpoint/checkpoint/storage"
)

// entry is one checkpoint file found in the directory.
type entry struct {
	name string
	fn   fileName
	obj  Object // as listed: Size and Version may be unknown until fill
	// Filled in by fill:
	size     int64
	h        header // for an unreadable header: step and kind from the name, time from the file
	hErr     error  // why the header could not be read
	verified bool
	indexed  bool // h is the index's line for the file, not read from it
}

// cachedHeader is a file's header (or why it could not be read) as last read
// or written, valid while the name's Object has the same Version (for a
// local file: the same inode, size, modification time and inode change
// time; on object storage, the same ETag).
type cachedHeader struct {
	obj      Object // the file when it was read: its Version says if it is still the same
	h        header
	err      error
	verified bool   // the whole file was written or loaded and verified
	indexed  bool   // h is the index's line for the file, not read from it
	gen      uint64 // Store.cacheGen when it was cached: see trimCache
}

// named is a checkpoint file known by its name only.
type named struct {
	name string
	fn   fileName
	obj  Object // as listed
	// unknown is set for a rolling file whose step cannot be known and may
	// be newer than any other (encrypted to a key not given, plaintext to
	// an encrypting store, or not given by the storage: ErrUnavailable):
	// the error its header read gave.
	unknown error
}

// names lists the directory's checkpoint files whose names pass keep (all,
// if keep is nil), by their names alone (see eachName).
func (s *Store[T]) names(ctx context.Context, keep func(fileName) bool) (ns, dropped []named, err error) {
	objs, err := s.b.List(ctx)
	if err != nil {
		return nil, nil, err
	}
	ns, dropped = s.namesIn(ctx, objs, keep)
	return ns, dropped, nil
}

// namesIn is names of the listing objs.
func (s *Store[T]) namesIn(ctx context.Context, objs []Object, keep func(fileName) bool) (ns, dropped []named) {
	dropped = s.eachListed(ctx, objs, keep, func(n int) { ns = make([]named, 0, n) }, func(o Object, fn fileName, unknown error) {
		ns = append(ns, named{name: o.Name, fn: fn, obj: o, unknown: unknown})
	})
	return ns, dropped
}

// scan lists the directory's checkpoint files whose names pass keep (all, if
// keep is nil), unfilled but for the rolling file's step (see eachName). A
// full scan also drops cached headers of files that are gone, so a
// long-lived store's cache stays the size of the directory.
func (s *Store[T]) scan(ctx context.Context, keep func(fileName) bool) ([]entry, error) {
	var entries []entry
	presize := func(n int) {
		if keep == nil { // a filtered scan (one step) keeps few
			entries = make([]entry, 0, n)
		}
	}
	s.mu.Lock()
	start := s.cacheGen // what was cached before the directory is read
	s.mu.Unlock()
	_, err := s.eachName(ctx, keep, presize, func(o Object, fn fileName, _ error) {
		entries = append(entries, entry{name: o.Name, fn: fn, obj: o})
	})
	if err == nil && keep == nil {
		s.trimCache(entries, start)
		var comps uint32
		for i := range entries {
			comps |= 1 << entries[i].fn.comp
		}
		s.comps.Or(comps)
	}
	return entries, err
}

// eachName reads the directory's names, calls size with their number, then
// found with each checkpoint name that passes keep (all, if keep is nil) and
// what it says. It stats nothing: fill stats entries, and drops those that
// are not regular files. The rolling file's step is in its header, so
// eachName reads it (an unreadable rolling file has no known step: it is
// listed as step 0, Latest tries it last and reports its damage; one that
// no key given opens, or a plaintext one to an encrypting store, is passed
// with that error: its step may be the newest). A rolling
// name whose header read found no regular file (removed since the listing,
// or a directory, a symbolic link, a named pipe) is not passed to found but
// returned in dropped, so that Latest can report what is there as damage
// without listing the directory again.
func (s *Store[T]) eachName(ctx context.Context, keep func(fileName) bool, size func(n int), found func(o Object, fn fileName, unknown error)) (dropped []named, err error) {
	objs, err := s.b.List(ctx)
	if err != nil {
		return nil, err
	}
	return s.eachListed(ctx, objs, keep, size, found), nil
}

// eachListed is eachName of the listing objs.
func (s *Store[T]) eachListed(ctx context.Context, objs []Object, keep func(fileName) bool, size func(n int), found func(o Object, fn fileName, unknown error)) (dropped []named) {
	size(len(objs))
	for _, o := range objs {
		fn, ok := s.cfg.layout.parse(o.Name)
		if !ok || keep != nil && !keep(fn) {
			continue
		}
		if fn.kind == KindRolling {
			n, ok := s.rollingNamed(ctx, o, fn)
			if !ok {
				dropped = append(dropped, n)
				continue
			}
			found(o, n.fn, n.unknown)
			continue
		}
		found(o, fn, nil)
	}
	return dropped
}

// rollingNamed returns the rolling file o, of the name fn, with its step
// read from its header (see eachName), or false if no regular file was
// there to read.
func (s *Store[T]) rollingNamed(ctx context.Context, o Object, fn fileName) (named, bool) {
	n := named{name: o.Name, fn: fn, obj: o}
	filled := s.fill(ctx, []entry{{name: o.Name, fn: fn, obj: o}})
	if len(filled) == 0 {
		return n, false // removed meanwhile, or not a regular file
	}
	n.fn.step = filled[0].h.Step
	if err := filled[0].hErr; errors.Is(err, ErrNoKey) || errors.Is(err, ErrPlaintext) || errors.Is(err, ErrUnavailable) {
		n.unknown = err
	}
	return n, true
}

// stepEntries returns the filled entries whose step is step. A rolling file
// whose step cannot be read belongs to no step.
func (s *Store[T]) stepEntries(ctx context.Context, step int64) ([]entry, error) {
	entries, err := s.scan(ctx, func(fn fileName) bool { return fn.kind == KindRolling || fn.step == step })
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(s.fill(ctx, entries), func(e entry) bool {
		return e.h.Step != step || e.fn.kind == KindRolling && e.hErr != nil
	}), nil
}

// fill stats entries (unless the listing said their size and version) and
// reads their headers (from the cache when the object is unchanged).
// Entries whose files have vanished, or are not regular files (a directory
// or symlink with a checkpoint's name), are dropped.
//
// List and Prune fill the whole directory, and the system calls (requests,
// on object storage) dominate their cost: a large directory is stat'ed by
// one goroutine per processor, and the cache is consulted under one lock
// for all entries.
func (s *Store[T]) fill(ctx context.Context, entries []entry) []entry {
	return s.fillAhead(ctx, entries, nil)
}

// scanAll reads the names of the whole directory and fills their entries,
// for List and Prune. A fresh store (no index read, no header cached) reads
// its index meanwhile, on another processor: its first List of a large
// directory would otherwise read the names, then the index, one after the
// other.
func (s *Store[T]) scanAll(ctx context.Context) ([]entry, error) {
	ahead := s.indexAhead(ctx)
	entries, err := s.scan(ctx, nil)
	if err != nil {
		ahead.wait()
		return nil, err
	}
	return s.fillAhead(ctx, entries, ahead), nil
}

// pendingIndex is the index being read by indexAhead.
type pendingIndex struct {
	done  chan struct{}
	index *indexFile
}

// indexAhead starts reading the store's index for a fill to come, if the
// store is a fresh one on a local directory with processors to spare; nil
// otherwise.
func (s *Store[T]) indexAhead(ctx context.Context) *pendingIndex {
	s.mu.Lock()
	fresh := !s.indexRead && len(s.headers) == 0
	s.mu.Unlock()
	// Only a local directory: on object storage the read is a request,
	// which a small store (no index) would pay at every start.
	if !fresh || s.remote() || runtime.GOMAXPROCS(0) == 1 {
		return nil
	}
	p := &pendingIndex{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.index = s.readIndex(ctx)
	}()
	return p
}

// wait returns the index indexAhead read, once read (nil for a nil p).
func (p *pendingIndex) wait() *indexFile {
	if p == nil {
		return nil
	}
	<-p.done
	return p.index
}

// fillAhead is fill, with the index read ahead by indexAhead (or nil).
func (s *Store[T]) fillAhead(ctx context.Context, entries []entry, ahead *pendingIndex) []entry {
	errs := make([]error, len(entries))
	todo := func(e *entry) bool { return e.h.Format == 0 && e.hErr == nil }
	// A stat only tells whether a cached header still holds: a name
	// with none is opened at once, and the open tells its object and
	// refuses what is not a regular file (the first List of a store reads
	// every file so, and the stat would be a third of its system calls).
	stat := make([]bool, len(entries))
	index := s.fillIndex(ctx, entries, todo, ahead)
	s.mu.Lock()
	if len(s.headers) > 0 { // a fresh store's first List has none
		for i := range entries {
			if e := &entries[i]; todo(e) && e.obj.Version == "" {
				_, stat[i] = s.headers[e.name]
			}
		}
	}
	s.mu.Unlock()
	// An entry of the index is looked up, stat'ed and decoded on every
	// processor (the index is only read here): its header is trusted only
	// if the Version matches.
	var indexed []header // by entry; Format 0 where the index has none
	if index != nil {
		indexed = make([]header, len(entries))
	}
	parallel(len(entries), func(i int) {
		e := &entries[i]
		if !todo(e) {
			return
		}
		x, inIndex := index[e.name]
		if e.obj.Version == "" && inIndex {
			stat[i] = true
		}
		if stat[i] {
			e.obj, errs[i] = s.b.Stat(ctx, e.name)
		}
		if inIndex && errs[i] == nil && e.obj.Version != "" && string(x.version) == e.obj.Version && x.size == e.obj.Size {
			indexed[i], _ = x.decode(e.fn)
		}
	})
	keep := make([]bool, len(entries))
	var misses []int
	s.mu.Lock()
	for i := range entries {
		e := &entries[i]
		if !todo(e) {
			keep[i] = true // already filled
			continue
		}
		if e.obj.Version == "" && !stat[i] {
			keep[i] = true // header reads it, or drops it if it is gone
			misses = append(misses, i)
			continue
		}
		err := errs[i]
		if errors.Is(err, fs.ErrNotExist) || err == nil && !e.obj.Mode.IsRegular() {
			continue
		}
		keep[i] = true
		if err != nil {
			e.setUnreadable(err, Object{})
			continue
		}
		e.size = e.obj.Size
		if c, ok := s.headers[e.name]; ok && c.obj.Version == e.obj.Version {
			e.h, e.verified, e.indexed = c.h, c.verified, c.indexed
			if c.err != nil {
				e.setUnreadable(c.err, e.obj)
			}
			continue
		}
		if indexed != nil && indexed[i].Format != 0 {
			e.h, e.indexed = indexed[i], true
			s.cacheGen++
			s.headers[e.name] = cachedHeader{obj: e.obj, h: e.h, indexed: true, gen: s.cacheGen}
			continue
		}
		misses = append(misses, i)
	}
	if index != nil {
		// The cache holds what the index does: Close need not write it
		// again unless headers are read or written from now on.
		s.indexGen = s.cacheGen
	}
	s.mu.Unlock()
	parallel(len(misses), func(k int) {
		e := &entries[misses[k]]
		var err error
		if e.h, err = s.header(ctx, e); err != nil {
			if gone(err) {
				keep[misses[k]] = false // removed or replaced since the Stat
				return
			}
			if e.obj.Version == "" { // not opened (permission?): the stat says its size and time
				if o, err := s.b.Stat(ctx, e.name); err == nil {
					e.obj, e.size = o, o.Size
				}
			}
			e.setUnreadable(err, e.obj)
		}
	})
	if len(misses) > indexMinWrite {
		// A store that is killed never reaches Close: write the index
		// now, so that its next first List reads none of these again.
		s.writeIndex(ctx)
	}
	// Entries are large: only those after the first dropped one move.
	first := slices.Index(keep, false)
	if first < 0 {
		return entries
	}
	out := entries[:first]
	for i := first + 1; i < len(entries); i++ {
		if keep[i] {
			out = append(out, entries[i])
		}
	}
	return out
}

// fillIndex returns the entries of the store's index if fill should
// consult it for entries: the first time that a fill has at least
// indexMinFill headers to read that the cache does not hold (a fresh
// store's first List). Later fills find the index's headers in the cache.
// An index read ahead (see indexAhead) is waited for, and used if needed.
func (s *Store[T]) fillIndex(ctx context.Context, entries []entry, todo func(*entry) bool, ahead *pendingIndex) map[string]indexEntry {
	s.mu.Lock()
	unknown := 0
	if !s.indexRead {
		for i := range entries {
			if e := &entries[i]; todo(e) {
				if _, ok := s.headers[e.name]; !ok {
					unknown++
				}
			}
		}
	}
	read := unknown >= indexMinFill
	if read {
		s.indexRead = true
	}
	s.mu.Unlock()
	if !read {
		ahead.wait()
		return nil
	}
	var file *indexFile
	if ahead != nil {
		file = ahead.wait()
	} else {
		file = s.readIndex(ctx)
	}
	// Only the entries of names this fill reads are kept: what the index
	// costs is bounded by what the directory holds, whatever it claims.
	var want map[string]string
	if file != nil {
		want = make(map[string]string, len(entries))
		for i := range entries {
			if e := &entries[i]; todo(e) {
				want[e.name] = e.name
			}
		}
	}
	index := file.entries(func(name []byte) (string, bool) {
		key, ok := want[string(name)]
		return key, ok
	})
	s.mu.Lock()
	if len(s.headers) == 0 && len(index) > 0 {
		// The index's headers are about to be cached: a map of their
		// number at once, not grown step by step.
		s.headers = make(map[string]cachedHeader, len(index))
	}
	s.mu.Unlock()
	return index
}

// gone reports whether a file's header could not be read because the file
// is no longer a checkpoint file: removed, or replaced by something that is
// not a regular file, since it was stat'ed. fill drops such entries.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, storage.ErrNotRegular)
}

// setUnreadable records why e's header could not be read, and gives it the
// step and kind its name says and the file's modification time.
func (e *entry) setUnreadable(err error, o Object) {
	e.hErr = err
	e.h = header{Step: e.fn.step, Kind: e.fn.kind, Time: o.ModTime}
}

// parallelFill is the number of entries from which fill uses every
// processor.
const parallelFill = 512

// parallelBatch is how many calls of f a worker of parallel takes at a time.
const parallelBatch = 32

// parallel calls f(0) to f(n-1), on every processor if n is large. The
// workers take the calls in small batches as they go rather than a fixed
// share each: on a busy machine a worker whose thread is descheduled would
// otherwise hold up the whole call with its share, while the others idle.
func parallel(n int, f func(i int)) {
	procs := runtime.GOMAXPROCS(0)
	if procs == 1 || n < parallelFill {
		for i := 0; i < n; i++ {
			f(i)
		}
		return
	}
	var wg sync.WaitGroup
	var next atomic.Int64
	for range procs {
		wg.Go(func() {
			for {
				lo := int(next.Add(parallelBatch)) - parallelBatch
				if lo >= n {
					return
				}
				for i := lo; i < min(lo+parallelBatch, n); i++ {
					f(i)
				}
			}
		})
	}
	wg.Wait()
}

// header reads the header of the checkpoint file of e, updates e's object
// and size to those of the file it read, and caches the header. A damaged
// header (or one that disagrees with the name) is cached and logged once; a
// read that failed for an operating-system reason is logged each time and
// not cached, since its cause may pass.
func (s *Store[T]) header(ctx context.Context, e *entry) (header, error) {
	h, o, err := s.readHeaderFile(ctx, e.name, e.fn)
	if err != nil && !gone(err) {
		s.cfg.logger.Warn("checkpoint: unreadable checkpoint header", "path", s.path(e.name), "error", err)
	}
	if o.Version != "" {
		e.obj, e.size = o, o.Size
	}
	if err == nil || errors.Is(err, ErrCorrupt) {
		s.mu.Lock()
		s.cacheGen++
		s.headers[e.name] = cachedHeader{obj: e.obj, h: h, err: err, gen: s.cacheGen}
		s.mu.Unlock()
	}
	return h, err
}

func (s *Store[T]) readHeaderFile(ctx context.Context, name string, fn fileName) (header, Object, error) {
	f, o, err := s.openStream(ctx, name)
	if err != nil {
		return header{}, Object{}, err
	}
	defer f.Close()
	h, err := s.codec.ReadHeader(f)
	if err == nil {
		err = fn.agrees(h)
	}
	return h, o, err
}

// agrees checks that a header is the one the file name promises.
func (fn fileName) agrees(h header) error {
	if fn.kind == KindRolling {
		if h.Kind != KindRolling {
			return damaged("rolling file holds kind %q", h.Kind)
		}
		return nil
	}
	if h.Step != fn.step || h.Kind != fn.kind {
		return damaged("header says step %d kind %q, name says step %d kind %q", h.Step, h.Kind, fn.step, fn.kind)
	}
	return nil
}

func (s *Store[T]) forget(names ...string) {
	s.mu.Lock()
	for _, n := range names {
		delete(s.headers, n)
	}
	s.mu.Unlock()
}

// trimCache drops cached headers of files not among entries, the whole
// directory's checkpoints. It looks only when the cache has more headers
// than the directory has checkpoints, which any file gone since the last
// look makes true once the new ones are cached: the cache stays bounded
// without building a set of names on every List.
//
// Only headers cached before the directory was read (start, the cacheGen
// then) may go: a checkpoint saved while a List read the directory is not
// among its entries, yet it is there, and the prune after each save judges
// from the cache, so a header dropped then would leave its file unknown to
// the rules for as long as the store is open.
func (s *Store[T]) trimCache(entries []entry, start uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.headers) <= len(entries) {
		return
	}
	present := make(map[string]bool, len(entries))
	for _, e := range entries {
		present[e.name] = true
	}
	maps.DeleteFunc(s.headers, func(name string, c cachedHeader) bool { return c.gen <= start && !present[name] })
}

// sortEntries orders filled entries by step, then save time, then kind, then
// attempt, then name: a total order, so no stable sort is needed.
func sortEntries(entries []entry) {
	order := sortedOrder(entries)
	sorted := make([]entry, len(entries))
	for k, i := range order {
		sorted[k] = entries[i]
	}
	copy(entries, sorted)
}

// sortedOrder returns the indices of entries in sortEntries' order. It sorts
// small keys by step first and compares whole entries only within a step:
// entries are large, and List sorts the whole directory.
func sortedOrder(entries []entry) []int32 {
	type key struct {
		step int64
		i    int32
	}
	keys := make([]key, len(entries))
	for i := range entries {
		keys[i] = key{entries[i].h.Step, int32(i)}
	}
	slices.SortFunc(keys, func(a, b key) int { return cmp.Compare(a.step, b.step) })
	order := make([]int32, len(keys))
	for i := range keys {
		order[i] = keys[i].i
	}
	for start := 0; start < len(keys); {
		end := start + 1
		for end < len(keys) && keys[end].step == keys[start].step {
			end++
		}
		if end-start > 1 {
			slices.SortFunc(order[start:end], func(i, j int32) int { return compareEntries(&entries[i], &entries[j]) })
		}
		start = end
	}
	return order
}

func compareEntries(a, b *entry) int {
	if c := cmp.Compare(a.h.Step, b.h.Step); c != 0 {
		return c
	}
	if c := a.h.Time.Compare(b.h.Time); c != 0 {
		return c
	}
	if c := cmp.Compare(kindRank(a.h.Kind), kindRank(b.h.Kind)); c != 0 {
		return c
	}
	if c := cmp.Compare(a.fn.attempt, b.fn.attempt); c != 0 {
		return c
	}
	return strings.Compare(a.name, b.name)
}

// kindRank breaks ties between checkpoints of one step saved at the same
// instant, in the order a loop writes them. Within one store save times
// never tie (see saveTime), and a redo is stamped after its step's error
// checkpoints (see afterErrorsOf).
func kindRank(k Kind) int {
	switch k {
	case KindStep:
		return 0
	case KindRolling:
		return 1
	case KindFinal:
		return 2
	default:
		return 3
	}
}

// newestToEnd moves the names of the highest step to the end of ns and
// returns where they start. It is linear: Latest usually needs no other
// step, and sorting a large directory costs more than loading a checkpoint.
func newestToEnd(ns []named) int {
	if len(ns) == 0 {
		return 0
	}
	top := ns[0].fn.step
	for i := range ns {
		top = max(top, ns[i].fn.step)
	}
	end := len(ns)
	for i := end - 1; i >= 0; i-- {
		if ns[i].fn.step == top {
			end--
			ns[i], ns[end] = ns[end], ns[i]
		}
	}
	return end
}
