package backendtest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/storage"
)

// memStore is one store in memory that every memBackend opened on it
// shares, as processes share a directory: the smallest backend that keeps
// the whole contract, so that the suite is seen to pass a correct backend
// that is no directory. Its mutant, if set, breaks one promise, so that the
// suite is seen to fail a backend that breaks it.
type memStore struct {
	mutant string
	ttl    time.Duration

	mu    sync.Mutex
	objs  map[string]memObject // by key: prefix + name
	dirs  map[string]bool      // child stores made with Sub(create=true), by prefix
	locks map[string]*memLock  // by prefix
	seq   int
}

type memObject struct {
	data    []byte // never written to once stored
	version string
	mod     time.Time
}

type memLock struct {
	conn     *memConn
	closedAt time.Time // when conn was closed while holding the lock
}

// memConn is one handle, shared by the backends Sub returns from it.
type memConn struct {
	closed bool // guarded by memStore.mu
}

type memBackend struct {
	s      *memStore
	conn   *memConn
	prefix string // "" or "child/" or "child/grand/"
}

func newMemStore(mutant string, ttl time.Duration) *memStore {
	return &memStore{mutant: mutant, ttl: ttl, objs: map[string]memObject{}, dirs: map[string]bool{}, locks: map[string]*memLock{}}
}

func (s *memStore) open() (checkpoint.Backend, error) {
	if s.is("handles-not-shared") {
		s = newMemStore(s.mutant, s.ttl)
	}
	return &memBackend{s: s, conn: &memConn{}}, nil
}

func (s *memStore) is(mutant string) bool { return s.mutant == mutant }

func (s *memStore) validName(name string) error {
	if s.is("names-unchecked") && name != "" {
		return nil
	}
	if name == "" || name == "." || name == ".." || strings.Trim(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") != "" {
		return fmt.Errorf("mem: invalid name %q: %w", name, checkpoint.ErrInvalid)
	}
	return nil
}

// newObject makes the object that write produces; s.mu is held.
func (s *memStore) newObject(data []byte) memObject {
	s.seq++
	v := fmt.Sprintf("v%d", s.seq)
	if s.is("version-by-size") {
		v = fmt.Sprintf("size%d", len(data))
	}
	return memObject{data: data, version: v, mod: time.Now()}
}

func (b *memBackend) write(ctx context.Context, key string, write func(io.Writer) error) ([]byte, error) {
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		if b.s.is("failed-write-publishes") {
			b.s.mu.Lock()
			b.s.objs[key] = b.s.newObject(buf.Bytes())
			b.s.mu.Unlock()
		}
		return nil, fmt.Errorf("mem: write %s: %w", b.Locate(key), err)
	}
	if err := ctx.Err(); err != nil && !b.s.is("ctx-ignored") {
		return nil, fmt.Errorf("mem: write %s: %w", b.Locate(key), err)
	}
	return buf.Bytes(), nil
}

func (b *memBackend) Create(ctx context.Context, name string, write func(io.Writer) error) (checkpoint.Object, error) {
	if err := b.s.validName(name); err != nil {
		return checkpoint.Object{}, err
	}
	if err := ctx.Err(); err != nil && !b.s.is("ctx-ignored") {
		return checkpoint.Object{}, fmt.Errorf("mem: create %s: %w", b.Locate(name), err)
	}
	key := b.prefix + name
	exists := func() bool { _, ok := b.s.objs[key]; return ok && !b.s.is("create-replaces") }
	data, err := b.write(ctx, key, write)
	if err != nil {
		return checkpoint.Object{}, err
	}
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	// The mutant checks nothing: every one of racing creators wins (a
	// check before the write, outside the lock, would lose the race only
	// when the scheduler lets it, and the suite must fail it every time).
	if !b.s.is("create-no-check") && exists() {
		return checkpoint.Object{}, fmt.Errorf("mem: create %s: %w", b.Locate(name), checkpoint.ErrExists)
	}
	o := b.s.newObject(data)
	b.s.objs[key] = o
	return o.describe(name), nil
}

func (b *memBackend) Replace(ctx context.Context, name, ifVersion string, write func(io.Writer) error) (checkpoint.Object, error) {
	if err := b.s.validName(name); err != nil {
		return checkpoint.Object{}, err
	}
	key := b.prefix + name
	data, err := b.write(ctx, key, write)
	if err != nil {
		return checkpoint.Object{}, err
	}
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	cur, ok := b.s.objs[key]
	conflict := ifVersion == checkpoint.NoObject && ok ||
		ifVersion != "" && ifVersion != checkpoint.NoObject && (!ok || cur.version != ifVersion)
	if conflict && !b.s.is("replace-ignores-version") {
		return checkpoint.Object{}, fmt.Errorf("mem: replace %s: %w", b.Locate(name), checkpoint.ErrConflict)
	}
	o := b.s.newObject(data)
	b.s.objs[key] = o
	return o.describe(name), nil
}

func (o memObject) describe(name string) checkpoint.Object {
	return checkpoint.Object{Name: name, Size: int64(len(o.data)), Version: o.version, ModTime: o.mod}
}

func (b *memBackend) Open(ctx context.Context, name string) (io.ReadCloser, checkpoint.Object, error) {
	o, err := b.stat(name)
	if err != nil {
		return nil, checkpoint.Object{}, err
	}
	if b.s.is("torn-replace") {
		return &tornReader{b: b, key: b.prefix + name, data: o.data}, o.describe(name), nil
	}
	obj := o.describe(name)
	if b.s.is("open-zero-modtime") {
		obj.ModTime = time.Time{}
	}
	if b.s.is("early-close-fails") {
		return &strictReader{Reader: bytes.NewReader(o.data)}, obj, nil
	}
	return io.NopCloser(bytes.NewReader(o.data)), obj, nil
}

// strictReader fails a Close before the end of the object.
type strictReader struct{ *bytes.Reader }

func (r *strictReader) Close() error {
	if r.Len() > 0 {
		return errors.New("mem: closed before the end")
	}
	return nil
}

// tornReader reads the second half of an object from whatever is under
// its name by then: a backend that overwrites objects in place.
type tornReader struct {
	b    *memBackend
	key  string
	data []byte
	off  int
}

func (r *tornReader) Read(p []byte) (int, error) {
	if r.off >= len(r.data)/2 {
		r.b.s.mu.Lock()
		if cur, ok := r.b.s.objs[r.key]; ok && len(cur.data) == len(r.data) {
			r.data = cur.data
		}
		r.b.s.mu.Unlock()
	}
	if r.off >= len(r.data) {
		return 0, io.EOF
	}
	n := copy(p, r.data[r.off:min(len(r.data), r.off+4096)])
	r.off += n
	return n, nil
}

func (r *tornReader) Close() error { return nil }

func (b *memBackend) stat(name string) (memObject, error) {
	if err := b.s.validName(name); err != nil {
		return memObject{}, err
	}
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	o, ok := b.s.objs[b.prefix+name]
	if !ok {
		if b.s.is("missing-not-notexist") {
			return memObject{}, fmt.Errorf("mem: %s: no such object", b.Locate(name))
		}
		return memObject{}, fmt.Errorf("mem: %s: %w", b.Locate(name), fs.ErrNotExist)
	}
	return o, nil
}

func (b *memBackend) Stat(ctx context.Context, name string) (checkpoint.Object, error) {
	o, err := b.stat(name)
	if err != nil {
		return checkpoint.Object{}, err
	}
	obj := o.describe(name)
	if b.s.is("version-per-call") {
		obj.Version += time.Now().String()
	}
	return obj, nil
}

func (b *memBackend) List(ctx context.Context) ([]checkpoint.Object, error) {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	var objs []checkpoint.Object
	for key, o := range b.s.objs {
		name, ok := strings.CutPrefix(key, b.prefix)
		if !ok || strings.Contains(name, "/") && !b.s.is("list-children") {
			continue
		}
		// List tells Size and Version, as S3 does (OpenDir's does not).
		objs = append(objs, o.describe(name))
	}
	if b.s.is("list-one-page") && len(objs) > 1000 {
		objs = objs[:1000]
	}
	return objs, nil
}

func (b *memBackend) Remove(ctx context.Context, names ...string) ([]bool, error) {
	gone := make([]bool, len(names))
	var errs []error
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	for i, name := range names {
		if err := b.s.validName(name); err != nil {
			errs = append(errs, err)
			continue
		}
		if _, ok := b.s.objs[b.prefix+name]; !ok && b.s.is("remove-missing-fails") {
			errs = append(errs, fmt.Errorf("mem: remove %s: %w", b.Locate(name), fs.ErrNotExist))
			continue
		}
		delete(b.s.objs, b.prefix+name)
		gone[i] = true
	}
	return gone, errors.Join(errs...)
}

func (b *memBackend) Rename(ctx context.Context, from, to string) error {
	if err := errors.Join(b.s.validName(from), b.s.validName(to)); err != nil {
		return err
	}
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	o, ok := b.s.objs[b.prefix+from]
	if !ok {
		return fmt.Errorf("mem: rename %s: %w", b.Locate(from), fs.ErrNotExist)
	}
	if _, taken := b.s.objs[b.prefix+to]; taken && !b.s.is("rename-overwrites") {
		return fmt.Errorf("mem: rename to %s: %w", b.Locate(to), checkpoint.ErrExists)
	}
	if b.s.is("rename-checks-then-moves") {
		// The destination was free when checked; the move replaces
		// whatever is there by the time it happens. It waits a while for
		// the racing Create to land there, so that the suite catches it
		// on any scheduler (Wine's ran the two one after the other).
		b.s.mu.Unlock()
		for deadline := time.Now().Add(100 * time.Millisecond); time.Now().Before(deadline); runtime.Gosched() {
			b.s.mu.Lock()
			_, taken := b.s.objs[b.prefix+to]
			b.s.mu.Unlock()
			if taken {
				break
			}
		}
		b.s.mu.Lock()
	}
	b.s.objs[b.prefix+to] = o
	if !b.s.is("rename-copies") {
		delete(b.s.objs, b.prefix+from)
	}
	return nil
}

// rewrite puts p under name in place, as a program writing behind the
// backend would: a new object, with the old modification time, and the
// old Version under the mutant version-kept-on-rewrite.
func (b *memBackend) rewrite(name string, p []byte) {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	old := b.s.objs[b.prefix+name]
	o := b.s.newObject(slices.Clone(p))
	o.mod = old.mod
	if b.s.is("version-kept-on-rewrite") {
		o.version = old.version
	}
	b.s.objs[b.prefix+name] = o
}

func (b *memBackend) Lock(ctx context.Context) (func() error, error) {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	key := b.prefix
	if b.s.is("lock-global") {
		key = ""
	}
	if b.s.is("lock-per-handle") {
		key = fmt.Sprintf("%s@%p", b.prefix, b.conn)
	}
	if l := b.s.locks[key]; l != nil {
		expired := l.conn.closed && b.s.ttl > 0 && time.Since(l.closedAt) > b.s.ttl && !b.s.is("lease-never-expires")
		if !expired {
			return nil, fmt.Errorf("mem: lock %s: %w", b.Locate(""), checkpoint.ErrLocked)
		}
	}
	l := &memLock{conn: b.conn}
	b.s.locks[key] = l
	return func() error {
		b.s.mu.Lock()
		defer b.s.mu.Unlock()
		if b.s.locks[key] == l {
			delete(b.s.locks, key)
		}
		return nil
	}, nil
}

func (b *memBackend) Sub(ctx context.Context, name string, create bool) (checkpoint.Backend, error) {
	if err := b.s.validName(name); err != nil {
		return nil, err
	}
	prefix := b.prefix + name + "/"
	if b.s.is("sub-shares-parent") {
		prefix = b.prefix
	}
	if create || b.s.is("children-lists-lazy") {
		b.s.mu.Lock()
		b.s.dirs[prefix] = true
		b.s.mu.Unlock()
	}
	return &memBackend{s: b.s, conn: b.conn, prefix: prefix}, nil
}

func (b *memBackend) Children(ctx context.Context) ([]string, error) {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	var names []string
	add := func(key string) {
		rest, ok := strings.CutPrefix(key, b.prefix)
		if child, _, nested := strings.Cut(rest, "/"); ok && nested && !slices.Contains(names, child) {
			names = append(names, child)
		}
	}
	for key := range b.s.objs {
		add(key)
	}
	for prefix := range b.s.dirs {
		add(prefix)
	}
	return names, nil
}

func (b *memBackend) Locate(name string) string {
	if b.s.is("locate-constant") {
		return "mem://" + name
	}
	return "mem://" + b.prefix + name
}

func (b *memBackend) Close() error {
	if b.prefix != "" {
		return nil // a child's Close leaves its parent's handle open
	}
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	b.conn.closed = true
	for _, l := range b.s.locks {
		if l.conn == b.conn {
			l.closedAt = time.Now()
		}
	}
	return nil
}

// The optional interfaces of package storage: memory has no durability to
// skip and no temporary objects, so each is the plain operation, or
// nothing, unless a mutant breaks it.

func (b *memBackend) ReplaceUnsynced(ctx context.Context, name string, write func(io.Writer) error) (checkpoint.Object, error) {
	if b.s.is("unsynced-replace-ignores-write-error") {
		return b.Replace(ctx, name, "", func(w io.Writer) error { _ = write(w); return nil })
	}
	return b.Replace(ctx, name, "", write)
}

func (b *memBackend) RemoveUnsynced(ctx context.Context, names ...string) ([]bool, error) {
	gone, err := b.Remove(ctx, names...)
	if b.s.is("unsynced-remove-says-nothing-gone") {
		clear(gone)
	}
	return gone, err
}

func (b *memBackend) RemoveTemps(ctx context.Context, ours func(final string, legacy bool) bool) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !b.s.is("remove-temps-takes-dot-objects") {
		return nil, nil
	}
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	var removed []string
	for key := range b.s.objs {
		name, ok := strings.CutPrefix(key, b.prefix)
		if ok && !strings.Contains(name, "/") && strings.HasPrefix(name, ".") && ours(name[1:], false) {
			delete(b.s.objs, key)
			removed = append(removed, name)
		}
	}
	return removed, nil
}

func (b *memBackend) LockState(ctx context.Context) (storage.LockState, int) {
	if b.s.is("lock-state-never-held") {
		return storage.LockNotSeen, 0
	}
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	if b.s.locks[b.prefix] != nil {
		return storage.LockHeld, 0
	}
	return storage.LockNotSeen, 0
}
