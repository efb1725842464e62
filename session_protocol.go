package checkpoint

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"
)

// Sessions on a Backend (OpenSessionsBackend). No lock spans the root: a
// bucket shared by many workers has none that a crashed worker releases at
// once. Instead every step that must have one winner is a Backend.Create:
//
//   - A session is the child store Sub(id). It exists exactly when its
//     session.json exists (and is not a tombstone, below).
//   - Whoever makes a session first creates the claim (claimName) in the
//     child: the claim takes the ID, so that two forks never copy
//     checkpoints into one child. A claim says who made it (claimCreate or
//     claimFork). Create and New may go on over a creation's claim whose
//     session.json is missing (a racing creation, or one a crash
//     interrupted: it left no checkpoints), since the Create of
//     session.json picks one winner; nobody goes on over a fork's.
//   - session.json is created last, after a fork has copied its
//     checkpoints: a crash before that leaves no visible session.
//   - RemoveStaging removes what crashed forks left (a fork's claim, no
//     session.json): it first creates session.json as a tombstone, so that
//     a fork still running there can never publish, then removes the rest.
//     The tombstone stays: the ID is never used again.
const (
	// claimName is the object that takes a session's ID on a Backend. Its
	// leading dot keeps it out of every layout and every side file name.
	claimName = ".session.claim"
	// claimCreate and claimFork say which call made a claim.
	claimCreate = "create"
	claimFork   = "fork"
	// maxClaimSize bounds how much of a claim is read.
	maxClaimSize = 4096
	// maxNumberAttempts bounds how many numbers New and Fork try when
	// other workers take each first.
	maxNumberAttempts = 100
	// setMetaAttempts bounds how often SetMeta reads session.json again
	// after another writer replaced it between its read and its write.
	setMetaAttempts = 8
)

// sessionClaim is the content of a claim.
type sessionClaim struct {
	Op    string    `json:"op"`
	Token string    `json:"token"` // random, so that every claim's Version differs
	Time  time.Time `json:"time"`
}

// sessionTombstone is the session.json RemoveStaging puts where a fork was
// abandoned. Its format 0 is no session's: no reader of sessions takes it
// for one.
type sessionTombstone struct {
	Format    int       `json:"format"`
	ID        string    `json:"id"`
	Abandoned string    `json:"abandoned"`
	Time      time.Time `json:"time"`
}

// OpenSessionsBackend opens the root of sessions kept in b, such as a
// bucket and prefix of object storage shared by many workers (see
// Backend.Sub): each session is the child store of b named by its ID, with
// its metadata in the object session.json. opts apply to every session's
// store, as with OpenSessions. The Sessions owns b from then on: Close
// closes it, and so does a failed OpenSessionsBackend.
//
// Every method of Sessions works as with OpenSessions, with these
// differences, since no lock spans a root on a Backend:
//
//   - A session exists exactly when its session.json does; a child store
//     without one is not listed (it is a session being made, or left by a
//     crash).
//   - Of concurrent Creates of one ID, in any number of processes, exactly
//     one succeeds; the others return an error wrapping ErrExists. New and
//     Fork take the next number that no child store uses and go on to the
//     next when another worker takes it first, so concurrent calls get
//     distinct IDs.
//   - Fork copies the checkpoints (object storage has no links), then
//     creates session.json: if it fails, it removes what it copied; if a
//     crash interrupts it, what it copied stays out of sight under the new
//     ID, which New and Fork skip and which Create refuses (ErrExists)
//     rather than adopt checkpoints it did not make. RemoveStaging removes
//     such leftovers.
//   - SetMeta replaces session.json only if it is still what SetMeta read
//     (Backend.Replace with its Version); if another writer replaced it
//     meanwhile, SetMeta reads it again and retries a few times, then
//     returns an error wrapping ErrConflict. A session removed meanwhile
//     is not brought back: that is ErrNotFound.
//
// OpenSession and ResumeSession open the session's store with OpenBackend
// on its child store, whose writer lock is the session's own: different
// workers run different sessions at once, and a second writer of one
// session gets ErrLocked.
//
// A directory's root can be opened either way, OpenSessions(dir) or
// OpenSessionsBackend(OpenDir(dir)): the sessions are the same. The two do
// not coordinate the making of sessions with each other, though, so every
// process that makes sessions in one root should open it the same way.
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
	return &Sessions{dir: b.Locate(""), b: b, cfg: cfg, opts: slices.Clone(opts)}, nil
}

func (r *Sessions) closeBackend() error {
	if err := r.b.Close(); err != nil {
		return opError("close sessions", r.dir, err)
	}
	return nil
}

// readMetaIn reads the session.json of the session id in its child store
// sub, and returns it with its Object (for a conditional Replace). A
// missing session.json, or a tombstone, is ErrNotFound.
func readMetaIn(ctx context.Context, sub Backend, id string) (sessionMeta, Object, error) {
	rc, obj, err := sub.Open(ctx, sessionFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return sessionMeta{}, obj, fmt.Errorf("%w: no session %q", ErrNotFound, id)
	case errors.Is(err, errNotRegular):
		return sessionMeta{}, obj, fmt.Errorf("%w: %w", ErrCorrupt, err)
	case err != nil:
		return sessionMeta{}, obj, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxSessionFileSize+1))
	if err != nil {
		return sessionMeta{}, obj, err
	}
	var t sessionTombstone
	if json.Unmarshal(data, &t) == nil && t.Format == 0 && t.Abandoned != "" {
		return sessionMeta{}, obj, fmt.Errorf("%w: no session %q (%s)", ErrNotFound, id, t.Abandoned)
	}
	m, err := decodeSessionMeta(bytes.NewReader(data))
	return m, obj, err
}

// readerOn opens a ReadOnly store on the child store sub, which it owns
// from then on, to see what a session holds without knowing its T.
func (r *Sessions) readerOn(sub Backend) *Store[json.RawMessage] {
	cfg := r.readerConfig()
	st, _ := newStore[json.RawMessage](sub, cfg) // a ReadOnly store takes no lock: it cannot fail
	return st
}

func (r *Sessions) listBackend(ctx context.Context) ([]Session, error) {
	ids, err := r.b.Children(ctx)
	if err != nil {
		return nil, opError("list sessions", r.dir, err)
	}
	var out []Session
	for _, id := range ids {
		if ValidSessionID(id) != nil {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, opError("list sessions", r.dir, err)
		}
		if s, ok := r.describeBackend(ctx, id); ok {
			out = append(out, s)
		}
	}
	sortSessions(out)
	return out, nil
}

func (r *Sessions) getBackend(ctx context.Context, id string) (Session, error) {
	if err := ValidSessionID(id); err != nil {
		return Session{}, opError("get session", r.path(id), err)
	}
	if err := ctx.Err(); err != nil {
		return Session{}, opError("get session", r.path(id), err)
	}
	s, ok := r.describeBackend(ctx, id)
	if !ok {
		return Session{}, opError("get session", r.path(id), fmt.Errorf("%w: no session %q", ErrNotFound, id))
	}
	return s, s.Err
}

// describeBackend reads what List reports of the session id, and whether
// it exists (has a session.json); damage goes to Err.
func (r *Sessions) describeBackend(ctx context.Context, id string) (Session, bool) {
	s := Session{ID: id, Dir: r.path(id)}
	sub, err := r.b.Sub(ctx, id, false)
	if err != nil {
		s.Err = opError("read session", s.Dir, err)
		return s, true
	}
	s.Dir = sub.Locate("")
	m, _, err := readMetaIn(ctx, sub, id)
	switch {
	case errors.Is(err, ErrNotFound):
		sub.Close()
		return s, false
	case err != nil:
		s.Err = opError("read session", sub.Locate(sessionFile), err)
	default:
		s.setMeta(m)
	}
	st := r.readerOn(sub)
	defer st.Close()
	infos, err := st.List(ctx)
	if err != nil {
		if s.Err == nil {
			s.Err = err
		}
		return s, true
	}
	s.setCheckpoints(infos)
	return s, true
}

// nextFreeID returns the number after the highest all-digit name in the
// root, of a child store (a session or not yet one) or of an object (a
// file, which a session's directory could not be created over), and of
// the IDs already tried.
func (r *Sessions) nextFreeID(ctx context.Context, tried []string) (string, error) {
	names, err := r.b.Children(ctx)
	if err != nil {
		return "", err
	}
	objs, err := r.b.List(ctx)
	if err != nil {
		return "", err
	}
	for _, o := range objs {
		names = append(names, o.Name)
	}
	return nextSessionID(append(names, tried...))
}

// createBackend makes the session id, or, if id is "", the next numbered
// one.
func (r *Sessions) createBackend(ctx context.Context, op, id string, meta map[string]string) (Session, error) {
	if r.cfg.readOnly {
		return Session{}, opError(op, r.path(id), ErrReadOnly)
	}
	numbered := id == ""
	var tried []string
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return Session{}, opError(op, r.path(id), err)
		}
		if numbered {
			var err error
			if id, err = r.nextFreeID(ctx, tried); err != nil {
				return Session{}, opError(op, r.dir, err)
			}
			tried = append(tried, id)
		}
		err := r.publish(ctx, id, claimCreate, sessionMeta{Meta: meta}, nil)
		if numbered && errors.Is(err, ErrExists) && attempt < maxNumberAttempts {
			continue // another worker took the number first
		}
		if err != nil {
			return Session{}, opError(op, r.path(id), err)
		}
		s, _ := r.describeBackend(context.WithoutCancel(ctx), id)
		return s, nil
	}
}

func (r *Sessions) forkBackend(ctx context.Context, from string, step int64, meta map[string]string) (Session, error) {
	fail := func(err error) (Session, error) {
		return Session{}, &Error{Op: "fork session", Step: step, HasStep: true, Path: r.path(from), Err: err}
	}
	if err := ValidSessionID(from); err != nil {
		return fail(err)
	}
	if err := checkStep(step); err != nil {
		return fail(err)
	}
	if r.cfg.readOnly {
		return fail(ErrReadOnly)
	}
	src, err := r.b.Sub(ctx, from, false)
	if err != nil {
		return fail(err)
	}
	if _, _, err := readMetaIn(ctx, src, from); err != nil {
		src.Close()
		if !errors.Is(err, ErrNotFound) {
			err = fmt.Errorf("session %q: %w", from, err)
		}
		return fail(err)
	}
	st := r.readerOn(src)
	defer st.Close()
	if _, _, err := st.Load(ctx, step); err != nil {
		return fail(inner(err, st.dir))
	}
	infos, err := st.List(ctx)
	if err != nil {
		return fail(inner(err, st.dir))
	}
	m := sessionMeta{Parent: from, ParentStep: &step, Meta: meta}
	fill := func(id string, dst Backend) ([]string, error) {
		return r.copyCheckpointsTo(ctx, st.b, infos, id, dst, step)
	}
	var tried []string
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		id, err := r.nextFreeID(ctx, tried)
		if err != nil {
			return fail(err)
		}
		tried = append(tried, id)
		err = r.publish(ctx, id, claimFork, m, fill)
		if errors.Is(err, ErrExists) && attempt < maxNumberAttempts {
			continue // another worker took the number first
		}
		if err != nil {
			return fail(err)
		}
		s, _ := r.describeBackend(context.WithoutCancel(ctx), id)
		return s, nil
	}
}

// publish makes the session id: it claims the ID (as op), lets fill put
// checkpoints in the child store and return their names, then creates
// session.json. If anything fails, it removes what it made (the claim and
// what fill made) and the session is not visible.
func (r *Sessions) publish(ctx context.Context, id, op string, m sessionMeta, fill func(id string, dst Backend) ([]string, error)) error {
	dst, err := r.b.Sub(ctx, id, false)
	if err != nil {
		return err
	}
	defer dst.Close()
	mine, err := r.claim(ctx, dst, id, op)
	if err != nil {
		return err
	}
	var made []string
	if mine {
		made = append(made, claimName)
	}
	published := false
	defer func() {
		if !published && len(made) > 0 {
			// What this call made is its own: no other caller writes under
			// a claim it does not hold, and none adopts a fork's.
			dst.Remove(context.WithoutCancel(ctx), made...)
		}
	}()
	if fill != nil {
		names, err := fill(id, dst)
		made = append(made, names...)
		if err != nil {
			return err
		}
	}
	r.stamp(&m, id)
	write, err := encodeSessionMeta(m)
	if err != nil {
		return err
	}
	if _, err := dst.Create(ctx, sessionFile, write); err != nil {
		if !errors.Is(err, ErrExists) {
			return err
		}
		if op == claimFork {
			// Only RemoveStaging's tombstone is created over a fork's
			// claim: what the fork made is removed, as it wants.
			return fmt.Errorf("%w: session %q was abandoned (by RemoveStaging) while it was being forked", ErrExists, id)
		}
		// Another creation went on over the claim and won: the claim is
		// part of its session now.
		published = true
		return fmt.Errorf("%w: session %q", ErrExists, id)
	}
	published = true
	return nil
}

// claim takes the ID of the child store dst for a session made by op, and
// reports whether it created the claim (mine) or goes on over a
// creation's. It returns an error wrapping ErrExists if the session exists,
// if a fork holds the ID (or, for a fork, any claim), or if the child holds
// objects that are not a session's: they are never adopted.
func (r *Sessions) claim(ctx context.Context, dst Backend, id, op string) (mine bool, err error) {
	if _, err := dst.Stat(ctx, sessionFile); err == nil {
		return false, fmt.Errorf("%w: session %q", ErrExists, id)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	c, err := json.Marshal(sessionClaim{Op: op, Token: rand.Text(), Time: r.now(time.Time{})})
	if err != nil {
		return false, err
	}
	for attempt := 1; !mine; attempt++ {
		_, err = dst.Create(ctx, claimName, func(w io.Writer) error {
			_, err := w.Write(c)
			return err
		})
		if err == nil {
			mine = true
			break
		}
		if !errors.Is(err, ErrExists) {
			return false, err
		}
		if op == claimFork {
			return false, fmt.Errorf("%w: session ID %q is taken", ErrExists, id)
		}
		held, err := readClaim(ctx, dst)
		if errors.Is(err, fs.ErrNotExist) && attempt < 3 {
			continue // its maker failed and removed it: claim again
		}
		if err != nil {
			return false, fmt.Errorf("%w: session %q is being made by another call (its claim: %w)", ErrExists, id, err)
		}
		if held.Op != claimCreate {
			return false, fmt.Errorf("%w: a fork holds session ID %q (it is running, or a crash interrupted it and RemoveStaging removes what it left)", ErrExists, id)
		}
		break // a creation's claim: go on over it, session.json picks the winner
	}
	objs, err := dst.List(ctx)
	if err != nil {
		return mine, err
	}
	// Checkpoints and side files never start with a dot: what does (the
	// claim, temporary files, a store's lock or lease) is no state.
	var foreign []string
	exists := false
	for _, o := range objs {
		if o.Name == sessionFile {
			exists = true
		} else if !strings.HasPrefix(o.Name, ".") {
			foreign = append(foreign, o.Name)
		}
	}
	switch {
	case exists:
		err = fmt.Errorf("%w: session %q", ErrExists, id)
	case len(foreign) > 0:
		slices.Sort(foreign)
		err = fmt.Errorf("%w: %s holds objects that are not a session's (%s): a session is not made over them", ErrExists, dst.Locate(""), strings.Join(foreign[:min(len(foreign), 3)], ", "))
	default:
		return mine, nil
	}
	if mine && !exists {
		dst.Remove(context.WithoutCancel(ctx), claimName)
	}
	return false, err
}

func readClaim(ctx context.Context, b Backend) (sessionClaim, error) {
	var c sessionClaim
	rc, _, err := b.Open(ctx, claimName)
	if err != nil {
		return c, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxClaimSize))
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return c, fmt.Errorf("%w: %s: %w", ErrCorrupt, claimName, err)
	}
	return c, nil
}

// copyCheckpointsTo copies the checkpoints of infos (read from src) with
// steps up to step into dst, and returns the names it created. Like the
// directory's Fork, it skips a checkpoint pruned meanwhile and then checks
// that the newest checkpoint that loads in dst is step.
func (r *Sessions) copyCheckpointsTo(ctx context.Context, src Backend, infos []Info, id string, dst Backend, step int64) ([]string, error) {
	var made []string
	for _, info := range infos {
		if info.Step > step || info.Kind == KindRolling && info.Format == 0 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return made, err
		}
		name := info.Name()
		err := copyObject(ctx, src, dst, name)
		if errors.Is(err, fs.ErrNotExist) {
			continue // pruned meanwhile by the session's writer: the check below sees to it
		}
		if err != nil {
			return made, fmt.Errorf("copy %s: %w", name, err)
		}
		made = append(made, name)
	}
	return made, r.checkForkIn(ctx, id, dst, step)
}

func copyObject(ctx context.Context, src, dst Backend, name string) error {
	rc, _, err := src.Open(ctx, name)
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = dst.Create(ctx, name, func(w io.Writer) error {
		_, err := io.Copy(w, rc)
		return err
	})
	return err
}

// checkForkIn is checkFork on a Backend: it drops a rolling file past step
// from dst, then the newest checkpoint that loads must be step.
func (r *Sessions) checkForkIn(ctx context.Context, id string, dst Backend, step int64) error {
	view, err := r.b.Sub(ctx, id, false) // the reader owns and closes it
	if err != nil {
		return err
	}
	st := r.readerOn(view)
	defer st.Close()
	infos, err := st.List(ctx)
	if err != nil {
		return inner(err, st.dir)
	}
	for _, info := range infos {
		if info.Kind == KindRolling && (info.Step > step || info.Format == 0) {
			if _, err := dst.Remove(ctx, info.Name()); err != nil {
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

func (r *Sessions) setMetaBackend(ctx context.Context, id string, meta map[string]string) error {
	path := r.path(id)
	fail := func(err error) error { return opError("set session meta", path, err) }
	if err := ValidSessionID(id); err != nil {
		return fail(err)
	}
	if r.cfg.readOnly {
		return fail(ErrReadOnly)
	}
	sub, err := r.b.Sub(ctx, id, false)
	if err != nil {
		return fail(err)
	}
	defer sub.Close()
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

func openSessionBackend[T any](r *Sessions, id string, opts []Option) (*Store[T], error) {
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
	ctx := context.Background()
	sub, err := r.b.Sub(ctx, id, false)
	if err != nil {
		return nil, opError("open session", path, err)
	}
	if _, _, err := readMetaIn(ctx, sub, id); err != nil {
		sub.Close()
		return nil, opError("open session", sub.Locate(sessionFile), err)
	}
	return OpenBackend[T](sub, all...)
}

// removeStagingBackend removes what crashed forks left: for each child
// store with a fork's claim and no session.json, it creates session.json
// as a tombstone (a fork still running there then fails to publish), then
// removes every other object of the child.
func (r *Sessions) removeStagingBackend(ctx context.Context) ([]string, error) {
	fail := func(removed []string, err error) ([]string, error) {
		return removed, opError("remove staging", r.dir, err)
	}
	if r.cfg.readOnly {
		return fail(nil, ErrReadOnly)
	}
	ids, err := r.b.Children(ctx)
	if err != nil {
		return fail(nil, err)
	}
	slices.Sort(ids)
	var removed []string
	for _, id := range ids {
		if ValidSessionID(id) != nil {
			continue
		}
		if err := ctx.Err(); err != nil {
			return fail(removed, err)
		}
		ok, err := r.abandon(ctx, id)
		if err != nil {
			return fail(removed, err)
		}
		if ok {
			removed = append(removed, r.path(id))
			r.cfg.logger.Warn("checkpoint: removed a session left half-made by a crash", "path", r.path(id))
		}
	}
	return removed, nil
}

// abandon cleans the child store id if a crashed fork left it, and reports
// whether it did.
func (r *Sessions) abandon(ctx context.Context, id string) (bool, error) {
	sub, err := r.b.Sub(ctx, id, false)
	if err != nil {
		return false, err
	}
	defer sub.Close()
	_, _, err = readMetaIn(ctx, sub, id)
	if !errors.Is(err, ErrNotFound) {
		return false, nil // a session (or a damaged one, which List shows): not ours to remove
	}
	if _, err := sub.Stat(ctx, sessionFile); errors.Is(err, fs.ErrNotExist) {
		c, err := readClaim(ctx, sub)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrCorrupt) || err == nil && c.Op != claimFork {
			return false, nil // no fork's: nothing of it could be adopted by mistake
		}
		if err != nil {
			return false, err
		}
		write, err := encodeSessionMeta(sessionTombstone{ID: id, Abandoned: "a fork a crash interrupted, removed by RemoveStaging", Time: r.now(time.Time{})})
		if err != nil {
			return false, err
		}
		if _, err := sub.Create(ctx, sessionFile, write); errors.Is(err, ErrExists) {
			return r.abandon(ctx, id) // the fork finished after all, or another RemoveStaging won
		} else if err != nil {
			return false, err
		}
	}
	// session.json is a tombstone now, made here or by a RemoveStaging that
	// a crash interrupted: no fork can publish here.
	objs, err := sub.List(ctx)
	if err != nil {
		return false, err
	}
	var names []string
	for _, o := range objs {
		if o.Name != sessionFile {
			names = append(names, o.Name)
		}
	}
	if len(names) == 0 {
		return false, nil
	}
	if _, err := sub.Remove(ctx, names...); err != nil {
		return false, err
	}
	return true, nil
}
