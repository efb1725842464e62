package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/storage"
)

// Store saves and loads checkpoints of a state of type T in one directory,
// or in one Backend (see OpenBackend). T must round-trip through
// encoding/json.
//
// A Store is safe for concurrent use by multiple goroutines. Writes are
// serialised; loads run in parallel with each other and with writes. Only
// one writer may have a store open at a time, in any process (see Open). A
// writer opened with Async runs one goroutine of its own, which Close stops.
type Store[T any] struct {
	b      Backend      // every byte goes through it (the local directory: dirstore)
	local  bool         // b's Traits say Local (see remote)
	dir    string       // b.Locate(""), for messages
	unlock func() error // releases the writer lock; nil for ReadOnly
	cfg    config
	codec  *codec
	async  *asyncQueue // nil unless Async

	wmu sync.Mutex // serialises writes: save, delete, prune, side files
	// rollingKeyed (guarded by wmu) is set once the rolling files were
	// found readable by this store's keys (see checkRollingKeys).
	rollingKeyed bool
	imu          sync.Mutex // serialises writes of the index (see writeIndex)
	// written (guarded by wmu) holds, for each object this store
	// replaced (the rolling file, side files), the Version the next
	// replacement is conditional on (see replace): the one written, ""
	// after a failed replacement (unconditional), NoObject once removed.
	written map[string]string
	// listed (guarded by wmu), for a writer on a remote backend (see
	// remote), holds the names of the backend's objects and their
	// Versions ("" where unknown): listed at Open, then kept up to date
	// by the writer's own writes and removals.
	listed map[string]string
	// scanned (guarded by wmu) records that a prune has read the whole
	// directory into the header cache: later prunes after a save judge
	// from the cache (see pruneFromCache).
	scanned bool
	// errs (guarded by wmu) is what the writer knows of the error
	// checkpoints a clean save could supersede: it decides, without a
	// listing, whether a save or Close needs a superseded-error pass
	// (see errorWatch).
	errs errorWatch
	// comps has a bit (1<<compression) for each compression of which a
	// full scan of the directory found a checkpoint name: with scanned,
	// a save need not look for its step in the compressions that have
	// none (see freeName).
	comps atomic.Uint32
	// next is what Append knows of the store's newest step.
	next appendCounter

	mu        sync.Mutex // guards the fields below
	closed    bool
	closeDone chan struct{} // closed when Close has finished
	closeErr  error
	ops       sync.WaitGroup // operations in flight; Close waits for them
	headers   map[string]cachedHeader
	cacheGen  uint64    // counts what was put in headers: each cachedHeader has its number
	indexGen  uint64    // the cacheGen the index on the backend was written (or read) at
	indexRead bool      // a fill has read the index (see fill): it is read once
	lastTime  time.Time // the latest save time written or read: save times only grow
	// resumed is the name of the checkpoint the last successful Latest,
	// LatestClean, Load or LoadExact returned: KeepBest keeps it.
	resumed string
}

// Open opens the store in dir, creating the directory (and its parents,
// durably) if it does not exist.
//
// Unless ReadOnly is given, Open takes the directory's writer lock (an
// exclusive flock on the file .checkpoint.lock in dir and, where the file
// system allows, on dir itself, released by Close or by the process's
// death) and fails with ErrLocked if another writer holds it, in this
// process or another: at once, or after waiting for it as long as
// WaitLock says. Removing or replacing .checkpoint.lock under a writer
// does not let a second one in. It then removes the temporary files a
// crashed save left behind. It never touches other files.
//
// With ReadOnly, a missing directory is ErrNotFound. An empty dir name ("")
// is ErrInvalid, and so is a T that encoding/json would save as {}
// whatever its value (a struct with no exported field and no MarshalJSON
// or MarshalText method): such a store would restore zero values without a
// word.
func Open[T any](dir string, opts ...Option) (*Store[T], error) {
	if err := checkStateType(reflect.TypeFor[T]()); err != nil {
		return nil, opError("open", dir, err)
	}
	b, cfg, err := openDirWithOptions("open", dir, opts)
	if err != nil {
		return nil, err
	}
	return newStore[T](b, cfg)
}

// openDirWithOptions checks opts and opens dir as openDir does; its
// errors are *Error of op on dir.
func openDirWithOptions(op, dir string, opts []Option) (Backend, config, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, cfg, opError(op, dir, err)
	}
	b, err := openDir(dir, cfg)
	if err != nil {
		return nil, cfg, opError(op, dir, err)
	}
	return b, cfg, nil
}

// openDir opens dir with dirstore.Open, passing on the store's ReadOnly
// and NoSync: the one constructor of the directory backend that Open,
// OpenDir and OpenSessions share. Its error is the cause that
// dirstore.Open's names dir for (see dirOpenCause).
func openDir(dir string, cfg config) (Backend, error) {
	var opts []dirstore.Option
	if cfg.readOnly {
		opts = append(opts, dirstore.ReadOnly())
	}
	if cfg.noSync {
		opts = append(opts, dirstore.NoSync())
	}
	b, err := dirstore.Open(dir, opts...)
	if err != nil {
		return nil, dirOpenCause(err, dir)
	}
	return b, nil
}

// dirOpenCause returns the cause of err, an error of dirstore.Open for dir
// (an *fs.PathError of "open" on dir), for an *Error of the store's, which
// names the operation and dir itself.
func dirOpenCause(err error, dir string) error {
	if pe, ok := err.(*fs.PathError); ok && pe.Op == "open" && pe.Path == dir {
		return pe.Err
	}
	return err
}

// OpenBackend opens the store kept in b, a Backend such as the S3 one of
// the module github.com/gocheckpoint/checkpoint/s3store, with opts as for
// Open. The store owns b from then on: Close closes it, and so does a
// failed OpenBackend.
//
// Unless ReadOnly is given, OpenBackend takes b's writer lock (Backend.Lock)
// and fails with ErrLocked if another writer holds it (at once, or after
// waiting for it as long as WaitLock says). Everything else
// behaves as with Open; what a backend promises beyond the contract of
// Backend (the cost of a save, the consistency of a listing) is its own
// documentation's.
func OpenBackend[T any](b Backend, opts ...Option) (*Store[T], error) {
	return openBackend[T](context.Background(), b, opts)
}

// OpenBackendContext is OpenBackend with a context that bounds the wait
// for the writer lock: taking it (Backend.Lock, which on S3 may watch a
// lease that looks expired for up to one lease TTL before taking it over)
// and waiting for it (WaitLock). When ctx is done first the open fails
// with an error that wraps ctx's error (and ErrLocked, naming the holder,
// where the backend had found the lock held), and b is closed. Nothing
// else of the open is bounded by ctx.
func OpenBackendContext[T any](ctx context.Context, b Backend, opts ...Option) (*Store[T], error) {
	return openBackend[T](ctx, b, opts)
}

// openBackend is OpenBackend for an open that has a context (see
// newStoreContext).
func openBackend[T any](ctx context.Context, b Backend, opts []Option) (*Store[T], error) {
	if b == nil {
		return nil, opError("open", "", fmt.Errorf("%w: nil Backend", ErrInvalid))
	}
	fail := func(err error) (*Store[T], error) {
		err = opError("open", b.Locate(""), err)
		if cerr := b.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return nil, err
	}
	if err := checkStateType(reflect.TypeFor[T]()); err != nil {
		return fail(err)
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return fail(err)
	}
	return newStoreContext[T](ctx, b, cfg)
}

// newStore opens the store kept in b, which it owns from then on, with a
// validated cfg.
func newStore[T any](b Backend, cfg config) (*Store[T], error) {
	return newStoreContext[T](context.Background(), b, cfg)
}

// newStoreContext is newStore for an open that has a context: a wait for
// the writer lock (WaitLock) ends with it.
func newStoreContext[T any](ctx context.Context, b Backend, cfg config) (*Store[T], error) {
	b = cfg.seal(b)
	s := &Store[T]{
		b:         b,
		dir:       b.Locate(""),
		cfg:       cfg,
		codec:     newCodec(cfg.compression(), cfg.maxRead),
		headers:   make(map[string]cachedHeader),
		closeDone: make(chan struct{}),
		written:   make(map[string]string),
		local:     storage.TraitsOf(b).Local,
	}
	if cfg.readOnly {
		return s, nil
	}
	var err error
	if s.unlock, err = lock(ctx, b, cfg.waitLock); err != nil {
		err = opError("open", s.dir, err)
		if cerr := b.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return nil, err
	}
	// Only the writer may remove the temporary files a crashed save left
	// behind: a save in progress has one.
	if tc, ok := storage.As[storage.TempCleaner](b); ok {
		stale, err := tc.RemoveTemps(context.Background(), cfg.layout.ownsTemp)
		for _, name := range stale {
			cfg.logger.Warn("checkpoint: removed temporary file left by an interrupted save", "path", b.Locate(name))
		}
		if err != nil {
			s.Close()
			return nil, opError("open", s.dir, fmt.Errorf("remove stale temporary files: %w", err))
		}
	}
	if s.remote() {
		objs, err := b.List(context.Background())
		if err != nil {
			s.Close()
			return nil, opError("open", s.dir, err)
		}
		s.listed = make(map[string]string, len(objs))
		// Known from the listing when it names no error checkpoint: no
		// request at the first save. (With some, their save times are
		// not: the first pass reads them.)
		s.errs.known = true
		for _, o := range objs {
			s.listed[o.Name] = o.Version
			if fn, ok := cfg.layout.parse(o.Name); ok && fn.kind == KindError {
				s.errs.known = false
			}
		}
	}
	if cfg.async {
		s.async = newAsyncQueue(cfg.queue)
		go s.publishInBackground()
	}
	return s, nil
}

// Location returns where the store is, for messages and tools: its
// directory, as given to Open, or for a store opened with OpenBackend where
// its backend is (Backend.Locate("")), such as s3://bucket/prefix/, which is
// no path to join file names to.
func (s *Store[T]) Location() string { return s.dir }

// Close waits for operations in flight and, with Async, publishes every
// queued save and stops the background goroutine; then it releases the
// writer lock and the directory. Later calls on the store return ErrClosed.
// Close returns the failures of background saves not yet returned by Flush
// (wrapping ErrAsync), joined with its own. Every call to Close, the first
// or a later one, returns once the store is closed, with the result of the
// first.
//
// A writer's Close removes the error checkpoints that a clean checkpoint
// superseded (see SaveError) if it cannot rule out that one is left: a
// save killed between publishing its checkpoint and removing them leaves
// them to the next run, which may save nothing (its SaveFinal is
// ErrExists) and relies on its Close. Before any pass of its own, a
// writer on a local directory lists the names there once; otherwise Close
// goes by what the writer knows, and lists nothing unless it saved a clean
// checkpoint after an error checkpoint that is still there. A failure of
// that pass is logged and reported to Hooks.OnError, not returned: the
// store's checkpoints are all in place, and an error from Close means the
// writer lock or background saves failed.
//
// With Async, when Close returns the store's goroutine is gone, and every
// hook that it or Close ran has returned, but for a hook that calls Close
// itself (see Hooks).
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
	pruned, pruneErr := s.closingPass()
	s.mu.Lock()
	stale := len(s.headers) >= indexMinWrite && s.cacheGen != s.indexGen
	s.mu.Unlock()
	if stale {
		s.writeIndex(context.Background())
	}

	var errs []error
	if s.unlock != nil {
		errs = append(errs, s.unlock())
	}
	errs = append(errs, s.b.Close())
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
	s.prunedReport(pruned)
	s.failed(pruneErr)
	s.awaitWorker()
	return s.closeErr
}

// closingPass is Close's superseded-error pass (see Close), with no
// retention rule: Close applies no rule of its own accord. It runs after
// the last save, under the write lock, and returns what it removed and its
// failure.
func (s *Store[T]) closingPass() ([]Info, error) {
	if s.cfg.readOnly {
		return nil, nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if !s.errs.supersedable(s.errs.clean) {
		return nil, nil
	}
	return s.pass(context.Background(), "", time.Time{}, retention{})
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

// remove deletes checkpoint files, forgetting their cached headers.
func (s *Store[T]) remove(ctx context.Context, names ...string) error {
	_, err := s.removeReporting(ctx, names)
	return err
}

// removeReporting deletes checkpoint files, forgetting their cached
// headers, and says which of them are gone (see Backend.Remove).
func (s *Store[T]) removeReporting(ctx context.Context, names []string) ([]bool, error) {
	gone, err := s.b.Remove(ctx, names...)
	s.forget(names...)
	s.unlisted(names, gone)
	return gone, err
}

// remote reports whether the store's backend is not Local: a writer there
// trusts what it listed at Open and what it wrote and removed since
// (listed), and its header cache, instead of asking before each save and
// each pruning, as storage.Traits.Local says it may.
func (s *Store[T]) remote() bool { return !s.local }

// exists reports whether the object name exists. The caller holds the
// write lock.
func (s *Store[T]) exists(ctx context.Context, name string) bool {
	if s.listed != nil {
		_, ok := s.listed[name]
		return ok
	}
	_, err := s.b.Stat(ctx, name)
	return err == nil
}

// unlisted records removals by this store (gone[i] says whether names[i]
// is gone) in listed, and in written: the next replacement of a name this
// store removed expects no object there. The caller holds the write lock.
func (s *Store[T]) unlisted(names []string, gone []bool) {
	for i, n := range names {
		if i < len(gone) && gone[i] {
			if s.listed != nil {
				delete(s.listed, n)
			}
			if _, ok := s.written[n]; ok {
				s.written[n] = storage.NoObject
			}
		}
	}
}

func (s *Store[T]) path(name string) string {
	return s.b.Locate(name)
}

// info builds the Info of a checkpoint. Meta, Metrics and Error are copied: the
// caller owns what it gets, and the header cache stays as read.
func (s *Store[T]) info(name string, fn fileName, size int64, h header) Info {
	loc := s.path(name)
	info := Info{
		Step:        h.Step,
		Kind:        h.Kind,
		Time:        h.Time,
		Location:    loc,
		Path:        loc,
		Size:        size,
		Compression: fn.comp.String(),
		Format:      h.Format,
		Schema:      h.Schema,
		Meta:        maps.Clone(h.Meta),
		Metrics:     maps.Clone(h.Metrics),
		Payload:     payloadOf(h.Format),
	}
	if info.Payload == PayloadBytes {
		info.PayloadSize = -1 // see Info.PayloadSize
	}
	if h.Error != nil {
		rec := *h.Error
		rec.Types = slices.Clone(rec.Types)
		info.Error = &rec
	}
	return info
}

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

// cache caches the header of the object o, which this store just wrote, or
// loaded and verified.
func (s *Store[T]) cache(o Object, h header) {
	s.mu.Lock()
	s.cacheGen++
	s.headers[o.Name] = cachedHeader{obj: o, h: h, verified: true, gen: s.cacheGen}
	s.mu.Unlock()
}

// Hooks are functions the store calls after its operations, so that a host
// can emit events ("checkpoint created", "checkpoint restored") or metrics.
// Any field may be nil. Hooks run on the goroutine that called the store,
// after the operation is complete and outside the store's locks, so a hook
// may call the store (even Close) without deadlock; a slow hook slows that
// caller. The hooks of a save queued by an Async store run once it is
// published, on the goroutine that published it: the store's own, or a
// caller that was waiting on the queue (a Save finding it full, Flush,
// Close, another write); they may run concurrently with each other.
//
// A hook runs before the call that runs it returns. When Close returns, the
// store's goroutine has finished its hooks and Close has run those of the
// saves it published, so a hook may write what the caller of Close reads
// afterwards; the exception is a hook that calls Close itself, which goes on
// after that Close returns. The hooks of calls still running on other
// goroutines belong to those calls.
type Hooks struct {
	// OnSave is called after a checkpoint is durably saved. info.Size is its
	// size in bytes on disk.
	OnSave func(info Info)
	// OnLoad is called after Load, Latest or LatestClean returns a
	// checkpoint, with its age: the time since it was saved.
	OnLoad func(info Info, age time.Duration)
	// OnPrune is called with the checkpoints a retention pass removed (a
	// rule's, or a superseded error checkpoint, after a save, on Prune or
	// at a writer's Close).
	OnPrune func(removed []Info)
	// OnError is called with every error the store returns, except
	// ErrNotFound results and context cancellations, with every
	// checkpoint that Latest skipped because it did not load, and with the
	// failures of retention passes that a save or Close does not return.
	// The error is an *Error naming the operation, the step and the file.
	OnError func(err error)
}

// failed reports err to the logger and OnError and returns it.
func (s *Store[T]) failed(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrNotFound) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// A normal outcome (a fresh start) or the caller's own decision.
		s.cfg.logger.Debug("checkpoint: operation ended", "error", err)
		return err
	}
	s.cfg.logger.Warn("checkpoint: operation failed", "error", err)
	if s.cfg.hooks.OnError != nil {
		s.cfg.hooks.OnError(err)
	}
	return err
}

func (s *Store[T]) saved(info Info) {
	s.cfg.logger.Debug("checkpoint created", "step", info.Step, "kind", info.Kind, "path", info.Location, "size", info.Size)
	if s.cfg.hooks.OnSave != nil {
		s.cfg.hooks.OnSave(info)
	}
}

func (s *Store[T]) loaded(info Info) {
	s.mu.Lock()
	s.resumed = info.Name()
	s.mu.Unlock()
	age := s.cfg.now().Sub(info.Time)
	s.cfg.logger.Info("checkpoint restored", "step", info.Step, "kind", info.Kind, "path", info.Location, "age", age)
	if s.cfg.hooks.OnLoad != nil {
		s.cfg.hooks.OnLoad(info, age)
	}
}

func (s *Store[T]) prunedReport(removed []Info) {
	if len(removed) == 0 {
		return
	}
	for _, info := range removed {
		s.cfg.logger.Debug("checkpoint pruned", "step", info.Step, "kind", info.Kind, "path", info.Location)
	}
	if s.cfg.hooks.OnPrune != nil {
		s.cfg.hooks.OnPrune(removed)
	}
}
