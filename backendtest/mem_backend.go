package backendtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"runtime"
	"strings"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/storage"
)

// memBackend is one handle on a Mem, or a child store reached from one:
// the object storage a Mem models by default.
type memBackend struct {
	m      *Mem
	conn   *memConn
	prefix string // "" or "child/" or "child/grand/"
}

// memLocal is a memBackend of a Mem made with MemLocal: a local directory,
// with its Traits and optional interfaces.
type memLocal struct{ *memBackend }

// flavoured returns b as the kind of backend its Mem models.
func (b *memBackend) flavoured() checkpoint.Backend {
	if b.m.local {
		return memLocal{b}
	}
	return b
}

// memOf returns the memBackend of a backend a Mem returned.
func memOf(b checkpoint.Backend) *memBackend {
	if l, ok := b.(memLocal); ok {
		return l.memBackend
	}
	return b.(*memBackend)
}

func (b *memBackend) fail(op, name string, err error) error {
	return fmt.Errorf("mem: %s %s: %w", op, b.Locate(name), err)
}

// write runs write into a buffer, as a backend writes a temporary file.
func (b *memBackend) write(ctx context.Context, op, name string, write func(io.Writer) error) ([]byte, error) {
	m := b.m
	if err := m.checkName(name); err != nil {
		return nil, err
	}
	if err := m.off(); err != nil {
		return nil, b.fail(op, name, err)
	}
	if err := ctx.Err(); err != nil && !m.is("ctx-ignored") {
		return nil, b.fail(op, name, err)
	}
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		if m.is("failed-write-publishes") {
			m.mu.Lock()
			m.live[b.prefix+name] = m.newObject(buf.Bytes())
			m.mu.Unlock()
		}
		return nil, b.fail(op, name, err)
	}
	if err := ctx.Err(); err != nil && !m.is("ctx-ignored") {
		return nil, b.fail(op, name, err)
	}
	return buf.Bytes(), nil
}

func (b *memBackend) Create(ctx context.Context, name string, write func(io.Writer) error) (checkpoint.Object, error) {
	return b.publish(ctx, opCreate, name, write, func(_ memObject, exists bool) error {
		// The mutants check nothing under the lock: every one of racing
		// creators wins, on any scheduler.
		if exists && !b.m.is("create-replaces") && !b.m.is("create-no-check") {
			return checkpoint.ErrExists
		}
		return nil
	})
}

func (b *memBackend) Replace(ctx context.Context, name, ifVersion string, write func(io.Writer) error) (checkpoint.Object, error) {
	return b.publish(ctx, opReplace, name, write, func(cur memObject, exists bool) error {
		conflict := ifVersion == storage.NoObject && exists ||
			ifVersion != "" && ifVersion != storage.NoObject && (!exists || cur.version != ifVersion)
		if conflict && !b.m.is("replace-ignores-version") {
			return checkpoint.ErrConflict
		}
		return nil
	})
}

// publish puts what write produces under name, unless refuse, given what
// is there, returns the error to refuse it with.
func (b *memBackend) publish(ctx context.Context, op memOp, name string, write func(io.Writer) error, refuse func(cur memObject, exists bool) error) (checkpoint.Object, error) {
	data, err := b.write(ctx, op.name, name, write)
	if err != nil {
		return checkpoint.Object{}, err
	}
	m := b.m
	m.mu.Lock()
	defer m.mu.Unlock()
	key := b.prefix + name
	cur, ok := m.live[key]
	if refused := refuse(cur, ok); refused != nil {
		if err := m.count(); err != nil {
			refused = err
		}
		return checkpoint.Object{}, b.fail(op.name, name, refused)
	}
	o := m.newObject(data)
	o.bare = op.unsynced && !op.synced
	if err := m.change(op, b.prefix, memChange{key: key, obj: o}); err != nil {
		return checkpoint.Object{}, b.fail(op.name, name, err)
	}
	return o.describe(name), nil
}

func (o memObject) describe(name string) checkpoint.Object {
	return checkpoint.Object{Name: name, Size: int64(len(o.data)), Version: o.version, ModTime: o.mod}
}

func (b *memBackend) stat(ctx context.Context, name string) (memObject, error) {
	m := b.m
	if err := m.checkName(name); err != nil {
		return memObject{}, err
	}
	if err := ctx.Err(); err != nil {
		return memObject{}, b.fail("stat", name, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cut {
		return memObject{}, b.fail("stat", name, ErrPowerCut)
	}
	o, ok := m.live[b.prefix+name]
	if !ok {
		if m.is("missing-not-notexist") {
			return memObject{}, b.fail("stat", name, errors.New("no such object"))
		}
		return memObject{}, b.fail("stat", name, fs.ErrNotExist)
	}
	return o, nil
}

func (b *memBackend) Open(ctx context.Context, name string) (io.ReadCloser, checkpoint.Object, error) {
	o, err := b.stat(ctx, name)
	if err != nil {
		return nil, checkpoint.Object{}, err
	}
	obj := o.describe(name)
	switch m := b.m; {
	case m.is("torn-replace"):
		return &tornReader{b: b, key: b.prefix + name, data: o.data}, obj, nil
	case m.is("open-zero-modtime"):
		obj.ModTime = time.Time{}
	case m.is("early-close-fails"):
		return &strictReader{Reader: bytes.NewReader(o.data)}, obj, nil
	}
	return io.NopCloser(bytes.NewReader(o.data)), obj, nil
}

// strictReader fails a Close before the end of the object (a mutant).
type strictReader struct{ *bytes.Reader }

func (r *strictReader) Close() error {
	if r.Len() > 0 {
		return errors.New("mem: closed before the end")
	}
	return nil
}

// tornReader reads the second half of an object from whatever is under
// its name by then: a backend that overwrites objects in place (a mutant).
type tornReader struct {
	b    *memBackend
	key  string
	data []byte
	off  int
}

func (r *tornReader) Read(p []byte) (int, error) {
	if r.off >= len(r.data)/2 {
		m := r.b.m
		m.mu.Lock()
		if cur, ok := m.live[r.key]; ok && len(cur.data) == len(r.data) {
			r.data = cur.data
		}
		m.mu.Unlock()
	}
	if r.off >= len(r.data) {
		return 0, io.EOF
	}
	n := copy(p, r.data[r.off:min(len(r.data), r.off+4096)])
	r.off += n
	return n, nil
}

func (r *tornReader) Close() error { return nil }

func (b *memBackend) Stat(ctx context.Context, name string) (checkpoint.Object, error) {
	o, err := b.stat(ctx, name)
	if err != nil {
		return checkpoint.Object{}, err
	}
	obj := o.describe(name)
	if b.m.is("version-per-call") {
		obj.Version += time.Now().String()
	}
	return obj, nil
}

// List tells each object's Size and Version, as object storage does; a
// local Mem's, names only, as a directory's.
func (b *memBackend) List(ctx context.Context) ([]checkpoint.Object, error) {
	if err := ctx.Err(); err != nil {
		return nil, b.fail("list", "", err)
	}
	m := b.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cut {
		return nil, b.fail("list", "", ErrPowerCut)
	}
	var objs []checkpoint.Object
	for key, o := range m.live {
		name, ok := strings.CutPrefix(key, b.prefix)
		if !ok || name == "" || strings.Contains(name, "/") && !m.is("list-children") {
			continue
		}
		obj := o.describe(name)
		if m.local && !strings.Contains(name, "/") { // the mutant list-children lists a child's objects as its own
			obj = checkpoint.Object{Name: name, Size: -1}
		}
		objs = append(objs, obj)
	}
	if m.is("list-one-page") && len(objs) > 1000 {
		objs = objs[:1000]
	}
	return objs, nil
}

func (b *memBackend) Remove(ctx context.Context, names ...string) ([]bool, error) {
	return b.remove(ctx, opRemove, names)
}

func (b *memBackend) remove(ctx context.Context, op memOp, names []string) ([]bool, error) {
	gone := make([]bool, len(names))
	if err := ctx.Err(); err != nil {
		return gone, b.fail("remove", "", err)
	}
	m := b.m
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	var changes []memChange
	var at []int
	for i, name := range names {
		if err := m.checkName(name); err != nil {
			errs = append(errs, err)
			continue
		}
		if _, ok := m.live[b.prefix+name]; !ok && m.is("remove-missing-fails") {
			errs = append(errs, b.fail("remove", name, fs.ErrNotExist))
			continue
		}
		changes = append(changes, memChange{key: b.prefix + name, gone: true})
		at = append(at, i)
	}
	if err := m.change(op, b.prefix, changes...); err != nil {
		return gone, b.fail("remove", "", err)
	}
	for _, i := range at {
		gone[i] = true
	}
	return gone, errors.Join(errs...)
}

func (b *memBackend) Rename(ctx context.Context, from, to string) error {
	m := b.m
	if err := errors.Join(m.checkName(from), m.checkName(to)); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return b.fail("rename", from, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.live[b.prefix+from]
	_, taken := m.live[b.prefix+to]
	if !ok || taken && !m.is("rename-overwrites") {
		if err := m.count(); err != nil {
			return b.fail("rename", from, err)
		}
		if !ok {
			return b.fail("rename", from, fs.ErrNotExist)
		}
		return b.fail("rename to", to, checkpoint.ErrExists)
	}
	if m.is("rename-checks-then-moves") {
		// The destination was free when checked; the move replaces
		// whatever is there by the time it happens. It waits a while for
		// the racing Create to land there, so that the suite catches it
		// on any scheduler (Wine's ran the two one after the other).
		m.mu.Unlock()
		for deadline := time.Now().Add(100 * time.Millisecond); time.Now().Before(deadline); runtime.Gosched() {
			m.mu.Lock()
			_, taken := m.live[b.prefix+to]
			m.mu.Unlock()
			if taken {
				break
			}
		}
		m.mu.Lock()
	}
	changes := []memChange{{key: b.prefix + to, obj: o}, {key: b.prefix + from, gone: true}}
	if m.is("rename-copies") {
		changes = changes[:1]
	}
	if err := m.change(opRename, b.prefix, changes...); err != nil {
		return b.fail("rename", from, err)
	}
	return nil
}

// Lock takes the lock of b's store. A power cut releases every lock, as
// it ends every process.
func (b *memBackend) Lock(ctx context.Context) (func() error, error) {
	if err := ctx.Err(); err != nil {
		return nil, b.fail("lock", "", err)
	}
	m := b.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cut {
		return nil, b.fail("lock", "", ErrPowerCut)
	}
	key := b.prefix
	switch {
	case m.is("lock-global"):
		key = ""
	case m.is("lock-per-handle"):
		key = fmt.Sprintf("%s@%p", b.prefix, b.conn)
	}
	if l := m.locks[key]; l != nil && !m.expired(l) {
		return nil, b.fail("lock", "", checkpoint.ErrLocked)
	}
	l := &memLock{conn: b.conn}
	m.locks[key] = l
	return func() error {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.locks[key] == l {
			delete(m.locks, key)
		}
		return nil
	}, nil
}

// expired reports whether l is a lease its closed holder let expire (see
// MemLease). m.mu is held.
func (m *Mem) expired(l *memLock) bool {
	return l.conn.closed && m.ttl > 0 && time.Since(l.closedAt) > m.ttl && !m.is("lease-never-expires")
}

func (b *memBackend) Sub(ctx context.Context, name string, create bool) (checkpoint.Backend, error) {
	m := b.m
	if err := m.checkName(name); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, b.fail("sub", name, err)
	}
	prefix := b.prefix + name + "/"
	if m.is("sub-shares-parent") {
		prefix = b.prefix
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cut {
		return nil, b.fail("sub", name, ErrPowerCut)
	}
	_, exists := m.live[prefix]
	switch {
	case create && exists:
		if err := m.count(); err != nil {
			return nil, b.fail("sub", name, err)
		}
	case create:
		if err := m.change(opSub, b.prefix, memChange{key: prefix, obj: memObject{}}); err != nil {
			return nil, b.fail("sub", name, err)
		}
	case m.is("children-lists-lazy"):
		m.live[prefix] = memObject{}
	}
	return (&memBackend{m: m, conn: b.conn, prefix: prefix}).flavoured(), nil
}

func (b *memBackend) Children(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, b.fail("children", "", err)
	}
	m := b.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cut {
		return nil, b.fail("children", "", ErrPowerCut)
	}
	seen := map[string]bool{}
	var names []string
	for key := range m.live {
		rest, ok := strings.CutPrefix(key, b.prefix)
		if child, _, nested := strings.Cut(rest, "/"); ok && nested && !seen[child] {
			seen[child] = true
			names = append(names, child)
		}
	}
	return names, nil
}

func (b *memBackend) Locate(name string) string {
	if b.m.is("locate-constant") {
		return "mem:/" + name
	}
	return "mem:/" + b.prefix + name
}

// Close releases the locks the handle holds, or, if the Mem's locks are
// leases, lets them expire (a child's Close leaves its handle open).
func (b *memBackend) Close() error {
	if b.prefix != "" {
		return nil
	}
	m := b.m
	m.mu.Lock()
	defer m.mu.Unlock()
	b.conn.closed = true
	for key, l := range m.locks {
		switch {
		case l.conn != b.conn:
		case m.ttl > 0:
			l.closedAt = time.Now()
		default:
			delete(m.locks, key)
		}
	}
	return nil
}

// rewrite puts p under name in place, as a program writing behind the
// backend would: a new Version, the old modification time. It is not a
// mutating call of the store (Ops does not count it) and is made durable.
func (b *memBackend) rewrite(name string, p []byte) {
	m := b.m
	m.mu.Lock()
	defer m.mu.Unlock()
	key := b.prefix + name
	old := m.live[key]
	o := m.newObject(bytes.Clone(p))
	o.mod = old.mod
	if m.is("version-kept-on-rewrite") {
		o.version = old.version
	}
	m.live[key] = o
	m.durable[key] = o
	m.synced[key] = m.ops
}

// Traits says a local Mem is Local.
func (l memLocal) Traits() storage.Traits { return storage.Traits{Local: true} }

// ReplaceUnsynced is an unconditional Replace that makes nothing durable
// (see MemLocal).
func (l memLocal) ReplaceUnsynced(ctx context.Context, name string, write func(io.Writer) error) (checkpoint.Object, error) {
	if l.m.is("unsynced-replace-ignores-write-error") {
		w := write
		write = func(out io.Writer) error { _ = w(out); return nil }
	}
	return l.publish(ctx, opReplaceU, name, write, func(memObject, bool) error { return nil })
}

// CreateUncommitted is a Create that makes nothing durable but the
// object's bytes: a later Commit, or any call that syncs the directory,
// makes its name durable (see MemLocal).
func (l memLocal) CreateUncommitted(ctx context.Context, name string, write func(io.Writer) error) (checkpoint.Object, error) {
	return l.publish(ctx, opCreateU, name, write, func(_ memObject, exists bool) error {
		if exists && !l.m.is("create-replaces") && !l.m.is("create-no-check") {
			return checkpoint.ErrExists
		}
		return nil
	})
}

// Commit syncs the directory, which makes durable every name
// CreateUncommitted published in it (see MemLocal). The Mem fails it only
// with a power cut, and then takes nothing back: the process is gone.
func (l memLocal) Commit(ctx context.Context, names ...string) error {
	for _, name := range names {
		if err := l.m.checkName(name); err != nil {
			return err
		}
	}
	m := l.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.change(opCommit, l.prefix); err != nil {
		return l.fail("commit", "", err)
	}
	if m.is("commit-takes-back") {
		for _, name := range names {
			delete(m.live, l.prefix+name)
		}
	}
	return nil
}

// RemoveUnsynced is a Remove that makes nothing durable (see MemLocal).
func (l memLocal) RemoveUnsynced(ctx context.Context, names ...string) ([]bool, error) {
	gone, err := l.remove(ctx, opRemoveU, names)
	if l.m.is("unsynced-remove-says-nothing-gone") {
		clear(gone)
	}
	return gone, err
}

// RemoveTemps removes the temporary objects a power cut left behind (see
// MemLocal) whose final name ours accepts, durably. One that finds none
// is not a mutating call, as it makes none on a directory.
func (l memLocal) RemoveTemps(ctx context.Context, ours func(final string, legacy bool) bool) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, l.fail("remove temps", "", err)
	}
	m := l.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cut {
		return nil, l.fail("remove temps", "", ErrPowerCut)
	}
	var removed []string
	var changes []memChange
	for key, o := range m.live {
		name, ok := strings.CutPrefix(key, l.prefix)
		if !ok || strings.Contains(name, "/") {
			continue
		}
		final := o.tempOf
		if m.is("remove-temps-takes-dot-objects") && strings.HasPrefix(name, ".") {
			final = name[1:]
		}
		if final != "" && ours(final, false) {
			removed = append(removed, name)
			changes = append(changes, memChange{key: key, gone: true})
		}
	}
	if len(changes) == 0 {
		return nil, nil
	}
	if err := m.change(opRemove, l.prefix, changes...); err != nil {
		return nil, l.fail("remove temps", "", err)
	}
	return removed, nil
}

// LockState says whether a handle holds the lock of l's store.
func (l memLocal) LockState(ctx context.Context) (storage.LockState, int) {
	m := l.m
	if m.is("lock-state-never-held") {
		return storage.LockNotSeen, 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if lk := m.locks[l.prefix]; lk != nil && !m.expired(lk) {
		return storage.LockHeld, 0
	}
	return storage.LockNotSeen, 0
}

// Link puts the object name of src, another child store of l's parent,
// under the same name in l, sharing its bytes and Version, as a hard link
// does (see storage.Linker); it is durable when it returns, as the
// directory syncs itself after the link.
func (l memLocal) Link(ctx context.Context, src checkpoint.Backend, name string) (checkpoint.Object, error) {
	m := l.m
	if err := m.checkName(name); err != nil {
		return checkpoint.Object{}, err
	}
	if err := ctx.Err(); err != nil {
		return checkpoint.Object{}, l.fail("link", name, err)
	}
	s, ok := src.(memLocal)
	if !ok || s.m != m || l.prefix == "" || s.prefix == "" || parentOf(s.prefix) != parentOf(l.prefix) {
		return checkpoint.Object{}, l.fail("link", name, fmt.Errorf("%w: not a child of the same store", errors.ErrUnsupported))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o, found := m.live[s.prefix+name]
	_, taken := m.live[l.prefix+name]
	if !found || taken {
		if err := m.count(); err != nil {
			return checkpoint.Object{}, l.fail("link", name, err)
		}
		if !found {
			return checkpoint.Object{}, s.fail("link", name, fs.ErrNotExist)
		}
		return checkpoint.Object{}, l.fail("link", name, checkpoint.ErrExists)
	}
	if err := m.change(opLink, l.prefix, memChange{key: l.prefix + name, obj: o}); err != nil {
		return checkpoint.Object{}, l.fail("link", name, err)
	}
	return o.describe(name), nil
}

// parentOf returns the prefix of the store whose child the store of
// prefix is.
func parentOf(prefix string) string {
	i := strings.LastIndexByte(strings.TrimSuffix(prefix, "/"), '/')
	return prefix[:i+1]
}

// RemoveChild removes the child store name if it holds nothing, durably
// (see storage.ChildRemover): a child made by Sub with create.
func (l memLocal) RemoveChild(ctx context.Context, name string) error {
	m := l.m
	if err := m.checkName(name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return l.fail("remove child", name, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	prefix := l.prefix + name + "/"
	_, isObject := m.live[l.prefix+name]
	holds := false
	for key := range m.live {
		if key != prefix && strings.HasPrefix(key, prefix) {
			holds = true
			break
		}
	}
	if isObject || holds {
		if err := m.count(); err != nil {
			return l.fail("remove child", name, err)
		}
		if isObject {
			return l.fail("remove child", name, fmt.Errorf("%w: not a child store", checkpoint.ErrInvalid))
		}
		return l.fail("remove child", name, checkpoint.ErrExists)
	}
	err := m.count() // no child: nothing to remove nor sync
	if _, ok := m.live[prefix]; ok {
		err = m.change(opRemoveChild, l.prefix, memChange{key: prefix, gone: true})
	}
	if err != nil {
		return l.fail("remove child", name, err)
	}
	return nil
}
