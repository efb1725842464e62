package s3store

// Fencing: a writer that was paused past its lease (a GC pause, SIGSTOP,
// a network partition) and wakes up must not make anything it writes
// after another writer took the lease over visible, to List, Open or Stat,
// in any process. S3 has no fencing tokens of its own, so the rule is
// enforced by every reader:
//
//	An object is visible iff there is no lease object, or the object has
//	no generation (it was written by something that did not hold a lease,
//	not by a store), or its generation is the lease's current generation
//	G, or its (name, ETag) is in the lease's sealed set.
//
// A reader learns an object's generation from its metadata (HeadObject,
// cached by name and ETag) or, without a request, from the lease's written
// set: the (name, ETag) of what G wrote, which each renewal brings up to
// date.
//
// Each holder stamps its generation in every object it writes (metadata
// checkpoint-generation). A takeover lists the store BEFORE its PUT of the
// lease and puts into the new lease the sealed set: the (name, ETag) of
// every object visible by the old lease's rule at that moment. The set is
// in the same PUT as the new generation, so a reader sees both or neither;
// renewals copy it; the next takeover recomputes it.
//
// Why that is enough. Let A hold generation g and B take over at the
// instant T (B's If-Match PUT of generation g+1 on the lease ETag that A
// last wrote). Anything A's requests put after T has generation g < g+1,
// so it is visible only if its (name, ETag) is sealed; but the sealed set
// comes from a listing made before T, so it holds only objects that
// existed before T. A write landing after T could match a sealed pair only
// by having exactly the bytes (the ETag is their MD5) of the object that
// was under that name before T: then nothing new became visible. (The one
// way that can happen is an unconditional Replace, ifVersion "", of bytes
// identical to an older version, which the store never sends for a
// checkpoint; it is the one exception, and it brings back old bytes, not
// new ones. The written set has the same exception: a stale write of the
// very bytes G wrote under a name counts as G's.)
//
// Readers judge by the lease they read AFTER reading the object (List:
// after the listing and any HeadObject; Open and Stat: after the GET or
// HEAD). If that lease still says g, the takeover had not happened when it
// was read, so the object, which was read earlier, was written before the
// takeover, and the next holder will seal it (it is visible by g's rule and
// in its listing). If it says g+1, the rule above applies. The holder does
// not read the lease: while its own deadline has not passed nobody can
// have taken over (below), so its own view is the lease's.
//
// Acknowledged writes are never hidden. A holder's deadline is the start
// of its last successful renewal plus TTL minus a tenth, by its monotonic
// clock and by its wall clock (both must say it has not passed: Go's
// monotonic clock does not count a system suspend on Linux, so a machine
// that slept past its lease would otherwise wake up trusting it); a write
// that finishes after it returns ErrLocked. B takes over
// only after it has seen A's last lease ETag unchanged for a full TTL by
// its own clock, starting when it first read that ETag, which is after A's
// renewal request started; then it lists. So B's listing starts after A's
// deadline (unless A's clocks run more than 10% slow against B's, or A's
// machine slept and its wall clock was not moved on at resume), and
// every write A acknowledged had finished, and is in B's listing, and is
// sealed. A write that A did not acknowledge may be visible or hidden.
//
// A fenced object blocks nothing: Create (and Replace with NoObject) treat it
// as absent and replace it with If-Match on its ETag, and a new holder may
// Remove it. Whether the object in the way is fenced is judged by the lease
// as read from the server then (visibleNow), never by the writer's own view:
// a stale writer whose clock misled it must not take the new holder's objects
// for fenced ones and overwrite them. What fencing does not cover: a stale
// writer's delayed DeleteObject can still remove an object (the store deletes
// only checkpoints older than ones it keeps), and deleting the lease object
// by hand while a writer might still be running restarts the generations
// at 1.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocheckpoint/checkpoint"
)

// leaseView is what the fencing rule needs of a lease.
type leaseView struct {
	exists bool
	etag   string
	gen    uint64
	sealed map[string]string
	// written is the lease's Written: objects known to be of gen.
	written map[string]string
}

func viewOf(st leaseState) leaseView {
	return leaseView{exists: st.exists, etag: st.etag, gen: st.doc.Generation, sealed: st.doc.Sealed, written: st.doc.Written}
}

// admits is the fencing rule.
func (v leaseView) admits(name, etag string, gen uint64) bool {
	return !v.exists || gen == 0 || gen == v.gen || v.isSealed(name, etag)
}

func (v leaseView) isSealed(name, etag string) bool {
	return etag != "" && v.sealed[name] == etag
}

// judges reports whether v can judge the object without knowing its
// generation from the object itself: there is no lease, or the object is
// sealed, or the lease lists it as written by its generation.
func (v leaseView) judges(name, etag string) bool {
	return !v.exists || v.isSealed(name, etag) || (etag != "" && v.written[name] == etag)
}

// admitsListed is admits for an object known by name and ETag only: its
// generation from the cache, or the lease's written set.
func (b *Backend) admitsListed(v leaseView, name, etag string) bool {
	if etag != "" && v.written[name] == etag {
		return true
	}
	gen, _ := b.generation(name, etag)
	return v.admits(name, etag, gen)
}

// holderView returns the view of the lease this backend holds, if it holds
// one whose deadline has not passed.
func (b *Backend) holderView() (leaseView, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.lease
	if l == nil || l.lost != nil || l.expired(time.Now()) {
		return leaseView{}, false
	}
	return leaseView{exists: true, etag: l.etag, gen: l.doc.Generation, sealed: l.doc.Sealed, written: l.doc.Written}, true
}

// readerView reads the lease (a GET with If-None-Match on the ETag last
// read: a 304 when it did not change) and returns its view.
func (b *Backend) readerView(ctx context.Context) (leaseView, error) {
	b.mu.Lock()
	last := b.view
	b.mu.Unlock()
	st, same, err := b.readLease(ctx, last.etag)
	if err != nil {
		return leaseView{}, err
	}
	if same {
		return last, nil
	}
	v := viewOf(st)
	b.mu.Lock()
	b.view = v
	b.mu.Unlock()
	return v, nil
}

// currentView is the holder's view while it holds the lease, and the
// lease as read now otherwise.
func (b *Backend) currentView(ctx context.Context) (leaseView, error) {
	if v, ok := b.holderView(); ok {
		return v, nil
	}
	return b.readerView(ctx)
}

// visible judges an object just read (its name, ETag and generation).
func (b *Backend) visible(ctx context.Context, name, etag string, gen uint64) (bool, error) {
	v, err := b.currentView(ctx)
	if err != nil {
		return false, err
	}
	return v.admits(name, etag, gen), nil
}

// visibleNow judges an object just read by the lease as read from the
// server now, even on the holder. It decides whether an object in the
// way may be overwritten as fenced, which must not rest on this writer's
// belief that it still holds the lease: a writer whose clock misled it
// would take the new holder's objects for fenced ones and destroy them.
// It costs a conditional GET of the lease, only when a name is taken.
func (b *Backend) visibleNow(ctx context.Context, name, etag string, gen uint64) (bool, error) {
	v, err := b.readerView(ctx)
	if err != nil {
		return false, err
	}
	return v.admits(name, etag, gen) || (etag != "" && v.written[name] == etag), nil
}

// remember caches the generation of the object name with etag.
func (b *Backend) remember(name, etag string, gen uint64) {
	if etag == "" {
		return
	}
	b.mu.Lock()
	b.gens[objectKey{name, etag}] = gen
	b.mu.Unlock()
}

// generation returns the cached generation of an object.
func (b *Backend) generation(name, etag string) (uint64, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	g, ok := b.gens[objectKey{name, etag}]
	return g, ok
}

// forget drops what this backend knows of name, which it deleted: its
// cached generations and its entry in the sealed set of the lease it holds
// (the next renewal writes the smaller set).
func (b *Backend) forget(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.gens {
		if k.name == name {
			delete(b.gens, k)
		}
	}
	if b.lease != nil {
		b.noteWrite(name, "")
	}
}

// noteWrite records that this writer wrote name (etag) or removed it
// (""), for the next renewal: the name leaves the sealed set (its sealed
// object is gone) and joins or leaves the written set. The sets are
// rebuilt only then (foldChanges): the views handed out share them, and a
// copy per write would cost a full copy per save. b.mu is held.
func (b *Backend) noteWrite(name, etag string) {
	l := b.lease
	if l.changed == nil {
		l.changed = make(map[string]string)
	}
	l.changed[name] = etag
}

// foldChanges applies the writes and removals noted since the last
// renewal to the sealed and written sets. b.mu is held.
func (l *lease) foldChanges() {
	if len(l.changed) == 0 {
		return
	}
	sealed := make(map[string]string, len(l.doc.Sealed))
	for k, v := range l.doc.Sealed {
		if _, ok := l.changed[k]; !ok {
			sealed[k] = v
		}
	}
	written := make(map[string]string, len(l.doc.Written)+len(l.changed))
	for k, v := range l.doc.Written {
		written[k] = v
	}
	for k, v := range l.changed {
		if v == "" {
			delete(written, k)
		} else {
			written[k] = v
		}
	}
	l.doc.Sealed, l.doc.Written, l.changed = sealed, written, nil
}

// beginWrite is called before each write request: it returns the
// generation to stamp (0 if this backend never locked), or an error
// wrapping ErrLocked if the lease was lost, has passed its deadline or was
// released.
func (b *Backend) beginWrite(op, loc string) (uint64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, fail(op, loc, checkpoint.ErrClosed, nil)
	}
	if b.lease != nil {
		b.lease.listing, b.lease.listed = nil, false // List asks the server from now on
	}
	if b.lease == nil {
		if b.released {
			return 0, fail(op, loc, checkpoint.ErrLocked, errors.New("the lease was released"))
		}
		return 0, nil
	}
	if err := b.leaseProblem(); err != nil {
		return 0, fail(op, loc, checkpoint.ErrLocked, err)
	}
	return b.lease.doc.Generation, nil
}

// leaseProblem says why the held lease cannot be trusted now. b.mu is held.
func (b *Backend) leaseProblem() error {
	l := b.lease
	if b.unguarded {
		return nil
	}
	if l.lost != nil {
		return l.lost
	}
	if now := time.Now(); l.expired(now) {
		late := max(now.Sub(l.deadline), now.Round(0).Sub(l.wallDeadline))
		err := fmt.Errorf("the lease (generation %d) was not renewed in time: its deadline passed %v ago", l.doc.Generation, late.Round(time.Millisecond))
		if l.renewErr != nil {
			err = fmt.Errorf("%w (last renewal: %w)", err, l.renewErr)
		}
		return err
	}
	return nil
}

// endWrite is called after a successful write request of generation gen:
// it records the object's generation and, if the write was fenced, fails
// it with ErrLocked if it finished after the lease's deadline or after the
// lease was lost: the object may exist, but this writer can no longer
// promise it is visible.
func (b *Backend) endWrite(op, loc, name, etag string, gen uint64) error {
	b.remember(name, etag, gen)
	if gen == 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lease == nil || b.lease.doc.Generation != gen {
		return fail(op, loc, checkpoint.ErrLocked, errors.New("the lease was released or lost while writing; the object may exist but be hidden"))
	}
	if err := b.leaseProblem(); err != nil {
		return fail(op, loc, checkpoint.ErrLocked, fmt.Errorf("%w; the object may exist but be hidden", err))
	}
	b.noteWrite(name, etag)
	return nil
}

// listVisible lists the objects and keeps those the fencing rule admits.
// It reads the generation of each object it cannot judge otherwise (the
// cache, then HeadObject, several at a time), and judges by a lease view
// taken after all those reads.
func (b *Backend) listVisible(ctx context.Context) ([]checkpoint.Object, error) {
	objs, _, err := b.listAll(ctx)
	if err != nil {
		return nil, err
	}
	for round := 0; ; round++ {
		v, err := b.currentView(ctx)
		if err != nil {
			return nil, err
		}
		var unknown []int
		for i, o := range objs {
			if v.judges(o.Name, o.Version) {
				continue
			}
			if _, ok := b.generation(o.Name, o.Version); !ok {
				unknown = append(unknown, i)
			}
		}
		if len(unknown) == 0 {
			out := objs[:0:0]
			for _, o := range objs {
				if b.admitsListed(v, o.Name, o.Version) {
					out = append(out, o)
				}
			}
			b.pruneGens(objs)
			return out, nil
		}
		if round == 3 {
			return nil, fmt.Errorf("objects keep changing while listed (%d not judged)", len(unknown))
		}
		// The HEADs come before the next view, so the view is at least as
		// new as every object judged by it.
		if objs, err = b.headAll(ctx, objs, unknown); err != nil {
			return nil, err
		}
	}
}

// headConcurrency bounds the HeadObject requests in flight for one List.
const headConcurrency = 8

// headAll learns the generation of objs[i] for i in which by a HeadObject
// (which records it), replaces those that changed since the listing by the
// HEAD's answer, and drops those gone since.
func (b *Backend) headAll(ctx context.Context, objs []checkpoint.Object, which []int) ([]checkpoint.Object, error) {
	type result struct {
		o   checkpoint.Object
		err error
	}
	res := make([]result, len(which))
	// A fixed set of workers: a reader new to a large store may have
	// thousands of objects to ask about.
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(headConcurrency, len(which)) {
		wg.Go(func() {
			for {
				j := int(next.Add(1)) - 1
				if j >= len(which) {
					return
				}
				o, _, err := b.head(ctx, objs[which[j]].Name)
				res[j] = result{o, err}
			}
		})
	}
	wg.Wait()
	drop := make(map[int]bool)
	for j, i := range which {
		switch r := res[j]; {
		case r.err == nil && r.o.Version == objs[i].Version && r.o.Size == objs[i].Size:
			// The version listed: keep the listing's description, whose
			// ModTime is as precise as the server keeps it (a HEAD's
			// Last-Modified is whole seconds), so that a listing does not
			// depend on which objects it had to HEAD.
		case r.err == nil:
			objs[i] = r.o
		case isNotFound(r.err):
			drop[i] = true
		default:
			return nil, requestError(ctx, "head", b.Locate(objs[i].Name), nil, r.err)
		}
	}
	if len(drop) == 0 {
		return objs, nil
	}
	kept := objs[:0:0]
	for i, o := range objs {
		if !drop[i] {
			kept = append(kept, o)
		}
	}
	return kept, nil
}

// pruneGens forgets cached generations of objects that are no longer
// listed, once the cache has grown well past the listing.
func (b *Backend) pruneGens(listed []checkpoint.Object) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.gens) <= 2*len(listed)+64 {
		return
	}
	keep := make(map[objectKey]bool, len(listed))
	for _, o := range listed {
		keep[objectKey{o.Name, o.Version}] = true
	}
	for k := range b.gens {
		if !keep[k] {
			delete(b.gens, k)
		}
	}
}

// sealedSet lists the store and returns the (name, ETag) of every object
// visible by the rule of the lease st (all of them if there is none): the
// sealed set of the generation that takes over st; and those objects
// themselves, as List returns them.
func (b *Backend) sealedSet(ctx context.Context, st leaseState) (map[string]string, []checkpoint.Object, error) {
	objs, _, err := b.listAll(ctx)
	if err != nil {
		return nil, nil, err
	}
	v := viewOf(st)
	var unknown []int
	for i, o := range objs {
		if _, ok := b.generation(o.Name, o.Version); !ok && !v.judges(o.Name, o.Version) {
			unknown = append(unknown, i)
		}
	}
	if objs, err = b.headAll(ctx, objs, unknown); err != nil {
		return nil, nil, err
	}
	sealed := make(map[string]string, len(objs))
	visible := objs[:0:0]
	for _, o := range objs {
		if b.admitsListed(v, o.Name, o.Version) {
			sealed[o.Name] = o.Version
			visible = append(visible, o)
		}
	}
	return sealed, visible, nil
}

// resumeListing returns the takeover's listing of the lease this backend
// holds (see lease.listing) while List may answer from it: no write of
// this backend's has begun since the takeover, nor any renewal, and the
// lease is trusted. Only this writer's writes change which objects are
// visible while it holds the lease: anything an older generation writes
// after the takeover is hidden by the fencing rule. (An object written or
// deleted meanwhile by something that holds no lease, a person or another
// tool, is seen by the next List after the first write or renewal, as it
// would be by a List that had run a moment earlier.)
func (b *Backend) resumeListing() ([]checkpoint.Object, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.lease
	if l == nil || !l.listed || l.lost != nil || l.expired(time.Now()) {
		return nil, false
	}
	return slices.Clone(l.listing), true
}
