package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"reflect"
	"strconv"
	"time"

	"github.com/gocheckpoint/checkpoint/internal/format"
	"github.com/gocheckpoint/checkpoint/storage"
)

// Save writes the checkpoint of step: state encoded with encoding/json inside
// the envelope, written atomically and durably. When Save returns nil the
// checkpoint is on disk and survives a crash or a power cut (with NoSync, a
// crash of the program only; with Async, see below).
//
// Save never replaces a checkpoint: if step already has one (plain or
// compressed) it returns an error wrapping ErrExists and the existing file is
// left byte-for-byte unchanged. (Once it has pruned, a writer looks for
// step in another compression only if a read of the whole directory found
// checkpoints of that compression: see the README. A file there that is
// provably damaged, or holds another step's checkpoint, or a symbolic link,
// is first moved aside to name.corrupt: see the README. A directory or
// named pipe there is an ErrCorrupt error that says so.) A negative step,
// an empty meta key, a bad metric (see WithMetric), a state that cannot be
// encoded (a channel, a NaN), a state that encodes as null in a store of a
// type that cannot be nil (a struct whose MarshalJSON returns null), or a
// checkpoint larger than the read limit (WithMaxReadSize: the state and
// its envelope, before compression, as a load counts them), which no load
// could read back, is ErrInvalid, and no file is written. (A large state
// of a type whose encoding runs none of the host's code, no MarshalJSON
// or MarshalText, no interface, is encoded into the file as it is written;
// such a save finds a NaN or the read limit while it writes, and then
// removes its temporary file: see the README.) If a retention
// rule is configured (KeepLast), old checkpoints are pruned after the new
// one is durable; a pruning failure is logged and reported to
// Hooks.OnError, not returned.
//
// A nil state (a nil slice, map or pointer, or a nil interface value in a
// store of an interface type such as any) is saved as null and loads back
// as nil. A checkpoint whose state is null loads only into a type that
// can be nil: into any other (a struct, a number) it is ErrCorrupt, as a
// state of another type is, never a zero value, unless it was saved at
// an older schema, when the migrations get it (see WithSchema).
//
// With Async, Save returns once state is encoded and queued, and the
// checkpoint is published in the background: see Async. The Info it returns
// describes the checkpoint to be written (its Size is 0); Hooks.OnSave gets
// the Info of the published file. If background saves failed since a Save
// last returned their failures, Save still queues state, and returns its
// Info together with an error wrapping ErrAsync that names the steps that
// failed: such an error is never this save's own. Any other error means
// state was not queued.
func (s *Store[T]) Save(ctx context.Context, step int64, state T, opts ...SaveOption) (Info, error) {
	return s.save(ctx, "save", step, KindStep, state, saveOptions(opts), nil)
}

// saveJob is one checkpoint to publish, its state already encoded.
type saveJob struct {
	ctx     context.Context // for pruning after the save
	op      string
	fn      fileName
	meta    map[string]string
	metrics map[string]float64
	rec     *ErrorRecord
	state   *bytes.Buffer // from s.codec; returned to it once published
	// value is the state itself where the write encodes it (see
	// prepare); state is then nil.
	value any
	// payload writes a byte payload (SaveFrom) instead of state. It is
	// called at most once.
	payload func(io.Writer) error
	time    time.Time // the save time; zero until queued (Async) or written
}

// save writes a checkpoint of kind (the rolling file for KindRolling) and
// reports it to the hooks once the store's locks are released. With Async,
// step and rolling checkpoints are queued instead.
func (s *Store[T]) save(ctx context.Context, op string, step int64, kind Kind, state T, sc saveConfig, rec *ErrorRecord) (Info, error) {
	queued := s.async != nil && (kind == KindStep || kind == KindRolling)
	j, err := s.prepare(ctx, op, step, kind, state, sc, rec, queued)
	if err != nil {
		return Info{}, s.failed(err)
	}
	if queued {
		return s.enqueue(ctx, j)
	}
	r := s.saveNow(ctx, j)
	s.report(r)
	return r.info, r.err
}

// prepare checks a save's arguments and encodes its state, before any lock
// is taken: the caller's MarshalJSON may be slow, or may even use the store.
// A large state of a type whose encoding runs none of the host's code is
// not encoded here, unless the save is queued: the write encodes it into
// the file (see format.Codec.WriteStateEnvelope), and no buffer holds it.
func (s *Store[T]) prepare(ctx context.Context, op string, step int64, kind Kind, state T, sc saveConfig, rec *ErrorRecord, queued bool) (*saveJob, error) {
	j, err := s.prepareJob(ctx, op, step, kind, sc, rec)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*saveJob, error) {
		return nil, stepError(op, step, s.path(s.cfg.layout.format(j.fn)), err)
	}
	if !queued && s.codec.Streamed(reflect.TypeFor[T]()) {
		// Such a type encodes as null only where it is nil and so
		// loads back, and the read limit is checked as it is written.
		j.value = state
		return j, nil
	}
	if j.state, err = s.codec.EncodeState(state); err != nil {
		return fail(err)
	}
	// null loads back only into a type that can be nil (a nil slice, map,
	// pointer or interface saves as null): in a store of another type it
	// could only be ErrCorrupt later.
	if t := reflect.TypeFor[T](); isNull(j.state.Bytes()) && !nilable(t) {
		s.codec.PutBuffer(j.state)
		return fail(fmt.Errorf("%w: the state encodes as null, which a %v cannot load", ErrInvalid, t))
	}
	// A checkpoint no load could read is refused before anything is
	// written (or queued): saved, it would only be ErrCorrupt later.
	h := header{Format: formatVersion, Schema: s.cfg.schema.Version, Step: step, Kind: kind, Meta: j.meta, Metrics: j.metrics, Error: j.rec}
	if err := s.codec.CheckFits(h, j.state.Len()); err != nil {
		s.codec.PutBuffer(j.state)
		return fail(err)
	}
	return j, nil
}

// prepareJob checks the arguments of a save, whatever its payload.
func (s *Store[T]) prepareJob(ctx context.Context, op string, step int64, kind Kind, sc saveConfig, rec *ErrorRecord) (*saveJob, error) {
	meta := sc.meta
	j := &saveJob{ctx: ctx, op: op, fn: fileName{step: step, kind: kind, comp: s.codec.Compression()}, meta: meta, metrics: sc.metrics, rec: rec}
	if kind == KindError {
		j.fn.attempt = 1
	}
	if err := checkStep(step); err != nil {
		// No file can have a negative step's name: name the directory.
		return nil, stepError(op, step, s.dir, err)
	}
	fail := func(err error) (*saveJob, error) {
		return nil, stepError(op, step, s.path(s.cfg.layout.format(j.fn)), err)
	}
	if _, ok := meta[""]; ok {
		return fail(fmt.Errorf("%w: empty meta key", ErrInvalid))
	}
	if len(meta) > 0 {
		if b, _ := json.Marshal(meta); len(b) > maxMetaSize { // a map of strings always encodes
			return fail(fmt.Errorf("%w: meta takes %d bytes as JSON, more than %d", ErrInvalid, len(b), maxMetaSize))
		}
	}
	if err := checkMetrics(sc.metrics); err != nil {
		return fail(err)
	}
	if rec != nil {
		j.rec = boundedRecord(rec)
	}
	if err := ctx.Err(); err != nil {
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
	defer s.codec.PutBuffer(j.state)
	if err := s.beginWrite(ctx); err != nil {
		return saveReport{err: stepError(j.op, j.fn.step, s.path(s.cfg.layout.format(j.fn)), err)}
	}
	defer s.endWrite()
	return s.publishLocked(j)
}

// publishLocked writes j's checkpoint and, after a step checkpoint, applies
// the retention rules. The caller holds the write lock.
func (s *Store[T]) publishLocked(j *saveJob) saveReport {
	w := s.writeLocked(j, s.b.Create)
	if w.err != nil {
		return saveReport{err: w.err}
	}
	return s.finishLocked(j, w)
}

// written is what writeLocked published of a job: its name, its object and
// header, or why it failed.
type written struct {
	name  string
	o     Object
	h     header
	write func(io.Writer) error // the envelope's bytes
	err   error                 // the job's failure, an *Error naming its step and file

	payloadSize *int64 // a byte payload's size, which write sets; nil for a state
}

// writeLocked writes j's checkpoint: a rolling one with Replace, any other
// with create (Backend.Create, or a GroupCommitter's CreateUncommitted)
// under a free name. It changes nothing the store knows: finishLocked
// does, once the checkpoint is durable. The caller holds the write lock.
func (s *Store[T]) writeLocked(j *saveJob, create func(context.Context, string, func(io.Writer) error) (Object, error)) written {
	w := s.nameLocked(j)
	if w.err != nil {
		return w
	}
	return s.createLocked(j, w, create)
}

// nameLocked settles the name (a free one: see freeName), the save time and
// the header of j's checkpoint, and how to write it (w.write). The caller
// holds the write lock.
func (s *Store[T]) nameLocked(j *saveJob) written {
	fn := j.fn
	name := s.cfg.layout.format(fn) // for messages until the name is settled
	var err error
	if fn.kind != KindRolling {
		// A byte payload's stream can be written once: the names are
		// looked at, not trusted from a listing, so that an object put
		// there since (damaged, to be moved aside) is found before the
		// write rather than by a Create that could not be tried again.
		if name, err = s.freeNameFor(j.ctx, fn, j.payload == nil); err != nil {
			return written{name: name, err: stepError(j.op, fn.step, s.path(name), err)}
		}
	}
	if j.time.IsZero() {
		s.afterErrorsOf(j.ctx, fn)
		var behind time.Time
		j.time, behind = s.saveTime(fn.step, true) // a save refused above reads no clock
		s.clockBehind(j.time, behind)
	}
	h := header{Format: formatVersion, Schema: s.cfg.schema.Version, Step: fn.step, Kind: fn.kind, Time: j.time, Meta: j.meta, Metrics: j.metrics, Error: j.rec}
	w := written{name: name, h: h, write: func(w io.Writer) error { return s.codec.WriteEnvelope(w, h, j.state.Bytes()) }}
	if j.state == nil && j.payload == nil {
		w.write = func(w io.Writer) error { return s.codec.WriteStateEnvelope(w, h, j.value) }
	}
	if j.payload != nil {
		w.h.Format = format.PayloadVersion
		h := w.h
		size := new(int64)
		w.payloadSize = size
		called := false
		w.write = func(w io.Writer) error {
			// The host's write streams once (a raft snapshot, a pipe): a
			// backend that called this again would publish what a second
			// call wrote, most often nothing, under a valid checksum.
			if called {
				return fmt.Errorf("%w: the backend called the write function of a byte payload twice, and a stream cannot be replayed", ErrInvalid)
			}
			called = true
			var err error
			*size, err = s.codec.WritePayload(w, h, j.payload)
			return err
		}
	}
	return w
}

// createLocked writes the checkpoint nameLocked settled as w: a rolling
// one with Replace, any other with create, looking at the name again if
// create finds it taken (see create). The caller holds the write lock.
func (s *Store[T]) createLocked(j *saveJob, w written, create func(context.Context, string, func(io.Writer) error) (Object, error)) written {
	var err error
	if j.fn.kind == KindRolling {
		if err = s.checkRollingKeys(j.ctx, j.fn); err == nil {
			w.o, err = s.replace(j.ctx, w.name, w.write)
		}
	} else {
		w.name, w.o, err = s.create(j.ctx, j.fn, w.name, w.write, create, j.payload == nil)
	}
	if err != nil {
		w.err = stepError(j.op, j.fn.step, s.path(w.name), err)
	}
	return w
}

// finishLocked records j's checkpoint, which writeLocked wrote as w and
// which is now durable, and, after a step checkpoint, applies the
// retention rules. The caller holds the write lock.
func (s *Store[T]) finishLocked(j *saveJob, w written) saveReport {
	fn, name, o, h := j.fn, w.name, w.o, w.h
	ctx := j.ctx
	s.cache(o, h)
	if s.listed != nil {
		s.listed[name] = o.Version
	}
	s.errs.saved(fn.kind, h.Time)
	s.next.saw(fn.step)
	r := saveReport{info: s.info(name, fn, o.Size, h)}
	if w.payloadSize != nil {
		r.info.PayloadSize = *w.payloadSize
	}
	if fn.kind == KindRolling {
		// A rolling file of another compression is older: remove it, so
		// that the store keeps one.
		for _, c := range compressions {
			other := fn
			other.comp = c
			if c == fn.comp {
				continue
			}
			if o := s.cfg.layout.format(other); s.exists(ctx, o) {
				if err := s.remove(ctx, o); err != nil {
					r.pruneErr = stepError(j.op, fn.step, s.path(o), err)
					break
				}
			}
		}
		return r
	}
	r.pruned, r.pruneErr = s.pruneLocked(j.ctx, name, h.Time)
	return r
}

func checkStep(step int64) error {
	if step < 0 {
		return fmt.Errorf("%w: negative step %d: steps are 0 or more", ErrInvalid, step)
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
	now := s.cfg.now().UTC()
	// Reading the directory takes the store's lock, so the newest time of
	// the step is read first, and only when it will be needed; the choice
	// of the time and its record are one critical section (stamp), so that
	// no two saves (an Async one being queued and a synchronous one) get
	// one time.
	var newest *time.Time
	for {
		if byStep && newest == nil && s.clockFarBehind(now) {
			n := s.newestOfStep(step)
			newest = &n
		}
		if t, behind, ok := s.stamp(now, newest, byStep); ok {
			return t, behind
		}
		// A load moved the newest save time far ahead meanwhile: read
		// the step's newest time and try again.
	}
}

// stamp chooses and records the save time of a save at clock time now,
// under the store's lock (see saveTime). newest is the newest save time of
// the save's step, if read; stamp fails if it is needed and not read.
func (s *Store[T]) stamp(now time.Time, newest *time.Time, byStep bool) (t, behind time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	last := s.lastTime
	t = now
	if !t.After(last) {
		if last.Sub(t) <= maxClockLead {
			t = last.Add(time.Nanosecond)
		} else {
			if byStep && newest == nil {
				return t, behind, false
			}
			behind = last
			if newest != nil && !t.After(*newest) {
				t = newest.Add(time.Nanosecond)
			}
			// From here the clock is followed again.
		}
	}
	s.lastTime = t
	return t, behind, true
}

// clockFarBehind reports whether now is more than maxClockLead behind the
// newest save time.
func (s *Store[T]) clockFarBehind(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastTime.Sub(now) > maxClockLead
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
	// Rare (the clock is far behind): no caller's context reaches here.
	entries, err := s.stepEntries(context.Background(), step)
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

// afterErrorsOf makes the clock of a clean save of fn's step run after the
// save times of the step's error checkpoints, which the store has not read:
// a store stamps its saves 1 ns apart within one tick of a coarse clock
// (Windows ticks every 0.5 to 15.6 ms), so a store opened after the one
// that saved the error checkpoint, in the same tick, would stamp the redo
// before it, and Load would return the error checkpoint. It reads only
// while the store may hold error checkpoints (see errorWatch): the names
// of the step's attempts, one after the other, and the headers of those
// that exist.
func (s *Store[T]) afterErrorsOf(ctx context.Context, fn fileName) {
	if fn.kind == KindError || s.errs.known && s.errs.oldest.IsZero() {
		return
	}
	for attempt := 1; ; attempt++ {
		found := false
		for _, c := range compressions {
			e := fileName{step: fn.step, kind: KindError, attempt: attempt, comp: c}
			name := s.cfg.layout.format(e)
			if !s.exists(ctx, name) {
				continue
			}
			found = true
			if h, _, err := s.readHeaderFile(ctx, name, e); err == nil {
				s.observe(h.Time)
			}
		}
		if !found {
			return
		}
	}
}

// freeName returns the name for fn, or ErrExists if a checkpoint of that step
// and kind exists in any compression. An error checkpoint never fails:
// it takes the next attempt number (.error, .error-2, ...).
//
// A file in the way that is provably damaged (bad checksum, truncated, bad
// gzip or JSON, a header of another step or kind), or a symbolic link, is
// moved aside first: otherwise a host that resumed from the checkpoint
// before it, as Latest makes it do, could never save that step again.
// Anything else in the way that is not a regular file (a directory, a named
// pipe) is an error wrapping ErrCorrupt that says what it is.
//
// Once a prune's full scan has read the directory (scanned), a local store
// does not look at the names of fn in the other compressions unless that
// scan, or one since, found a checkpoint of that compression (comps): a
// save of a store that has only ever seen its own compression makes one
// stat, of its own name. The cost is the one pruneFromCache accepts: a file
// another program puts into the directory of a running writer is unknown
// to it; such a file of another compression does not block a save of its
// step (it is never replaced: both stay, and Load takes the one saved
// last). An error checkpoint looks at every name.
func (s *Store[T]) freeName(ctx context.Context, fn fileName) (string, error) {
	return s.freeNameFor(ctx, fn, true)
}

// freeNameFor is freeName; without trust, it looks at every name of fn's
// step and kind, whatever the writer listed or scanned.
func (s *Store[T]) freeNameFor(ctx context.Context, fn fileName, trust bool) (string, error) {
	var skip uint32 // bits of the compressions not looked at
	if trust && s.listed == nil && s.scanned && fn.kind != KindError {
		skip = ^s.comps.Load() &^ (1 << fn.comp)
	}
	for {
		name := s.cfg.layout.format(fn)
		exists := false
		for _, c := range compressions {
			alt := fn
			alt.comp = c
			n := s.cfg.layout.format(alt)
			if _, ok := s.listed[n]; trust && s.listed != nil && !ok || skip&(1<<c) != 0 { // see remote
				continue
			}
			o, err := s.b.Stat(ctx, n)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				continue
			case err != nil:
				return n, err
			case fn.kind == KindError:
				exists = true // the next attempt's name may be free
				continue
			}
			if err := s.quarantineIfDamaged(ctx, n, alt, o); err != nil {
				return n, err
			}
		}
		if !exists {
			return name, nil
		}
		fn.attempt++
	}
}

// maxTakenRetries bounds how often create looks again at a name that
// Create found taken: each round is caused by an object put there since
// the look before, which only another program does.
const maxTakenRetries = 3

// create publishes the checkpoint fn under name, which freeName chose. If
// Create finds the name taken after all, the object there is looked at as
// freeName looks at one (moved aside if provably damaged; for an error
// checkpoint, the next attempt's name is taken) and the Create is tried
// again. freeName can miss an object: a writer on a remote backend trusts
// what it listed at Open (see remote), and anything put under the store
// since (another program's PUT, a paused writer's late one) is unknown
// to it until a Create runs into it. Without this a damaged object there
// would block its step forever, where the local directory, which freeName
// stats, moves it aside. It returns the name published. create is
// Backend.Create, or a GroupCommitter's CreateUncommitted. Without again,
// write can run only once (a byte payload's stream): the name found taken
// is the error.
func (s *Store[T]) create(ctx context.Context, fn fileName, name string, write func(io.Writer) error, create func(context.Context, string, func(io.Writer) error) (Object, error), again bool) (string, Object, error) {
	for retried := 0; ; retried++ {
		o, err := create(ctx, name, write)
		if err == nil || !errors.Is(err, ErrExists) || retried == maxTakenRetries || !again {
			return name, o, err
		}
		if _, ok := s.listed[name]; s.listed != nil && !ok {
			s.listed[name] = "" // of unknown Version: freeName stats it
		}
		if name, err = s.freeName(ctx, fn); err != nil {
			return name, Object{}, err
		}
	}
}

// quarantineSuffix ends the name of a damaged checkpoint moved aside. Such
// files are never listed or loaded; they are kept for inspection.
const (
	quarantineSuffix = ".corrupt"
	maxQuarantined   = 100 // per checkpoint name: beyond this, Save fails
)

// quarantineIfDamaged renames the checkpoint file name, whose name says fn
// and whose Stat is o, to name.corrupt (or name.corrupt-2, ...) if it is
// a symbolic link (the link is moved, never its target) or its bytes prove
// it damaged (see isDamage), and returns nil. It returns ErrExists if the
// file is intact or cannot be checked here (too large for the read limit, a
// newer format, an I/O or permission error: it may be good), and an
// ErrCorrupt error if it is not a regular file.
func (s *Store[T]) quarantineIfDamaged(ctx context.Context, name string, fn fileName, o Object) error {
	var damage error
	switch mode := o.Mode; {
	case mode&fs.ModeSymlink != 0:
		damage = errors.New("a symbolic link where a checkpoint file belongs")
	case !mode.IsRegular():
		return fmt.Errorf("%w: %w (move it away to save this step)", ErrCorrupt, storage.NotRegular(name, mode))
	default:
		f, o, err := s.openStream(ctx, name)
		if errors.Is(err, storage.ErrNotRegular) { // replaced since the Stat
			return fmt.Errorf("%w: %w (move it away to save this step)", ErrCorrupt, err)
		}
		if err == nil {
			err = s.codec.Read(f, o.Size, func(h header, _ []byte) error { return fn.agrees(h) })
			f.Close()
		}
		switch {
		case err == nil:
			return ErrExists
		case !isDamage(err):
			return fmt.Errorf("%w (not checked for damage: %w)", ErrExists, err)
		}
		damage = err
	}
	for i := 1; i <= maxQuarantined; i++ {
		q := name + quarantineSuffix
		if i > 1 {
			q += "-" + strconv.Itoa(i)
		}
		if _, err := s.b.Stat(ctx, q); err == nil {
			continue
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := s.b.Rename(ctx, name, q); err != nil {
			if errors.Is(err, ErrExists) {
				continue // taken since the Stat
			}
			return fmt.Errorf("quarantine damaged checkpoint: %w", err)
		}
		s.unlisted([]string{name}, []bool{true})
		s.forget(name)
		s.cfg.logger.Warn("checkpoint: moved a damaged checkpoint aside", "path", s.path(name), "to", s.path(q), "damage", damage)
		return nil
	}
	return fmt.Errorf("%w: damaged, and %d damaged copies of it are already kept aside: remove some (%s*)", ErrExists, maxQuarantined, name+quarantineSuffix)
}

// checkRollingKeys returns an error wrapping ErrNoKey or ErrPlaintext if a
// rolling file (of any compression) is one this store cannot read for want
// of a key (encrypted to a key not given, or plaintext to an encrypting
// store): it may hold a newer step than the store knows, and a rolling save
// would replace or remove it unread. The check is made once per store: the
// writer lock keeps any other writer from making such a file since. The
// caller holds the write lock.
func (s *Store[T]) checkRollingKeys(ctx context.Context, fn fileName) error {
	if s.rollingKeyed {
		return nil
	}
	for _, c := range compressions {
		other := fn
		other.comp = c
		name := s.cfg.layout.format(other)
		if err := s.keyedOut(ctx, name); err != nil {
			return fmt.Errorf("the rolling file %s, which a rolling save would replace unread: %w", s.path(name), err)
		}
	}
	s.rollingKeyed = true
	return nil
}

// keyedOut returns the error wrapping ErrNoKey or ErrPlaintext that reading
// name gives if this store cannot read it for want of a key, and nil
// otherwise (a missing, readable or damaged file included).
func (s *Store[T]) keyedOut(ctx context.Context, name string) error {
	rc, _, err := s.b.Open(ctx, name)
	if err != nil {
		if errors.Is(err, ErrNoKey) || errors.Is(err, ErrPlaintext) {
			return err
		}
		return nil
	}
	defer rc.Close()
	var first [format.SealedLen]byte
	n, _ := io.ReadFull(rc, first[:])
	return format.Sealed(first[:n]) // an encrypted file to a store without Encrypt
}
