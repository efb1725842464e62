package checkpoint

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
)

// Store saves and loads checkpoints of a state of type T in one directory.
// T must round-trip through encoding/json.
//
// A Store is safe for concurrent use by multiple goroutines. Writes are
// serialised; loads run in parallel with each other and with writes. Only one
// writer may have a directory open at a time, in any process (see Open).
type Store[T any] struct {
	dir  string
	root *os.Root // every file operation goes through it: no name escapes dir
	lock *os.File // nil for ReadOnly
	cfg  config

	wmu sync.Mutex // serialises writes: save, delete, prune, side files

	mu      sync.Mutex // guards the fields below
	closed  bool
	ops     sync.WaitGroup // operations in flight; Close waits for them
	headers map[string]cachedHeader
}

// cachedHeader is a file's header as last read or written, valid while the
// name refers to the same file (inode) with the same size and modification
// time.
type cachedHeader struct {
	fi       fs.FileInfo
	h        header
	verified bool // the whole file was written or loaded and verified
}

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

// Open opens the store in dir, creating the directory if it does not exist.
//
// Unless ReadOnly is given, Open takes the directory's writer lock (an
// exclusive flock on the file .checkpoint.lock in dir, released by Close or by
// the process's death) and fails with ErrLocked if another writer holds it, in
// this process or another. It then removes the temporary files a crashed save
// left behind. It never touches files that are not its own.
//
// With ReadOnly, a missing directory is ErrNotFound.
func Open[T any](dir string, opts ...Option) (*Store[T], error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, opError("open", dir, err)
	}
	if !cfg.readOnly {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, opError("open", dir, err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("%w: %w", ErrNotFound, err)
		}
		return nil, opError("open", dir, err)
	}
	s := &Store[T]{dir: dir, root: root, cfg: cfg, headers: make(map[string]cachedHeader)}
	if cfg.readOnly {
		return s, nil
	}
	if s.lock, err = lockDir(root); err != nil {
		root.Close()
		return nil, opError("open", dir, err)
	}
	stale, err := removeStaleTemps(root)
	for _, name := range stale {
		cfg.logger.Warn("checkpoint: removed temporary file left by an interrupted save", "path", filepath.Join(dir, name))
	}
	if err != nil {
		s.Close()
		return nil, opError("open", dir, fmt.Errorf("remove stale temporary files: %w", err))
	}
	return s, nil
}

// Dir returns the store's directory, as given to Open.
func (s *Store[T]) Dir() string { return s.dir }

// Close releases the writer lock and the directory. It waits for operations
// in flight; later calls on the store return ErrClosed. Closing a closed store
// does nothing and returns nil.
func (s *Store[T]) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.ops.Wait()

	var errs []error
	if s.lock != nil {
		errs = append(errs, unlockDir(s.lock))
	}
	errs = append(errs, s.root.Close())
	if err := errors.Join(errs...); err != nil {
		return opError("close", s.dir, err)
	}
	return nil
}

// begin admits an operation unless ctx is done or the store is closed; every
// admitted operation must call s.ops.Done.
func (s *Store[T]) begin(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.ops.Add(1)
	return nil
}

// beginWrite is begin for an operation that writes, holding the write lock
// on success; release it with endWrite.
func (s *Store[T]) beginWrite(ctx context.Context) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	if s.cfg.readOnly {
		s.ops.Done()
		return ErrReadOnly
	}
	s.wmu.Lock()
	// Waiting for the lock may have taken a while: look at ctx again before
	// any I/O.
	if err := ctx.Err(); err != nil {
		s.endWrite()
		return err
	}
	return nil
}

func (s *Store[T]) endWrite() {
	s.wmu.Unlock()
	s.ops.Done()
}

// Save writes the checkpoint of step: state encoded with encoding/json inside
// the envelope, written atomically and durably. When Save returns nil the
// checkpoint is on disk and survives a crash or a power cut.
//
// Save never replaces a checkpoint: if step already has one (plain or
// compressed) it returns an error wrapping ErrExists and the existing file is
// left byte-for-byte unchanged. A negative step, an empty meta key or a state
// that cannot be encoded (a channel, a NaN) is ErrInvalid, and no file is
// written. If a retention rule is configured (KeepLast), old checkpoints are
// pruned after the new one is durable; a pruning failure is logged and
// reported to Hooks.OnError, not returned.
func (s *Store[T]) Save(ctx context.Context, step int64, state T, opts ...SaveOption) (Info, error) {
	var sc saveConfig
	for _, o := range opts {
		if o != nil {
			o.applySave(&sc)
		}
	}
	return s.save(ctx, "save", step, KindStep, state, sc.meta, nil)
}

// save writes a numbered checkpoint of kind and reports it to the hooks.
func (s *Store[T]) save(ctx context.Context, op string, step int64, kind Kind, state T, meta map[string]string, rec *ErrorRecord) (Info, error) {
	info, pruned, pruneErr, err := s.saveLocked(ctx, op, step, kind, state, meta, rec)
	if err != nil {
		return Info{}, s.failed(err)
	}
	s.saved(info)
	s.prunedReport(pruned)
	s.failed(pruneErr) // the save itself succeeded
	return info, nil
}

// saveLocked does the work of save; it returns the error of the pruning that
// follows a successful save separately.
func (s *Store[T]) saveLocked(ctx context.Context, op string, step int64, kind Kind, state T, meta map[string]string, rec *ErrorRecord) (info Info, pruned []Info, pruneErr error, err error) {
	if step < 0 {
		return Info{}, nil, nil, stepError(op, step, "", fmt.Errorf("%w: negative step", ErrInvalid))
	}
	if _, ok := meta[""]; ok {
		return Info{}, nil, nil, stepError(op, step, "", fmt.Errorf("%w: empty meta key", ErrInvalid))
	}
	if err := s.beginWrite(ctx); err != nil {
		return Info{}, nil, nil, stepError(op, step, "", err)
	}
	defer s.endWrite()

	data, err := encodeState(state)
	if err != nil {
		return Info{}, nil, nil, stepError(op, step, "", err)
	}
	h := header{Format: formatVersion, Step: step, Kind: kind, Time: s.cfg.now().UTC(), Meta: meta, Error: rec}
	fn := fileName{step: step, kind: kind, attempt: 1, gz: s.cfg.gzip}
	if kind != KindError {
		fn.attempt = 0
	}
	name, err := s.freeName(fn)
	if err != nil {
		return Info{}, nil, nil, stepError(op, step, s.path(name), err)
	}
	size, err := createFile(s.root, name, func(w io.Writer) error { return writeEnvelope(w, h, data, s.cfg.gzip) })
	if err != nil {
		return Info{}, nil, nil, stepError(op, step, s.path(name), err)
	}
	s.remember(name, h)
	info = s.info(name, fn, size, h)

	pruned, pruneErr = s.autoPrune(ctx)
	return info, pruned, pruneErr, nil
}

// freeName returns the name for fn, or ErrExists if a checkpoint of that step
// and kind exists in either compression. An error checkpoint never fails:
// it takes the next attempt number (.error, .error-2, ...).
//
// A file in the way that is provably damaged (bad checksum, truncated, bad
// gzip or JSON) is quarantined first: otherwise a host that resumed from the
// checkpoint before it, as Latest makes it do, could never save that step
// again.
func (s *Store[T]) freeName(fn fileName) (string, error) {
	for {
		name := s.cfg.layout.format(fn)
		alt := fn
		alt.gz = !fn.gz
		exists := false
		for _, n := range []string{name, s.cfg.layout.format(alt)} {
			_, err := s.root.Lstat(n)
			if err == nil && fn.kind != KindError {
				if err = s.quarantineIfDamaged(n); err == nil {
					continue
				}
			}
			if err == nil {
				exists = true
			} else if !errors.Is(err, fs.ErrNotExist) {
				return n, err
			}
		}
		if !exists {
			return name, nil
		}
		fn.attempt++
	}
}

// quarantineSuffix ends the name of a damaged checkpoint moved aside. Such
// files are never listed or loaded; they are kept for inspection.
const quarantineSuffix = ".corrupt"

// quarantineIfDamaged renames the checkpoint name to name.corrupt (or
// name.corrupt-2, ...) if it is provably damaged, and returns nil. It returns
// ErrExists if the file is intact, or of a format version this package cannot
// read, and any other error as it is.
func (s *Store[T]) quarantineIfDamaged(name string) error {
	f, err := s.root.Open(name)
	if err != nil {
		return err
	}
	_, err = readEnvelope(f, s.cfg.maxRead)
	f.Close()
	if err == nil || !errors.Is(err, ErrCorrupt) || errors.Is(err, errFormat) {
		return ErrExists
	}
	damage := err
	for i := 1; ; i++ {
		q := name + quarantineSuffix
		if i > 1 {
			q += "-" + strconv.Itoa(i)
		}
		if _, err := s.root.Lstat(q); err == nil {
			continue
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := s.root.Rename(name, q); err != nil {
			return fmt.Errorf("quarantine damaged checkpoint: %w", err)
		}
		if err := syncDir(s.root); err != nil {
			return err
		}
		s.forget(name)
		s.cfg.logger.Warn("checkpoint: moved a damaged checkpoint aside", "path", s.path(name), "to", s.path(q), "damage", damage)
		return nil
	}
}

// Load returns the state and Info of the checkpoint of step. If the step has
// more than one checkpoint (say a step and an error checkpoint), Load returns
// the one saved last. A step with no checkpoint is ErrNotFound; a checkpoint
// that fails verification is ErrCorrupt, and no state is returned.
func (s *Store[T]) Load(ctx context.Context, step int64) (T, Info, error) {
	var zero T
	if step < 0 {
		return zero, Info{}, s.failed(stepError("load", step, "", fmt.Errorf("%w: negative step", ErrInvalid)))
	}
	if err := s.begin(ctx); err != nil {
		return zero, Info{}, s.failed(stepError("load", step, "", err))
	}
	entries, err := s.stepEntries(step)
	var v T
	var info Info
	switch {
	case err != nil:
		err = stepError("load", step, s.dir, err)
	case len(entries) == 0:
		err = stepError("load", step, s.dir, ErrNotFound)
	default:
		sortEntries(entries)
		v, info, err = s.loadEntry(ctx, "load", entries[len(entries)-1])
	}
	s.ops.Done()
	if err != nil {
		return zero, Info{}, s.failed(err)
	}
	s.loaded(info)
	return v, info, nil
}

// LoadInfo loads exactly the checkpoint file that info describes, as
// returned by List, Save or Latest: use it to reach a checkpoint that Load
// does not return because its step has a newer one (a step checkpoint beside
// a final one, an earlier error attempt). Only info's file name is used; it
// must be a checkpoint name of the store's layout (else ErrInvalid). A file
// that is gone is ErrNotFound.
func (s *Store[T]) LoadInfo(ctx context.Context, info Info) (T, Info, error) {
	var zero T
	name := info.Name()
	fn, ok := s.cfg.layout.parse(name)
	if !ok {
		return zero, Info{}, s.failed(stepError("load", info.Step, info.Path, fmt.Errorf("%w: %q is not a checkpoint name of this store", ErrInvalid, name)))
	}
	if err := s.begin(ctx); err != nil {
		return zero, Info{}, s.failed(stepError("load", info.Step, s.path(name), err))
	}
	e := entry{name: name, fn: fn}
	if fn.kind == KindRolling {
		e.h.Step = info.Step // for messages; the file's own header is checked
	}
	v, got, err := s.loadEntry(ctx, "load", e)
	s.ops.Done()
	if err != nil {
		return zero, Info{}, s.failed(err)
	}
	s.loaded(got)
	return v, got, nil
}

// Latest returns the newest checkpoint that loads: the highest step, and
// within a step the checkpoint saved last. The rolling file (WithRolling)
// counts like any other. Checkpoints that fail to load are skipped; each
// skipped one is logged at Warn and reported to Hooks.OnError, and if none
// loads, the error joins every failure (so errors.Is(err, ErrCorrupt) holds
// when damage was the cause). A store with no checkpoint is ErrNotFound:
// that, and only that, means a fresh start.
func (s *Store[T]) Latest(ctx context.Context) (T, Info, error) {
	return s.latest(ctx, "latest", func(fileName) bool { return true })
}

func (s *Store[T]) latest(ctx context.Context, op string, want func(fileName) bool) (T, Info, error) {
	var zero T
	if err := s.begin(ctx); err != nil {
		return zero, Info{}, s.failed(opError(op, s.dir, err))
	}
	v, info, skipped, err := s.latestLocked(ctx, op, want)
	s.ops.Done()
	for _, e := range skipped {
		s.failed(e)
	}
	if err != nil {
		return zero, Info{}, s.failed(err)
	}
	s.loaded(info)
	return v, info, nil
}

// latestLocked walks the checkpoints newest first and returns the first that
// loads, with the failures it passed.
func (s *Store[T]) latestLocked(ctx context.Context, op string, want func(fileName) bool) (T, Info, []error, error) {
	var zero T
	entries, err := s.scan(want)
	if err != nil {
		return zero, Info{}, nil, opError(op, s.dir, err)
	}
	// Order by step from the names alone, then read headers only for the
	// steps actually tried: most calls read one header and one file.
	slices.SortStableFunc(entries, func(a, b entry) int { return cmp.Compare(a.fn.step, b.fn.step) })
	var skipped []error
	tried := 0
	for end := len(entries); end > 0; {
		start := end - 1
		for start > 0 && entries[start-1].fn.step == entries[end-1].fn.step {
			start--
		}
		group := s.fill(slices.Clone(entries[start:end]))
		end = start
		sortEntries(group)
		for i := len(group) - 1; i >= 0; i-- {
			tried++
			v, info, err := s.loadEntry(ctx, op, group[i])
			if err == nil {
				return v, info, skipped, nil
			}
			if ctxErr := ctx.Err(); ctxErr != nil {
				return zero, Info{}, skipped, opError(op, s.dir, ctxErr)
			}
			if errors.Is(err, ErrNotFound) {
				continue // removed since the scan
			}
			skipped = append(skipped, err)
		}
	}
	if len(skipped) == 0 {
		return zero, Info{}, nil, opError(op, s.dir, ErrNotFound)
	}
	return zero, Info{}, nil, opError(op, s.dir, fmt.Errorf("none of the %d checkpoints loads: %w", tried, errors.Join(skipped...)))
}

// List returns the checkpoints in the directory, ascending by step and,
// within a step, by save time. It reads file names and each file's header
// (once: headers are cached), never a state, and ignores temporary files and
// anything that is not a checkpoint of the store's layout. A checkpoint whose
// header cannot be read is listed with the step and kind its name gives and
// the file's modification time; loading it reports the damage.
func (s *Store[T]) List(ctx context.Context) ([]Info, error) {
	if err := s.begin(ctx); err != nil {
		return nil, s.failed(opError("list", s.dir, err))
	}
	entries, err := s.scan(nil)
	if err == nil {
		entries = s.fill(entries)
	}
	s.ops.Done()
	if err != nil {
		return nil, s.failed(opError("list", s.dir, err))
	}
	sortEntries(entries)
	infos := make([]Info, len(entries))
	for i, e := range entries {
		infos[i] = s.info(e.name, e.fn, e.size, e.h)
	}
	return infos, nil
}

// Delete removes every checkpoint of step (of any kind, including the rolling
// file if it holds that step) and syncs the directory. A step with no
// checkpoint is ErrNotFound.
func (s *Store[T]) Delete(ctx context.Context, step int64) error {
	return s.deleteWhere(ctx, "delete", step, func(Kind) bool { return true })
}

func (s *Store[T]) deleteWhere(ctx context.Context, op string, step int64, kind func(Kind) bool) error {
	if step < 0 {
		return s.failed(stepError(op, step, "", fmt.Errorf("%w: negative step", ErrInvalid)))
	}
	if err := s.beginWrite(ctx); err != nil {
		return s.failed(stepError(op, step, "", err))
	}
	err := s.deleteLocked(step, kind)
	s.endWrite()
	if err != nil {
		return s.failed(stepError(op, step, s.dir, err))
	}
	return nil
}

func (s *Store[T]) deleteLocked(step int64, kind func(Kind) bool) error {
	entries, err := s.stepEntries(step)
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
	err = removeFiles(s.root, names...)
	s.forget(names...)
	return err
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

// scan lists the directory's checkpoint files whose names pass keep (all, if
// keep is nil). Only regular files count. The rolling file's step is in its
// header, so scan fills it in.
func (s *Store[T]) scan(keep func(fileName) bool) ([]entry, error) {
	dirents, err := readDir(s.root)
	if err != nil {
		return nil, err
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
			e.h, e.verified, e.hErr = s.header(e.name, fi)
		} else {
			e.hErr = err
		}
		if e.hErr == nil && e.fn.kind != KindRolling && (e.h.Step != e.fn.step || e.h.Kind != e.fn.kind) {
			e.hErr = fmt.Errorf("%w: header says step %d kind %q, name says step %d kind %q", ErrCorrupt, e.h.Step, e.h.Kind, e.fn.step, e.fn.kind)
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

// header returns the header of the file name with info fi, from the cache if
// the file is unchanged since it was cached.
func (s *Store[T]) header(name string, fi fs.FileInfo) (header, bool, error) {
	s.mu.Lock()
	c, ok := s.headers[name]
	s.mu.Unlock()
	if ok && os.SameFile(c.fi, fi) && c.fi.Size() == fi.Size() && c.fi.ModTime().Equal(fi.ModTime()) {
		return c.h, c.verified, nil
	}
	f, err := s.root.Open(name)
	if err != nil {
		return header{}, false, err
	}
	defer f.Close()
	h, err := readHeader(f)
	if err != nil {
		return header{}, false, err
	}
	s.cache(name, fi, h, false)
	return h, false, nil
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

// loadEntry reads, verifies and decodes one checkpoint file.
func (s *Store[T]) loadEntry(ctx context.Context, op string, e entry) (T, Info, error) {
	var v T
	step := e.fn.step
	if e.fn.kind == KindRolling {
		step = e.h.Step
	}
	path := s.path(e.name)
	fail := func(err error) (T, Info, error) {
		var zero T
		return zero, Info{}, stepError(op, step, path, err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	f, err := s.root.Open(e.name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("%w: %w", ErrNotFound, err)
		}
		return fail(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	if !fi.Mode().IsRegular() {
		return fail(fmt.Errorf("%w: not a regular file", ErrCorrupt))
	}
	env, err := readEnvelope(f, s.cfg.maxRead)
	if err != nil {
		return fail(err)
	}
	if e.fn.kind == KindRolling {
		if env.Kind != KindRolling {
			return fail(fmt.Errorf("%w: rolling file holds kind %q", ErrCorrupt, env.Kind))
		}
	} else if env.Step != e.fn.step || env.Kind != e.fn.kind {
		return fail(fmt.Errorf("%w: header says step %d kind %q, name says step %d kind %q", ErrCorrupt, env.Step, env.Kind, e.fn.step, e.fn.kind))
	}
	if err := json.Unmarshal(env.State, &v); err != nil {
		return fail(fmt.Errorf("%w: decode state: %w", ErrCorrupt, err))
	}
	s.cache(e.name, fi, env.header, true)
	return v, s.info(e.name, e.fn, fi.Size(), env.header), nil
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

func (s *Store[T]) path(name string) string {
	if name == "" {
		return ""
	}
	return filepath.Join(s.dir, name)
}

func (s *Store[T]) info(name string, fn fileName, size int64, h header) Info {
	return Info{
		Step:       h.Step,
		Kind:       h.Kind,
		Time:       h.Time,
		Path:       s.path(name),
		Size:       size,
		Compressed: fn.gz,
		Format:     h.Format,
		Meta:       h.Meta,
		Error:      h.Error,
	}
}
