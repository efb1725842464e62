package checkpoint

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/gocheckpoint/checkpoint/internal/names"
	"github.com/gocheckpoint/checkpoint/storage"
)

// PinMeta is the key of Session.Meta that keeps a session from expiring:
// PruneIdle never removes, and Idle never lists, a session whose Meta holds
// a non-empty value under it (such as "true", or why it is kept). Set it
// with SetMeta; Delete still removes a pinned session.
const PinMeta = "checkpoint.pin"

// Pinned reports whether the session is pinned (see PinMeta).
func (s Session) Pinned() bool { return s.Meta[PinMeta] != "" }

// The deletion of a session, the same on every Backend:
//
//   - Delete first creates the marker deleteMarker in the child, then
//     takes the session's writer lock (Backend.Lock: a directory's lock
//     file, object storage's lease), which fails with ErrLocked while a
//     writer holds the session. The marker tells a writer whose opening
//     ran into the deleter's lock to wait for the outcome instead of
//     reporting ErrLocked for a session that is about to go.
//   - Under the lock it replaces session.json, conditionally, by a
//     tombstone (abandonedDeleted): from that single atomic write on the
//     session is listed nowhere and opens nowhere (readMetaIn takes a
//     tombstone for no session). Until then it is whole.
//   - Still under the lock it removes every checkpoint and side file (the
//     names not starting with a dot), then releases the lock and removes
//     the hidden objects (the lock file or lease, the marker, temporary
//     files), the tombstone last, and the child itself where the Backend
//     keeps empty ones.
//   - A crash after the tombstone leaves a child that is no session and
//     that no creation reuses (claim refuses a child holding a
//     session.json); the next Delete of the ID, RemoveStaging and PruneIdle
//     finish the deletion (finishDelete), after which the ID is free.
//   - A writer opening the session (OpenSessionStore) reads session.json
//     again once it holds the lock: a tombstone there is ErrNotFound.
const (
	// deleteMarker is the object Delete creates in a session's child
	// store before it takes the session's lock.
	deleteMarker = ".session.delete"
	// abandonedDeleted is the Abandoned reason of Delete's tombstone.
	abandonedDeleted = "deleted"
	// deleteWait bounds how long a writer opening a session waits for a
	// deletion that holds the session's lock to hide it, before it takes
	// the deleter for a writer and returns ErrLocked.
	deleteWait = 10 * time.Second
)

// Delete removes the session id: its session.json, every checkpoint and
// side file, and its child store (its directory; on object storage what
// the backend keeps of its own may stay, such as the released lease of
// s3store's writer lock, which holds no session and which the next writer
// takes over).
//
// It returns an error wrapping ErrLocked, and changes nothing, while a
// writer holds the session (a Store opened with OpenSessionStore, in this process
// or another, on this machine or another): Delete holds the session's
// writer lock itself while it runs, so that a writer opening the session
// meanwhile either opens it before Delete starts (and Delete fails with
// ErrLocked) or fails with ErrNotFound. A missing session is ErrNotFound.
// A damaged session (one with checkpoints but no valid session.json, which
// List shows with Err set) is removed as well, unless its session.json is
// a directory that holds files, made by hand, whose files Delete leaves
// alone (an error wrapping ErrCorrupt that names it). A session that
// holds any other directory (which no store writes, such as a user's
// logs) is refused the same way, before anything changes. One whose ID is unknown
// (List shows it with ID "") is removed by its stored name, the last
// element of its Dir, given as id when no session has that ID: a healthy
// session is never removed by its stored name.
//
// A session is listed whole until its deletion begins and never again
// after: its session.json is replaced by a tombstone, atomically, before
// anything else is removed. If Delete fails or a crash interrupts it after
// that point, what it left is out of sight and cannot be reused by Create
// (which fails with ErrExists meanwhile); the next Delete of the same ID
// removes it and returns nil, and so do RemoveStaging and PruneIdle. Once
// Delete returns nil the ID is free to Create again. Since the tombstone
// is written before anything is removed, Delete cannot free a disk that is
// full to the last byte: it fails with the file system's error and the
// session stays whole.
func (r *Sessions) Delete(ctx context.Context, id string) error {
	if err := r.writable(ctx, id); err != nil {
		return opError("delete session", r.path(id), err)
	}
	where := r.path(id)
	gone, err := r.delete(ctx, id, r.lookup(ctx, id), nil)
	if errors.Is(err, ErrNotFound) && !gone && names.IsMapped(id) {
		// id may be the stored name of a damaged session whose ID is
		// unknown, which List shows by its Dir only. One whose
		// session.json names its ID, or that a transient error (not
		// damage) keeps from being read whole, is kept: a healthy session
		// is never removed by its stored name.
		byName, nerr := r.delete(ctx, "", id, func(s Session) bool { return s.ID != "" || !errors.Is(s.Err, ErrCorrupt) })
		if byName || (nerr != nil && !errors.Is(nerr, ErrNotFound)) {
			err, where = nerr, r.b.Locate(id)
		}
	}
	if errors.Is(err, fs.ErrNotExist) && !errors.Is(err, ErrNotFound) {
		// The session's directory went while this Delete ran: another
		// Delete removed it.
		err = fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	if err != nil {
		return opError("delete session", where, err)
	}
	return nil
}

// delete deletes the session id, kept in the child store name, or
// finishes its deletion if a crash interrupted one, and reports whether the
// session is gone or going (out of sight). If keep is not nil, it is asked
// under the session's lock, before anything is removed, whether the
// session, as it is then, stays; then delete returns false and changes
// nothing. keep is not asked about a deletion already under way.
func (r *Sessions) delete(ctx context.Context, id, name string, keep func(Session) bool) (bool, error) {
	sub, err := r.b.Sub(ctx, name, false)
	if err != nil {
		return false, err
	}
	defer sub.Close()
	_, obj, err := readMetaIn(ctx, sub, id)
	version := obj.Version
	switch {
	case errors.Is(err, ErrNotFound):
		if deleted, terr := deletedIn(ctx, sub); terr != nil || !deleted {
			return false, errors.Join(err, terr)
		}
		sub.Close() // finishDelete opens it again
		return true, r.finishDelete(ctx, name)
	case errors.Is(err, ErrCorrupt):
		if obj.Version == "" {
			// A damaged session without session.json, or with one that
			// is no regular object (a named pipe, a directory): that
			// one is removed first, under the lock.
			version = NoObject
		}
	case err != nil:
		return false, err
	}
	owned, err := r.mark(ctx, sub)
	if err == nil {
		var unlock func() error
		if unlock, err = sub.Lock(ctx); err == nil {
			return r.deleteLocked(ctx, sub, id, name, version, keep, owned, unlock)
		}
	}
	// Its own marker only: another Delete's marker (the one that holds
	// the lock) tells a writer opening meanwhile to wait for it.
	if owned {
		sub.Remove(context.WithoutCancel(ctx), deleteMarker)
	}
	if errors.Is(err, fs.ErrNotExist) {
		// Another Delete removed the child while this one wrote in it.
		err = fmt.Errorf("%w: no session %q (deleted meanwhile): %w", ErrNotFound, id, err)
	}
	return false, err
}

// mark creates Delete's marker in sub, and reports whether it is this
// Delete's: one that another Delete created and that is not stale (see
// staleMarker) is left as it is, since that Delete removes it when it is
// done or fails; this one never removes it.
func (r *Sessions) mark(ctx context.Context, sub Backend) (owned bool, err error) {
	mark, err := json.Marshal(sessionClaim{Op: "delete", Token: rand.Text(), Time: r.now(time.Time{})})
	if err != nil {
		return false, err
	}
	_, err = sub.Create(ctx, deleteMarker, writeBytes(mark))
	if !errors.Is(err, ErrExists) {
		return err == nil, err
	}
	o, err := sub.Stat(ctx, deleteMarker)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil // the other Delete is done
	case err != nil:
		return false, err
	case !o.Mode.IsRegular() || !staleMarker(o):
		return false, nil
	}
	// Left by a Delete that a crash interrupted: take it over.
	if _, err := sub.Replace(ctx, deleteMarker, o.Version, writeBytes(mark)); err != nil {
		if errors.Is(err, ErrConflict) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// deleteLocked goes on with delete once it holds the session's lock
// (unlock releases it); owned tells whether the marker is this Delete's.
func (r *Sessions) deleteLocked(ctx context.Context, sub Backend, id, name, version string, keep func(Session) bool, owned bool, unlock func() error) (bool, error) {
	unmark := func() {
		if owned {
			sub.Remove(context.WithoutCancel(ctx), deleteMarker)
		}
	}
	locked := true
	release := func() error {
		if !locked {
			return nil
		}
		locked = false
		return unlock()
	}
	defer release()
	if keep != nil {
		s, ok := r.describe(ctx, id, name)
		if !ok || keep(s) {
			unmark()
			return false, nil
		}
	}
	if err := noDirectories(ctx, sub); err != nil {
		unmark()
		return false, err
	}
	if version == NoObject {
		if err := removeNotRegular(ctx, sub, sessionFile); err != nil {
			unmark()
			return false, err
		}
	}
	if kept, err := r.entomb(ctx, sub, id, name, version, keep); err != nil || kept {
		unmark()
		return false, err
	}
	// Out of sight from here on: what fails below is finished later.
	if err := removeObjects(ctx, sub, func(name string) bool { return !strings.HasPrefix(name, ".") && name != sessionFile }); err != nil {
		return true, err
	}
	if err := release(); err != nil {
		return true, err
	}
	sub.Close()
	return true, r.sweep(ctx, name)
}

// entomb replaces the session.json of sub (the child store name), as long
// as its Version is version, by Delete's tombstone. A SetMeta that
// replaced it meanwhile (SetMeta takes no lock) makes it read the session
// again, a few times, and, if keep is not nil, ask keep again about the
// session as it is now: if it stays (pinned or active since), entomb
// writes nothing and reports kept.
func (r *Sessions) entomb(ctx context.Context, sub Backend, id, name, version string, keep func(Session) bool) (kept bool, err error) {
	write, err := encodeSessionMeta(sessionTombstone{ID: id, Abandoned: abandonedDeleted, Time: r.now(time.Time{})})
	if err != nil {
		return false, err
	}
	for attempt := 1; ; attempt++ {
		_, err := sub.Replace(ctx, sessionFile, version, write)
		if !errors.Is(err, ErrConflict) || attempt == setMetaAttempts {
			return false, err
		}
		_, obj, rerr := readMetaIn(ctx, sub, id)
		switch {
		case errors.Is(rerr, ErrCorrupt) && obj.Version == "":
			version = NoObject
		case rerr != nil && !errors.Is(rerr, ErrCorrupt):
			return false, rerr
		default:
			version = obj.Version
		}
		if keep != nil {
			if s, ok := r.describe(ctx, id, name); !ok || keep(s) {
				return true, nil
			}
		}
	}
}

// finishDelete finishes a deletion that a crash or a failure interrupted,
// in the child store name whose session.json is Delete's tombstone: under
// the session's lock when it can take it (no writer opens a tombstone, but
// one may be checking it), it removes what is left.
func (r *Sessions) finishDelete(ctx context.Context, name string) error {
	sub, err := r.b.Sub(ctx, name, false)
	if err != nil {
		return err
	}
	defer sub.Close()
	unlock, err := sub.Lock(ctx)
	if err != nil {
		return err
	}
	err = removeObjects(ctx, sub, func(name string) bool { return !strings.HasPrefix(name, ".") && name != sessionFile })
	if uerr := unlock(); err == nil {
		err = uerr
	}
	if err != nil {
		return err
	}
	sub.Close()
	return r.sweep(ctx, name)
}

// sweep removes the hidden objects of the deleted session's child store
// name, then its tombstone, then the child itself where the Backend keeps
// empty ones. It writes through a Backend of its own: one that held the
// session's lock may refuse every write once it released it (an object
// storage's lease fences them). A hidden object that comes back meanwhile
// (the lock file of a writer that opened the tombstone and is leaving),
// or that cannot be removed, keeps the child, which holds no session and
// stays out of sight.
func (r *Sessions) sweep(ctx context.Context, name string) error {
	ctx = context.WithoutCancel(ctx) // the session is gone: leave as little as possible
	sub, err := r.b.Sub(ctx, name, false)
	if err != nil {
		return err
	}
	defer sub.Close()
	// What is hidden holds no session: one that cannot go (a lock file
	// that a writer checking the tombstone holds open, on Windows) stays,
	// out of sight, and the deletion goes on.
	if err := removeObjects(ctx, sub, func(name string) bool { return name != sessionFile }); err != nil {
		r.cfg.logger.Warn("checkpoint: left hidden objects of a deleted session", "path", sub.Locate(""), "err", err)
	}
	if _, err := sub.Remove(ctx, sessionFile); err != nil {
		return err
	}
	sub.Close() // a directory: release it before it goes
	r.dropChild(ctx, name)
	return nil
}

// removeNotRegular removes name from b if it is there and is no regular
// object (a named pipe, an empty directory: see Backend.Stat), without
// opening it: a damaged session.json that Delete replaces by its
// tombstone, which a conditional Replace cannot match.
func removeNotRegular(ctx context.Context, b Backend, name string) error {
	o, err := b.Stat(ctx, name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case o.Mode.IsRegular():
		return nil
	}
	if _, err = b.Remove(ctx, name); err != nil && o.Mode.IsDir() {
		// A directory that holds files: made by hand, and never removed
		// with them (Delete removes only what a store could have written).
		return fmt.Errorf("%w: %s is a directory that is not empty; remove it by hand: %w", ErrCorrupt, b.Locate(name), err)
	}
	return err
}

// noDirectories returns an error wrapping ErrCorrupt that names the first
// directory in b (but session.json: see removeNotRegular), such as a
// user's logs kept beside the checkpoints: no store writes one, and
// Delete, which would hide the session and then fail on it, refuses
// before it changes anything.
func noDirectories(ctx context.Context, b Backend) error {
	objs, err := b.List(ctx)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if o.Name == sessionFile || (o.Size >= 0 && o.Mode.IsRegular()) {
			continue
		}
		st, err := b.Stat(ctx, o.Name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if st.Mode.IsDir() {
			return fmt.Errorf("%w: %s is a directory, which no store writes; move it out of the session first", ErrCorrupt, b.Locate(o.Name))
		}
	}
	return nil
}

// removeObjects removes the objects of b whose names match.
func removeObjects(ctx context.Context, b Backend, match func(string) bool) error {
	objs, err := b.List(ctx)
	if err != nil {
		return err
	}
	var names []string
	for _, o := range objs {
		if match(o.Name) {
			names = append(names, o.Name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	_, err = b.Remove(ctx, names...)
	return err
}

// deletedIn reports whether the session.json of sub is Delete's tombstone.
// One that is no regular object (a damaged session) is none.
func deletedIn(ctx context.Context, sub Backend) (bool, error) {
	rc, _, err := sub.Open(ctx, sessionFile)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, storage.ErrNotRegular) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxSessionFileSize+1))
	if err != nil {
		return false, err
	}
	var t sessionTombstone
	return json.Unmarshal(data, &t) == nil && t.Format == 0 && t.Abandoned == abandonedDeleted, nil
}

// staleMarker reports whether the deletion marker o was left by a Delete
// that a crash interrupted before it took the lock or gave up: a Delete
// under way holds it for no longer than a Lock and a Replace take.
func staleMarker(o Object) bool {
	return !o.ModTime.IsZero() && time.Since(o.ModTime) > staleSessionTemp
}

// dropStaleMarker removes the deletion marker of the child store sub of a
// live session if a Delete that a crash interrupted left it (see
// staleMarker): it would make a writer opening the session beside a
// running one wait before it reports ErrLocked.
func dropStaleMarker(ctx context.Context, sub Backend) error {
	o, err := sub.Stat(ctx, deleteMarker)
	if err != nil || !o.Mode.IsRegular() || !staleMarker(o) {
		return nil
	}
	_, err = sub.Remove(ctx, deleteMarker)
	return err
}

// writeBytes returns a writer of data for Backend.Create and Replace.
func writeBytes(data []byte) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}
}

// Idle returns the sessions PruneIdle(ctx, idle) would remove now, the
// least recently active first: those whose last activity (Session.Active)
// is more than idle ago, by the root's clock, and that are neither pinned
// (see PinMeta) nor damaged. It changes nothing, so a tool can show what
// would go (a dry run). A session that a writer holds is listed, since
// telling would take its lock; PruneIdle skips it. idle must not be
// negative (ErrInvalid).
func (r *Sessions) Idle(ctx context.Context, idle time.Duration) ([]Session, error) {
	if idle < 0 {
		return nil, opError("list idle sessions", r.dir, fmt.Errorf("%w: negative idle time %v", ErrInvalid, idle))
	}
	list, err := r.List(ctx)
	if err != nil {
		return nil, err
	}
	cutoff := r.cfg.now().Add(-idle)
	var out []Session
	for _, s := range list {
		if s.Err == nil && expired(s, cutoff) {
			out = append(out, s)
		}
	}
	slices.Reverse(out)
	return out, nil
}

// expired reports whether s may be removed as idle since before cutoff.
func expired(s Session, cutoff time.Time) bool {
	return !s.Pinned() && s.Active().Before(cutoff)
}

// PruneIdle deletes, as Delete does, every session whose last activity
// (Session.Active: its last checkpoint, or its creation or metadata change
// if later) is more than idle ago by the root's clock, and returns their
// IDs, sorted. It skips a session that a writer holds (without error: it
// is not idle), a pinned one (see PinMeta), and a damaged one, which
// cannot be dated with certainty and is never removed unasked (List shows
// it; Delete removes it). Each session's idleness is checked again under
// its lock, so that a session saved to after Idle listed it stays. It also
// finishes the deletions that a crash interrupted (see Delete). One
// session it cannot delete does not stop the others: it returns the IDs it
// removed with the errors joined. Idle is its dry run. idle must not be
// negative (ErrInvalid); with ReadOnly it is ErrReadOnly.
func (r *Sessions) PruneIdle(ctx context.Context, idle time.Duration) ([]string, error) {
	fail := func(removed []string, err error) ([]string, error) {
		return removed, opError("prune idle sessions", r.dir, err)
	}
	if r.cfg.readOnly {
		return fail(nil, ErrReadOnly)
	}
	if idle < 0 {
		return fail(nil, fmt.Errorf("%w: negative idle time %v", ErrInvalid, idle))
	}
	cutoff := r.cfg.now().Add(-idle)
	errs := []error{r.finishDeletions(ctx)}
	list, err := r.List(ctx)
	if err != nil {
		return fail(nil, errors.Join(append(errs, err)...))
	}
	slices.SortFunc(list, func(a, b Session) int { return strings.Compare(a.ID, b.ID) })
	var removed []string
	for _, s := range list {
		if err := ctx.Err(); err != nil {
			return fail(removed, errors.Join(append(errs, err)...))
		}
		if s.Err != nil {
			r.cfg.logger.Warn("checkpoint: left a damaged session that cannot be dated", "path", s.Dir, "err", s.Err)
			continue
		}
		if !expired(s, cutoff) {
			continue
		}
		gone, err := r.delete(ctx, s.ID, r.lookup(ctx, s.ID), func(s Session) bool { return s.Err != nil || !expired(s, cutoff) })
		switch {
		case errors.Is(err, ErrLocked), errors.Is(err, ErrNotFound) && !gone:
			// A writer holds it, or it went meanwhile.
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", s.Dir, err))
			if gone {
				removed = append(removed, s.ID)
			}
		case gone:
			removed = append(removed, s.ID)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fail(removed, err)
	}
	return removed, nil
}

// finishDeletions finishes every deletion of the root that a crash
// interrupted (see finishDeleted). One whose session a writer is checking
// right now (ErrLocked) is left for the next time.
func (r *Sessions) finishDeletions(ctx context.Context) error {
	children, err := r.b.Children(ctx)
	if err != nil {
		return err
	}
	slices.Sort(children)
	var errs []error
	for _, name := range children {
		if !names.IsSessionName(name) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, err := r.finishDeleted(ctx, name); err != nil && !errors.Is(err, ErrLocked) {
			errs = append(errs, fmt.Errorf("%s: %w", r.b.Locate(name), err))
		}
	}
	return errors.Join(errs...)
}

// finishDeleted finishes the deletion of the child store name if a crash
// interrupted one there, and reports whether it did.
func (r *Sessions) finishDeleted(ctx context.Context, name string) (bool, error) {
	sub, err := r.b.Sub(ctx, name, false)
	if err != nil {
		return false, err
	}
	defer sub.Close()
	if deleted, err := deletedIn(ctx, sub); err != nil || !deleted {
		return false, err
	}
	sub.Close() // finishDelete opens it again
	if err := r.finishDelete(ctx, name); err != nil {
		return false, err
	}
	return true, nil
}
