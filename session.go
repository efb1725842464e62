package checkpoint

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"
)

const (
	// sessionFile is a session's metadata file, in the session's directory.
	sessionFile = "session.json"
	// sessionsLockName is the lock file of a root of sessions, held while a
	// session is created, forked or has its metadata written.
	sessionsLockName = ".sessions.lock"
	// stagingPrefix starts the name of the hidden directory in which a new
	// session is assembled before it is renamed into place.
	stagingPrefix = ".staging-"
	// maxSessionIDLen bounds a session ID.
	maxSessionIDLen = 64
	// sessionFormat is the version of session.json.
	sessionFormat = 1
	// maxSessionFileSize bounds how much of a session.json is read.
	maxSessionFileSize = 1 << 20
)

// Sessions is a root directory holding many sessions: one subdirectory per
// session, named by its ID, each a checkpoint store with a small metadata
// file, session.json. A campaign's sessions, a simulation's runs or an
// orchestrator's sprints live side by side under one root:
//
//	campaigns/
//	  001/session.json  001/turn_001.json  001/turn_002.json ...
//	  002/session.json  002/turn_001.json ...
//
// A new session appears whole or not at all: it is assembled in a hidden
// directory and renamed into place. New, Create and Fork either return the
// session, visible, with a nil error, or return an error and leave no
// session behind (a failed sync of the root takes the new session back), so
// a caller may retry without making a second session. Should taking it back
// fail too, the session stays visible and is returned, its ID set, along
// with the error. Creating a session and writing metadata
// take a lock on the root (.sessions.lock) for a moment; Fork holds it while
// it links or copies the checkpoints. A call waiting for that lock gives up
// when its context is done. Each session's store has its own writer lock, so
// different processes can run different sessions of one root at the same
// time. On platforms without flock (not Unix), a root can be read but not
// changed.
//
// OpenSessionsBackend keeps the sessions on any Backend instead, such as a
// bucket that many workers share: each session is a child store (a key
// prefix), and no lock spans the root (see there for what differs).
//
// A Sessions is safe for concurrent use by multiple goroutines.
type Sessions struct {
	dir  string
	root *os.Root // nil on a Backend
	b    Backend  // nil in a directory (OpenSessions); see session_backend.go
	cfg  config
	// fault is the test seam of the directory's fault points (see
	// fileIO.fault), set by tests only.
	fault func(point, name string) error
	opts  []Option
	link  func(oldname, newname string) error // root.Link; a seam for tests
}

// Session describes one session of a root.
type Session struct {
	ID  string // the directory name: "001", or a name given to Create
	Dir string // the session's store directory

	Created    time.Time         // when the session was created
	Updated    time.Time         // when its metadata was last written
	Parent     string            // the session it was forked from, if any
	ParentStep int64             // the step it was forked at, if Parent is set
	Meta       map[string]string // the caller's fields, such as progress

	Checkpoints int       // how many checkpoint files the session holds
	LastStep    int64     // the step of the checkpoint saved last
	LastSaved   time.Time // when that checkpoint was saved; zero if none

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
}

// OpenSessions opens the root of sessions in dir, creating it (durably) if it
// does not exist. opts apply to every session's store, as if given to Open:
// a layout, compression, retention rules, hooks. With ReadOnly, a missing dir
// is ErrNotFound, and creating, forking and SetMeta return ErrReadOnly.
// OpenSessions takes no lock.
func OpenSessions(dir string, opts ...Option) (*Sessions, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, opError("open sessions", dir, err)
	}
	root, err := openDirRoot(dir, cfg.readOnly, cfg.noSync)
	if err != nil {
		return nil, opError("open sessions", dir, err)
	}
	return &Sessions{dir: dir, root: root, cfg: cfg, opts: slices.Clone(opts), link: root.Link}, nil
}

// Location returns where the root is: its directory, as given to
// OpenSessions, or for OpenSessionsBackend where its Backend is
// (Backend.Locate("")).
func (r *Sessions) Location() string { return r.dir }

// Close releases the root directory, or closes the Backend given to
// OpenSessionsBackend. Stores opened from it stay open.
func (r *Sessions) Close() error {
	if r.b != nil {
		return r.closeBackend()
	}
	if err := r.root.Close(); err != nil {
		return opError("close sessions", r.dir, err)
	}
	return nil
}

// ValidSessionID reports whether id can name a session: 1 to 64 characters
// of [A-Za-z0-9._-], not starting with a dot. Such an ID cannot name a path
// outside the root or a hidden file. The error wraps ErrInvalid.
func ValidSessionID(id string) error {
	if !validChars(id) || len(id) > maxSessionIDLen {
		return fmt.Errorf("%w: session ID %q: want 1 to %d characters of [A-Za-z0-9._-], not starting with a dot", ErrInvalid, id, maxSessionIDLen)
	}
	return nil
}

// List returns every session of the root, the most recently active first
// (see Session.Active). A damaged session is listed with Err set and never
// hides the others. Listing reads each session's metadata and checkpoint
// headers, never a state.
func (r *Sessions) List(ctx context.Context) ([]Session, error) {
	if r.b != nil {
		return r.listBackend(ctx)
	}
	dirents, err := readDir(r.root)
	if err != nil {
		return nil, opError("list sessions", r.dir, err)
	}
	var out []Session
	for _, d := range dirents {
		if !d.IsDir() || ValidSessionID(d.Name()) != nil {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, opError("list sessions", r.dir, err)
		}
		s := r.describe(ctx, d.Name())
		// Only a directory that does not read as a session may be what
		// the backend path leaves where there is none.
		if s.Err != nil && r.noSessionOnBackend(d.Name()) {
			continue
		}
		out = append(out, s)
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
	if r.b != nil {
		return r.getBackend(ctx, id)
	}
	if err := r.check(id); err != nil {
		return Session{}, opError("get session", r.path(id), err)
	}
	if err := ctx.Err(); err != nil {
		return Session{}, opError("get session", r.path(id), err)
	}
	s := r.describe(ctx, id)
	return s, s.Err
}

// New creates the next numbered session: one more than the highest all-digit
// session ID in the root, written with at least three digits ("001", "002",
// ...), however large that ID is. If the highest is 64 nines, no number is
// left and New returns an error wrapping ErrInvalid. meta is stored as the
// session's Meta.
func (r *Sessions) New(ctx context.Context, meta map[string]string) (Session, error) {
	if r.b != nil {
		return r.createBackend(ctx, "new session", "", meta)
	}
	return r.create(ctx, "new session", "", sessionMeta{Meta: meta}, nil)
}

// Create creates the session id, such as a run's ID. An ID already taken is
// ErrExists; an invalid one is ErrInvalid.
func (r *Sessions) Create(ctx context.Context, id string, meta map[string]string) (Session, error) {
	if err := ValidSessionID(id); err != nil {
		return Session{}, opError("create session", r.path(id), err)
	}
	if r.b != nil {
		return r.createBackend(ctx, "create session", id, meta)
	}
	return r.create(ctx, "create session", id, sessionMeta{Meta: meta}, nil)
}

// SetMeta replaces the caller's fields of session id (Session.Meta), such as
// progress counters, and sets its Updated time. session.json is replaced
// atomically and durably.
func (r *Sessions) SetMeta(ctx context.Context, id string, meta map[string]string) error {
	if r.b != nil {
		return r.setMetaBackend(ctx, id, meta)
	}
	path := r.path(id)
	if err := r.check(id); err != nil {
		return opError("set session meta", path, err)
	}
	err := r.locked(ctx, func() error {
		sub, err := r.root.OpenRoot(id)
		if err != nil {
			return err
		}
		defer sub.Close()
		m, err := readSessionMeta(sub)
		if err != nil {
			return err
		}
		if err := removeStaleSessionTemps(sub, r.fileIO()); err != nil {
			return err
		}
		m.Meta = maps.Clone(meta)
		m.Updated = r.now(m.Created)
		return writeSessionMeta(sub, m, true, r.fileIO())
	})
	if err != nil {
		return opError("set session meta", path, err)
	}
	return nil
}

// Fork creates the next numbered session holding the checkpoints of session
// from up to and including step, so that play can go on from step without
// touching from's later checkpoints. Checkpoints are hard-linked where the
// filesystem allows (they are never modified, so sharing them is safe) and
// copied otherwise. The rolling file goes along if it holds a step up to
// step. The new session's Parent and ParentStep record where it came from;
// meta becomes its Meta.
//
// The checkpoint of step must exist and load, so that the new session's
// Latest is step: otherwise Fork returns an error wrapping ErrNotFound or
// ErrCorrupt and creates nothing.
func (r *Sessions) Fork(ctx context.Context, from string, step int64, meta map[string]string) (Session, error) {
	if r.b != nil {
		return r.forkBackend(ctx, from, step, meta)
	}
	fail := func(err error) (Session, error) {
		return Session{}, &Error{Op: "fork session", Step: step, HasStep: true, Path: r.path(from), Err: err}
	}
	if err := r.check(from); err != nil {
		return fail(err)
	}
	if err := checkStep(step); err != nil {
		return fail(err)
	}
	m := sessionMeta{Parent: from, ParentStep: &step, Meta: meta}
	s, err := r.create(ctx, "fork session", "", m, func(staging string) error {
		return r.copyCheckpoints(ctx, from, step, staging)
	})
	if err != nil {
		var e *Error
		if errors.As(err, &e) && e.Op == "fork session" {
			e.Step, e.HasStep, e.Path = step, true, r.path(from)
		}
	}
	return s, err
}

// OpenSessionStore opens the store of session id with the options of the root
// followed by opts. A missing session is ErrNotFound; one whose session.json
// is missing or damaged is ErrCorrupt (its checkpoints can still be reached
// with Open on its directory). The store belongs to the caller, who closes
// it; the writer lock is the session's own, as with Open.
func OpenSessionStore[T any](r *Sessions, id string, opts ...Option) (*Store[T], error) {
	if r.b != nil {
		return openSessionBackend[T](r, id, opts)
	}
	path := r.path(id)
	if err := r.check(id); err != nil {
		return nil, opError("open session", path, err)
	}
	if err := checkStateType(reflect.TypeFor[T]()); err != nil {
		return nil, opError("open session", path, err)
	}
	cfg, err := newConfig(append(slices.Clone(r.opts), opts...))
	if err != nil {
		return nil, opError("open session", path, err)
	}
	sub, err := r.root.OpenRoot(id)
	if err != nil {
		return nil, opError("open session", path, err)
	}
	if _, err := readSessionMeta(sub); err != nil {
		sub.Close()
		return nil, opError("open session", filepath.Join(path, sessionFile), err)
	}
	return newStore[T](r.dirBackend(path, sub, cfg), cfg)
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
	st, err := OpenSession[T](r, s.ID, opts...)
	if err != nil {
		return nil, s, err
	}
	return st, s, nil
}

func (r *Sessions) path(id string) string {
	if ValidSessionID(id) != nil {
		return r.dir
	}
	if r.b != nil {
		return r.b.Locate(id)
	}
	return filepath.Join(r.dir, id)
}

// check validates id and makes sure it names a session directory (not a
// symbolic link, not a file).
func (r *Sessions) check(id string) error {
	if err := ValidSessionID(id); err != nil {
		return err
	}
	fi, err := r.root.Lstat(id)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: no session %q", ErrNotFound, id)
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %q is not a session directory", ErrNotFound, id)
	}
	return nil
}

// now returns the current time, never before not (a clock that stepped back
// must not make a session look younger than its creation).
func (r *Sessions) now(not time.Time) time.Time {
	t := r.cfg.now().UTC()
	if t.Before(not) {
		return not
	}
	return t
}

// stamp completes the metadata of a session being made with the ID id: its
// format, ID, creation time and a copy of the caller's fields.
func (r *Sessions) stamp(m *sessionMeta, id string) {
	m.Format, m.ID = sessionFormat, id
	m.Created = r.now(time.Time{})
	m.Updated = m.Created
	m.Meta = maps.Clone(m.Meta)
}

// describe reads what List reports of the session id; damage goes to Err.
// noSessionOnBackend reports whether the subdirectory id is what
// OpenSessionsBackend on this directory leaves where there is no session: a
// claim without session.json (a creation in progress or interrupted) or
// RemoveStaging's tombstone. Sessions on a backend never list it; neither
// does List here.
func (r *Sessions) noSessionOnBackend(id string) bool {
	sub, err := r.root.OpenRoot(id)
	if err != nil {
		return false
	}
	defer sub.Close()
	f, _, err := openRegular(sub, sessionFile)
	if errors.Is(err, fs.ErrNotExist) {
		_, cerr := sub.Lstat(claimName)
		return cerr == nil
	}
	if err != nil {
		return false
	}
	defer f.Close()
	var t sessionTombstone
	data, err := io.ReadAll(io.LimitReader(f, maxSessionFileSize+1))
	return err == nil && json.Unmarshal(data, &t) == nil && t.Format == 0 && t.Abandoned != ""
}

func (r *Sessions) describe(ctx context.Context, id string) Session {
	s := Session{ID: id, Dir: r.path(id)}
	sub, err := r.root.OpenRoot(id)
	if err != nil {
		s.Err = opError("read session", s.Dir, err)
		return s
	}
	m, err := readSessionMeta(sub)
	if err != nil {
		s.Err = opError("read session", filepath.Join(s.Dir, sessionFile), err)
	} else {
		s.setMeta(m)
	}
	st, err := r.reader(s.Dir, sub)
	if err != nil {
		s.Err = cmp.Or(s.Err, err)
		return s
	}
	defer st.Close()
	infos, err := st.List(ctx)
	if err != nil {
		s.Err = cmp.Or(s.Err, err)
		return s
	}
	s.setCheckpoints(infos)
	return s
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
	for _, info := range infos {
		if info.Format != 0 && !info.Time.Before(s.LastSaved) {
			s.LastStep, s.LastSaved = info.Step, info.Time
		}
	}
}

// create makes a session: it assembles it in a hidden staging directory
// (fill adds checkpoints, then session.json is written), takes the ID (the
// next number if id is empty), renames the staging directory into place and
// syncs the root, all under the root's lock.
//
// Either the session is visible and returned with a nil error, or an error
// is returned and no session is visible, so that a caller may retry without
// making a second session: if the root's sync fails, the rename is taken
// back. Only if that too fails is the session left visible; it is then
// returned along with the error, which says so.
func (r *Sessions) create(ctx context.Context, op, id string, m sessionMeta, fill func(staging string) error) (Session, error) {
	if r.cfg.readOnly {
		return Session{}, opError(op, r.path(id), ErrReadOnly)
	}
	visible := false // the session is there although create failed
	err := r.locked(ctx, func() error {
		if id != "" {
			if _, err := r.root.Lstat(id); err == nil {
				return fmt.Errorf("%w: session %q", ErrExists, id)
			}
		}
		staging := stagingPrefix + rand.Text()
		if err := r.root.Mkdir(staging, dirPerm); err != nil {
			return err
		}
		published := false
		defer func() {
			if !published {
				removeAll(r.root, staging)
			}
		}()
		sub, err := r.root.OpenRoot(staging)
		if err != nil {
			return err
		}
		defer sub.Close()
		if fill != nil {
			if err := fill(staging); err != nil {
				return err
			}
		}
		if id == "" {
			if id, err = r.nextID(); err != nil {
				return err
			}
		}
		r.stamp(&m, id)
		if err := writeSessionMeta(sub, m, false, r.fileIO()); err != nil {
			return err
		}
		if err := renameFile(r.root, staging, id); err != nil {
			return err
		}
		if err := r.fileIO().syncDir(r.root); err != nil {
			// The new name may not survive a power cut, so the session
			// must not look made: take it back out of sight, where the
			// deferred cleanup removes it.
			rerr := r.fileIO().at("take back", id)
			if rerr == nil {
				rerr = r.root.Rename(id, staging)
			}
			if rerr != nil {
				published, visible = true, true
				return fmt.Errorf("%w; the session is visible but may not survive a power cut, and taking it back failed: %w", err, rerr)
			}
			return err
		}
		published = true
		return nil
	})
	if visible {
		return r.describe(context.WithoutCancel(ctx), id), opError(op, r.path(id), err)
	}
	if err != nil {
		return Session{}, opError(op, r.path(id), err)
	}
	// The session exists now: report it, and any trouble reading it back in
	// its Err, but not as a failure (a caller that retried would make a
	// second one).
	return r.describe(context.WithoutCancel(ctx), id), nil
}

// locked runs fn holding the root's lock, after removing staging directories
// left by a crash (while the lock is held, no other one can be in use).
func (r *Sessions) locked(ctx context.Context, fn func() error) error {
	if r.cfg.readOnly {
		return ErrReadOnly
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	lock, err := r.lock(ctx)
	if err != nil {
		return err
	}
	defer unlockFile(lock)
	if _, err := r.removeStagingLocked(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return fn()
}

// removeStagingLocked removes the staging directories a crash left behind
// and returns their paths; the caller holds the root's lock, so none of
// them is in use.
func (r *Sessions) removeStagingLocked() ([]string, error) {
	dirents, err := readDir(r.root)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, d := range dirents {
		if !d.IsDir() || !strings.HasPrefix(d.Name(), stagingPrefix) {
			continue
		}
		if err := removeAll(r.root, d.Name()); err != nil {
			return removed, err
		}
		removed = append(removed, filepath.Join(r.dir, d.Name()))
		r.cfg.logger.Warn("checkpoint: removed a session left half-made by a crash", "path", removed[len(removed)-1])
	}
	if len(removed) > 0 {
		if err := r.fileIO().syncDir(r.root); err != nil {
			return removed, err
		}
	}
	return removed, nil
}

// lock takes the root's lock, waiting for it (polling, with a growing pause
// of up to 50ms) until ctx is done.
func (r *Sessions) lock(ctx context.Context) (*os.File, error) {
	pause := time.Millisecond
	for {
		f, err := lockFile(r.root, sessionsLockName)
		if !errors.Is(err, ErrLocked) {
			if err != nil {
				return nil, fmt.Errorf("lock %s: %w", sessionsLockName, err)
			}
			return f, nil
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("wait for %s, held by another call: %w", sessionsLockName, ctx.Err())
		case <-t.C:
		}
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// nextID returns the number after the highest all-digit name in the root,
// with at least three digits. Names are compared as decimal numbers of any
// length, not as machine integers, so that numbering goes on past any ID
// Create took ("9223372036854775807" is followed by "9223372036854775808").
// Past the longest ID (64 nines) there is no number left: that is an error,
// every time, and nothing is created.
func (r *Sessions) nextID() (string, error) {
	names, err := readNames(r.root)
	if err != nil {
		return "", err
	}
	return nextSessionID(names)
}

// nextSessionID returns the number after the highest all-digit name of
// names (see nextID).
func nextSessionID(names []string) (string, error) {
	highest := "0"
	for _, name := range names {
		if n, ok := sessionNumber(name); ok && (len(n) > len(highest) || len(n) == len(highest) && n > highest) {
			highest = n
		}
	}
	next := []byte(highest)
	i := len(next) - 1
	for ; i >= 0 && next[i] == '9'; i-- {
		next[i] = '0'
	}
	if i >= 0 {
		next[i]++
	} else {
		next = append([]byte{'1'}, next...)
	}
	if len(next) > maxSessionIDLen {
		return "", fmt.Errorf("%w: no session number is left after %q (a session ID has at most %d characters): name new sessions with Create", ErrInvalid, highest, maxSessionIDLen)
	}
	return strings.Repeat("0", max(0, 3-len(next))) + string(next), nil
}

// sessionNumber returns the number an all-digit name stands for, without
// leading zeros ("007" is "7"), and whether name is all digits.
func sessionNumber(name string) (string, bool) {
	if name == "" || strings.Trim(name, "0123456789") != "" {
		return "", false
	}
	if n := strings.TrimLeft(name, "0"); n != "" {
		return n, true
	}
	return "0", true
}

// copyCheckpoints puts the checkpoints of session from with steps up to step
// into the staging directory: a hard link each, or a copy where linking
// fails, and a copy of the rolling file. The checkpoint of step must load.
func (r *Sessions) copyCheckpoints(ctx context.Context, from string, step int64, staging string) error {
	src, err := r.root.OpenRoot(from)
	if err != nil {
		return err
	}
	if _, err := readSessionMeta(src); err != nil {
		src.Close()
		return fmt.Errorf("session %q: %w", from, err)
	}
	st, err := r.reader(r.path(from), src)
	if err != nil {
		return err
	}
	defer st.Close()
	if _, _, err := st.Load(ctx, step); err != nil {
		return inner(err, st.dir)
	}
	infos, err := st.List(ctx)
	if err != nil {
		return inner(err, st.dir)
	}
	dst, err := r.root.OpenRoot(staging)
	if err != nil {
		return err
	}
	defer dst.Close()
	for _, info := range infos {
		if info.Step > step || info.Kind == KindRolling && info.Format == 0 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		name := filepath.Base(info.Path)
		// The rolling file is copied: a link would change its inode
		// change time, and so its Version, under the session's writer,
		// whose next conditional Replace of it would fail.
		var err error
		if info.Kind != KindRolling {
			err = r.link(from+"/"+name, staging+"/"+name)
		}
		if info.Kind == KindRolling || err != nil && !errors.Is(err, fs.ErrNotExist) {
			err = copyFile(src, name, dst, r.fileIO())
		}
		if errors.Is(err, fs.ErrNotExist) {
			continue // pruned meanwhile by the session's writer: checkFork sees to it
		}
		if err != nil {
			return fmt.Errorf("copy %s: %w", name, err)
		}
	}
	if err := r.checkFork(ctx, dst, staging, step); err != nil {
		return err
	}
	return r.fileIO().syncDir(dst)
}

// fileIO says how the root writes and removes files: as its stores do
// (NoSync), and in tests where they fail.
func (r *Sessions) fileIO() fileIO {
	return fileIO{noSync: r.cfg.noSync, fault: r.fault}
}

// dirBackend is the directory backend of a session's store on sub, at path
// dir, sharing the root's fault seam (tests only).
func (r *Sessions) dirBackend(dir string, sub *os.Root, cfg config) *dirBackend {
	d := newDirBackend(dir, sub, cfg.readOnly, cfg.noSync)
	d.fault = r.fault
	return d
}

// reader opens a ReadOnly store, without hooks, on the directory sub (at
// path dir), to see what a session holds without knowing its T. The store
// owns sub from then on, even if opening fails.
func (r *Sessions) reader(dir string, sub *os.Root) (*Store[json.RawMessage], error) {
	cfg := r.readerConfig()
	st, err := newStore[json.RawMessage](r.dirBackend(dir, sub, cfg), cfg)
	if err != nil {
		sub.Close()
		return nil, err
	}
	return st, nil
}

// readerConfig is the configuration of a store that reads a session for
// the root: ReadOnly, without the caller's hooks.
func (r *Sessions) readerConfig() config {
	cfg := r.cfg
	cfg.readOnly = true
	cfg.hooks = Hooks{}
	return cfg
}

// checkFork checks the checkpoints gathered in staging, which no writer can
// change: a running writer of the source may have pruned the step or moved
// its rolling file on between the listing and the links. A rolling file
// past step is dropped; then the newest checkpoint that loads must be step.
func (r *Sessions) checkFork(ctx context.Context, dst *os.Root, staging string, step int64) error {
	sub, err := r.root.OpenRoot(staging)
	if err != nil {
		return err
	}
	st, err := r.reader(filepath.Join(r.dir, staging), sub)
	if err != nil {
		return err
	}
	defer st.Close()
	infos, err := st.List(ctx)
	if err != nil {
		return inner(err, st.dir)
	}
	for _, info := range infos {
		if info.Kind == KindRolling && (info.Step > step || info.Format == 0) {
			if err := removeFile(dst, filepath.Base(info.Path)); err != nil {
				return err
			}
		}
	}
	_, info, err := st.Latest(ctx)
	if err != nil || info.Step != step {
		return fmt.Errorf("%w: the checkpoint of step %d changed while it was being forked (a running writer pruned or replaced it)", ErrNotFound, step)
	}
	return nil
}

// inner returns the reason of a store's error without its "checkpoint: op"
// prefix, naming the file if the error names one in the store dir: the
// session call's own error names the operation and the session.
func inner(err error, dir string) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	if e.Path != dir && e.Path != "" {
		return fmt.Errorf("%s: %w", filepath.Base(e.Path), e.Err)
	}
	return e.Err
}

// copyFile copies the file name from src to dst durably.
func copyFile(src *os.Root, name string, dst *os.Root, o fileIO) error {
	f, _, err := openRegular(src, name)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = createFile(dst, name, func(w io.Writer) error {
		_, err := io.Copy(w, f)
		return err
	}, o)
	return err
}

func readSessionMeta(sub *os.Root) (sessionMeta, error) {
	var m sessionMeta
	f, _, err := openRegular(sub, sessionFile)
	if errors.Is(err, fs.ErrNotExist) {
		return m, fmt.Errorf("%w: missing %s", ErrCorrupt, sessionFile)
	}
	if errors.Is(err, errNotRegular) {
		return m, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if err != nil {
		return m, err
	}
	defer f.Close()
	return decodeSessionMeta(f)
}

// decodeSessionMeta reads a session.json from f, at most
// maxSessionFileSize bytes of it. Damage is ErrCorrupt.
func decodeSessionMeta(f io.Reader) (sessionMeta, error) {
	var m sessionMeta
	data, err := io.ReadAll(io.LimitReader(f, maxSessionFileSize+1))
	if err != nil {
		return m, err
	}
	if len(data) > maxSessionFileSize {
		return m, fmt.Errorf("%w: %s is larger than %d bytes", ErrCorrupt, sessionFile, maxSessionFileSize)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("%w: %s: %w", ErrCorrupt, sessionFile, err)
	}
	if m.Format != sessionFormat {
		return m, fmt.Errorf("%w: %s: %w %d (this package reads version %d)", ErrCorrupt, sessionFile, errFormat, m.Format, sessionFormat)
	}
	return m, nil
}

func writeSessionMeta(sub *os.Root, m sessionMeta, replace bool, o fileIO) error {
	write, err := encodeSessionMeta(m)
	if err != nil {
		return err
	}
	if replace {
		_, err = replaceFile(sub, sessionFile, write, o)
	} else {
		_, err = createFile(sub, sessionFile, write, o)
	}
	return err
}

// encodeSessionMeta returns a writer of m as the content of session.json.
func encodeSessionMeta(m any) (func(io.Writer) error, error) {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("%w: encode %s: %w", ErrInvalid, sessionFile, err)
	}
	data = append(data, '\n')
	return func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}, nil
}

// removeStaleSessionTemps removes the temporary files of session.json that
// an interrupted SetMeta left in a session directory. It runs under the
// root's lock, so no SetMeta is writing one.
func removeStaleSessionTemps(sub *os.Root, o fileIO) error {
	dirents, err := readDir(sub)
	if err != nil {
		return err
	}
	var stale []string
	for _, d := range dirents {
		if d.Type().IsRegular() && isSessionTemp(d.Name()) {
			stale = append(stale, d.Name())
		}
	}
	if len(stale) == 0 {
		return nil
	}
	_, err = removeNames(sub, o, stale)
	return err
}

// isSessionTemp reports whether name is a temporary file of session.json:
// tempPrefix(session.json) and random digits, or, from releases before the
// marker, the digits alone (session.json is the library's own name).
func isSessionTemp(name string) bool {
	final, _, ok := splitTemp(name)
	return ok && final == sessionFile
}

// RemoveStaging removes the hidden directories (.staging- and random text)
// in which a crash interrupted the creation or fork of a session, and
// returns their paths, sorted. It takes the root's lock (.sessions.lock)
// without waiting, so that no session being made right now is touched: while
// another process creates or forks a session it fails with ErrLocked. The
// next New, Create, Fork or SetMeta removes them as well; RemoveStaging is
// for tools that clean up without creating anything.
//
// On a Backend (OpenSessionsBackend) nothing is removed by the way, and no
// lock tells a fork in progress from one a crash interrupted: RemoveStaging
// removes the checkpoints of every fork whose session.json is missing,
// returns the locations of those child stores, and first creates their
// session.json as a tombstone, so that a fork still running there fails to
// publish (Fork then goes on under the next number) and never shows a
// session with checkpoints missing. The tombstone stays: its ID is not used
// again. A child store without a fork's claim is never touched.
func (r *Sessions) RemoveStaging(ctx context.Context) ([]string, error) {
	if r.b != nil {
		return r.removeStagingBackend(ctx)
	}
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
	defer unlockFile(lock)
	removed, err := r.removeStagingLocked()
	if err != nil {
		return removed, opError("remove staging", r.dir, err)
	}
	slices.Sort(removed)
	return removed, nil
}
