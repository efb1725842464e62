package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gocheckpoint/checkpoint/internal/names"
)

const (
	// sessionFile is a session's metadata file, in the session's child
	// store.
	sessionFile = "session.json"
	// maxSessionIDLen bounds a session ID, in bytes.
	maxSessionIDLen = 1024
	// sessionFormat is the version of session.json.
	sessionFormat = 1
	// maxSessionFileSize bounds how much of a session.json is read.
	maxSessionFileSize = 1 << 20
)

// Sessions is a root holding many sessions: one child store per session
// (a subdirectory, or a key prefix: see Backend.Sub), named by its ID (or
// a name mapped from it: see ValidSessionID), each
// a checkpoint store with a small metadata file, session.json. A
// campaign's sessions, a simulation's runs or an orchestrator's sprints
// live side by side under one root:
//
//	campaigns/
//	  001/session.json  001/turn_001.json  001/turn_002.json ...
//	  002/session.json  002/turn_001.json ...
//
// OpenSessions keeps the root in a local directory, OpenSessionsBackend on
// any Backend, such as a bucket that many workers share. Both run one
// protocol, so any number of processes may make sessions in one root at
// once, each opening it either way. No lock spans the root: every step
// that must have one winner is a Backend.Create. Of concurrent Creates of
// one ID exactly one succeeds, the others returning an error wrapping
// ErrExists; concurrent New and Fork calls get distinct IDs.
//
// A new session appears whole or not at all: its session.json is created
// last, after its checkpoints, and a session exists exactly when its
// session.json does. New, Create and Fork either return the session,
// visible, with a nil error, or return an error and leave no session
// behind, so that a caller may retry without making a second session; a
// crash (kill -9, or a power cut unless NoSync) at any step leaves no
// visible session either (what it left is out of sight, and RemoveStaging
// removes it).
// Each session's store has its own writer lock, so different processes
// can run different sessions of one root at the same time.
// Delete removes a session under that lock, and PruneIdle every session
// idle for longer than a duration: a session is listed whole until its
// deletion begins and never again after, whatever a crash interrupts.
//
// A child store that holds checkpoints but no session.json (one written
// by hand, or whose session.json was deleted) is listed as a damaged
// session, with Err set, never hidden; one that holds nothing but the
// protocol's own hidden objects (a claim, a temporary file) is a session
// being made, or one a crash interrupted, and is not listed.
//
// A Sessions is safe for concurrent use by multiple goroutines.
type Sessions struct {
	dir  string
	b    Backend
	cfg  config
	opts []Option
	// metaMu serializes this Sessions' SetMeta calls, which would
	// otherwise conflict with each other (see setMetaAttempts).
	metaMu sync.Mutex
	// clockMu guards newest, the latest activity time this Sessions has
	// read (see now), and stamped, the latest it has stamped (see floor).
	clockMu sync.Mutex
	newest  time.Time
	stamped time.Time
}

// Session describes one session of a root.
type Session struct {
	// ID is the session's ID exactly as given to Create, or the number
	// New or Fork gave it ("001"). It is "" for a damaged session stored
	// under a mapped name (see ValidSessionID) whose session.json is
	// missing, does not decode or records an ID stored elsewhere: Dir
	// says where it is.
	ID  string
	Dir string // the session's store directory (Backend.Locate of its child store)

	Created    time.Time         // when the session was created
	Updated    time.Time         // when its metadata was last written
	Parent     string            // the session it was forked from, if any
	ParentStep int64             // the step it was forked at, if Parent is set
	Meta       map[string]string // the caller's fields, such as progress

	Checkpoints int       // how many checkpoint files the session holds
	Size        int64     // the sum of their sizes in bytes, as Info.Size counts them
	LastStep    int64     // the step of the checkpoint saved last
	LastKind    Kind      // the kind of that checkpoint; "" if none
	LastSaved   time.Time // when that checkpoint was saved; zero if none
	// LastMetrics are the metrics of that checkpoint (WithMetric); nil if
	// it records none.
	LastMetrics map[string]float64

	// Err is set for a damaged session, one whose metadata or checkpoint
	// list cannot be read; the fields above are filled in as far as they
	// could be. It wraps ErrCorrupt when session.json is missing or does not
	// decode.
	Err error
}

// Active returns when the session was last active: the latest of its
// creation, its last metadata write and its last checkpoint.
func (s Session) Active() time.Time {
	t := s.Created
	for _, u := range []time.Time{s.Updated, s.LastSaved} {
		if u.After(t) {
			t = u
		}
	}
	return t
}

// sessionMeta is the content of session.json.
type sessionMeta struct {
	Format     int               `json:"format"`
	ID         string            `json:"id"`
	Created    time.Time         `json:"created"`
	Updated    time.Time         `json:"updated"`
	Parent     string            `json:"parent,omitempty"`
	ParentStep *int64            `json:"parent_step,omitempty"`
	Meta       map[string]string `json:"meta,omitempty"`
	// Maker is the token of the claim under which the session was made:
	// it makes every creation's session.json its own, so that a creation
	// whose Create failed with ErrExists tells its own retried Create
	// (object storage) from another creation's identical metadata (one
	// ID, one clock tick). Readers ignore it.
	Maker string `json:"maker,omitempty"`
}

// OpenSessions opens the root of sessions in dir, creating it (durably) if
// it does not exist: it is OpenSessionsBackend on dirstore.Open(dir), with
// the ReadOnly and NoSync among opts. opts apply to every session's store,
// as if given to Open: a layout, compression, retention rules, hooks. With
// ReadOnly, a missing dir is ErrNotFound, and creating, forking and
// SetMeta return ErrReadOnly. OpenSessions takes no lock.
//
// Roots written by earlier releases open as they are: their sessions are
// the same, and the hidden staging directories (.staging-...) and the lock
// file (.sessions.lock) their protocol left are removed by the next New,
// Create, Fork or RemoveStaging. Those releases made sessions under that
// lock file, which this protocol does not take: a root must not be written
// by this release and an earlier one at the same time.
func OpenSessions(dir string, opts ...Option) (*Sessions, error) {
	b, _, err := openDirWithOptions("open sessions", dir, opts)
	if err != nil {
		return nil, err
	}
	return OpenSessionsBackend(b, opts...)
}

// OpenSessionsBackend opens the root of sessions kept in b, such as a
// bucket and prefix of object storage shared by many workers (see
// Backend.Sub): each session is the child store of b named by its ID, with
// its metadata in the object session.json. opts apply to every session's
// store, as with OpenSessions. The Sessions owns b from then on: Close
// closes it, and so does a failed OpenSessionsBackend. Concurrent
// creations, the writer lock of each session and what a crash leaves are
// as Sessions says.
func OpenSessionsBackend(b Backend, opts ...Option) (*Sessions, error) {
	if b == nil {
		return nil, opError("open sessions", "", fmt.Errorf("%w: nil Backend", ErrInvalid))
	}
	cfg, err := newConfig(opts)
	if err != nil {
		err = opError("open sessions", b.Locate(""), err)
		if cerr := b.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return nil, err
	}
	b = cfg.seal(b)
	return &Sessions{dir: b.Locate(""), b: b, cfg: cfg, opts: slices.Clone(opts)}, nil
}

// Location returns where the root is: its directory, as given to
// OpenSessions, or for OpenSessionsBackend where its Backend is
// (Backend.Locate("")).
func (r *Sessions) Location() string { return r.dir }

// Close closes the root's Backend (for OpenSessions, releases the
// directory). Stores opened from it stay open.
func (r *Sessions) Close() error {
	if err := r.b.Close(); err != nil {
		return opError("close sessions", r.dir, err)
	}
	return nil
}

// ValidSessionID reports whether id can name a session: any non-empty
// valid UTF-8 string of at most 1024 bytes, such as "user:42/thread#7", a
// UUID, "Ünïcode", "..", "a/b" or "CON". The error wraps ErrInvalid.
//
// A session is stored under a name made from its ID, which List, Get and
// Session.ID never show: an ID of 1 to 64 bytes of [A-Za-z0-9._-], not
// starting with a dot (every ID earlier releases took), is its own name,
// so that roots written by them open unchanged; so is every number New
// and Fork give. Any other ID, and one of those that Windows cannot hold
// as a file name (a device name such as CON or nul.txt, or a name ending
// in a dot: such a session of an earlier release keeps its own name), is
// stored under a mapped name: the ID's ASCII letters and
// digits, lower-cased, then a hyphen and the SHA-256 of the ID in hex,
// such as "user_42_thread_7-<64 hex digits>", 66 to 97 bytes of
// [a-z0-9_-]. The session's session.json records the ID, and every read
// checks that it maps to the name it was read from: a directory copied
// there by hand is a damaged session, never another ID's. Mapped names
// differ from each other and from the names of IDs that are their own in
// more than case; two IDs that are their own names and differ only in
// case ("Run" and "run") are one directory on a case-insensitive file
// system (Windows, macOS by default), as they were in earlier releases:
// there they are one session, which Get of either returns, and Create of
// the second fails with ErrExists.
func ValidSessionID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty session ID", ErrInvalid)
	case len(id) > maxSessionIDLen:
		return fmt.Errorf("%w: session ID %.40q... is %d bytes long (at most %d)", ErrInvalid, id, len(id), maxSessionIDLen)
	case !utf8.ValidString(id):
		return fmt.Errorf("%w: session ID %q is not valid UTF-8", ErrInvalid, id)
	}
	return nil
}

// List returns every session of the root, the most recently active first
// (see Session.Active). A damaged session is listed with Err set and never
// hides the others. Listing reads each session's metadata and checkpoint
// headers, never a state.
func (r *Sessions) List(ctx context.Context) ([]Session, error) {
	ids, err := r.b.Children(ctx)
	if err != nil {
		return nil, opError("list sessions", r.dir, err)
	}
	var out []Session
	for _, name := range ids {
		if !names.IsSessionName(name) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, opError("list sessions", r.dir, err)
		}
		id := "" // a mapped name's ID is in its session.json
		if names.Legacy(name) {
			id = name
		}
		if s, ok := r.describe(ctx, id, name); ok {
			out = append(out, s)
		}
	}
	sortSessions(out)
	return out, nil
}

// sortSessions orders sessions as List returns them: the most recently
// active first, then by ID, the greater first.
func sortSessions(out []Session) {
	slices.SortFunc(out, func(a, b Session) int {
		if c := b.Active().Compare(a.Active()); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
}

// Get returns the session id. A missing session is ErrNotFound; a damaged
// one is returned with its Err, which Get also returns.
func (r *Sessions) Get(ctx context.Context, id string) (Session, error) {
	if err := r.check(ctx, id); err != nil {
		return Session{}, opError("get session", r.path(id), err)
	}
	s, ok := r.describe(ctx, id, r.lookup(ctx, id))
	if !ok {
		return Session{}, opError("get session", r.path(id), fmt.Errorf("%w: no session %q", ErrNotFound, id))
	}
	return s, s.Err
}

// New creates the next numbered session: one more than the highest all-digit
// session ID in the root, written with at least three digits ("001", "002",
// ...), however large that ID is; IDs that are not all digits, and the
// mapped names of sessions (see ValidSessionID), do not count. If the
// highest is 64 nines, no number is
// left and New returns an error wrapping ErrInvalid. meta is stored as the
// session's Meta.
func (r *Sessions) New(ctx context.Context, meta map[string]string) (Session, error) {
	return r.create(ctx, "new session", "", meta)
}

// Create creates the session id, such as a run's ID. An ID already taken is
// ErrExists (so is one whose child store holds objects that are not a
// session's: they are never adopted, and one under which the root holds
// anything but a child store, such as a file or a symbolic link: nothing
// is written through it); an invalid one is ErrInvalid.
func (r *Sessions) Create(ctx context.Context, id string, meta map[string]string) (Session, error) {
	if err := ValidSessionID(id); err != nil {
		return Session{}, opError("create session", r.path(id), err)
	}
	return r.create(ctx, "create session", id, meta)
}

// SetMeta replaces the caller's fields of session id (Session.Meta), such as
// progress counters, and sets its Updated time. session.json is replaced
// atomically and durably, and only if it is still what SetMeta read: if
// another process replaced it meanwhile, SetMeta reads it again and
// retries a few times, then returns an error wrapping ErrConflict. A
// session removed meanwhile is not brought back: that is ErrNotFound.
// SetMeta also removes the temporary files of session.json that an
// interrupted SetMeta left, once they are a minute old (a SetMeta under
// way, in any process, has a younger one). Metadata that would make
// session.json larger than 1 MiB, more than a reader takes, is refused
// with ErrInvalid (so is it by Create and Fork), and nothing changes.
func (r *Sessions) SetMeta(ctx context.Context, id string, meta map[string]string) error {
	fail := func(err error) error { return opError("set session meta", r.path(id), err) }
	if err := r.writable(ctx, id); err != nil {
		return fail(err)
	}
	r.metaMu.Lock()
	defer r.metaMu.Unlock()
	sub, err := r.sub(ctx, id)
	if err != nil {
		return fail(err)
	}
	defer sub.Close()
	if err := r.removeStaleSessionTemps(ctx, sub); err != nil {
		return fail(err)
	}
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		m, obj, err := readMetaIn(ctx, sub, id)
		if err != nil {
			return fail(err)
		}
		m.Meta = maps.Clone(meta)
		m.Updated = r.now(m.Created)
		write, err := encodeSessionMeta(m)
		if err != nil {
			return fail(err)
		}
		_, err = sub.Replace(ctx, sessionFile, obj.Version, write)
		if err == nil {
			return nil
		}
		if !errors.Is(err, ErrConflict) || attempt == setMetaAttempts {
			return fail(err)
		}
	}
}

// Fork creates the next numbered session holding the checkpoints of session
// from up to and including step, so that play can go on from step without
// touching from's later checkpoints. Checkpoints are linked where the
// Backend can (hard links in a directory: they are never modified, so
// sharing them is safe) and copied otherwise. The rolling file goes along,
// as a copy, if it holds a step up to step. The new session's Parent and
// ParentStep record where it came from; meta becomes its Meta.
//
// The checkpoint of step must exist and load, so that the new session's
// Latest is step: otherwise Fork returns an error wrapping ErrNotFound or
// ErrCorrupt and creates nothing. A writer of from may go on saving and
// pruning meanwhile: if it prunes or replaces what Fork takes, Fork fails
// (ErrNotFound) and creates nothing.
func (r *Sessions) Fork(ctx context.Context, from string, step int64, meta map[string]string) (Session, error) {
	fail := func(err error) (Session, error) {
		return Session{}, &Error{Op: "fork session", Step: step, HasStep: true, Path: r.path(from), Err: err}
	}
	if err := ValidSessionID(from); err != nil {
		return fail(err)
	}
	if err := checkStep(step); err != nil {
		return fail(err)
	}
	if err := r.writable(ctx, from); err != nil {
		return fail(err)
	}
	s, err := r.fork(ctx, from, step, meta)
	if err != nil {
		return fail(err)
	}
	return s, nil
}

// OpenSessionStore opens the store of session id with the options of the root
// followed by opts. A missing session is ErrNotFound; one whose session.json
// is missing or damaged is ErrCorrupt (its checkpoints can still be reached
// with Open on its directory, or OpenBackend on its child store). The store
// belongs to the caller, who closes it; the writer lock is the session's
// own, as with Open (WaitLock waits for it). A session that Delete removes
// while it opens is ErrNotFound: if a Delete of the session holds its lock,
// it waits (a few seconds at most) for that Delete to remove it or to give
// up, and never opens a session that is being deleted (see Delete).
func OpenSessionStore[T any](r *Sessions, id string, opts ...Option) (*Store[T], error) {
	return openSessionStore[T](context.Background(), r, id, opts)
}

// openSessionStore is OpenSessionStore for an open that has a context: a
// wait for the writer lock (WaitLock) ends with it.
func openSessionStore[T any](ctx context.Context, r *Sessions, id string, opts []Option) (*Store[T], error) {
	path := r.path(id)
	if err := ValidSessionID(id); err != nil {
		return nil, opError("open session", path, err)
	}
	if err := checkStateType(reflect.TypeFor[T]()); err != nil {
		return nil, opError("open session", path, err)
	}
	all := append(slices.Clone(r.opts), opts...)
	if _, err := newConfig(all); err != nil {
		return nil, opError("open session", path, err)
	}
	if err := r.check(ctx, id); err != nil {
		return nil, opError("open session", path, err)
	}
	st, err := openLiveSession[T](ctx, r, id, all)
	if err != nil {
		return nil, err
	}
	// Its saves come after every activity this root has read: on a coarse
	// clock they would otherwise be stamped in the tick of a session
	// created after them, and not make it the most recently active.
	st.observe(r.floor())
	return st, nil
}

// openLiveSession opens the store of the existing session id with the
// options all. Once it holds the session's writer lock it reads
// session.json again: a session that Delete removed meanwhile is
// ErrNotFound. If the lock is held by a Delete of the session (its marker
// is there), it waits up to deleteWait for that Delete to hide the session
// (ErrNotFound) or to give up (then it takes the lock again), so that a
// writer racing a Delete either opens the session, which the Delete then
// leaves whole (ErrLocked), or fails with ErrNotFound.
func openLiveSession[T any](ctx context.Context, r *Sessions, id string, all []Option) (*Store[T], error) {
	readOnly := false
	if cfg, err := newConfig(all); err == nil {
		readOnly = cfg.readOnly
	}
	var deadline time.Time
	pause := time.Millisecond
	for {
		sub, err := r.sub(ctx, id)
		if err != nil {
			return nil, opError("open session", r.path(id), err)
		}
		if _, _, err := readMetaIn(ctx, sub, id); err != nil {
			sub.Close()
			return nil, opError("open session", sub.Locate(sessionFile), err)
		}
		view, err := r.sub(ctx, id) // st owns sub from here on
		if err != nil {
			sub.Close()
			return nil, opError("open session", r.path(id), err)
		}
		st, err := openBackend[T](ctx, sub, all)
		if err == nil && !readOnly {
			_, _, err = readMetaIn(ctx, view, id)
			if err != nil {
				st.Close()
				err = opError("open session", view.Locate(sessionFile), err)
			}
		}
		if err != nil && !errors.Is(err, ErrLocked) && !errors.Is(err, ErrNotFound) {
			// The directory may have gone under the opening (Delete).
			if _, _, merr := readMetaIn(ctx, view, id); errors.Is(merr, ErrNotFound) {
				err = opError("open session", r.path(id), merr)
			}
		}
		if err == nil || !errors.Is(err, ErrLocked) {
			view.Close()
			return st, err
		}
		// The lock is held: by a writer, or by a Delete that is about to
		// hide the session.
		// The marker first: a Delete holding the lock removes its marker
		// only after its tombstone, so if the marker is gone the session
		// read next is gone too.
		mark, serr := view.Stat(ctx, deleteMarker)
		_, _, merr := readMetaIn(ctx, view, id)
		view.Close()
		if errors.Is(merr, ErrNotFound) {
			return nil, opError("open session", r.path(id), merr)
		}
		if serr != nil || staleMarker(mark) {
			return nil, err // no Delete under way: a writer holds it
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(deleteWait)
		}
		if time.Now().After(deadline) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, opError("open session", r.path(id), errors.Join(ctx.Err(), err))
		case <-time.After(pause):
		}
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// ResumeLatestSession opens the store of the most recently active session of the
// root (the first that List returns), so that a host picks up where it left
// off in one call: then Latest gives the state to resume from. A root with
// no session is ErrNotFound; if that session is damaged, its error is
// returned and the caller is free to start a new session.
func ResumeLatestSession[T any](ctx context.Context, r *Sessions, opts ...Option) (*Store[T], Session, error) {
	list, err := r.List(ctx)
	if err != nil {
		return nil, Session{}, err
	}
	if len(list) == 0 {
		return nil, Session{}, opError("resume session", r.dir, fmt.Errorf("%w: no session", ErrNotFound))
	}
	s := list[0]
	if s.Err != nil {
		return nil, s, opError("resume session", s.Dir, s.Err)
	}
	st, err := openSessionStore[T](ctx, r, s.ID, opts)
	if err != nil {
		return nil, s, err
	}
	return st, s, nil
}

// RemoveStaging removes what crashes left where no session is, and returns
// its locations, sorted: what remains of every session whose deletion was
// interrupted (see Delete), after which its ID is free again, the
// checkpoints of every fork whose session.json
// is missing (Fork's claim, no session.json), and the staging directories
// (.staging- and random text) and the lock file (.sessions.lock) of roots
// written by earlier releases. Before removing a fork's checkpoints it
// creates its session.json as a tombstone, so that a fork still running
// there, in any process, fails to publish (Fork then goes on under the next
// number) and never shows a session with checkpoints missing. The tombstone
// stays: its ID is not used again. A child store without a fork's claim is
// never touched, and no session is. New, Create and Fork remove the
// staging directories of earlier releases as well; RemoveStaging is for
// tools that clean up without creating anything. What it cannot remove in
// one place (its error names the place) does not stop it in the others: it
// returns what it removed with the errors joined. A child store whose claim
// is not a regular file is no fork's: it is logged and left as it is.
func (r *Sessions) RemoveStaging(ctx context.Context) ([]string, error) {
	fail := func(removed []string, err error) ([]string, error) {
		return removed, opError("remove staging", r.dir, err)
	}
	if r.cfg.readOnly {
		return fail(nil, ErrReadOnly)
	}
	removed, err := r.removeLegacy(ctx)
	errs := []error{err}
	ids, err := r.b.Children(ctx)
	if err != nil {
		return fail(removed, errors.Join(append(errs, err)...))
	}
	slices.Sort(ids)
	for _, name := range ids {
		if !names.IsSessionName(name) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return fail(removed, errors.Join(append(errs, err)...))
		}
		ok, err := r.abandon(ctx, name)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.b.Locate(name), err))
			continue // one child in trouble does not keep the others' leftovers
		}
		if ok {
			removed = append(removed, r.b.Locate(name))
			r.cfg.logger.Warn("checkpoint: removed a session left half-made by a crash", "path", r.b.Locate(name))
		}
	}
	slices.Sort(removed)
	if err := errors.Join(errs...); err != nil {
		return fail(removed, err)
	}
	return removed, nil
}

// path returns where the session id is stored (the root, if id is
// invalid), for errors: see ValidSessionID.
func (r *Sessions) path(id string) string {
	if ValidSessionID(id) != nil {
		return r.dir
	}
	return r.b.Locate(names.SessionName(id))
}

// lookup returns the name of the child store of the session id (see
// ValidSessionID). An ID of an earlier release that Windows cannot hold as
// a name (such as "con") is mapped, unless the root, written by an earlier
// release, holds its session under its own name (a session.json there, or
// any object that is not hidden: a damaged session): then that is its
// name. Only such IDs cost a look.
func (r *Sessions) lookup(ctx context.Context, id string) string {
	name := names.SessionName(id)
	if name == id || !names.Legacy(id) {
		return name
	}
	sub, err := r.b.Sub(ctx, id, false)
	if err != nil {
		return name
	}
	defer sub.Close()
	if _, err := sub.Stat(ctx, sessionFile); err == nil {
		return id
	}
	objs, err := sub.List(ctx)
	if err == nil && slices.ContainsFunc(objs, func(o Object) bool { return !strings.HasPrefix(o.Name, ".") }) {
		return id
	}
	return name
}

// sub returns the child store of the session id (see lookup), which the
// caller closes.
func (r *Sessions) sub(ctx context.Context, id string) (Backend, error) {
	return r.b.Sub(ctx, r.lookup(ctx, id), false)
}

// check validates id and makes sure that what the root holds under its
// name, if the root lists it as an object at all (a directory does), is a
// child store: not a file, not a symbolic link.
func (r *Sessions) check(ctx context.Context, id string) error {
	if err := ValidSessionID(id); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	what, err := r.nonChild(ctx, r.lookup(ctx, id))
	if err == nil && what != "" {
		err = fmt.Errorf("%w: session %q is not a session directory (it is %s)", ErrNotFound, id, what)
	}
	return err
}

// nonChild returns what the root holds under the name if it lists it as
// an object that is not a child store ("a file", "a symbolic link", ...),
// and "" otherwise. On object storage a child store is no object.
func (r *Sessions) nonChild(ctx context.Context, name string) (what string, err error) {
	o, err := r.b.Stat(ctx, name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", nil
	case err != nil:
		return "", err
	case o.Mode&fs.ModeDir != 0:
		return "", nil
	case o.Mode&fs.ModeSymlink != 0:
		return "a symbolic link", nil
	case o.Mode&fs.ModeNamedPipe != 0:
		return "a named pipe", nil
	case o.Mode.IsRegular():
		return "a file", nil
	}
	return "a special file", nil
}

// writable checks that the root may be changed and that id names a child
// store (see check).
func (r *Sessions) writable(ctx context.Context, id string) error {
	if err := ValidSessionID(id); err != nil {
		return err
	}
	if r.cfg.readOnly {
		return ErrReadOnly
	}
	return r.check(ctx, id)
}

// now returns the current time, never before not (a clock that stepped back
// must not make a session look younger than its creation), and after every
// activity time this Sessions has read (see observe), unless
// that is more than maxClockLead ahead: on a coarse clock (Windows ticks
// every 0.5 to 15.6 ms) a SetMeta in the tick of another session's last
// save must still make its session the most recently active.
func (r *Sessions) now(not time.Time) time.Time {
	t := r.cfg.now().UTC()
	if t.Before(not) {
		t = not
	}
	r.clockMu.Lock()
	defer r.clockMu.Unlock()
	if !t.After(r.newest) && r.newest.Sub(t) <= maxClockLead {
		t = r.newest.Add(time.Nanosecond)
	}
	if t.After(r.stamped) {
		r.stamped = t
	}
	return t
}

// floor returns the latest activity time this Sessions has read or
// stamped.
func (r *Sessions) floor() time.Time {
	r.clockMu.Lock()
	defer r.clockMu.Unlock()
	if r.stamped.After(r.newest) {
		return r.stamped
	}
	return r.newest
}

// observe records t, an activity time read from the root (see now).
func (r *Sessions) observe(t time.Time) {
	if t.After(timeMax) {
		return
	}
	r.clockMu.Lock()
	if t.After(r.newest) {
		r.newest = t
	}
	r.clockMu.Unlock()
}

// setMeta fills in what session.json says of the session.
func (s *Session) setMeta(m sessionMeta) {
	s.Created, s.Updated, s.Parent, s.Meta = m.Created, m.Updated, m.Parent, m.Meta
	if m.ParentStep != nil {
		s.ParentStep = *m.ParentStep
	}
}

// setCheckpoints fills in what the session's checkpoint list says of it.
func (s *Session) setCheckpoints(infos []Info) {
	s.Checkpoints = len(infos)
	s.Size = 0
	for _, info := range infos {
		s.Size += info.Size
		if info.Format != 0 && !info.Time.Before(s.LastSaved) {
			s.LastStep, s.LastKind, s.LastSaved, s.LastMetrics = info.Step, info.Kind, info.Time, info.Metrics
		}
	}
}
