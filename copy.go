package checkpoint

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"sync"

	"github.com/gocheckpoint/checkpoint/internal/names"
	"github.com/gocheckpoint/checkpoint/storage"
)

// DefaultCopyConcurrency is how many files Copy copies at once without
// CopyConcurrency: enough to hide the latency of object storage's requests
// (each file is one GET and one PUT), few enough for a local disk.
const DefaultCopyConcurrency = 8

// CopyProgress is what Copy has done so far, reported to the function given
// to OnCopyProgress.
type CopyProgress struct {
	// Done counts the files handled so far (copied, found at the
	// destination, skipped or failed), of Total: every checkpoint, rolling
	// file, side file and session.json that Copy found to copy.
	Done, Total int
	// Bytes counts the bytes of the files handled so far, as stored
	// (compressed or encrypted).
	Bytes int64
	// Location is where the file just handled is at the source
	// (Backend.Locate); "" in the first report, made before any file.
	Location string
}

// OnCopyProgress makes Copy call fn once before it copies any file and
// then after each file it handles. Calls are never concurrent with each
// other; fn should return quickly, as the copy waits for it. Stores ignore
// the option.
func OnCopyProgress(fn func(CopyProgress)) Option {
	return optionFunc(func(c *config) { c.copyProgress = fn })
}

// CopyConcurrency makes Copy copy up to n files of a store at once
// (DefaultCopyConcurrency without it). n must be at least 1. Stores ignore
// the option.
func CopyConcurrency(n int) Option {
	return optionFunc(func(c *config) { c.copyConcurrency, c.copyConcurrencySet = n, true })
}

// Copied is what Copy did.
type Copied struct {
	// Copied counts the files Copy created at the destination, and Bytes
	// their size.
	Copied int
	Bytes  int64
	// Present counts the files the destination already held with the same
	// bytes: those a copy that was interrupted had made, which a rerun
	// counts as copied.
	Present int
	// Sessions counts the sessions of a root of sessions that the
	// destination holds whole after the copy (published by this call or
	// an earlier one).
	Sessions int
	// Skipped are the checkpoints, and sessions, that Copy did not copy
	// because they do not verify, each an *Error whose Path is where it is
	// at the source:
	// damaged ones (ErrCorrupt), ones encrypted to a key no identity given
	// opens (ErrNoKey), plaintext ones read with Encrypt (ErrPlaintext),
	// ones over the read limit (WithMaxReadSize), or a session whose
	// session.json is damaged.
	Skipped []error
	// Failed are the files and sessions that Copy could not copy, each an
	// error naming the source and the destination: an object under the
	// name at the destination holding other bytes (ErrExists), a writer
	// holding a session's lock (ErrLocked), a read or a write that failed.
	Failed []error
}

// Copy copies the store kept in src, or the root of sessions kept in src
// with every session in it, to dst, another Backend or the same kind
// (a directory to a bucket, a bucket to a directory, one bucket to
// another): the migration of a store between storages. Copy does not close
// src or dst. opts say how src's files are read: WithLayout (the step/8
// layout without it), Encrypt with the identities that open an encrypted
// store, WithMaxReadSize; and how Copy runs: WaitLock, CopyConcurrency,
// OnCopyProgress. Other options are ignored.
//
// src is a store if it holds a checkpoint of the layout, and otherwise a
// root of sessions if it has sessions (child stores holding a
// session.json); otherwise Copy fails with an error wrapping ErrNotFound.
// A store is not copied into a dst that is a root of sessions, nor a
// root into a dst that holds checkpoints (ErrInvalid).
//
// What is copied, byte for byte as it is stored (compressed, encrypted):
// every checkpoint of the layout, the rolling file included, once it has
// verified (it is read in full and its checksum, header and state or
// payload checked, as Load does, in the same pass that copies it); the side
// files (WriteJSON), which have no checksum and are copied as they are;
// and each session's session.json, read and checked first. An encrypted
// checkpoint verifies only with its key, so an encrypted store is copied
// with Encrypt and its identities; without them its checkpoints are
// skipped (ErrNoKey), never copied unverified. What is not copied: the
// header index (the destination's writer makes its own), the backend's own
// objects (a lock, a lease, temporary files), checkpoints moved aside as
// damaged (.corrupt), files of other layouts, and sessions deleted or
// being made at the source.
//
// A checkpoint that does not verify is reported in Copied.Skipped and not
// copied; Copy goes on. Copy never replaces an object at dst: each file is
// published with Backend.Create, atomically, and where dst already holds
// one under the name, it counts as copied (Present) if its bytes are the
// same, and fails (Failed, wrapping ErrExists) if they differ, leaving it
// as it is. A rerun after an interruption, a crash or a kill -9 at any
// instant thus completes the copy.
//
// Nothing at dst is ever half-visible. A store's files appear one by one,
// each whole, under dst's writer lock (Backend.Lock, which WaitLock lets
// Copy wait for): a running writer of dst makes Copy fail with ErrLocked.
// A root has no lock: each session is copied under the writer lock of its
// store at dst, and appears whole, as a new session of Sessions does: the
// copy claims the session's ID in its child store first (a claim of its
// own, that only a copy holding the session's lock takes over), puts the
// files in, and creates session.json last, so that no reader lists the
// session before it is complete. A session that dst already holds with the
// same session.json gets the files it lacks; one with another session.json
// fails (ErrExists). A session with a file that failed is left unpublished,
// out of sight, for a rerun to complete.
//
// The error Copy returns wraps each of Copied.Skipped and Copied.Failed, so
// that errors.Is finds ErrCorrupt, ErrNoKey, ErrExists or ErrLocked; the
// Copied it returns with it says what was done nonetheless.
func Copy(ctx context.Context, dst, src Backend, opts ...Option) (Copied, error) {
	var out Copied
	if dst == nil || src == nil {
		return out, opError("copy", "", fmt.Errorf("%w: nil Backend", ErrInvalid))
	}
	op, where := "copy "+src.Locate("")+" to", dst.Locate("")
	cfg, err := newConfig(opts)
	if err != nil {
		return out, opError(op, where, err)
	}
	c := &copier{cfg: &cfg, src: src, dst: dst, codec: newCodec(cfg.compression(), cfg.maxRead), out: &out}
	if err := c.run(ctx); err != nil {
		return out, opError(op, where, err)
	}
	if n := len(out.Skipped) + len(out.Failed); n > 0 {
		return out, opError(op, where, fmt.Errorf("%d not copied: %w", n, joinFew(append(slices.Clone(out.Failed), out.Skipped...))))
	}
	return out, nil
}

// claimCopy is the op of the claim a copy holds on a session it puts into
// a root (see Copy): unlike a creation's or a fork's, it is taken over by
// the next copy that holds the session's writer lock, which can only be
// a copy's that ended (a crash), so that a rerun resumes the copy.
const claimCopy = "copy"

// copier is one Copy.
type copier struct {
	cfg      *config
	src, dst Backend
	codec    *codec

	mu       sync.Mutex // guards out and progress
	out      *Copied
	progress CopyProgress
}

// copyFile is a file to copy, as the source listed it.
type copyFile struct {
	name  string
	fn    fileName
	check bool  // a checkpoint, verified as it is copied
	size  int64 // -1 if the listing did not say
}

// sessionPlan is a session of a root to copy.
type sessionPlan struct {
	name  string     // its stored name, the same at both ends
	meta  []byte     // its session.json at the source, as stored
	files []copyFile // what else it holds to copy
}

// run plans the copy, then makes it.
func (c *copier) run(ctx context.Context) error {
	objs, err := c.src.List(ctx)
	if err != nil {
		return fmt.Errorf("list %s: %w", c.src.Locate(""), err)
	}
	files, store := c.plan(c.src, objs)
	if store {
		c.report(CopyProgress{Total: len(files)})
		return c.copyStore(ctx, files)
	}
	sessions, err := c.planRoot(ctx)
	if err != nil {
		return err
	}
	if len(sessions) == 0 && len(c.out.Skipped) > 0 {
		return nil // every session is damaged: Skipped says so
	}
	if len(sessions) == 0 {
		return fmt.Errorf("%w: %s holds no checkpoint of layout %s_%0*d.json and no session", ErrNotFound, c.src.Locate(""), c.cfg.layout.prefix, c.cfg.layout.digits, 1)
	}
	total := 0
	for _, s := range sessions {
		total += len(s.files) + 1
	}
	c.report(CopyProgress{Total: total})
	if err := c.dstHolds(ctx, c.dst, false); err != nil {
		return err
	}
	for _, s := range sessions {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := c.copySession(ctx, s); err != nil {
			c.fail(err)
		}
	}
	return nil
}

// plan returns the files of b, listed as objs, that a copy of its store
// copies, and whether b is a store: whether it holds a checkpoint.
func (c *copier) plan(b Backend, objs []Object) ([]copyFile, bool) {
	var files []copyFile
	store := false
	for _, o := range objs {
		name := o.Name
		if strings.HasPrefix(name, ".") {
			continue // the backend's or the store's own: a lock, a lease, the index, a claim, a temporary file
		}
		if _, _, temp := storage.TempOf(b, name); temp {
			continue
		}
		if fn, ok := c.cfg.layout.parse(name); ok {
			files = append(files, copyFile{name: name, fn: fn, check: true, size: o.Size})
			store = true
			continue
		}
		if _, _, _, other := layoutEvidence(b, name); other {
			continue // another layout's checkpoint, or one moved aside
		}
		if c.cfg.layout.sideName(name) == nil {
			files = append(files, copyFile{name: name, size: o.Size})
		}
	}
	// Oldest first: an interrupted copy leaves the older history whole.
	slices.SortFunc(files, func(a, b copyFile) int {
		if a.check != b.check {
			if a.check {
				return -1
			}
			return 1
		}
		if a.fn.kind == KindRolling || b.fn.kind == KindRolling {
			return boolCmp(a.fn.kind == KindRolling, b.fn.kind == KindRolling)
		}
		if a.fn.step != b.fn.step {
			return int(min(max(a.fn.step-b.fn.step, -1), 1))
		}
		return strings.Compare(a.name, b.name)
	})
	return files, store
}

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// planRoot lists the sessions of the root src, reading each one's
// session.json: a damaged one is skipped (reported), one that is no
// session (deleted, being made) is left out.
func (c *copier) planRoot(ctx context.Context) ([]sessionPlan, error) {
	children, err := c.src.Children(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the sessions of %s: %w", c.src.Locate(""), err)
	}
	slices.Sort(children)
	var plans []sessionPlan
	for _, name := range children {
		if !names.IsSessionName(name) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		sub, err := c.src.Sub(ctx, name, false)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.src.Locate(name), err)
		}
		p, err := c.planSession(ctx, sub, name)
		sub.Close()
		switch {
		case errors.Is(err, ErrNotFound):
			continue
		case isUnverified(err):
			c.skip(opError("copy session", c.src.Locate(name), err))
			continue
		case err != nil:
			return nil, fmt.Errorf("session %s: %w", c.src.Locate(name), err)
		}
		plans = append(plans, p)
	}
	return plans, nil
}

// planSession reads the session.json of the session name, in its child
// store sub of the source, checks it and lists the session's files.
func (c *copier) planSession(ctx context.Context, sub Backend, name string) (sessionPlan, error) {
	p := sessionPlan{name: name}
	rc, _, err := sub.Open(ctx, sessionFile)
	if errors.Is(err, fs.ErrNotExist) {
		// No session (ErrNotFound), or a damaged one (ErrCorrupt).
		if err = missingMeta(ctx, sub, ""); errors.Is(err, errMadeMeanwhile) {
			err = fmt.Errorf("%w: its session.json appeared while it was read: copy again", ErrConflict)
		}
		return p, err
	}
	if errors.Is(err, storage.ErrNotRegular) {
		return p, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if err != nil {
		return p, err
	}
	// Encrypted, session.json takes a few hundred bytes more.
	p.meta, err = io.ReadAll(io.LimitReader(rc, 2*maxSessionFileSize))
	rc.Close()
	if err != nil {
		return p, err
	}
	plain := p.meta
	if k := c.cfg.sealKeys; k != nil {
		r, _, err := k.Open(bytes.NewReader(p.meta), sub.Locate(sessionFile))
		if err != nil {
			return p, fmt.Errorf("%s: %w", sessionFile, err)
		}
		if plain, err = io.ReadAll(r); err != nil {
			return p, fmt.Errorf("%s: %w", sessionFile, err)
		}
	}
	var t sessionTombstone
	if json.Unmarshal(plain, &t) == nil && t.Format == 0 && t.Abandoned != "" {
		return p, fmt.Errorf("%w: deleted (%s)", ErrNotFound, t.Abandoned)
	}
	m, err := decodeSessionMeta(bytes.NewReader(plain))
	if err == nil {
		err = checkID(m.ID, "", name)
	}
	if err != nil {
		return p, err
	}
	objs, err := sub.List(ctx)
	if err != nil {
		return p, err
	}
	p.files, _ = c.plan(sub, objs)
	return p, nil
}

// isUnverified reports whether err says that what was read does not
// verify (damage, a key not given, plaintext where encryption is
// expected, over the read limit), as opposed to a failure to read it.
func isUnverified(err error) bool {
	return errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNoKey) || errors.Is(err, ErrPlaintext)
}

// dstHolds fails if b, the destination, already holds what would make the
// copy into it another thing than its source: sessions, for a store's
// copy (wantStore), or checkpoints of the layout, for a root's.
func (c *copier) dstHolds(ctx context.Context, b Backend, wantStore bool) error {
	if !wantStore {
		objs, err := b.List(ctx)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("list %s: %w", b.Locate(""), err)
		}
		for _, o := range objs {
			if _, ok := c.cfg.layout.parse(o.Name); ok {
				return fmt.Errorf("%w: %s is a root of sessions, and %s holds checkpoints (%s): copy it into a new place", ErrInvalid, c.src.Locate(""), b.Locate(""), o.Name)
			}
		}
		return nil
	}
	children, err := b.Children(ctx)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("list %s: %w", b.Locate(""), err)
	}
	for _, name := range children {
		if !names.IsSessionName(name) {
			continue
		}
		sub, err := b.Sub(ctx, name, false)
		if err != nil {
			return err
		}
		_, err = sub.Stat(ctx, sessionFile)
		sub.Close()
		if err == nil {
			return fmt.Errorf("%w: %s is a store, and %s is a root of sessions (it holds %s): copy it into a new place, or into one session's", ErrInvalid, c.src.Locate(""), b.Locate(""), b.Locate(name))
		}
	}
	return nil
}

// copyStore copies the files of the store src to dst, under dst's writer
// lock.
func (c *copier) copyStore(ctx context.Context, files []copyFile) (err error) {
	if err := c.dstHolds(ctx, c.dst, true); err != nil {
		return err
	}
	unlock, err := lock(ctx, c.dst, c.cfg.waitLock)
	if err != nil {
		return err
	}
	defer func() {
		if uerr := unlock(); err == nil && uerr != nil {
			err = fmt.Errorf("release the writer lock of %s: %w", c.dst.Locate(""), uerr)
		}
	}()
	if err := c.removeTemps(ctx, c.dst, false); err != nil {
		return err
	}
	_, err = c.copyFiles(ctx, c.src, c.dst, files)
	return err
}

// removeTemps removes the temporary files that an interrupted write left
// in b, which the caller holds the writer lock of: those of a store's
// files, and of session.json if meta (a session not yet published, which
// no SetMeta writes).
func (c *copier) removeTemps(ctx context.Context, b Backend, meta bool) error {
	tc, ok := storage.As[storage.TempCleaner](b)
	if !ok {
		return nil
	}
	_, err := tc.RemoveTemps(ctx, func(final string, legacy bool) bool {
		return c.cfg.layout.ownsTemp(final, legacy) || meta && !legacy && final == sessionFile
	})
	if err != nil {
		return fmt.Errorf("remove stale temporary files of %s: %w", b.Locate(""), err)
	}
	return nil
}

// copyFiles copies files from src to dst, up to the configured number at
// once, and returns how many failed; the error is one that stops the copy
// (ctx ending).
func (c *copier) copyFiles(ctx context.Context, src, dst Backend, files []copyFile) (int, error) {
	have := map[string]Object{}
	objs, err := dst.List(ctx)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("list %s: %w", dst.Locate(""), err)
	}
	for _, o := range objs {
		have[o.Name] = o
	}
	workers := c.cfg.copyConcurrency
	if workers == 0 {
		workers = DefaultCopyConcurrency
	}
	workers = min(workers, max(len(files), 1))
	next := make(chan copyFile)
	var wg sync.WaitGroup
	var failedMu sync.Mutex
	failed := 0
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range next {
				o, exists := have[f.name]
				if !c.copyOne(ctx, src, dst, f, exists, o) {
					failedMu.Lock()
					failed++
					failedMu.Unlock()
				}
			}
		}()
	}
	for _, f := range files {
		if ctx.Err() != nil {
			break
		}
		next <- f
	}
	close(next)
	wg.Wait()
	return failed, ctx.Err()
}

// What copying one file came to.
type copyOutcome int

const (
	copyCreated copyOutcome = iota
	copyPresent
	copyGone    // removed at the source since the listing
	copySkipped // does not verify
	copyFailed
)

// copyOne copies the file f of src to dst, which listed it (exists, as o)
// or not, records the outcome, and reports whether it did not fail.
func (c *copier) copyOne(ctx context.Context, src, dst Backend, f copyFile, exists bool, o Object) bool {
	var outcome copyOutcome
	var size int64
	var err error
	if !exists {
		outcome, size, err = c.create(ctx, src, dst, f)
	}
	if exists || outcome == copyPresent {
		outcome, size, err = c.compare(ctx, src, dst, f, o)
	}
	switch outcome {
	case copySkipped:
		err = opError("copy", src.Locate(f.name), err)
	case copyFailed:
		err = fmt.Errorf("%s to %s: %w", src.Locate(f.name), dst.Locate(f.name), err)
	}
	c.record(src.Locate(f.name), outcome, size, err)
	return outcome != copyFailed
}

// create copies f from src to a new object of dst, verifying it on the
// way. It returns copyPresent when dst holds an object under the name
// (made meanwhile), for the caller to compare.
func (c *copier) create(ctx context.Context, src, dst Backend, f copyFile) (copyOutcome, int64, error) {
	var rd readResult
	_, err := dst.Create(ctx, f.name, func(w io.Writer) error {
		rd = c.read(ctx, src, f, w)
		return rd.err()
	})
	switch {
	case err == nil:
		return copyCreated, rd.size, nil
	case rd.gone:
		return copyGone, 0, nil
	case rd.verify != nil:
		return copySkipped, rd.size, rd.verify
	case rd.src != nil:
		return copyFailed, 0, fmt.Errorf("read: %w", rd.src)
	case errors.Is(err, ErrExists):
		return copyPresent, 0, nil
	}
	return copyFailed, 0, err
}

// compare checks f of src, which verifies, against the object dst holds
// under its name (o, as listed).
func (c *copier) compare(ctx context.Context, src, dst Backend, f copyFile, o Object) (copyOutcome, int64, error) {
	h := sha256.New()
	rd := c.read(ctx, src, f, h)
	switch {
	case rd.gone:
		return copyGone, 0, nil
	case rd.verify != nil:
		return copySkipped, rd.size, rd.verify
	case rd.src != nil:
		return copyFailed, 0, fmt.Errorf("read: %w", rd.src)
	}
	differ := fmt.Errorf("%w: the destination holds other bytes under the name, left as they are", ErrExists)
	if o.Size >= 0 && o.Size != rd.size {
		return copyFailed, 0, differ
	}
	rc, got, err := dst.Open(ctx, f.name)
	if err != nil {
		return copyFailed, 0, fmt.Errorf("read the destination's: %w", err)
	}
	defer rc.Close()
	if got.Size >= 0 && got.Size != rd.size {
		return copyFailed, 0, differ
	}
	d := sha256.New()
	if _, err := io.Copy(d, rc); err != nil {
		return copyFailed, 0, fmt.Errorf("read the destination's: %w", err)
	}
	if !bytes.Equal(d.Sum(nil), h.Sum(nil)) {
		return copyFailed, 0, differ
	}
	return copyPresent, rd.size, nil
}

// readResult is what reading a source file came to: its size and SHA-256
// (when read to its end), or why it could not be read.
type readResult struct {
	size   int64
	gone   bool  // the source no longer has it
	verify error // it does not verify
	src    error // reading it failed
	dst    error // writing it failed
}

// err is the error that fails the write of a Create of the file.
func (r readResult) err() error {
	switch {
	case r.dst != nil:
		return r.dst
	case r.src != nil:
		return r.src
	case r.verify != nil:
		return r.verify
	case r.gone:
		return fs.ErrNotExist
	}
	return nil
}

// read reads the file f of src to its end into w, verifying it on the way
// if it is a checkpoint. Failures of the source, of w and of the
// verification are told apart: the decoder reports a read error as damage.
func (c *copier) read(ctx context.Context, src Backend, f copyFile, w io.Writer) readResult {
	var res readResult
	rc, o, err := src.Open(ctx, f.name)
	if errors.Is(err, fs.ErrNotExist) {
		res.gone = true
		return res
	}
	if errors.Is(err, storage.ErrNotRegular) {
		// Not a file (a directory named so, a named pipe): never read,
		// so no proof of damage, and not copied.
		if f.check {
			res.verify = err
		} else {
			res.gone = true
		}
		return res
	}
	if err != nil {
		res.src = err
		return res
	}
	defer rc.Close()
	sr := &errReader{r: rc}
	cw := &errWriter{w: w}
	tee := io.TeeReader(sr, cw)
	if f.check {
		err = c.verify(tee, f, o.Size, src.Locate(f.name))
	}
	if err == nil {
		_, err = io.Copy(io.Discard, tee) // what the decoder left: bytes as they are
	}
	res.size = cw.n
	switch {
	case cw.err != nil:
		res.dst = cw.err
	case sr.err != nil:
		res.src = sr.err
	case err != nil && ctx.Err() != nil:
		res.src = ctx.Err()
	case err != nil:
		res.verify = err
	}
	return res
}

// verify reads a checkpoint from r, as stored, and returns why it does not
// verify (nil if it does): its key, checksum, header and state or payload,
// as a Load checks them.
func (c *copier) verify(r io.Reader, f copyFile, size int64, loc string) error {
	if k := c.cfg.sealKeys; k != nil {
		pr, plain, err := k.Open(r, loc)
		if err != nil {
			return err
		}
		if !plain {
			size = -1 // the sealed stream's own size, not the file's
		}
		r = pr
	}
	return c.codec.Read(r, size, func(h header, _ []byte) error { return f.fn.agrees(h) })
}

// errReader is a reader that keeps its first error other than io.EOF.
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF && e.err == nil {
		e.err = err
	}
	return n, err
}

// errWriter is a writer that counts what it wrote and keeps its first
// error.
type errWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.n += int64(n)
	if err != nil {
		e.err = err
	}
	return n, err
}

// copySession copies the session s of the source root to dst, where it
// appears whole (see Copy): under the session's writer lock at dst, it
// claims the ID, copies the files, then publishes session.json.
func (c *copier) copySession(ctx context.Context, s sessionPlan) (err error) {
	srcSub, err := c.src.Sub(ctx, s.name, false)
	if err != nil {
		return fmt.Errorf("session %s: %w", c.src.Locate(s.name), err)
	}
	defer srcSub.Close()
	dstSub, err := c.dst.Sub(ctx, s.name, false)
	if err != nil {
		return fmt.Errorf("session %s: %w", c.dst.Locate(s.name), err)
	}
	defer dstSub.Close()
	where := fmt.Sprintf("session %s to %s", srcSub.Locate(""), dstSub.Locate(""))
	unlock, err := lock(ctx, dstSub, c.cfg.waitLock)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	defer func() {
		if uerr := unlock(); err == nil && uerr != nil {
			err = fmt.Errorf("%s: release the writer lock: %w", where, uerr)
		}
	}()
	token, published, err := c.claimCopy(ctx, dstSub, s)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if err := c.removeTemps(ctx, dstSub, !published); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	failed, err := c.copyFiles(ctx, srcSub, dstSub, s.files)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if failed > 0 {
		// Left out of sight, claimed, for a rerun to complete.
		c.countMeta(srcSub, copyFailed, 0)
		return nil
	}
	if !published {
		if _, err := dstSub.Create(ctx, sessionFile, writeBytes(s.meta)); err != nil {
			mine, rerr := holdsContent(ctx, dstSub, sessionFile, writeBytes(s.meta))
			if rerr != nil || !mine {
				return fmt.Errorf("%s: publish %s: %w", where, sessionFile, errors.Join(err, rerr))
			}
			// This call's own Create, retried after it landed.
		}
		// Published: the claim guards nothing from here on (a crash
		// that leaves it is harmless, as a creation's is).
		releaseClaim(context.WithoutCancel(ctx), dstSub, token)
		c.countMeta(srcSub, copyCreated, int64(len(s.meta)))
	} else {
		c.countMeta(srcSub, copyPresent, int64(len(s.meta)))
	}
	c.mu.Lock()
	c.out.Sessions++
	c.mu.Unlock()
	return nil
}

// countMeta records the outcome of a session's session.json, in src.
func (c *copier) countMeta(src Backend, outcome copyOutcome, size int64) {
	c.record(src.Locate(sessionFile), outcome, size, nil)
}

// record counts the outcome of the file at loc of the source, of size
// bytes (why, err, if it was skipped or failed: nil counts it in neither),
// and reports the progress.
func (c *copier) record(loc string, outcome copyOutcome, size int64, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch outcome {
	case copyCreated:
		c.out.Copied++
		c.out.Bytes += size
	case copyPresent:
		c.out.Present++
	case copySkipped:
		if err != nil {
			c.out.Skipped = append(c.out.Skipped, err)
		}
	case copyFailed:
		if err != nil {
			c.out.Failed = append(c.out.Failed, err)
		}
	}
	c.progress.Done++
	c.progress.Bytes += size
	c.progress.Location = loc
	if c.cfg.copyProgress != nil {
		c.cfg.copyProgress(c.progress)
	}
}

// claimCopy takes the ID of the session s in its child store dst, whose
// writer lock the caller holds. It returns the claim's token, or, if dst
// already holds the session with the same session.json (published by an
// earlier copy), published and no claim. Another session.json, a session
// being deleted, a creation's or a fork's claim, or objects that are no
// copy's under a claim of this call's own are ErrExists.
func (c *copier) claimCopy(ctx context.Context, dst Backend, s sessionPlan) (token string, published bool, err error) {
	if _, err := dst.Stat(ctx, sessionFile); err == nil {
		mine, err := holdsContent(ctx, dst, sessionFile, writeBytes(s.meta))
		if err != nil {
			return "", false, err
		}
		if !mine {
			if deleted, _ := deletedIn(ctx, dst); deleted {
				return "", false, fmt.Errorf("%w: the destination's session is being deleted, or a crash interrupted its deletion", ErrExists)
			}
			return "", false, fmt.Errorf("%w: the destination holds another session under the name (its %s differs)", ErrExists, sessionFile)
		}
		// A claim a crash left beside it (between the publication and
		// the claim's removal) guards nothing.
		return "", true, dropStaleClaim(ctx, dst)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", false, err
	}
	token = rand.Text()
	data, err := json.Marshal(sessionClaim{Op: claimCopy, Token: token, Time: c.cfg.now()})
	if err != nil {
		return "", false, err
	}
	fresh := true
	if _, err := dst.Create(ctx, claimName, writeBytes(data)); err != nil {
		if !errors.Is(err, ErrExists) {
			return "", false, err
		}
		held, obj, err := readClaimObject(ctx, dst)
		switch {
		case err != nil:
			return "", false, fmt.Errorf("%w: the session is being made at the destination (its claim: %w)", ErrExists, err)
		case held.Token == token:
			// This call's own Create, retried after it landed.
		case held.Op != claimCopy:
			return "", false, fmt.Errorf("%w: a %s at the destination holds the session's ID (it is running, or a crash interrupted it)", ErrExists, held.Op)
		default:
			// An earlier copy's, which a crash ended: this one holds
			// the lock that copy held. Resume it.
			if _, err := dst.Replace(ctx, claimName, obj.Version, writeBytes(data)); err != nil {
				return "", false, fmt.Errorf("take over the claim of an interrupted copy: %w", err)
			}
			fresh = false
		}
	}
	objs, err := dst.List(ctx)
	if err != nil {
		return token, false, err
	}
	var foreign []string
	for _, o := range objs {
		switch {
		case o.Name == sessionFile:
			// Published meanwhile, by a Create that holds no lock.
			releaseClaim(context.WithoutCancel(ctx), dst, token)
			return "", false, fmt.Errorf("%w: a session was created under the name at the destination meanwhile", ErrExists)
		case !strings.HasPrefix(o.Name, "."):
			foreign = append(foreign, o.Name)
		}
	}
	if fresh && len(foreign) > 0 {
		// Not an interrupted copy's (it would have left its claim):
		// never adopted.
		releaseClaim(context.WithoutCancel(ctx), dst, token)
		slices.Sort(foreign)
		return "", false, fmt.Errorf("%w: the destination holds objects that are not a session's (%s): a session is not copied over them", ErrExists, strings.Join(foreign[:min(len(foreign), 3)], ", "))
	}
	return token, false, nil
}

// report records p as the progress and reports it.
func (c *copier) report(p CopyProgress) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.progress = p
	if c.cfg.copyProgress != nil {
		c.cfg.copyProgress(p)
	}
}

func (c *copier) skip(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.out.Skipped = append(c.out.Skipped, err)
}

func (c *copier) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.out.Failed = append(c.out.Failed, err)
}
