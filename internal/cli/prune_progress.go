package cli

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"sync"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/storage"
)

// pruneProgress shows on a terminal what prune's store does, which is one
// call of the library (List, then Prune or PruneDryRun): it watches the
// store's Backend (see watch) and counts what the backend is asked to do.
//
// Reading: after each listing of the store, from the first read on, the
// checkpoint files listed (total) and how many of them the store has
// since opened (to read a header, or a whole checkpoint) or stat'ed (to
// check a header it has from the header index or its cache). On object
// storage a header the index holds is checked against the listing itself:
// such a file is read by no request and is not counted, and the bar ends
// short of its total. Removing: the checkpoints a Remove was asked to
// remove, and how many are gone: on object storage after each request's
// worth (see watched.Remove), on a local directory when its one call
// returns.
type pruneProgress struct {
	c          *cli
	checkpoint func(name string) bool // a checkpoint file's name, of the store's layout

	mu      sync.Mutex
	m       *meter
	listed  map[string]bool // the checkpoints of the last listing: true once read
	read    int
	stopped bool
}

// newPruneProgress returns the progress of c's prune of a store of layout
// l: nil (no progress, and the store's Backend left as it is) unless
// stderr is a terminal.
func (c *cli) newPruneProgress(l checkpoint.Layout) *pruneProgress {
	if !c.stderrTTY {
		return nil
	}
	return &pruneProgress{c: c, checkpoint: func(name string) bool { return isCheckpointName(l, name) }}
}

// phase ends the current bar and starts one counting unit, of total.
// The caller holds p.mu.
func (p *pruneProgress) phase(unit string, total int) {
	p.m.stop()
	p.m = p.c.newMeter(unit, false, false)
	p.m.set(0, total, -1)
}

// listing starts the count of reads over objs, what a List returned.
func (p *pruneProgress) listing(objs []storage.Object) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	p.listed = make(map[string]bool)
	for _, o := range objs {
		if (o.Version == "" || o.Mode.IsRegular()) && p.checkpoint(o.Name) {
			p.listed[o.Name] = false
		}
	}
	p.read = 0
	// The bar is drawn at the first read: a listing that the store reads
	// nothing of (its headers are cached) shows none.
	p.m.stop()
	p.m = nil
}

// looked counts a read of name (an Open or a Stat), once a listing.
func (p *pruneProgress) looked(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	if read, ok := p.listed[name]; ok && !read {
		p.listed[name] = true
		if p.read == 0 {
			p.phase("checkpoints read", len(p.listed))
		}
		p.read++
		p.m.set(p.read, len(p.listed), -1)
	}
}

// removing starts the count of the n checkpoints a Remove removes.
func (p *pruneProgress) removing(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stopped {
		p.phase("checkpoints removed", n)
	}
}

// removed counts what a Remove of n names reports gone.
func (p *pruneProgress) removed(n int, gone []bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	done := 0
	for _, g := range gone {
		if g {
			done++
		}
	}
	p.m.set(min(done, n), n, -1)
}

// stop erases the bar: prune's report follows. Nothing is shown after.
func (p *pruneProgress) stop() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	p.m.stop()
}

// open opens the store t with opts as t.open does, on its Backend watched
// by p: a local directory with dirstore.Open (read-only if readOnly, as
// checkpoint.Open opens it with ReadOnly among opts) and
// checkpoint.OpenBackend, which is what checkpoint.Open does. A nil p
// opens it with t.open.
func (p *pruneProgress) open(ctx context.Context, t target, readOnly bool, opts ...checkpoint.Option) (*checkpoint.Store[json.RawMessage], error) {
	if p == nil {
		return t.open(ctx, t.dir, opts...)
	}
	var b storage.Backend
	var err error
	if t.remote != nil {
		b, err = t.remote.Open(ctx, t.dir)
	} else {
		var dopts []dirstore.Option
		if readOnly {
			dopts = append(dopts, dirstore.ReadOnly())
		}
		if b, err = dirstore.Open(t.dir, dopts...); err != nil {
			// As checkpoint.Open says it: the operation, the directory and
			// the cause.
			var pe *fs.PathError
			if errors.As(err, &pe) && pe.Op == "open" && pe.Path == t.dir {
				err = pe.Err
			}
			err = &checkpoint.Error{Op: "open", Path: t.dir, Err: err}
		}
	}
	if err != nil {
		return nil, err
	}
	return checkpoint.OpenBackend[json.RawMessage](p.watch(b), opts...)
}

// watch returns b watched by p, or b itself if p is nil.
//
// The wrapper passes every call to b unchanged (but for a Remove of many
// names on object storage, passed on in batches: see watched.Remove), and
// so changes nothing of what a store does on it: it is a storage.Wrapper, so that its Traits
// are b's and a store takes from b the optional operations that it
// looks up through storage.As (TempCleaner, TempNamer, LockProber); and
// it implements storage.Unsynced exactly when b does, since a store takes
// that one from the outermost backend only (the header index is written
// through it). It does not implement storage.GroupCommitter, which only a
// save uses: prune saves nothing. A child store (Sub) is b's, unwatched.
func (p *pruneProgress) watch(b storage.Backend) storage.Backend {
	if p == nil {
		return b
	}
	w := &watched{Backend: b, p: p}
	if u, ok := b.(storage.Unsynced); ok {
		return &watchedUnsynced{watched: w, u: u}
	}
	return w
}

// watched is a Backend whose calls pruneProgress counts.
type watched struct {
	storage.Backend
	p *pruneProgress
}

// Unwrap returns the watched backend (see storage.Wrapper).
func (w *watched) Unwrap() storage.Backend { return w.Backend }

func (w *watched) List(ctx context.Context) ([]storage.Object, error) {
	objs, err := w.Backend.List(ctx)
	if err == nil {
		w.p.listing(objs)
	}
	return objs, err
}

func (w *watched) Open(ctx context.Context, name string) (io.ReadCloser, storage.Object, error) {
	r, o, err := w.Backend.Open(ctx, name)
	w.p.looked(name)
	return r, o, err
}

func (w *watched) Stat(ctx context.Context, name string) (storage.Object, error) {
	o, err := w.Backend.Stat(ctx, name)
	w.p.looked(name)
	return o, err
}

// removeBatch is how many names a Remove on object storage passes on at
// a time: as many as one S3 request deletes (DeleteObjects), so that the
// requests are the ones a single Remove would send, and the bar moves
// after each.
const removeBatch = 1000

// Remove removes names with the watched backend's Remove, in calls of
// removeBatch names on object storage (where each removal is durable on
// its own, and a Remove of more is sent in requests of that many
// anyway), in one call on a local directory (whose Remove syncs the
// directory once for them all). As a Remove does, a call that fails does
// not stop the next.
func (w *watched) Remove(ctx context.Context, names ...string) ([]bool, error) {
	w.p.removing(len(names))
	if storage.TraitsOf(w.Backend).Local || len(names) <= removeBatch {
		gone, err := w.Backend.Remove(ctx, names...)
		w.p.removed(len(names), gone)
		return gone, err
	}
	gone := make([]bool, 0, len(names))
	var errs []error
	for lo := 0; lo < len(names); lo += removeBatch {
		batch := names[lo:min(lo+removeBatch, len(names))]
		g, err := w.Backend.Remove(ctx, batch...)
		if len(g) != len(batch) { // a backend's mistake: nothing known gone
			g = make([]bool, len(batch))
		}
		gone = append(gone, g...)
		if err != nil {
			errs = append(errs, err)
		}
		w.p.removed(len(names), gone)
	}
	return gone, errors.Join(errs...)
}

// watchedUnsynced is watched over a storage.Unsynced backend.
type watchedUnsynced struct {
	*watched
	u storage.Unsynced
}

func (w *watchedUnsynced) ReplaceUnsynced(ctx context.Context, name string, write func(io.Writer) error) (storage.Object, error) {
	return w.u.ReplaceUnsynced(ctx, name, write)
}

func (w *watchedUnsynced) RemoveUnsynced(ctx context.Context, names ...string) ([]bool, error) {
	w.p.removing(len(names))
	gone, err := w.u.RemoveUnsynced(ctx, names...)
	w.p.removed(len(names), gone)
	return gone, err
}

// isCheckpointName reports whether name is that of a checkpoint file of
// layout l: PREFIX_STEP[.final|.error|.error-N].json[.gz|.zst], or
// PREFIX_last.json[...] for the rolling file. The library's own parsing
// also insists on the step's padding; a name that differs only there is
// counted here and read by no store, which only leaves the bar short.
func isCheckpointName(l checkpoint.Layout, name string) bool {
	rest, ok := strings.CutPrefix(name, l.Prefix+"_")
	if !ok || l.Prefix == "" {
		return false
	}
	for _, ext := range []string{".json.gz", ".json.zst", ".json"} {
		if r, ok := strings.CutSuffix(rest, ext); ok {
			rest = r
			break
		}
		if ext == ".json" {
			return false
		}
	}
	if rest == "last" {
		return true
	}
	step, kind, _ := strings.Cut(rest, ".")
	if step == "" || strings.Trim(step, "0123456789") != "" {
		return false
	}
	if n, ok := strings.CutPrefix(kind, "error-"); ok {
		a, err := strconv.Atoi(n)
		return err == nil && a >= 2 && strconv.Itoa(a) == n
	}
	return kind == "" || kind == "final" || kind == "error"
}
