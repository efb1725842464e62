package checkpoint

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/gocheckpoint/checkpoint/internal/format"
	"io"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gocheckpoint/checkpoint/internal/names"
	"github.com/gocheckpoint/checkpoint/storage"
)

// The protocol of Sessions, the same on every Backend (a local directory,
// object storage). No lock spans the root: a bucket shared by many workers
// has none that a crashed worker releases at once. Instead every step that
// must have one winner is a Backend.Create:
//
//   - A session is the child store Sub(id). It exists exactly when its
//     session.json exists (and is not a tombstone, below).
//   - Whoever makes a session first holds the claim (claimName) in the
//     child: the claim takes the ID, so that no two calls ever put a
//     session into one child. A claim says who made it (claimCreate or
//     claimFork) and carries a random token. A call goes on only while it
//     holds the claim, and removes only its own. Create and New take over
//     a creation's claim whose session.json is missing (a racing
//     creation, or one a crash interrupted: it left no checkpoints) with
//     a conditional Replace; a claim taken over is not removed before
//     session.json exists (see claim). Nobody takes over a fork's.
//   - A Create retried by object storage after it landed fails with
//     ErrExists on the caller's own object: a claim holding the call's
//     token, or a session.json holding its bytes, is its own.
//   - A fork links (Linker) or copies the checkpoints into the child, each
//     durable before the next step; session.json is created last: a crash
//     before that leaves no visible session, since a child with a claim and
//     no session.json is none. Once session.json is there, the claim is
//     removed: the session holds only its session.json and its store's
//     objects.
//   - A call that fails removes what it made, the claim last, and then the
//     child itself where the Backend keeps empty children (ChildRemover).
//     A child that holds only hidden objects (names starting with a dot:
//     a temporary file of a Create a crash interrupted) is no session
//     either, so that no instant of a creation shows one.
//   - RemoveStaging removes what crashed forks left (a fork's claim, no
//     session.json): it first creates session.json as a tombstone, so that
//     a fork still running there can never publish, then removes the rest.
//     The tombstone stays: the ID is never used again. A claim beside a
//     valid session.json (a crash came between publishing and removing
//     it) is removed, never taken for a fork's.
//   - Copy puts a session into a root (copied from another root) under a
//     claim of its own (claimCopy), taken while it holds the session's
//     writer lock: a copy that finds another copy's claim took the lock
//     that copy held, so that copy ended, and it takes the claim over and
//     resumes the work (see copy.go). Nobody else takes it over, and
//     RemoveStaging leaves it for the rerun that completes it.
//   - Delete hides a session by replacing its session.json with a
//     tombstone of its own (abandonedDeleted) under the session's writer
//     lock, then removes the rest; unlike RemoveStaging's, that tombstone
//     goes last and the ID is free again (see session_delete.go).
//   - Earlier releases made sessions in a directory under a lock file
//     (sessionsLockName), in hidden staging directories (stagingPrefix)
//     renamed into place: their sessions are the same, and what they left
//     is removed by removeLegacy.
const (
	// claimName is the object that takes a session's ID. Its leading dot
	// keeps it out of every layout and every side file name.
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
	// staleSessionTemp is the age past which a temporary file of
	// session.json is taken for one an interrupted SetMeta left: a SetMeta
	// writes its few hundred bytes in far less.
	staleSessionTemp = time.Minute
	// sessionsLockName is the lock file of a root that earlier releases
	// held while making a session in a directory.
	sessionsLockName = ".sessions.lock"
	// stagingPrefix starts the name of the hidden directory in which
	// earlier releases assembled a new session before renaming it into
	// place.
	stagingPrefix = ".staging-"
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

// readMetaIn reads the session.json of the session id in its child store
// sub, and returns it with its Object (for a conditional Replace). Where
// there is no session it returns an error wrapping ErrNotFound: no
// session.json and either a claim (a session being made, or one a crash
// interrupted) or no object but hidden ones, or a tombstone. A child that
// holds other objects but no session.json is a damaged session:
// ErrCorrupt. If id is "" (not known yet: a mapped name, see
// ValidSessionID) nothing is checked against it; otherwise the ID that
// the session.json of a mapped ID records must be id (see checkID).
func readMetaIn(ctx context.Context, sub Backend, id string) (sessionMeta, Object, error) {
	rc, obj, err := sub.Open(ctx, sessionFile)
	for attempt := 1; errors.Is(err, fs.ErrNotExist); attempt++ {
		err = missingMeta(ctx, sub, id)
		if !errors.Is(err, errMadeMeanwhile) || attempt == 3 {
			return sessionMeta{}, obj, err
		}
		// Another call made the session between the two looks: read
		// what it made.
		rc, obj, err = sub.Open(ctx, sessionFile)
	}
	switch {
	case errors.Is(err, storage.ErrNotRegular):
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
	if err == nil && id != "" {
		err = checkID(m.ID, id, names.SessionName(id))
	}
	return m, obj, err
}

// checkID checks that recorded, the ID that the session.json of the child
// store name records, is the session's, id, or, if id is "" (listing),
// any ID whose stored name is name. Legacy names are their sessions' IDs
// (see ValidSessionID): what their session.json records is checked only
// to be a Legacy ID, or none, as earlier releases took no other and
// checked nothing (a mapped session's directory renamed to a Legacy name
// is damaged, never that name's session). Another ID of the same name (a SHA-256
// collision) is ErrNotFound: id has no session; an ID of another name (a
// directory copied or renamed by hand) is ErrCorrupt.
func checkID(recorded, id, name string) error {
	switch {
	case !names.IsMapped(name):
		if recorded != "" && !names.Legacy(recorded) {
			return fmt.Errorf("%w: %s records the session ID %q, which is not stored under the name %s (a directory copied or renamed there?)", ErrCorrupt, sessionFile, recorded, name)
		}
		if id != "" && recorded != id && strings.EqualFold(recorded, id) {
			// A case-insensitive file system (macOS, Windows) showed
			// the directory of another ID for this one: id has none.
			return fmt.Errorf("%w: no session %q: its directory %s holds the session %q (IDs that differ only in case share a directory on a case-insensitive file system)", ErrNotFound, id, name, recorded)
		}
		return nil
	case names.SessionName(recorded) != name || recorded == "":
		return fmt.Errorf("%w: %s records the session ID %q, which is not stored under the name %s (a directory copied or renamed there?)", ErrCorrupt, sessionFile, recorded, name)
	case id != "" && recorded != id:
		return fmt.Errorf("%w: no session %q: its stored name %s holds the session %q", ErrNotFound, id, name, recorded)
	}
	return nil
}

// errMadeMeanwhile says that a session.json missing at first is there at
// a second look: another call made the session in between.
var errMadeMeanwhile = errors.New("session.json was made meanwhile")

// missingMeta tells why the child store sub of id has no session.json:
// ErrNotFound if it is no session, ErrCorrupt if it is a damaged one, and
// errMadeMeanwhile (with ErrCorrupt, should the next look miss it again)
// if its listing shows one after all.
func missingMeta(ctx context.Context, sub Backend, id string) error {
	if id == "" {
		id = sub.Locate("")
	}
	objs, err := sub.List(ctx)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: no session %q", ErrNotFound, id) // its directory went meanwhile (Delete)
	}
	if err != nil {
		return err
	}
	visible := false
	for _, o := range objs {
		if o.Name == sessionFile {
			return fmt.Errorf("%w: %w", ErrCorrupt, errMadeMeanwhile)
		}
		if o.Name == claimName {
			return fmt.Errorf("%w: no session %q (it is being made, or a crash interrupted its making)", ErrNotFound, id)
		}
		visible = visible || !strings.HasPrefix(o.Name, ".")
	}
	if !visible {
		return fmt.Errorf("%w: no session %q", ErrNotFound, id)
	}
	return fmt.Errorf("%w: missing %s", ErrCorrupt, sessionFile)
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
	if err := format.Sealed(data); err != nil {
		return m, fmt.Errorf("%s: %w", sessionFile, err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("%w: %s: %w", ErrCorrupt, sessionFile, err)
	}
	if m.Format != sessionFormat {
		return m, fmt.Errorf("%w: %s: %w %d (this package reads version %d)", ErrCorrupt, sessionFile, errFormat, m.Format, sessionFormat)
	}
	return m, nil
}

// encodeSessionMeta returns a writer of m as the content of session.json.
func encodeSessionMeta(m any) (func(io.Writer) error, error) {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("%w: encode %s: %w", ErrInvalid, sessionFile, err)
	}
	data = append(data, '\n')
	if len(data) > maxSessionFileSize {
		// No reader would take it: the session would read as damaged.
		return nil, fmt.Errorf("%w: %s would be %d bytes, more than the %d a reader takes: the metadata is too large", ErrInvalid, sessionFile, len(data), maxSessionFileSize)
	}
	return func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}, nil
}

// readerOn opens a ReadOnly store, without hooks, on the child store sub,
// which it owns from then on, to see what a session holds without knowing
// its T.
func (r *Sessions) readerOn(sub Backend) *Store[json.RawMessage] {
	cfg := r.cfg
	cfg.readOnly = true
	cfg.hooks = Hooks{}
	st, _ := newStore[json.RawMessage](sub, cfg) // a ReadOnly store takes no lock: it cannot fail
	return st
}

// describe reads what List reports of the session id, stored under name,
// and whether it is a session (see readMetaIn); damage goes to Err. If id
// is "" (a mapped name, listed), the ID is the one its session.json
// records, once checked (see checkID); a damaged session's stays "".
func (r *Sessions) describe(ctx context.Context, id, name string) (Session, bool) {
	s := Session{ID: id, Dir: r.b.Locate(name)}
	sub, err := r.b.Sub(ctx, name, false)
	if err != nil {
		s.Err = opError("read session", s.Dir, err)
		return s, true
	}
	s.Dir = sub.Locate("")
	m, _, err := readMetaIn(ctx, sub, id)
	if err == nil && id == "" {
		if err = checkID(m.ID, "", name); err == nil {
			s.ID = m.ID
		}
	}
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
	r.observe(s.Active())
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

// nextSessionID returns the number after the highest all-digit name of
// taken, with at least three digits. Names are compared as decimal numbers
// of any length, not as machine integers, so that numbering goes on past
// any ID Create took ("9223372036854775807" is followed by
// "9223372036854775808"). Past the longest ID that is its own stored name
// (64 nines: see ValidSessionID) there is no number
// left: that is an error, every time, and nothing is created.
func nextSessionID(taken []string) (string, error) {
	highest := "0"
	for _, name := range taken {
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
	if len(next) > names.MaxLegacyID {
		return "", fmt.Errorf("%w: no session number is left after %q (a numbered session ID has at most %d digits): name new sessions with Create", ErrInvalid, highest, names.MaxLegacyID)
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

// stamp completes the metadata of a session being made with the ID id: its
// format, ID, creation time and a copy of the caller's fields.
func (r *Sessions) stamp(m *sessionMeta, id string) {
	m.Format, m.ID = sessionFormat, id
	m.Created = r.now(time.Time{})
	m.Updated = m.Created
	m.Meta = maps.Clone(m.Meta)
}

// create makes the session id, or, if id is "", the next numbered one.
func (r *Sessions) create(ctx context.Context, op, id string, meta map[string]string) (Session, error) {
	if r.cfg.readOnly {
		return Session{}, opError(op, r.path(id), ErrReadOnly)
	}
	name := ""
	if id != "" {
		name = r.lookup(ctx, id)
		// What is there and no child store (a file, a symbolic link, a
		// named pipe) takes the ID: a session is never made through it.
		if what, err := r.nonChild(ctx, name); err != nil || what != "" {
			if err == nil {
				err = fmt.Errorf("%w: session ID %q is taken by %s, not a session directory", ErrExists, id, what)
			}
			return Session{}, opError(op, r.path(id), err)
		}
	}
	r.removeLegacyOnWrite(ctx)
	s, err := r.publishNumbered(ctx, id, name, claimCreate, sessionMeta{Meta: meta}, nil)
	if err != nil {
		return Session{}, opError(op, r.path(s.ID), err)
	}
	return s, nil
}

// fork makes the next numbered session of the checkpoints of from up to
// step (see Fork).
func (r *Sessions) fork(ctx context.Context, from string, step int64, meta map[string]string) (Session, error) {
	r.removeLegacyOnWrite(ctx)
	src, err := r.sub(ctx, from)
	if err != nil {
		return Session{}, err
	}
	if _, _, err := readMetaIn(ctx, src, from); err != nil {
		src.Close()
		if !errors.Is(err, ErrNotFound) {
			err = fmt.Errorf("session %q: %w", from, err)
		}
		return Session{}, err
	}
	st := r.readerOn(src)
	defer st.Close()
	// The step must verify, whatever it holds: Load reads a byte payload
	// to its end and verifies it before it says ErrPayloadMismatch.
	if _, _, err := st.Load(ctx, step); err != nil && !errors.Is(err, ErrPayloadMismatch) {
		return Session{}, inner(err, st.dir)
	}
	infos, err := st.List(ctx)
	if err != nil {
		return Session{}, inner(err, st.dir)
	}
	m := sessionMeta{Parent: from, ParentStep: &step, Meta: meta}
	fill := func(id string, dst Backend) ([]string, error) {
		return r.forkInto(ctx, st.b, infos, id, dst, step)
	}
	return r.publishNumbered(ctx, "", "", claimFork, m, fill)
}

// publishNumbered publishes the session id under the name name, or, if id
// is "", the next number that no child store uses (a number is its own
// name), going on to the next when another worker takes it first. The
// Session it returns has its ID set even when publishing fails.
func (r *Sessions) publishNumbered(ctx context.Context, id, name, op string, m sessionMeta, fill func(id string, dst Backend) ([]string, error)) (Session, error) {
	numbered := id == ""
	var tried []string
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return Session{ID: id}, err
		}
		if numbered {
			var err error
			if id, err = r.nextFreeID(ctx, tried); err != nil {
				return Session{}, err
			}
			tried = append(tried, id)
			name = names.SessionName(id)
		}
		err := r.publish(ctx, id, name, op, m, fill)
		if numbered && errors.Is(err, ErrExists) && attempt < maxNumberAttempts {
			continue // another worker took the number first
		}
		if err != nil {
			return Session{ID: id}, err
		}
		// The session exists now: report it, and any trouble reading it
		// back in its Err, but not as a failure (a caller that retried
		// would make a second one).
		s, _ := r.describe(context.WithoutCancel(ctx), id, name)
		return s, nil
	}
}

// publish makes the session id in the child store name: it claims the ID
// (as op), lets fill put
// checkpoints in the child store and return their names, then creates
// session.json. If anything fails, it removes what it made (what fill
// made, then its claim if it is still its own, then the child if it is
// empty) and the session is not visible.
func (r *Sessions) publish(ctx context.Context, id, name, op string, m sessionMeta, fill func(id string, dst Backend) ([]string, error)) (err error) {
	dst, err := r.b.Sub(ctx, name, false)
	if err != nil {
		return err
	}
	var made []string // what fill made
	token, fresh := "", false
	published := false
	defer func() {
		if published {
			dst.Close()
			return
		}
		// What this call made is its own: no other caller writes under a
		// claim it does not hold. The claim goes last, on its own (a
		// Remove of many names may go in any order), so that a crash
		// meanwhile leaves the child out of sight; a claim taken over
		// from another creation stays (see claim).
		ctx := context.WithoutCancel(ctx)
		var rerr error
		if len(made) > 0 {
			_, rerr = dst.Remove(ctx, made...)
		}
		if rerr == nil && fresh {
			rerr = releaseClaim(ctx, dst, token)
		}
		dst.Close() // a directory: release it before it goes
		if rerr == nil {
			r.dropChild(ctx, name)
		}
	}()
	token, fresh, err = r.claim(ctx, dst, id, op)
	if err != nil {
		return err
	}
	if fill != nil {
		names, err := fill(id, dst)
		made = names
		if err != nil {
			return err
		}
	}
	r.stamp(&m, id)
	m.Maker = token
	write, err := encodeSessionMeta(m)
	if err != nil {
		return err
	}
	if op == claimCreate {
		// Another creation may have taken the claim over: the session is
		// then its to publish.
		held, _, err := readClaimObject(ctx, dst)
		if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, ErrCorrupt) {
			return err
		}
		if err != nil || held.Token != token {
			return fmt.Errorf("%w: session %q is being made by another call", ErrExists, id)
		}
	}
	if _, err := dst.Create(ctx, sessionFile, write); err != nil {
		if !errors.Is(err, ErrExists) {
			return err
		}
		if mine, rerr := holdsContent(ctx, dst, sessionFile, write); rerr != nil {
			return errors.Join(err, rerr)
		} else if !mine {
			if op == claimFork {
				// Only RemoveStaging's tombstone is created over a fork's
				// claim: what the fork made is removed, as it wants.
				return fmt.Errorf("%w: session %q was abandoned (by RemoveStaging) while it was being forked", ErrExists, id)
			}
			return fmt.Errorf("%w: session %q", ErrExists, id)
		}
		// This call's own Create, retried after it landed (object
		// storage): the session is published.
	}
	published = true
	// The session exists now, whatever becomes of the claim: it took the
	// ID while the session was made, and session.json holds it from here
	// on; no claim beside it guards anything. A claim a crash leaves here
	// is a hidden object, and harmless (RemoveStaging removes it).
	dst.Remove(context.WithoutCancel(ctx), claimName)
	return nil
}

// holdsContent reports whether the object name of b holds exactly the
// bytes write produces: whether an object whose Create failed with
// ErrExists is the caller's own, a Create retried after it landed.
func holdsContent(ctx context.Context, b Backend, name string, write func(io.Writer) error) (bool, error) {
	var want bytes.Buffer
	if err := write(&want); err != nil {
		return false, err
	}
	rc, _, err := b.Open(ctx, name)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer rc.Close()
	got, err := io.ReadAll(io.LimitReader(rc, int64(want.Len())+1))
	if err != nil {
		return false, err
	}
	return bytes.Equal(got, want.Bytes()), nil
}

// dropChild removes the child store name if the Backend keeps empty ones
// (ChildRemover) and it is empty: a failed creation leaves nothing. A
// child that holds anything (another call's claim, a session) stays.
func (r *Sessions) dropChild(ctx context.Context, name string) {
	if cr, ok := storage.As[storage.ChildRemover](r.b); ok {
		cr.RemoveChild(context.WithoutCancel(ctx), name)
	}
}

// claim takes the ID of the child store dst for a session made by op. It
// returns the claim's token and whether it created the claim (fresh), or
// took over another creation's with a conditional Replace. Whoever holds
// the claim holds the ID alone: a creation publishes only while the claim
// is its own, and removes only its own; a creation whose claim another
// creation took over leaves the claim to it and fails with ErrExists.
// Creations never fill the child, so one taking over another's claim
// adopts nothing; a claim taken over is never removed before session.json
// exists (the creation it was taken from may still publish), so that a
// fork never claims an ID a creation may still publish over. A creation's
// claim a crash left is taken over the same way.
//
// It returns an error wrapping ErrExists if the session exists, if a fork
// holds the ID (or, for a fork, any claim), if another creation took the
// claim first, or if the child holds objects that are not a session's:
// they are never adopted.
func (r *Sessions) claim(ctx context.Context, dst Backend, id, op string) (token string, fresh bool, err error) {
	if _, err := dst.Stat(ctx, sessionFile); err == nil {
		if deleted, _ := deletedIn(ctx, dst); deleted {
			return "", false, fmt.Errorf("%w: session %q is being deleted, or a crash interrupted its deletion (Delete, RemoveStaging or PruneIdle removes what is left)", ErrExists, id)
		}
		return "", false, fmt.Errorf("%w: session %q", ErrExists, id)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", false, err
	}
	token = rand.Text()
	c, err := json.Marshal(sessionClaim{Op: op, Token: token, Time: r.now(time.Time{})})
	if err != nil {
		return "", false, err
	}
	write := func(w io.Writer) error {
		_, err := w.Write(c)
		return err
	}
	for attempt := 1; ; attempt++ {
		_, err = dst.Create(ctx, claimName, write)
		if err == nil {
			fresh = true
			break
		}
		if errors.Is(err, fs.ErrNotExist) {
			// A Delete of the ID removed the child while the claim was
			// written in it (a directory): it is done, claim again.
			if attempt < 3 {
				continue
			}
			return "", false, fmt.Errorf("%w: session %q is being deleted: %w", ErrExists, id, err)
		}
		if !errors.Is(err, ErrExists) {
			return "", false, err
		}
		held, obj, err := readClaimObject(ctx, dst)
		if errors.Is(err, fs.ErrNotExist) && attempt < 3 {
			continue // its maker failed and removed it: claim again
		}
		if err != nil {
			return "", false, fmt.Errorf("%w: session %q is being made by another call (its claim: %w)", ErrExists, id, err)
		}
		if held.Token == token {
			fresh = true // this call's own Create, retried after it landed (object storage)
			break
		}
		if op == claimFork {
			return "", false, fmt.Errorf("%w: session ID %q is taken", ErrExists, id)
		}
		if held.Op == claimCopy {
			return "", false, fmt.Errorf("%w: a copy (Copy, checkpoint cp) holds session ID %q (it is running, or a crash interrupted it and running it again completes it)", ErrExists, id)
		}
		if held.Op != claimCreate {
			return "", false, fmt.Errorf("%w: a fork holds session ID %q (it is running, or a crash interrupted it and RemoveStaging removes what it left)", ErrExists, id)
		}
		// A creation's claim: take it over, if nobody changes it first.
		if _, err := dst.Replace(ctx, claimName, obj.Version, write); err != nil {
			if held, _, rerr := readClaimObject(ctx, dst); rerr == nil && held.Token == token {
				break // this call's own Replace, retried after it landed
			}
			if errors.Is(err, ErrConflict) || errors.Is(err, fs.ErrNotExist) {
				return "", false, fmt.Errorf("%w: session %q is being made by another call", ErrExists, id)
			}
			return "", false, err
		}
		break
	}
	objs, err := dst.List(ctx)
	if err != nil {
		return token, fresh, err
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
		return token, fresh, nil
	}
	// A claim beside a session guards nothing; one this call took over
	// beside foreign objects stays, as any claim taken over does.
	if exists || fresh {
		releaseClaim(context.WithoutCancel(ctx), dst, token)
	}
	return "", false, err
}

// releaseClaim removes the claim of b if it is still the one with token.
func releaseClaim(ctx context.Context, b Backend, token string) error {
	held, _, err := readClaimObject(ctx, b)
	if errors.Is(err, fs.ErrNotExist) || err == nil && held.Token != token {
		return nil // removed (by RemoveStaging), or taken over by another creation
	}
	if err != nil {
		return err
	}
	_, err = b.Remove(ctx, claimName)
	return err
}

func readClaim(ctx context.Context, b Backend) (sessionClaim, error) {
	c, _, err := readClaimObject(ctx, b)
	return c, err
}

// readClaimObject reads the claim of b, and returns it with its Object.
func readClaimObject(ctx context.Context, b Backend) (sessionClaim, Object, error) {
	var c sessionClaim
	rc, obj, err := b.Open(ctx, claimName)
	if err != nil {
		return c, obj, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxClaimSize))
	if err != nil {
		return c, obj, err
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return c, obj, fmt.Errorf("%w: %s: %w", ErrCorrupt, claimName, err)
	}
	return c, obj, nil
}

// forkInto puts the checkpoints of infos (read from src) with steps up to
// step into dst, the child store of the new session id, and returns the
// names it created: a link each where dst is a Linker, a copy where it is
// not or linking fails, and always a copy of the rolling file (a link
// would change a local file's inode change time, and so its Version,
// under the source's writer, whose next conditional Replace of it would
// fail). A checkpoint pruned meanwhile by the source's writer is skipped;
// then checkFork checks what dst holds.
func (r *Sessions) forkInto(ctx context.Context, src Backend, infos []Info, id string, dst Backend, step int64) ([]string, error) {
	linker, _ := storage.As[storage.Linker](dst)
	if r.cfg.readPlaintext { // (only with Encrypt)
		// A link keeps the bytes as they are: a plaintext checkpoint
		// that ReadPlaintext reads is copied, so encrypted.
		linker = nil
	}
	var made []string
	for _, info := range infos {
		if info.Step > step || info.Kind == KindRolling && info.Format == 0 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return made, err
		}
		name := info.Name()
		err := errors.ErrUnsupported
		if linker != nil && info.Kind != KindRolling {
			_, err = linker.Link(ctx, src, name)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) && ctx.Err() == nil {
			err = copyObject(ctx, src, dst, name)
		}
		if errors.Is(err, fs.ErrNotExist) {
			continue // pruned meanwhile by the session's writer: checkFork sees to it
		}
		if err != nil {
			return made, fmt.Errorf("copy %s: %w", name, err)
		}
		made = append(made, name)
	}
	listed := make(map[string]Info, len(made))
	for _, info := range infos {
		listed[info.Name()] = info
	}
	return made, r.checkFork(ctx, id, dst, step, listed)
}

// copyObject copies the object name of src to a new object of dst.
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

// checkFork checks the checkpoints gathered in dst, the child store of the
// new session id, which no writer can change: a running writer of the
// source may have pruned the step, moved its rolling file on, or rewritten
// its history (Truncate, then saves of the same steps) between the listing
// and the copies. A rolling file past step is dropped; every other
// checkpoint must be the one listed (its step, kind, save time and size),
// so that the fork never mixes two histories; then the newest checkpoint
// that loads must be step.
func (r *Sessions) checkFork(ctx context.Context, id string, dst Backend, step int64, listed map[string]Info) error {
	view, err := r.b.Sub(ctx, names.SessionName(id), false) // the reader owns and closes it
	if err != nil {
		return err
	}
	st := r.readerOn(view)
	defer st.Close()
	infos, err := st.List(ctx)
	if err != nil {
		return inner(err, st.dir)
	}
	changed := fmt.Errorf("%w: the checkpoints up to step %d changed while they were being forked (a running writer pruned or replaced them)", ErrNotFound, step)
	for _, info := range infos {
		if info.Kind == KindRolling && (info.Step > step || info.Format == 0) {
			if _, err := dst.Remove(ctx, info.Name()); err != nil {
				return err
			}
			continue
		}
		was, ok := listed[info.Name()]
		if !ok || was.Step != info.Step || was.Kind != info.Kind || !was.Time.Equal(info.Time) || was.Size != info.Size {
			return changed
		}
	}
	_, info, err := st.Latest(ctx)
	if errors.Is(err, ErrPayloadMismatch) {
		// A byte payload: the newest that verifies (LatestPayload reads
		// it to its end first).
		var rc io.ReadCloser
		if rc, info, err = st.LatestPayload(ctx); err == nil {
			rc.Close()
		}
	}
	if err != nil || info.Step != step {
		return changed
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

// removeStaleSessionTemps removes the temporary files of session.json, in
// the child store sub, that an interrupted SetMeta left: those older than
// staleSessionTemp (a SetMeta under way, in any process, has a younger
// one).
func (r *Sessions) removeStaleSessionTemps(ctx context.Context, sub Backend) error {
	objs, err := sub.List(ctx)
	if err != nil {
		return err
	}
	var stale []string
	for _, o := range objs {
		if !isSessionTemp(sub, o.Name) {
			continue
		}
		if o.Version == "" { // a listing that does not tell the time
			if o, err = sub.Stat(ctx, o.Name); err != nil {
				continue // gone meanwhile, or unreadable: not ours to judge
			}
		}
		if o.Mode.IsRegular() && time.Since(o.ModTime) > staleSessionTemp {
			stale = append(stale, o.Name)
		}
	}
	if len(stale) == 0 {
		return nil
	}
	_, err = sub.Remove(ctx, stale...)
	return err
}

// isSessionTemp reports whether name is a temporary object of session.json
// in the child store b (see storage.TempOf), of either naming: session.json
// is the library's own name.
func isSessionTemp(b Backend, name string) bool {
	final, _, ok := storage.TempOf(b, name)
	return ok && final == sessionFile
}

// abandon cleans the child store name if a crashed fork left it, and
// reports whether it did. Forks make numbered sessions only, whose names
// are their IDs; a mapped name is never a fork's.
func (r *Sessions) abandon(ctx context.Context, name string) (bool, error) {
	id := name
	sub, err := r.b.Sub(ctx, name, false)
	if err != nil {
		return false, err
	}
	defer sub.Close()
	_, _, err = readMetaIn(ctx, sub, "")
	if err == nil {
		return false, errors.Join(dropStaleClaim(ctx, sub), dropStaleMarker(ctx, sub))
	}
	if !errors.Is(err, ErrNotFound) {
		return false, nil // a damaged session, which List shows: not ours to remove
	}
	if deleted, err := deletedIn(ctx, sub); err != nil || deleted {
		if err != nil {
			return false, err
		}
		sub.Close() // finishDeleted opens it again, and a directory must be released before it goes
		done, err := r.finishDeleted(ctx, id)
		if errors.Is(err, ErrLocked) {
			// A Delete still running (or a writer checking the
			// tombstone) holds it: nothing interrupted to finish.
			return false, nil
		}
		return done, err
	}
	if _, err := sub.Stat(ctx, sessionFile); errors.Is(err, fs.ErrNotExist) {
		c, err := readClaim(ctx, sub)
		if errors.Is(err, storage.ErrNotRegular) {
			r.cfg.logger.Warn("checkpoint: left a session directory whose claim is not a regular file", "path", sub.Locate(claimName))
			return false, nil // no claim the protocol made
		}
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
			return r.abandon(ctx, name) // the fork finished after all, or another RemoveStaging won
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

// dropStaleClaim removes the claim a crash left in the child store sub of
// a live session, between the publication of its session.json and the
// removal of its claim: beside a session.json no claim guards anything,
// and a fork's would make the session, once its session.json is lost,
// look like a fork a crash interrupted.
func dropStaleClaim(ctx context.Context, sub Backend) error {
	if o, err := sub.Stat(ctx, claimName); err != nil || !o.Mode.IsRegular() {
		return nil // none, or none the protocol made
	}
	_, err := sub.Remove(ctx, claimName)
	return err
}

// removeLegacyOnWrite is removeLegacy where the Backend keeps child stores
// apart from their objects (a directory: the only place earlier releases
// made staging directories), so that creating a session on object storage
// costs no extra listing. What it cannot remove is logged and left for
// RemoveStaging to report: the leftovers of earlier releases are out of
// every session's way, and never block a creation.
func (r *Sessions) removeLegacyOnWrite(ctx context.Context) {
	if _, ok := storage.As[storage.ChildRemover](r.b); !ok {
		return
	}
	if _, err := r.removeLegacy(ctx); err != nil {
		r.cfg.logger.Warn("checkpoint: could not remove what an earlier release left in a root of sessions", "path", r.dir, "err", err)
	}
}

// maxLegacyDepth bounds how deep removeLegacy goes into a staging
// directory: earlier releases made none deeper than one level (a session's
// directory), and what is deeper is nobody's session.
const maxLegacyDepth = 8

// removeLegacy removes what the protocol of earlier releases left in a
// root: staging directories a crash interrupted (every object in them and
// in their child stores, maxLegacyDepth deep, then the directory itself
// where the Backend can remove one) and the root's lock file. It returns
// the locations of the staging directories it removed; one it cannot
// remove does not stop the others, and its error names it.
func (r *Sessions) removeLegacy(ctx context.Context) ([]string, error) {
	children, err := r.b.Children(ctx)
	if err != nil {
		return nil, err
	}
	var gone []string
	var errs []error
	for _, name := range children {
		if !strings.HasPrefix(name, stagingPrefix) {
			continue
		}
		if err := removeTree(ctx, r.b, name, maxLegacyDepth); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.b.Locate(name), err))
			continue
		}
		gone = append(gone, name)
	}
	if _, ok := storage.As[storage.ChildRemover](r.b); !ok && len(gone) > 0 {
		// A child store without objects is gone where the Backend keeps
		// no empty ones; report none that is still listed.
		left, err := r.b.Children(ctx)
		if err != nil {
			return nil, errors.Join(append(errs, err)...)
		}
		gone = slices.DeleteFunc(gone, func(name string) bool { return slices.Contains(left, name) })
	}
	removed := make([]string, len(gone))
	for i, name := range gone {
		removed[i] = r.b.Locate(name)
		r.cfg.logger.Warn("checkpoint: removed a session left half-made by a crash", "path", removed[i])
	}
	if _, err := r.b.Stat(ctx, sessionsLockName); err == nil {
		if _, err := r.b.Remove(ctx, sessionsLockName); err != nil {
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}

// removeTree removes every object of the child store name of parent and,
// depth levels deep, of its own child stores, then the child itself where
// the Backend keeps empty ones (ChildRemover). It never follows a symbolic
// link: a directory lists one as an object, and removing it removes the
// link.
func removeTree(ctx context.Context, parent Backend, name string, depth int) error {
	sub, err := parent.Sub(ctx, name, false)
	if err != nil {
		return err
	}
	defer sub.Close()
	if depth > 0 {
		kids, err := sub.Children(ctx)
		if err != nil {
			return err
		}
		for _, kid := range kids {
			if err := removeTree(ctx, sub, kid, depth-1); err != nil {
				return fmt.Errorf("%s: %w", kid, err)
			}
		}
	}
	objs, err := sub.List(ctx)
	if err != nil {
		return err
	}
	names := make([]string, len(objs))
	for i, o := range objs {
		names[i] = o.Name
	}
	if _, err := sub.Remove(ctx, names...); err != nil {
		return err
	}
	sub.Close() // a directory: release it before it goes
	if cr, ok := storage.As[storage.ChildRemover](parent); ok {
		return cr.RemoveChild(ctx, name)
	}
	return nil
}
