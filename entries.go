package checkpoint

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
)

// entry is one checkpoint file found in the directory.
type entry struct {
	name string
	fn   fileName
	// Filled in by fill:
	size     int64
	h        header // for an unreadable header: step and kind from the name, time from the file
	hErr     error  // why the header could not be read
	verified bool
}

// cachedHeader is a file's header (or why it could not be read) as last read
// or written, valid while the name refers to the same file (inode) with the
// same size and modification time.
type cachedHeader struct {
	fi       fs.FileInfo
	h        header
	err      error
	verified bool // the whole file was written or loaded and verified
}

// scan lists the directory's checkpoint files whose names pass keep (all, if
// keep is nil). Only regular files count. The rolling file's step is in its
// header, so scan fills it in. A full scan also drops cached headers of files
// that are gone, so a long-lived store's cache stays the size of the
// directory.
func (s *Store[T]) scan(keep func(fileName) bool) ([]entry, error) {
	dirents, err := readDir(s.root)
	if err != nil {
		return nil, err
	}
	if keep == nil {
		s.trimCache(dirents)
	}
	var entries []entry
	for _, d := range dirents {
		if !d.Type().IsRegular() {
			continue
		}
		fn, ok := s.cfg.layout.parse(d.Name())
		if !ok || keep != nil && !keep(fn) {
			continue
		}
		e := entry{name: d.Name(), fn: fn}
		if fn.kind == KindRolling {
			filled := s.fill([]entry{e})
			if len(filled) == 0 {
				continue // removed meanwhile
			}
			// An unreadable rolling file has no known step: it is listed
			// as step 0, Latest tries it last and reports its damage.
			e = filled[0]
			e.fn.step = e.h.Step
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// stepEntries returns the filled entries whose step is step. A rolling file
// whose step cannot be read belongs to no step.
func (s *Store[T]) stepEntries(step int64) ([]entry, error) {
	entries, err := s.scan(func(fn fileName) bool { return fn.kind == KindRolling || fn.step == step })
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(s.fill(entries), func(e entry) bool {
		return e.h.Step != step || e.fn.kind == KindRolling && e.hErr != nil
	}), nil
}

// fill stats entries and reads their headers (from the cache when the file is
// unchanged). Entries whose files have vanished are dropped.
func (s *Store[T]) fill(entries []entry) []entry {
	out := entries[:0]
	for _, e := range entries {
		if e.h.Format != 0 || e.hErr != nil {
			out = append(out, e) // already filled
			continue
		}
		fi, err := s.root.Lstat(e.name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err == nil {
			e.size = fi.Size()
			e.h, e.verified, e.hErr = s.header(e.name, e.fn, fi)
		} else {
			e.hErr = err
		}
		if e.hErr != nil {
			e.h = header{Step: e.fn.step, Kind: e.fn.kind}
			if fi != nil {
				e.h.Time = fi.ModTime()
			}
		}
		out = append(out, e)
	}
	return out
}

// header returns the header of the checkpoint file name, whose name says fn
// and whose file info is fi, from the cache if the file is unchanged since
// it was cached. A damaged header (or one that disagrees with the name) is
// cached and logged once; a read that failed for an operating-system reason
// is logged each time and not cached, since its cause may pass.
func (s *Store[T]) header(name string, fn fileName, fi fs.FileInfo) (header, bool, error) {
	s.mu.Lock()
	c, ok := s.headers[name]
	s.mu.Unlock()
	if ok && os.SameFile(c.fi, fi) && c.fi.Size() == fi.Size() && c.fi.ModTime().Equal(fi.ModTime()) {
		return c.h, c.verified, c.err
	}
	h, err := s.readHeaderFile(name, fn)
	if err != nil {
		s.cfg.logger.Warn("checkpoint: unreadable checkpoint header", "path", s.path(name), "error", err)
	}
	if err == nil || errors.Is(err, ErrCorrupt) {
		s.mu.Lock()
		s.headers[name] = cachedHeader{fi: fi, h: h, err: err}
		s.mu.Unlock()
	}
	return h, false, err
}

func (s *Store[T]) readHeaderFile(name string, fn fileName) (header, error) {
	f, err := s.root.Open(name)
	if err != nil {
		return header{}, err
	}
	defer f.Close()
	h, err := readHeader(f)
	if err == nil {
		err = fn.agrees(h)
	}
	return h, err
}

// agrees checks that a header is the one the file name promises.
func (fn fileName) agrees(h header) error {
	if fn.kind == KindRolling {
		if h.Kind != KindRolling {
			return fmt.Errorf("%w: rolling file holds kind %q", ErrCorrupt, h.Kind)
		}
		return nil
	}
	if h.Step != fn.step || h.Kind != fn.kind {
		return fmt.Errorf("%w: header says step %d kind %q, name says step %d kind %q", ErrCorrupt, h.Step, h.Kind, fn.step, fn.kind)
	}
	return nil
}

// remember caches the header of a file this store just wrote.
func (s *Store[T]) remember(name string, h header) {
	if fi, err := s.root.Lstat(name); err == nil {
		s.cache(name, fi, h, true)
	}
}

func (s *Store[T]) cache(name string, fi fs.FileInfo, h header, verified bool) {
	s.mu.Lock()
	s.headers[name] = cachedHeader{fi: fi, h: h, verified: verified}
	s.mu.Unlock()
}

func (s *Store[T]) forget(names ...string) {
	s.mu.Lock()
	for _, n := range names {
		delete(s.headers, n)
	}
	s.mu.Unlock()
}

// trimCache drops cached headers of files not in dirents.
func (s *Store[T]) trimCache(dirents []fs.DirEntry) {
	present := make(map[string]bool, len(dirents))
	for _, d := range dirents {
		present[d.Name()] = true
	}
	s.mu.Lock()
	maps.DeleteFunc(s.headers, func(name string, _ cachedHeader) bool { return !present[name] })
	s.mu.Unlock()
}

// sortEntries orders filled entries by step, then save time, then kind.
func sortEntries(entries []entry) {
	slices.SortStableFunc(entries, func(a, b entry) int {
		return cmp.Or(
			cmp.Compare(a.h.Step, b.h.Step),
			a.h.Time.Compare(b.h.Time),
			cmp.Compare(kindRank(a.h.Kind), kindRank(b.h.Kind)),
			cmp.Compare(a.fn.attempt, b.fn.attempt),
		)
	})
}

// kindRank breaks ties between checkpoints of one step saved at the same
// instant, in the order a loop writes them.
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
