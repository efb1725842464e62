package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
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
	prefix string      // dir as path joins it with a file name
	root   *os.Root    // every file operation goes through it: no name escapes dir
	lock   *writerLock // nil for ReadOnly
	cfg    config
	codec  *codec
	async  *asyncQueue // nil unless Async

	wmu sync.Mutex // serialises writes: save, delete, prune, side files
	// scanned (guarded by wmu) records that a prune has read the whole
	// directory into the header cache: later prunes after a save judge
	// from the cache (see pruneFromCache).
	scanned bool

	mu        sync.Mutex // guards the fields below
	closed    bool
	closeDone chan struct{} // closed when Close has finished
	closeErr  error
	ops       sync.WaitGroup // operations in flight; Close waits for them
	headers   map[string]cachedHeader
	cacheGen  uint64    // counts what was put in headers: each cachedHeader has its number
	lastTime  time.Time // the latest save time written or read: save times only grow
}

// Open opens the store in dir, creating the directory (and its parents,
// durably) if it does not exist.
//
// Unless ReadOnly is given, Open takes the directory's writer lock (an
// exclusive flock on the file .checkpoint.lock in dir and, where the file
// system allows, on dir itself, released by Close or by the process's
// death) and fails with ErrLocked if another writer holds it, in this
// process or another. Removing or replacing .checkpoint.lock under a writer
// does not let a second one in. It then removes the temporary files a crashed save
// left behind. It never touches other files.
//
// With ReadOnly, a missing directory is ErrNotFound. An empty dir name ("")
// is ErrInvalid, and so is a T that encoding/json would save as {} whatever its
// value (a struct with no exported field and no MarshalJSON or MarshalText
// method): such a store would restore zero values without a word.
func Open[T any](dir string, opts ...Option) (*Store[T], error) {
	if err := checkStateType(reflect.TypeFor[T]()); err != nil {
		return nil, opError("open", dir, err)
	}
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
	if dir == "" {
		return cfg, nil, fmt.Errorf("%w: empty directory name (use \".\" for the current directory)", ErrInvalid)
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
		if errors.Is(err, ErrLocked) {
			err = lockedError(root, lockName, err)
		}
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

// lockedError adds to err, an ErrLocked for the lock file name in root, the
// process that holds the lock (where the system says) and what a reader
// should do instead.
func lockedError(root *os.Root, name string, err error) error {
	holder := ""
	switch pid := lockHolder(root, name); {
	case pid == os.Getpid():
		holder = " (by this process: close the other Store first)"
	case pid > 0:
		holder = fmt.Sprintf(" (by process %d)", pid)
	}
	return fmt.Errorf("%w%s; to read the store beside its writer, open it with ReadOnly()", err, holder)
}

// Dir returns the store's directory, as given to Open.
func (s *Store[T]) Dir() string { return s.dir }

// Close waits for operations in flight and, with Async, publishes every
// queued save and stops the background goroutine; then it releases the
// writer lock and the directory. Later calls on the store return ErrClosed.
// Close returns the failures of background saves not yet returned by Flush
// (wrapping ErrAsync), joined with its own. Every call to Close, the first
// or a later one, returns once the store is closed, with the result of the
// first.
//
// With Async, when Close returns the store's goroutine is gone and every
// hook it ran, and every hook of the saves Close published, has returned:
// a hook may write what the caller reads after Close. A hook may call Close
// itself; that call cannot wait for the hook it is made from, which goes on
// after Close returns.
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
		errs = append(errs, s.lock.release())
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
	s.awaitWorker()
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
		Compression: fn.comp.String(),
		Format:      h.Format,
		Schema:      h.Schema,
		Meta:        maps.Clone(h.Meta),
	}
	if h.Error != nil {
		rec := *h.Error
		rec.Types = slices.Clone(rec.Types)
		info.Error = &rec
	}
	return info
}
