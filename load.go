package checkpoint

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/gocheckpoint/checkpoint/storage"
)

// Load returns the state and Info of the checkpoint of step. If the step has
// more than one checkpoint (say a step and an error checkpoint), Load returns
// the one saved last; LoadExact reaches the others. A step with no checkpoint
// is ErrNotFound; a checkpoint that fails verification is ErrCorrupt, and no
// state is returned. A state saved at an older schema is migrated (see
// WithSchema); one of a newer schema is ErrNewerSchema. No byte of a file
// that fails verification reaches T's UnmarshalJSON or UnmarshalText
// methods or a migration; a panic in them is recovered and fails the load
// as a decode failure does (ErrCorrupt, or ErrMigration after a
// migration), the error wrapping the panic's value. A byte payload
// (SaveFrom) is read to its end and verified, and is then an error
// wrapping ErrPayloadMismatch: OpenPayload reads it.
func (s *Store[T]) Load(ctx context.Context, step int64) (T, Info, error) {
	return s.load(ctx, step, func() (T, Info, error) {
		var zero T
		entries, err := s.stepEntries(ctx, step)
		if err != nil {
			return zero, Info{}, stepError("load", step, s.dir, err)
		}
		if len(entries) == 0 {
			return zero, Info{}, s.missing(ctx, step)
		}
		sortEntries(entries)
		return s.loadEntry(ctx, "load", entries[len(entries)-1], true)
	})
}

// missing returns the error of a Load of step that found no checkpoint
// file: ErrNotFound (a fresh start), unless something that is not a
// regular file (a directory, a named pipe, a symbolic link) has a name of
// that step. That is no fresh start: the error wraps ErrCorrupt and says
// what is there. Nor is a rolling file that no key given opens (ErrNoKey),
// that an encrypting store finds in plaintext (ErrPlaintext), or that the
// storage did not give (ErrUnavailable): it may hold step, so the error is
// its own.
func (s *Store[T]) missing(ctx context.Context, step int64) error {
	named, _, err := s.names(ctx, func(fn fileName) bool { return fn.kind != KindRolling && fn.step == step })
	if err != nil {
		return stepError("load", step, s.dir, err)
	}
	for _, n := range named {
		if o, err := s.b.Stat(ctx, n.name); err == nil && !o.Mode.IsRegular() {
			return stepError("load", step, s.path(n.name), fmt.Errorf("%w: %w", ErrCorrupt, storage.NotRegular(n.name, o.Mode)))
		}
	}
	rolling, err := s.scan(ctx, func(fn fileName) bool { return fn.kind == KindRolling })
	if err != nil {
		return stepError("load", step, s.dir, err)
	}
	for _, e := range s.fill(ctx, rolling) {
		if errors.Is(e.hErr, ErrNoKey) || errors.Is(e.hErr, ErrPlaintext) || errors.Is(e.hErr, ErrUnavailable) {
			return stepError("load", step, s.path(e.name), fmt.Errorf("the rolling file may hold the step: %w", e.hErr))
		}
	}
	return stepError("load", step, s.dir, ErrNotFound)
}

// LoadExact loads exactly the checkpoint that info describes, as returned by
// List, Save or Latest: use it to reach a checkpoint that Load does not
// return because its step has a newer one (a step checkpoint beside a final
// one, an earlier error attempt). If the file no longer holds that
// checkpoint (it was deleted, or the rolling file has moved on), the result
// is ErrNotFound. info's file must be a checkpoint name of the store's layout
// (else ErrInvalid).
func (s *Store[T]) LoadExact(ctx context.Context, info Info) (T, Info, error) {
	return s.load(ctx, info.Step, func() (T, Info, error) {
		var zero T
		name := info.Name()
		fn, ok := s.cfg.layout.parse(name)
		if !ok {
			return zero, Info{}, stepError("load", info.Step, info.Location, fmt.Errorf("%w: %q is not a checkpoint name of this store", ErrInvalid, name))
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
	// Done runs even if do panics (a host's code under a load recovers its
	// own panics, but a missed Done would make Close wait forever); the
	// hooks below run once the operation no longer counts, so that one may
	// call Close.
	v, info, err := func() (T, Info, error) {
		defer s.ops.Done()
		return do()
	}()
	if err != nil {
		return zero, Info{}, s.failed(err)
	}
	s.loaded(info)
	return v, info, nil
}

// Latest returns the newest checkpoint that loads: the highest step, and
// within a step the checkpoint saved last. The rolling file (WithRolling)
// counts like any other. So it never resumes from an error checkpoint that a
// clean checkpoint of the same step saved after it, or of a later step,
// supersedes (see SaveError), unless that clean checkpoint does not load; it
// resumes from an error checkpoint only when the failure is the newest thing
// that happened, and the loop is to redo that step. Checkpoints that fail to
// load are skipped; each skipped one is logged at Warn and reported to
// Hooks.OnError, and if none loads, the error joins every failure (so
// errors.Is(err, ErrCorrupt) holds when damage was the cause; the text lists
// the first few). A checkpoint whose state T's own decoder panics on is
// skipped like one that does not decode (see Load). A checkpoint of a newer
// schema (ErrNewerSchema) or whose migration fails (ErrMigration) is not
// skipped: Latest stops there and returns that error (see WithSchema); so
// does one the storage did not give in full (ErrUnavailable: a network
// that failed, on object storage), and a byte payload that verifies
// (ErrPayloadMismatch: see LatestPayload), where a damaged one is skipped
// as damage. A store with no checkpoint is ErrNotFound: that, and only
// that, means a fresh start, and it is never the answer beside the store's
// own saves. A directory
// that holds checkpoints of another layout and none of the store's is
// ErrInvalid, naming the layout found (any of its files whose header reads
// shows it, not only its newest). Something at a checkpoint's name that is
// not a regular file (a directory, a named pipe, a symbolic link, which is
// never followed) is damage like a file that fails to load: if it is all
// there is, the error wraps ErrCorrupt and says what is there.
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
	v, info, skipped, err := func() (T, Info, []error, error) {
		defer s.ops.Done() // as in load
		return latestWalk(s, ctx, op, want, s.loadEntry, nil)
	}()
	for _, e := range skipped {
		s.failed(e)
	}
	if err != nil {
		return zero, Info{}, s.failed(err)
	}
	return v, info, nil
}

// latestRelists bounds how often a walk lists the store again after a
// checkpoint it listed vanished (see latestWalk). Each new listing holds
// a newer checkpoint, so only a writer that publishes and prunes faster
// than a reader can list and open (tens of thousands of saves a second,
// in a test) needs more than a few; past the bound, the walk answers from
// its last listing.
const latestRelists = 64

// latestWalk walks the checkpoints of s newest first and returns the first
// that load loads, with the failures it passed: Latest's walk, for a state
// (loadEntry) or a byte payload (LatestPayload). release, if not nil,
// releases a result the walk does not return.
//
// It first tries the checkpoints of the newest step alone, found without
// a list of every name (see newestNames): most calls end there. Where
// none of them loads (and the walk would go on to older steps), or one
// vanished, it walks the whole listing from the start: the answer and the
// failures are those of a walk over one listing.
//
// A checkpoint that vanishes between the listing and its read was removed
// by a writer (retention, Truncate, Delete): retention removes one only
// once a newer one is durable, which the listing missed. So a walk that
// saw one vanish lists the store again and walks anew, rather than answer
// with an older checkpoint or ErrNotFound (a fresh start) for a store that
// never lacked a checkpoint.
func latestWalk[T, R any](s *Store[T], ctx context.Context, op string, want func(fileName) bool, load func(context.Context, string, entry, bool) (R, Info, error), release func(R)) (R, Info, []error, error) {
	var zero R
	ns, dropped, objs, err := s.newestNames(ctx, want)
	if err != nil {
		return zero, Info{}, nil, opError(op, s.dir, err)
	}
	r, info, skipped, vanished, done, err := latestWalkNames(s, ctx, op, load, ns, dropped, true)
	if done && (!vanished || ctx.Err() != nil) {
		return r, info, skipped, err
	}
	if done && err == nil && release != nil {
		release(r)
	}
	if vanished {
		objs = nil // list again
	}
	for attempt := 1; ; attempt++ {
		if objs == nil {
			if objs, err = s.b.List(ctx); err != nil {
				return zero, Info{}, nil, opError(op, s.dir, err)
			}
		}
		ns, dropped := s.namesIn(ctx, objs, want)
		objs = nil
		r, info, skipped, vanished, _, err := latestWalkNames(s, ctx, op, load, ns, dropped, false)
		if !vanished || attempt == latestRelists || ctx.Err() != nil {
			return r, info, skipped, err
		}
		if err == nil && release != nil {
			release(r)
		}
	}
}

// latestWalkNames is one walk of latestWalk, over the names ns of one
// listing (and the rolling names dropped from it: see eachName); vanished
// says whether a checkpoint it listed was gone when it came to read it.
// With newest, it tries the newest step's checkpoints only: done says
// whether it came to an answer (a checkpoint that loads, or an error that
// ends the walk), where a walk of every name would go on to older steps.
func latestWalkNames[T, R any](s *Store[T], ctx context.Context, op string, load func(context.Context, string, entry, bool) (R, Info, error), ns, dropped []named, newest bool) (_ R, _ Info, _ []error, vanished, done bool, _ error) {
	var zero R
	// Order by step from the names alone, then read headers only for the
	// steps actually tried: most calls read one header and one file. The
	// newest step is found without sorting; the others are sorted only if
	// none of its checkpoints loads.
	// The walk dropped the rolling file's name if no regular file is
	// there (its step is in its header): what is there is damage of no
	// known step, reported whatever else loads, never skipped silently.
	for _, n := range ns {
		if n.unknown != nil {
			// Not damage, and its step may be the newest: resuming from
			// another would fork the history silently.
			return zero, Info{}, nil, false, true, opError(op, s.path(n.name), n.unknown)
		}
	}
	skipped := s.notRegularAmong(ctx, op, dropped, nil)
	tried := len(skipped)
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
			group = append(group, entry{name: n.name, fn: n.fn, obj: n.obj})
		}
		if len(group) == 1 && group[0].fn.kind != KindRolling && s.remote() {
			// One checkpoint of the newest step: its load reads the
			// header anyway, and on object storage a header read first
			// would be a request of its own.
			group[0].h = header{Step: group[0].fn.step, Kind: group[0].fn.kind}
		} else {
			group = s.fill(ctx, group)
			// fill drops what is not a regular file; at a checkpoint's
			// name it is damage (Save moves a symbolic link aside as
			// such, and refuses the others), never skipped silently.
			if len(group) < end-start {
				bad := s.notRegularAmong(ctx, op, ns[start:end], group)
				tried += len(bad)
				skipped = append(skipped, bad...)
				if len(group)+len(bad) < end-start {
					vanished = true // removed since the listing
				}
			}
		}
		end = start
		sortEntries(group)
		for i := len(group) - 1; i >= 0; i-- {
			tried++
			// Not exact: a rolling file that moved on to a newer step
			// since the scan is still the newest checkpoint.
			v, info, err := load(ctx, op, group[i], false)
			if err == nil {
				return v, info, skipped, vanished, true, nil
			}
			if ctxErr := ctx.Err(); ctxErr != nil {
				return zero, Info{}, skipped, vanished, true, opError(op, s.dir, ctxErr)
			}
			if errors.Is(err, ErrNotFound) {
				vanished = true // removed since the listing
				continue
			}
			if errors.Is(err, ErrNewerSchema) || errors.Is(err, ErrMigration) || errors.Is(err, ErrPayloadMismatch) || errors.Is(err, ErrNoKey) || errors.Is(err, ErrPlaintext) || errors.Is(err, ErrUnavailable) {
				// Not damage, and resuming from an older step would
				// fork the history silently (or, for a network that
				// failed, make Latest go back a step until it heals).
				return zero, Info{}, skipped, vanished, true, err
			}
			skipped = append(skipped, err)
		}
		if newest {
			return zero, Info{}, nil, vanished, false, nil
		}
		if !sorted {
			slices.SortFunc(ns[:end], func(a, b named) int {
				return cmp.Or(cmp.Compare(a.fn.step, b.fn.step), strings.Compare(a.name, b.name))
			})
			sorted = true
		}
	}
	if newest {
		return zero, Info{}, nil, vanished, false, nil // no name
	}
	if len(skipped) == 0 {
		if len(ns) == 0 {
			if err := s.foreignLayout(ctx); err != nil {
				return zero, Info{}, nil, vanished, true, opError(op, s.dir, err)
			}
		}
		return zero, Info{}, nil, vanished, true, opError(op, s.dir, ErrNotFound)
	}
	return zero, Info{}, nil, vanished, true, opError(op, s.dir, fmt.Errorf("none of the %d checkpoints loads: %w", tried, joinFew(skipped)))
}

// notRegularAmong returns an error wrapping ErrCorrupt, which says what is
// there, for each of ns that is not among filled (fill dropped it) and is
// there but not a regular file: a directory, a named pipe, a symbolic link
// (never followed).
func (s *Store[T]) notRegularAmong(ctx context.Context, op string, ns []named, filled []entry) []error {
	var errs []error
	for _, n := range ns {
		if slices.ContainsFunc(filled, func(e entry) bool { return e.name == n.name }) {
			continue
		}
		if o, err := s.b.Stat(ctx, n.name); err == nil && !o.Mode.IsRegular() {
			errs = append(errs, stepError(op, n.fn.step, s.path(n.name), fmt.Errorf("%w: %w", ErrCorrupt, storage.NotRegular(n.name, o.Mode))))
		}
	}
	return errs
}

// foreignLayout returns an ErrInvalid error when the directory holds no
// checkpoint of the store's layout but checkpoints of another: a store
// opened with the wrong WithLayout would otherwise report a fresh start
// beside its own saves. It returns nil if a file has the store's layout, or
// no other layout is confirmed by a header that reads (a side file named
// like a checkpoint, report_2024.json, is no checkpoint). Every file of a
// layout is evidence, newest name first, until one header reads: a damaged
// newest file (or rolling file) does not hide the others. It costs a
// directory read and a header read or more, on the way to ErrNotFound only.
func (s *Store[T]) foreignLayout(ctx context.Context) error {
	objs, err := s.b.List(ctx)
	if err != nil {
		return nil // the caller's ErrNotFound stands; the scan read it
	}
	for i, o := range objs {
		if _, ok := s.cfg.layout.parse(o.Name); ok {
			return nil // error checkpoints only, for LatestClean
		}
		// A listing that says no types (a local directory's): only
		// regular files are evidence.
		if o.Version == "" {
			if _, _, _, ok := layoutEvidence(s.b, o.Name); ok {
				if st, err := s.b.Stat(ctx, o.Name); err == nil {
					objs[i] = st
				}
			}
		}
	}
	for _, found := range detectLayouts(s.b, objs, true) {
		l := layout{prefix: found.Prefix, digits: found.Digits}
		slices.SortFunc(found.names, func(a, b string) int { return strings.Compare(b, a) })
		for _, name := range found.names {
			if err := ctx.Err(); err != nil {
				return err
			}
			fn, ok := l.parse(name)
			if !ok {
				continue
			}
			if _, _, err := s.readHeaderFile(ctx, name, fn); err != nil {
				continue
			}
			return fmt.Errorf("%w: no checkpoint of this store's layout %s/%d, but %d files of layout %s (%s): open the store with WithLayout(%q, %d)",
				ErrInvalid, s.cfg.layout.prefix, s.cfg.layout.digits, found.Files, found.Layout, name, found.Prefix, found.Digits)
		}
	}
	return nil
}

// List returns the checkpoints in the directory, ascending by step and,
// within a step, by save time. It reads file names and each file's header
// (once: headers are cached), never a state, and ignores temporary files and
// anything that is not a checkpoint of the store's layout. A checkpoint whose
// header cannot be read is listed with the step and kind its name gives, the
// file's modification time and Format 0, and logged at Warn (a damaged one
// once, while it stays the same file); loading it reports the damage.
func (s *Store[T]) List(ctx context.Context) ([]Info, error) {
	if err := s.begin(ctx); err != nil {
		return nil, s.failed(opError("list", s.dir, err))
	}
	entries, err := func() ([]entry, error) {
		defer s.ops.Done() // as in load
		return s.scanAll(ctx)
	}()
	if err != nil {
		return nil, s.failed(opError("list", s.dir, err))
	}
	return s.infos(entries), nil
}

// infos returns the Info of each entry, ordered as List orders them.
// A large directory's are built on every processor.
func (s *Store[T]) infos(entries []entry) []Info {
	infos := make([]Info, len(entries))
	order := sortedOrder(entries)
	parallel(len(order), func(k int) {
		e := &entries[order[k]]
		infos[k] = s.info(e.name, e.fn, e.size, e.h)
	})
	return infos
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
	open := func() (io.ReadCloser, Object, error) { return s.openObject(ctx, e.name) }
	f, o, err := open()
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	check := s.checkEntry(e, exact)
	// Where a streamed read cannot conclude, the file is read again: that
	// read's object is the one loaded.
	reopen := func() (io.ReadCloser, int64, error) {
		g, again, err := open()
		if err != nil {
			return nil, 0, err
		}
		o = again
		return g, again.Size, nil
	}
	h, err := s.codec.LoadState(f, o.Size, &s.cfg.schema, check, &v, reopen)
	if err != nil {
		return fail(err)
	}
	s.cache(o, h)
	s.observe(h.Time)
	return v, s.info(e.name, e.fn, o.Size, h), nil
}

// openObject opens the checkpoint file name for a load: a missing one is
// ErrNotFound, something there that is not a regular file ErrCorrupt.
func (s *Store[T]) openObject(ctx context.Context, name string) (io.ReadCloser, Object, error) {
	f, o, err := s.openStream(ctx, name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		err = fmt.Errorf("%w: %w", ErrNotFound, err)
	case errors.Is(err, storage.ErrNotRegular):
		err = fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return f, o, err
}

// checkEntry returns the check of the header of e's file that a load
// makes: it agrees with the name, and with exact, a rolling file still
// holds the step (and, if known, the save time) e says (otherwise
// ErrNotFound).
func (s *Store[T]) checkEntry(e entry, exact bool) func(header) error {
	return func(h header) error {
		if err := e.fn.agrees(h); err != nil {
			return err
		}
		known := e.hErr == nil && !e.h.Time.IsZero()
		if exact && (h.Step != e.h.Step || known && !h.Time.Equal(e.h.Time)) {
			return fmt.Errorf("%w: the file now holds the checkpoint of step %d saved %s", ErrNotFound, h.Step, h.Time.Format(time.RFC3339Nano))
		}
		return nil
	}
}

// openStream is b.Open of name whose stream's read errors are marked as
// what they are (see readErrors): the codec calls an error of its reader
// that is not an *fs.PathError damage, and a remote backend's read error
// (a connection reset in the middle of a GET) proves nothing of the file.
func (s *Store[T]) openStream(ctx context.Context, name string) (io.ReadCloser, Object, error) {
	f, o, err := s.b.Open(ctx, name)
	if err != nil {
		return nil, o, err
	}
	r := readErrors{f: f, loc: s.path(name)}
	if ra, ok := f.(io.ReaderAt); ok {
		return readErrorsAt{r, ra}, o, nil
	}
	return r, o, nil
}

// readErrors is a backend's stream whose read errors, but io.EOF and those
// that prove damage (an encrypted chunk that fails authentication), are
// *fs.PathError: an error of the storage, never proof of damage.
type readErrors struct {
	f   io.ReadCloser
	loc string
}

func (r readErrors) Read(p []byte) (int, error) {
	n, err := r.f.Read(p)
	return n, r.mark(err)
}

func (r readErrors) mark(err error) error {
	var pe *fs.PathError
	if err == nil || err == io.EOF || errors.As(err, &pe) || isDamage(err) {
		return err
	}
	return &fs.PathError{Op: "read", Path: r.loc, Err: err}
}

func (r readErrors) Close() error { return r.f.Close() }

// readErrorsAt is readErrors of a stream that reads at offsets too.
type readErrorsAt struct {
	readErrors
	ra io.ReaderAt
}

func (r readErrorsAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := r.ra.ReadAt(p, off)
	return n, r.mark(err)
}
