package checkpoint

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
)

// A Layout is a file naming scheme found in a directory by DetectLayouts:
// the arguments of the WithLayout that names those files, and how many files
// follow it.
type Layout struct {
	Prefix string // as given to WithLayout
	Digits int    // as given to WithLayout
	// Files counts the directory's files that the layout names: checkpoints,
	// temporary files of saves and quarantined checkpoints.
	Files int
}

// String returns the layout as "prefix/digits", such as "turn/3".
func (l Layout) String() string { return l.Prefix + "/" + strconv.Itoa(l.Digits) }

// Option returns WithLayout(l.Prefix, l.Digits): the option that opens a
// store of the files DetectLayouts found.
func (l Layout) Option() Option { return WithLayout(l.Prefix, l.Digits) }

// DetectLayouts returns the layouts of the files in dir, the one that names
// the most files first (ties in prefix order), so that a tool can open a
// store without being told its layout: open it with
// DetectLayouts(dir)[0].Option().
//
// Every regular file whose name is a checkpoint name of some layout counts,
// as do the temporary files of saves and quarantined checkpoints
// (name.corrupt). A name's prefix is everything before its last underscore;
// its digits are known exactly when the step has a leading zero, and
// otherwise are at most the step's width. Of the digit counts that name the
// most files of one prefix, DetectLayouts picks 8 (the default) if it is one
// of them, else the largest, since each of them reads the same files. Files
// of one prefix that no single digit count names (turn_007.json beside
// turn_0008.json) make more than one layout.
//
// A directory with no such file returns no layout and no error; a missing
// directory is ErrNotFound. Only names are read, never a file's contents, so
// a side file named like a checkpoint (notes_2024.json) is counted too.
func DetectLayouts(dir string) ([]Layout, error) {
	dirents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("%w: %w", ErrNotFound, err)
		}
		return nil, opError("detect layouts", dir, err)
	}
	type span struct{ lo, hi int } // the digit counts that name a file
	byPrefix := make(map[string][]span)
	for _, d := range dirents {
		if !d.Type().IsRegular() {
			continue
		}
		if prefix, lo, hi, ok := layoutEvidence(d.Name()); ok {
			byPrefix[prefix] = append(byPrefix[prefix], span{lo, hi})
		}
	}
	var out []Layout
	for prefix, spans := range byPrefix {
		for len(spans) > 0 {
			best, bestN := 0, 0
			for digits := 1; digits <= 19; digits++ {
				n := 0
				for _, s := range spans {
					if s.lo <= digits && digits <= s.hi {
						n++
					}
				}
				if n > bestN || n == bestN && n > 0 && best != 8 {
					best, bestN = digits, n
				}
			}
			out = append(out, Layout{Prefix: prefix, Digits: best, Files: bestN})
			spans = slices.DeleteFunc(spans, func(s span) bool { return s.lo <= best && best <= s.hi })
		}
	}
	slices.SortFunc(out, func(a, b Layout) int {
		return cmp.Or(cmp.Compare(b.Files, a.Files), strings.Compare(a.Prefix, b.Prefix), cmp.Compare(a.Digits, b.Digits))
	})
	return out, nil
}

// layoutEvidence returns the prefix of the layouts that would name the file
// name, a checkpoint, a temporary file of a save or a quarantined checkpoint,
// and the range of digit counts among them.
func layoutEvidence(name string) (prefix string, lo, hi int, ok bool) {
	if name == "" {
		return "", 0, 0, false
	}
	if name[0] == '.' {
		// A temporary file: a dot, the name, random digits.
		stem := strings.TrimRight(name[1:], "0123456789")
		if len(stem) == len(name)-1 {
			return "", 0, 0, false
		}
		name = stem
	} else if stem, ok := quarantinedStem(name); ok {
		name = stem
	}
	i := strings.LastIndexByte(name, '_')
	if i < 0 {
		return "", 0, 0, false
	}
	prefix, rest := name[:i], name[i+1:]
	num, _, _ := strings.Cut(rest, ".")
	lo, hi = 1, 19
	if num != rollingStem {
		if num == "" || strings.Trim(num, "0123456789") != "" || len(num) > 19 {
			return "", 0, 0, false
		}
		if num[0] == '0' {
			lo, hi = len(num), len(num)
		} else {
			hi = len(num)
		}
	}
	l := layout{prefix: prefix, digits: lo}
	if l.validate() != nil {
		return "", 0, 0, false
	}
	if _, ok := l.parse(name); !ok {
		return "", 0, 0, false
	}
	return prefix, lo, hi, true
}

// quarantinedStem returns the name of the checkpoint that the quarantined
// file name (name.corrupt, name.corrupt-2, ...) was, and whether name has
// that shape.
func quarantinedStem(name string) (string, bool) {
	i := strings.LastIndex(name, quarantineSuffix)
	if i <= 0 {
		return "", false
	}
	if n := name[i+len(quarantineSuffix):]; n != "" {
		k, err := strconv.Atoi(strings.TrimPrefix(n, "-"))
		if err != nil || k < 2 || "-"+strconv.Itoa(k) != n {
			return "", false
		}
	}
	return name[:i], true
}

// Leftovers are the files in a store's directory that belong to the store
// but are not checkpoints. Paths are the store's directory joined with the
// file's name, sorted.
type Leftovers struct {
	// Temps are temporary files of saves (".turn_007.json" and random
	// digits, or the same for a side file). Beside a running writer one may
	// be a save in progress; with no writer, each was left by a save that a
	// crash interrupted, and the next writer's Open removes it.
	Temps []string
	// Quarantined are damaged checkpoints that a save moved aside
	// (turn_005.json.corrupt, turn_005.json.corrupt-2), kept for
	// inspection. Nothing ever reads or removes them but RemoveLeftovers.
	Quarantined []string
}

// Leftovers lists the store's temporary files and quarantined checkpoints.
// It removes nothing and works on a ReadOnly store.
func (s *Store[T]) Leftovers(ctx context.Context) (Leftovers, error) {
	if err := s.begin(ctx); err != nil {
		return Leftovers{}, s.failed(opError("leftovers", s.dir, err))
	}
	defer s.ops.Done()
	temps, quarantined, err := s.leftovers()
	if err != nil {
		return Leftovers{}, s.failed(opError("leftovers", s.dir, err))
	}
	return Leftovers{Temps: s.paths(temps), Quarantined: s.paths(quarantined)}, nil
}

// RemoveLeftovers removes the store's temporary files and quarantined
// checkpoints, syncs the directory and returns what it removed. It needs the
// writer lock, so no save of another process can be in progress, and it
// waits for this store's own saves: every temporary file it finds is stale.
// A quarantined checkpoint is evidence of damage: remove it once it has been
// looked at. On a ReadOnly store it returns ErrReadOnly.
func (s *Store[T]) RemoveLeftovers(ctx context.Context) (Leftovers, error) {
	if err := s.beginWrite(ctx); err != nil {
		return Leftovers{}, s.failed(opError("remove leftovers", s.dir, err))
	}
	defer s.endWrite()
	temps, quarantined, err := s.leftovers()
	if err == nil && len(temps)+len(quarantined) > 0 {
		_, err = removeNames(s.root, s.fileIO(), slices.Concat(temps, quarantined))
	}
	if err != nil {
		return Leftovers{}, s.failed(opError("remove leftovers", s.dir, err))
	}
	for _, name := range slices.Concat(temps, quarantined) {
		s.cfg.logger.Debug("checkpoint: removed a leftover file", "path", s.path(name))
	}
	return Leftovers{Temps: s.paths(temps), Quarantined: s.paths(quarantined)}, nil
}

// leftovers returns the names of the temporary files and quarantined
// checkpoints of the store's layout, sorted.
func (s *Store[T]) leftovers() (temps, quarantined []string, err error) {
	dirents, err := readDir(s.root)
	if err != nil {
		return nil, nil, err
	}
	for _, d := range dirents {
		if !d.Type().IsRegular() {
			continue
		}
		name := d.Name()
		if s.cfg.layout.isTemp(name) {
			temps = append(temps, name)
		} else if stem, ok := quarantinedStem(name); ok {
			if _, ok := s.cfg.layout.parse(stem); ok {
				quarantined = append(quarantined, name)
			}
		}
	}
	slices.Sort(temps)
	slices.Sort(quarantined)
	return temps, quarantined, nil
}

func (s *Store[T]) paths(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = s.path(n)
	}
	return out
}

// RemoveStaging removes the hidden directories (.staging- and random text)
// in which a crash interrupted the creation or fork of a session, and
// returns their paths, sorted. It takes the root's lock (.sessions.lock)
// without waiting, so that no session being made right now is touched: while
// another process creates or forks a session it fails with ErrLocked. The
// next New, Create, Fork or SetMeta removes them as well; RemoveStaging is
// for tools that clean up without creating anything.
func (r *Sessions) RemoveStaging(ctx context.Context) ([]string, error) {
	fail := func(err error) ([]string, error) { return nil, opError("remove staging", r.dir, err) }
	if r.cfg.readOnly {
		return fail(ErrReadOnly)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	lock, err := lockFile(r.root, sessionsLockName)
	if err != nil {
		return fail(fmt.Errorf("lock %s: %w", sessionsLockName, err))
	}
	defer unlockDir(lock)
	removed, err := r.removeStagingLocked()
	if err != nil {
		return removed, opError("remove staging", r.dir, err)
	}
	slices.Sort(removed)
	return removed, nil
}
