package checkpoint

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Store saves and loads checkpoints of a state of type T in one directory.
// T must round-trip through encoding/json.
//
// A Store is safe for concurrent use by multiple goroutines. Writes are
// serialised; loads run in parallel with each other and with writes. Only one
// writer may have a directory open at a time, in any process (see Open). A
// writer opened with Async runs one goroutine of its own, which Close stops.
type Store[T any] struct {
	dir    string
	prefix string   // dir as path joins it with a file name
	root   *os.Root // every file operation goes through it: no name escapes dir
	lock   *os.File // nil for ReadOnly
	cfg    config
	codec  *codec
	async  *asyncQueue // nil unless Async

	wmu sync.Mutex // serialises writes: save, delete, prune, side files

	mu        sync.Mutex // guards the fields below
	closed    bool
	closeDone chan struct{} // closed when Close has finished
	closeErr  error
	ops       sync.WaitGroup // operations in flight; Close waits for them
	headers   map[string]cachedHeader
	lastTime  time.Time // the latest save time written or read: save times only grow
}

// Open opens the store in dir, creating the directory (and its parents,
// durably) if it does not exist.
//
// Unless ReadOnly is given, Open takes the directory's writer lock (an
// exclusive flock on the file .checkpoint.lock in dir, released by Close or by
// the process's death) and fails with ErrLocked if another writer holds it, in
// this process or another. It then removes the temporary files a crashed save
// left behind. It never touches other files.
//
// With ReadOnly, a missing directory is ErrNotFound.
func Open[T any](dir string, opts ...Option) (*Store[T], error) {
	cfg, root, err := openDir(dir, opts)
	if err != nil {
		return nil, opError("open", dir, err)
	}
	return openRoot[T](dir, root, cfg)
}

// openDir applies and validates opts, creates dir unless ReadOnly (durably
// unless NoSync) and opens it as an os.Root. A missing dir is ErrNotFound.
func openDir(dir string, opts []Option) (config, *os.Root, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return cfg, nil, err
	}
	if !cfg.readOnly {
		mkdir := mkdirDurable
		if cfg.noSync {
			mkdir = func(dir string) error { return os.MkdirAll(dir, dirPerm) }
		}
		if err := mkdir(dir); err != nil {
			return cfg, nil, err
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("%w: %w", ErrNotFound, err)
		}
		return cfg, nil, err
	}
	return cfg, root, nil
}

// openRoot opens the store of the directory root, which it owns from then
// on, with a validated cfg.
func openRoot[T any](dir string, root *os.Root, cfg config) (*Store[T], error) {
	s := &Store[T]{
		dir:       dir,
		prefix:    pathPrefix(dir),
		root:      root,
		cfg:       cfg,
		codec:     newCodec(cfg.compression(), cfg.maxRead),
		headers:   make(map[string]cachedHeader),
		closeDone: make(chan struct{}),
	}
	if cfg.readOnly {
		return s, nil
	}
	var err error
	if s.lock, err = lockDir(root); err != nil {
		root.Close()
		return nil, opError("open", dir, err)
	}
	stale, err := removeStaleTemps(root, cfg.layout, s.fileIO())
	for _, name := range stale {
		cfg.logger.Warn("checkpoint: removed temporary file left by an interrupted save", "path", filepath.Join(dir, name))
	}
	if err != nil {
		s.Close()
		return nil, opError("open", dir, fmt.Errorf("remove stale temporary files: %w", err))
	}
	if cfg.async {
		s.async = newAsyncQueue(cfg.queue)
		go s.publishInBackground()
	}
	return s, nil
}

// Dir returns the store's directory, as given to Open.
func (s *Store[T]) Dir() string { return s.dir }

// Close waits for operations in flight and, with Async, publishes every
// queued save and stops the background goroutine; then it releases the
// writer lock and the directory. Later calls on the store return ErrClosed.
// Close returns the failures of background saves not yet returned, joined
// with its own. Every call to Close, the first or a later one, returns once
// the store is closed, with the result of the first.
func (s *Store[T]) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.closeDone
		return s.closeErr
	}
	s.closed = true
	s.mu.Unlock()
	if s.async != nil {
		s.async.refuse()
	}
	s.ops.Wait()
	reports, failures := s.stopAsync()

	var errs []error
	if s.lock != nil {
		errs = append(errs, unlockDir(s.lock))
	}
	errs = append(errs, s.root.Close())
	if err := errors.Join(errs...); err != nil {
		s.closeErr = opError("close", s.dir, err)
	}
	if failures != nil {
		s.closeErr = errors.Join(failures, s.closeErr)
	}
	close(s.closeDone)
	// The hooks of the saves Close published run last, so that one may
	// call Close and get this result.
	for _, r := range reports {
		s.report(r)
	}
	return s.closeErr
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
// on success; release it with endWrite. With Async, the saves queued before
// are published first, so that writes take effect in the order they were
// made.
func (s *Store[T]) beginWrite(ctx context.Context) error {
	if s.async != nil {
		if err := s.drain(ctx); err != nil {
			return err
		}
	}
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
// checkpoint is on disk and survives a crash or a power cut (with NoSync, a
// crash of the program only; with Async, see below).
//
// Save never replaces a checkpoint: if step already has one (plain or
// compressed) it returns an error wrapping ErrExists and the existing file is
// left byte-for-byte unchanged. (A file there that is provably damaged is
// first moved aside to name.corrupt: see the README.) A negative step, an
// empty meta key or a state that cannot be encoded (a channel, a NaN) is
// ErrInvalid, and no file is written. If a retention rule is configured
// (KeepLast), old checkpoints are pruned after the new one is durable; a
// pruning failure is logged and reported to Hooks.OnError, not returned.
//
// With Async, Save returns once state is encoded and queued, and the
// checkpoint is published in the background: see Async. The Info it returns
// describes the checkpoint to be written (its Size is 0); Hooks.OnSave gets
// the Info of the published file.
func (s *Store[T]) Save(ctx context.Context, step int64, state T, opts ...SaveOption) (Info, error) {
	var sc saveConfig
	for _, o := range opts {
		if o != nil {
			o.applySave(&sc)
		}
	}
	return s.save(ctx, "save", step, KindStep, state, sc.meta, nil)
}

// saveJob is one checkpoint to publish, its state already encoded.
type saveJob struct {
	ctx   context.Context // for pruning after the save
	op    string
	fn    fileName
	meta  map[string]string
	rec   *ErrorRecord
	state *bytes.Buffer // from s.codec; returned to it once published
	time  time.Time     // the save time; zero until queued (Async) or written
}

// save writes a checkpoint of kind (the rolling file for KindRolling) and
// reports it to the hooks once the store's locks are released. With Async,
// step and rolling checkpoints are queued instead.
func (s *Store[T]) save(ctx context.Context, op string, step int64, kind Kind, state T, meta map[string]string, rec *ErrorRecord) (Info, error) {
	j, err := s.prepare(ctx, op, step, kind, state, meta, rec)
	if err != nil {
		return Info{}, s.failed(err)
	}
	if s.async != nil && (kind == KindStep || kind == KindRolling) {
		return s.enqueue(ctx, j)
	}
	r := s.saveNow(ctx, j)
	s.report(r)
	return r.info, r.err
}

// prepare checks a save's arguments and encodes its state, before any lock
// is taken: the caller's MarshalJSON may be slow, or may even use the store.
func (s *Store[T]) prepare(ctx context.Context, op string, step int64, kind Kind, state T, meta map[string]string, rec *ErrorRecord) (*saveJob, error) {
	j := &saveJob{ctx: ctx, op: op, fn: fileName{step: step, kind: kind, comp: s.codec.comp}, meta: meta, rec: rec}
	if kind == KindError {
		j.fn.attempt = 1
	}
	fail := func(err error) (*saveJob, error) {
		return nil, stepError(op, step, s.path(s.cfg.layout.format(j.fn)), err)
	}
	if err := checkStep(step); err != nil {
		return fail(err)
	}
	if _, ok := meta[""]; ok {
		return fail(fmt.Errorf("%w: empty meta key", ErrInvalid))
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	var err error
	if j.state, err = s.codec.encodeState(state); err != nil {
		return fail(err)
	}
	return j, nil
}

// saveReport is the outcome of a save, for the caller and the hooks.
type saveReport struct {
	info     Info
	pruned   []Info
	pruneErr error // the save itself succeeded
	err      error
}

// report tells the logger and the hooks about a save. It runs outside the
// store's locks.
func (s *Store[T]) report(r saveReport) {
	if r.err != nil {
		s.failed(r.err)
		return
	}
	s.saved(r.info)
	s.prunedReport(r.pruned)
	s.failed(r.pruneErr)
}

// saveNow publishes j at once, under the write lock.
func (s *Store[T]) saveNow(ctx context.Context, j *saveJob) saveReport {
	defer s.codec.putBuffer(j.state)
	if err := s.beginWrite(ctx); err != nil {
		return saveReport{err: stepError(j.op, j.fn.step, s.path(s.cfg.layout.format(j.fn)), err)}
	}
	defer s.endWrite()
	return s.publishLocked(j)
}

// publishLocked writes j's checkpoint and, after a step checkpoint, applies
// the retention rules. The caller holds the write lock.
func (s *Store[T]) publishLocked(j *saveJob) saveReport {
	fn := j.fn
	name := s.cfg.layout.format(fn) // for messages until the name is settled
	fail := func(err error) saveReport {
		return saveReport{err: stepError(j.op, fn.step, s.path(name), err)}
	}
	var err error
	if fn.kind != KindRolling {
		if name, err = s.freeName(fn); err != nil {
			return fail(err)
		}
	}
	if j.time.IsZero() {
		var behind time.Time
		j.time, behind = s.saveTime(fn.step, true) // a save refused above reads no clock
		s.clockBehind(j.time, behind)
	}
	h := header{Format: formatVersion, Step: fn.step, Kind: fn.kind, Time: j.time, Meta: j.meta, Error: j.rec}
	write := func(w io.Writer) error { return s.codec.writeEnvelope(w, h, j.state.Bytes()) }
	var size int64
	if fn.kind == KindRolling {
		size, err = replaceFile(s.root, name, write, s.fileIO())
	} else {
		size, err = createFile(s.root, name, write, s.fileIO())
	}
	if err != nil {
		return fail(err)
	}
	s.remember(name, h)
	r := saveReport{info: s.info(name, fn, size, h)}
	if fn.kind == KindRolling {
		// A rolling file of another compression is older: remove it, so
		// that the store keeps one.
		for _, c := range compressions {
			other := fn
			other.comp = c
			if c == fn.comp {
				continue
			}
			if o := s.cfg.layout.format(other); s.exists(o) {
				if err := s.remove(o); err != nil {
					r.pruneErr = stepError(j.op, fn.step, s.path(o), err)
					break
				}
			}
		}
		return r
	}
	r.pruned, r.pruneErr = s.pruneLocked(j.ctx)
	return r
}

func checkStep(step int64) error {
	if step < 0 {
		return fmt.Errorf("%w: negative step", ErrInvalid)
	}
	return nil
}

// maxClockLead bounds how far ahead of the clock a store stamps a save to
// keep save times growing.
const maxClockLead = time.Minute

// saveTime returns the time to record in a new checkpoint of step: now, but
// after every save time this store has written or read, so that "saved last"
// stays true when the wall clock steps back a little (a resumed error step
// redone and saved again sorts after its error checkpoint).
//
// If the clock is more than maxClockLead behind that time (it stepped back
// far, or was far ahead once), following it would stamp every later save in
// the future and blind the time-based retention rules. Then the save is
// stamped now, or just after the newest checkpoint of its own step: the
// only order that "saved last" needs.
//
// With byStep false (an Async save, stamped under the queue's lock) the
// directory is not read: such a save is stamped now. saveTime returns the
// newest save time it set aside in that case (zero otherwise), for the
// caller to log once it holds no lock.
func (s *Store[T]) saveTime(step int64, byStep bool) (t, behind time.Time) {
	t = s.cfg.now().UTC()
	s.mu.Lock()
	last := s.lastTime
	s.mu.Unlock()
	reset := false
	if !t.After(last) {
		if last.Sub(t) <= maxClockLead {
			t = last.Add(time.Nanosecond)
		} else {
			behind = last
			if byStep {
				if newest := s.newestOfStep(step); !t.After(newest) {
					t = newest.Add(time.Nanosecond)
				}
			}
			reset = true // follow the clock again from here
		}
	}
	s.mu.Lock()
	if reset || t.After(s.lastTime) {
		s.lastTime = t
	}
	s.mu.Unlock()
	return t, behind
}

// clockBehind logs that the clock was far behind the newest save time.
func (s *Store[T]) clockBehind(now, newest time.Time) {
	if !newest.IsZero() {
		s.cfg.logger.Warn("checkpoint: the clock is far behind the newest save time; ordering the save within its step only", "now", now, "newest", newest)
	}
}

// newestOfStep returns the newest save time among the checkpoints of step
// whose headers read (zero if none).
func (s *Store[T]) newestOfStep(step int64) time.Time {
	var newest time.Time
	entries, err := s.stepEntries(step)
	if err != nil {
		return newest
	}
	for _, e := range entries {
		if e.hErr == nil && e.h.Time.After(newest) && !e.h.Time.After(timeMax) {
			newest = e.h.Time
		}
	}
	return newest
}

// timeMax bounds the save times a store adopts from what it reads: JSON
// cannot encode a time past year 9999, so following a later one would make
// every save fail.
var timeMax = time.Date(9000, 1, 1, 0, 0, 0, 0, time.UTC)

// observe records the save time of a checkpoint that loaded and verified.
func (s *Store[T]) observe(t time.Time) {
	if t.After(timeMax) {
		return
	}
	s.mu.Lock()
	if t.After(s.lastTime) {
		s.lastTime = t
	}
	s.mu.Unlock()
}

// freeName returns the name for fn, or ErrExists if a checkpoint of that step
// and kind exists in any compression. An error checkpoint never fails:
// it takes the next attempt number (.error, .error-2, ...).
//
// A file in the way that is provably damaged (bad checksum, truncated, bad
// gzip or JSON) is quarantined first: otherwise a host that resumed from the
// checkpoint before it, as Latest makes it do, could never save that step
// again.
func (s *Store[T]) freeName(fn fileName) (string, error) {
	for {
		name := s.cfg.layout.format(fn)
		exists := false
		for _, c := range compressions {
			alt := fn
			alt.comp = c
			n := s.cfg.layout.format(alt)
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
const (
	quarantineSuffix = ".corrupt"
	maxQuarantined   = 100 // per checkpoint name: beyond this, Save fails
)

// quarantineIfDamaged renames the checkpoint name to name.corrupt (or
// name.corrupt-2, ...) if its bytes are provably damaged, and returns nil. It
// returns ErrExists if the file is intact, too large for the read limit, or
// of a format version this package cannot read (it may be good), and any
// other error as it is.
func (s *Store[T]) quarantineIfDamaged(name string) error {
	f, err := s.root.Open(name)
	if err != nil {
		return err
	}
	damage := s.codec.read(f, -1, func(header, []byte) error { return nil })
	f.Close()
	if damage == nil || !errors.Is(damage, ErrCorrupt) || errors.Is(damage, errFormat) || errors.Is(damage, errTooLarge) {
		return ErrExists
	}
	for i := 1; i <= maxQuarantined; i++ {
		q := name + quarantineSuffix
		if i > 1 {
			q += "-" + strconv.Itoa(i)
		}
		if _, err := s.root.Lstat(q); err == nil {
			continue
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		err := s.fileIO().at("quarantine", name)
		if err == nil {
			err = s.root.Rename(name, q)
		}
		if err != nil {
			return fmt.Errorf("quarantine damaged checkpoint: %w", err)
		}
		if err := s.fileIO().syncDir(s.root); err != nil {
			return err
		}
		s.forget(name)
		s.cfg.logger.Warn("checkpoint: moved a damaged checkpoint aside", "path", s.path(name), "to", s.path(q), "damage", damage)
		return nil
	}
	return fmt.Errorf("%w: damaged, and %d damaged copies of it are already kept aside: remove some (%s*)", ErrExists, maxQuarantined, name+quarantineSuffix)
}

// Load returns the state and Info of the checkpoint of step. If the step has
// more than one checkpoint (say a step and an error checkpoint), Load returns
// the one saved last; LoadInfo reaches the others. A step with no checkpoint
// is ErrNotFound; a checkpoint that fails verification is ErrCorrupt, and no
// state is returned.
func (s *Store[T]) Load(ctx context.Context, step int64) (T, Info, error) {
	return s.load(ctx, step, func() (T, Info, error) {
		var zero T
		entries, err := s.stepEntries(step)
		if err != nil {
			return zero, Info{}, stepError("load", step, s.dir, err)
		}
		if len(entries) == 0 {
			return zero, Info{}, stepError("load", step, s.dir, ErrNotFound)
		}
		sortEntries(entries)
		return s.loadEntry(ctx, "load", entries[len(entries)-1], true)
	})
}

// LoadInfo loads exactly the checkpoint that info describes, as returned by
// List, Save or Latest: use it to reach a checkpoint that Load does not
// return because its step has a newer one (a step checkpoint beside a final
// one, an earlier error attempt). If the file no longer holds that
// checkpoint (it was deleted, or the rolling file has moved on), the result
// is ErrNotFound. info's file must be a checkpoint name of the store's layout
// (else ErrInvalid).
func (s *Store[T]) LoadInfo(ctx context.Context, info Info) (T, Info, error) {
	return s.load(ctx, info.Step, func() (T, Info, error) {
		var zero T
		name := info.Name()
		fn, ok := s.cfg.layout.parse(name)
		if !ok {
			return zero, Info{}, stepError("load", info.Step, info.Path, fmt.Errorf("%w: %q is not a checkpoint name of this store", ErrInvalid, name))
		}
		e := entry{name: name, fn: fn, h: header{Step: info.Step, Time: info.Time}}
		if info.Format == 0 {
			e.h.Time = time.Time{} // a modification time, not a save time
		}
		return s.loadEntry(ctx, "load", e, true)
	})
}

// load runs a single-checkpoint load and reports it.
func (s *Store[T]) load(ctx context.Context, step int64, do func() (T, Info, error)) (T, Info, error) {
	var zero T
	if err := checkStep(step); err != nil {
		return zero, Info{}, s.failed(stepError("load", step, s.dir, err))
	}
	if err := s.begin(ctx); err != nil {
		return zero, Info{}, s.failed(stepError("load", step, s.dir, err))
	}
	v, info, err := do()
	s.ops.Done()
	if err != nil {
		return zero, Info{}, s.failed(err)
	}
	s.loaded(info)
	return v, info, nil
}

// Latest returns the newest checkpoint that loads: the highest step, and
// within a step the checkpoint saved last. The rolling file (WithRolling)
// counts like any other. Checkpoints that fail to load are skipped; each
// skipped one is logged at Warn and reported to Hooks.OnError, and if none
// loads, the error joins every failure (so errors.Is(err, ErrCorrupt) holds
// when damage was the cause). A store with no checkpoint is ErrNotFound:
// that, and only that, means a fresh start.
func (s *Store[T]) Latest(ctx context.Context) (T, Info, error) {
	v, info, err := s.latest(ctx, "latest", func(fileName) bool { return true })
	if err == nil {
		s.loaded(info)
	}
	return v, info, err
}

// latest finds the newest checkpoint that loads among the names want keeps,
// reporting the ones it skipped and a failure, but not a load.
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
	return v, info, nil
}

// latestLocked walks the checkpoints newest first and returns the first that
// loads, with the failures it passed.
func (s *Store[T]) latestLocked(ctx context.Context, op string, want func(fileName) bool) (T, Info, []error, error) {
	var zero T
	ns, err := s.names(want)
	if err != nil {
		return zero, Info{}, nil, opError(op, s.dir, err)
	}
	// Order by step from the names alone, then read headers only for the
	// steps actually tried: most calls read one header and one file. The
	// newest step is found without sorting; the others are sorted only if
	// none of its checkpoints loads.
	var skipped []error
	tried := 0
	sorted := false
	for end := len(ns); end > 0; {
		var start int
		if !sorted {
			start = newestToEnd(ns[:end])
		} else {
			for start = end - 1; start > 0 && ns[start-1].fn.step == ns[end-1].fn.step; start-- {
			}
		}
		group := make([]entry, 0, end-start)
		for _, n := range ns[start:end] {
			group = append(group, entry{name: n.name, fn: n.fn})
		}
		group = s.fill(group)
		end = start
		sortEntries(group)
		for i := len(group) - 1; i >= 0; i-- {
			tried++
			// Not exact: a rolling file that moved on to a newer step
			// since the scan is still the newest checkpoint.
			v, info, err := s.loadEntry(ctx, op, group[i], false)
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
		if !sorted {
			slices.SortFunc(ns[:end], func(a, b named) int {
				return cmp.Or(cmp.Compare(a.fn.step, b.fn.step), strings.Compare(a.name, b.name))
			})
			sorted = true
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
// header cannot be read is listed with the step and kind its name gives, the
// file's modification time and Format 0, and logged at Warn (a damaged one
// once, while it stays the same file);
// loading it reports the damage.
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
	return s.infos(entries), nil
}

// infos returns the Info of each entry, ordered as List orders them.
func (s *Store[T]) infos(entries []entry) []Info {
	infos := make([]Info, len(entries))
	for k, i := range sortedOrder(entries) {
		e := &entries[i]
		infos[k] = s.info(e.name, e.fn, e.size, e.h)
	}
	return infos
}

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
	return s.remove(names...)
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
	s.endWrite()
	if err != nil {
		return removed, s.failed(stepError("truncate", step, s.dir, err))
	}
	return removed, nil
}

func (s *Store[T]) truncateLocked(ctx context.Context, step int64) ([]Info, error) {
	entries, err := s.scan(func(fn fileName) bool { return fn.kind == KindRolling || fn.step > step })
	if err != nil {
		return nil, err
	}
	entries = slices.DeleteFunc(s.fill(entries), func(e entry) bool {
		return e.fn.kind == KindRolling && e.hErr != nil || e.h.Step <= step
	})
	sortEntries(entries)
	slices.Reverse(entries)
	var removed []Info
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		if err := s.remove(e.name); err != nil {
			return removed, fmt.Errorf("remove %s: %w", e.name, err)
		}
		removed = append(removed, s.info(e.name, e.fn, e.size, e.h))
	}
	return removed, nil
}

// fileIO says how the store writes and removes files.
func (s *Store[T]) fileIO() fileIO {
	return fileIO{noSync: s.cfg.noSync, fault: s.cfg.fault}
}

// remove deletes checkpoint files, forgetting their cached headers.
func (s *Store[T]) remove(names ...string) error {
	_, err := s.removeReporting(names)
	return err
}

// removeReporting deletes checkpoint files, forgetting their cached
// headers, and says which of them are gone (see removeNames).
func (s *Store[T]) removeReporting(names []string) ([]bool, error) {
	gone, err := removeNames(s.root, s.fileIO(), names)
	s.forget(names...)
	return gone, err
}

func (s *Store[T]) exists(name string) bool {
	_, err := s.root.Lstat(name)
	return err == nil
}

// loadEntry reads, verifies and decodes one checkpoint file. With exact, a
// rolling file must still hold the step (and, if known, the save time) that
// e says; otherwise it is ErrNotFound.
func (s *Store[T]) loadEntry(ctx context.Context, op string, e entry, exact bool) (T, Info, error) {
	var v T
	path := s.path(e.name)
	fail := func(err error) (T, Info, error) {
		var zero T
		return zero, Info{}, stepError(op, e.h.Step, path, err)
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
	var h header
	err = s.codec.read(f, fi.Size(), func(got header, state []byte) error {
		h = got
		if err := e.fn.agrees(h); err != nil {
			return err
		}
		known := e.hErr == nil && !e.h.Time.IsZero()
		if exact && (h.Step != e.h.Step || known && !h.Time.Equal(e.h.Time)) {
			return fmt.Errorf("%w: the file now holds the checkpoint of step %d saved %s", ErrNotFound, h.Step, h.Time.Format(time.RFC3339Nano))
		}
		if err := json.Unmarshal(state, &v); err != nil {
			return fmt.Errorf("%w: decode state: %w", ErrCorrupt, err)
		}
		return nil
	})
	if err != nil {
		return fail(err)
	}
	s.cache(e.name, fi, h, true)
	s.observe(h.Time)
	return v, s.info(e.name, e.fn, fi.Size(), h), nil
}

func (s *Store[T]) path(name string) string {
	if name == "" {
		return s.dir
	}
	return s.prefix + name // filepath.Join(s.dir, name), for a plain name
}

// pathPrefix returns what path puts before a file name in dir.
func pathPrefix(dir string) string {
	dir = filepath.Clean(dir)
	switch {
	case dir == ".":
		return ""
	case os.IsPathSeparator(dir[len(dir)-1]):
		return dir // the root directory
	}
	return dir + string(filepath.Separator)
}

// info builds the Info of a checkpoint. Meta and Error are copied: the
// caller owns what it gets, and the header cache stays as read.
func (s *Store[T]) info(name string, fn fileName, size int64, h header) Info {
	info := Info{
		Step:        h.Step,
		Kind:        h.Kind,
		Time:        h.Time,
		Path:        s.path(name),
		Size:        size,
		Compressed:  fn.comp != compressNone,
		Compression: fn.comp.String(),
		Format:      h.Format,
		Meta:        maps.Clone(h.Meta),
	}
	if h.Error != nil {
		rec := *h.Error
		rec.Types = slices.Clone(rec.Types)
		info.Error = &rec
	}
	return info
}
