package backendtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/gocheckpoint/checkpoint"
)

// ErrPowerCut is what every call on a Mem returns from the power cut on
// (see Mem.CutPowerAt): the process that made the calls is gone, and only
// a CrashClone of the Mem is used after it.
var ErrPowerCut = errors.New("backendtest: power cut")

// Mem is storage in memory with a crash model, in the style of pebble's
// vfs.MemFS: the backends its Open returns keep the contract of
// checkpoint.Backend (they pass Run and RunSessions), and CrashClone
// returns what a power cut would leave of it, which is what was made
// durable under the contract (see the package doc for how the contract is
// read). Its backends take the names of [A-Za-z0-9._-] only, as s3store
// does, and their List tells each object's Size and Version.
//
// A Mem is safe for concurrent use. Its Open is an Opener: every backend it
// returns is a handle of its own on the same objects, child stores and
// locks, as processes share a directory.
type Mem struct {
	noSync bool
	lose   string // the one operation whose change is never made durable (a mutant, see export_test.go)

	mu      sync.Mutex
	live    map[string]memObject // what calls see, by key: prefix + name, or prefix + child + "/" for a child made by Sub(create)
	durable map[string]memObject // what survives a power cut
	synced  map[string]int       // the number of the operation whose change of the key was made durable last
	pending []memChange          // the changes not made durable, oldest first
	locks   map[string]*memConn  // by the prefix of the store locked
	seq     int                  // the last Version given
	ops     int                  // mutating calls so far
	cutAt   int                  // the mutating call the power is cut at, 0 for none
	cut     bool
}

type memObject struct {
	data    []byte // never written to once stored
	version string
	mod     time.Time
}

// memChange is one change that was not made durable: of the object
// under key (to its obj, or a removal when gone), made by the mutating call
// numbered op. Each change of an op survives a power cut on its own (the
// removals of one Remove: a directory may persist any of them before its
// sync), unless it is one of an ordered op (a Rename, which puts the
// object at its new name and then removes the old): such a change
// survives only if the one before it did.
type memChange struct {
	op      int
	ordered bool
	key     string
	obj     memObject
	gone    bool
}

// memConn is one handle, shared by the backends Sub returns from it. It
// is not of size zero, so that each has an address of its own.
type memConn struct{ _ byte }

// A MemOption changes how a Mem behaves.
type MemOption interface {
	applyMem(*Mem)
}

type memOptionFunc func(*Mem)

func (f memOptionFunc) applyMem(m *Mem) { f(m) }

// MemNoSync makes the Mem behave as a backend opened with
// checkpoint.NoSync: no change is ever made durable, so a CrashClone with
// an UnsyncedPercent of 0 holds only what the Mem held when NewMem made
// it: nothing.
func MemNoSync() MemOption {
	return memOptionFunc(func(m *Mem) { m.noSync = true })
}

// NewMem returns an empty Mem.
func NewMem(opts ...MemOption) *Mem {
	m := &Mem{
		live:    map[string]memObject{},
		durable: map[string]memObject{},
		synced:  map[string]int{},
		locks:   map[string]*memConn{},
	}
	for _, o := range opts {
		o.applyMem(m)
	}
	return m
}

// Open opens a new handle on m: a checkpoint.Backend of the root store,
// as another process opening the same directory would. Its Close releases
// the locks the handle holds, as closing a directory's lock file does.
func (m *Mem) Open() (checkpoint.Backend, error) {
	return &memBackend{m: m, conn: &memConn{}}, nil
}

// Ops returns how many mutating calls (Create, Replace, Remove, Rename,
// and Sub with create) the handles of m have made so far that reached the
// storage: those refused with ErrExists or ErrConflict are counted, those
// that failed before (an invalid name, a failed write, an ended context)
// are not. Run a scenario once to count them, then again with CutPowerAt
// each of 1 to Ops()+1.
func (m *Mem) Ops() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ops
}

// CutPowerAt cuts the power during the n-th mutating call from now on
// (counted as Ops counts, 1 for the next): whatever that call changes
// reaches the storage but is never made durable (a CrashClone keeps it
// with the probability of its UnsyncedPercent), the call returns an error
// wrapping ErrPowerCut, and so does every call of every handle after it.
// n of 0 cuts the power at once.
func (m *Mem) CutPowerAt(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n <= 0 {
		m.cut = true
		return
	}
	m.cutAt = m.ops + n
}

// PowerCut reports whether the power has been cut (see CutPowerAt).
func (m *Mem) PowerCut() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cut
}

// CrashCloneConfig says what a CrashClone keeps of the changes that were
// not made durable.
type CrashCloneConfig struct {
	// UnsyncedPercent is the probability, from 0 to 100, that each change
	// not made durable survives the crash: 0 keeps exactly what was made
	// durable, 100 every change that reached the storage (what a kill -9
	// would leave).
	UnsyncedPercent int
	// Rand draws which changes survive; it must be set if UnsyncedPercent
	// is strictly between 0 and 100.
	Rand *rand.Rand
}

// CrashClone returns a new Mem holding what a power cut at this instant
// would leave of m: every change made durable (see the package doc), and
// of the others, in the order they were made, each with the probability
// cfg.UnsyncedPercent. The clone holds no lock, has its power on, and
// behaves as m does (the same options); m is left as it is.
func (m *Mem) CrashClone(cfg CrashCloneConfig) *Mem {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := &Mem{
		noSync:  m.noSync,
		lose:    m.lose,
		live:    make(map[string]memObject, len(m.durable)),
		durable: make(map[string]memObject, len(m.durable)),
		synced:  map[string]int{},
		locks:   map[string]*memConn{},
		seq:     m.seq,
	}
	for k, o := range m.durable {
		c.live[k] = o
	}
	keep := func() bool {
		switch p := cfg.UnsyncedPercent; {
		case p <= 0:
			return false
		case p >= 100:
			return true
		default:
			return cfg.Rand.IntN(100) < p
		}
	}
	kept := false // whether the change before this one survived
	for i, ch := range m.pending {
		follows := ch.ordered && i > 0 && m.pending[i-1].op == ch.op
		kept = (!follows || kept) && keep()
		if !kept || ch.op <= m.synced[ch.key] {
			continue // lost, or a later change of the key was made durable
		}
		if ch.gone {
			delete(c.live, ch.key)
		} else {
			c.live[ch.key] = ch.obj
		}
	}
	for k, o := range c.live {
		c.durable[k] = o
	}
	return c
}

// change applies one mutating call's changes to what calls see, and makes
// them durable unless the Mem does not sync, the call is the lost one, or
// the power is cut during it. It returns ErrPowerCut if the power was cut
// before or during the call, in which case it made changes only in the
// latter. Of an ordered call, a change survives a crash only if the one
// before it does (see memChange). m.mu is held.
func (m *Mem) change(op string, ordered bool, changes ...memChange) error {
	if m.cut {
		return ErrPowerCut
	}
	m.ops++
	n := m.ops
	cutNow := n == m.cutAt
	durable := !m.noSync && m.lose != op && !cutNow
	for _, ch := range changes {
		ch.op = n
		ch.ordered = ordered
		if ch.gone {
			delete(m.live, ch.key)
		} else {
			m.live[ch.key] = ch.obj
		}
		if durable {
			if ch.gone {
				delete(m.durable, ch.key)
			} else {
				m.durable[ch.key] = ch.obj
			}
			m.synced[ch.key] = n
		} else {
			m.pending = append(m.pending, ch)
		}
	}
	if cutNow {
		m.cut = true
		return ErrPowerCut
	}
	return nil
}

// count counts a mutating call that changes nothing (refused), so that
// Ops does not depend on what a call finds; the power can be cut at it
// too. m.mu is held.
func (m *Mem) count() error {
	return m.change("", false)
}

func (m *Mem) off() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cut {
		return ErrPowerCut
	}
	return nil
}

func (m *Mem) newObject(data []byte) memObject {
	m.seq++
	return memObject{data: data, version: fmt.Sprintf("m%d", m.seq), mod: time.Now()}
}

// memBackend is one handle on a Mem, or a child store reached from one.
type memBackend struct {
	m      *Mem
	conn   *memConn
	prefix string // "" or "child/" or "child/grand/"
}

const memNameChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-"

func memName(name string) error {
	if name == "" || name == "." || name == ".." || strings.Trim(name, memNameChars) != "" {
		return fmt.Errorf("mem: invalid name %q: %w", name, checkpoint.ErrInvalid)
	}
	return nil
}

func (b *memBackend) fail(op, name string, err error) error {
	return fmt.Errorf("mem: %s %s: %w", op, b.Locate(name), err)
}

// write runs write into a buffer, as a backend writes a temporary file.
func (b *memBackend) write(ctx context.Context, op, name string, write func(io.Writer) error) ([]byte, error) {
	if err := memName(name); err != nil {
		return nil, err
	}
	if err := b.m.off(); err != nil {
		return nil, b.fail(op, name, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, b.fail(op, name, err)
	}
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		return nil, b.fail(op, name, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, b.fail(op, name, err)
	}
	return buf.Bytes(), nil
}

func (b *memBackend) Create(ctx context.Context, name string, write func(io.Writer) error) (checkpoint.Object, error) {
	data, err := b.write(ctx, "create", name, write)
	if err != nil {
		return checkpoint.Object{}, err
	}
	m := b.m
	m.mu.Lock()
	defer m.mu.Unlock()
	key := b.prefix + name
	if _, ok := m.live[key]; ok {
		if err := m.count(); err != nil {
			return checkpoint.Object{}, b.fail("create", name, err)
		}
		return checkpoint.Object{}, b.fail("create", name, checkpoint.ErrExists)
	}
	o := m.newObject(data)
	if err := m.change("create", false, memChange{key: key, obj: o}); err != nil {
		return checkpoint.Object{}, b.fail("create", name, err)
	}
	return o.describe(name), nil
}

func (b *memBackend) Replace(ctx context.Context, name, ifVersion string, write func(io.Writer) error) (checkpoint.Object, error) {
	data, err := b.write(ctx, "replace", name, write)
	if err != nil {
		return checkpoint.Object{}, err
	}
	m := b.m
	m.mu.Lock()
	defer m.mu.Unlock()
	key := b.prefix + name
	cur, ok := m.live[key]
	if ifVersion == checkpoint.NoObject && ok || ifVersion != "" && ifVersion != checkpoint.NoObject && (!ok || cur.version != ifVersion) {
		if err := m.count(); err != nil {
			return checkpoint.Object{}, b.fail("replace", name, err)
		}
		return checkpoint.Object{}, b.fail("replace", name, checkpoint.ErrConflict)
	}
	o := m.newObject(data)
	if err := m.change("replace", false, memChange{key: key, obj: o}); err != nil {
		return checkpoint.Object{}, b.fail("replace", name, err)
	}
	return o.describe(name), nil
}

func (o memObject) describe(name string) checkpoint.Object {
	return checkpoint.Object{Name: name, Size: int64(len(o.data)), Version: o.version, ModTime: o.mod}
}

func (b *memBackend) stat(ctx context.Context, name string) (memObject, error) {
	if err := memName(name); err != nil {
		return memObject{}, err
	}
	if err := ctx.Err(); err != nil {
		return memObject{}, b.fail("stat", name, err)
	}
	m := b.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cut {
		return memObject{}, b.fail("stat", name, ErrPowerCut)
	}
	o, ok := m.live[b.prefix+name]
	if !ok {
		return memObject{}, b.fail("stat", name, fs.ErrNotExist)
	}
	return o, nil
}

func (b *memBackend) Open(ctx context.Context, name string) (io.ReadCloser, checkpoint.Object, error) {
	o, err := b.stat(ctx, name)
	if err != nil {
		return nil, checkpoint.Object{}, err
	}
	return io.NopCloser(bytes.NewReader(o.data)), o.describe(name), nil
}

func (b *memBackend) Stat(ctx context.Context, name string) (checkpoint.Object, error) {
	o, err := b.stat(ctx, name)
	if err != nil {
		return checkpoint.Object{}, err
	}
	return o.describe(name), nil
}

// List tells each object's Size and Version, as object storage does.
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
		if name, ok := strings.CutPrefix(key, b.prefix); ok && name != "" && !strings.Contains(name, "/") {
			objs = append(objs, o.describe(name))
		}
	}
	return objs, nil
}

func (b *memBackend) Remove(ctx context.Context, names ...string) ([]bool, error) {
	gone := make([]bool, len(names))
	if err := ctx.Err(); err != nil {
		return gone, b.fail("remove", "", err)
	}
	var errs []error
	var changes []memChange
	var at []int
	for i, name := range names {
		if err := memName(name); err != nil {
			errs = append(errs, err)
			continue
		}
		changes = append(changes, memChange{key: b.prefix + name, gone: true})
		at = append(at, i)
	}
	m := b.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.change("remove", false, changes...); err != nil {
		return gone, b.fail("remove", "", err)
	}
	for _, i := range at {
		gone[i] = true
	}
	return gone, errors.Join(errs...)
}

func (b *memBackend) Rename(ctx context.Context, from, to string) error {
	if err := errors.Join(memName(from), memName(to)); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return b.fail("rename", from, err)
	}
	m := b.m
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.live[b.prefix+from]
	_, taken := m.live[b.prefix+to]
	if !ok || taken {
		if err := m.count(); err != nil {
			return b.fail("rename", from, err)
		}
		if !ok {
			return b.fail("rename", from, fs.ErrNotExist)
		}
		return b.fail("rename to", to, checkpoint.ErrExists)
	}
	if err := m.change("rename", true, memChange{key: b.prefix + to, obj: o}, memChange{key: b.prefix + from, gone: true}); err != nil {
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
	if m.locks[b.prefix] != nil {
		return nil, b.fail("lock", "", checkpoint.ErrLocked)
	}
	m.locks[b.prefix] = b.conn
	key, conn := b.prefix, b.conn
	return func() error {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.locks[key] == conn {
			delete(m.locks, key)
		}
		return nil
	}, nil
}

func (b *memBackend) Sub(ctx context.Context, name string, create bool) (checkpoint.Backend, error) {
	if err := memName(name); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, b.fail("sub", name, err)
	}
	prefix := b.prefix + name + "/"
	m := b.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cut {
		return nil, b.fail("sub", name, ErrPowerCut)
	}
	if create {
		if _, ok := m.live[prefix]; ok {
			if err := m.count(); err != nil {
				return nil, b.fail("sub", name, err)
			}
		} else if err := m.change("sub", false, memChange{key: prefix, obj: memObject{}}); err != nil {
			return nil, b.fail("sub", name, err)
		}
	}
	return &memBackend{m: m, conn: b.conn, prefix: prefix}, nil
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
	return "mem:/" + b.prefix + name
}

// Close releases the locks the handle holds (a child's Close leaves its
// handle open).
func (b *memBackend) Close() error {
	if b.prefix != "" {
		return nil
	}
	m := b.m
	m.mu.Lock()
	defer m.mu.Unlock()
	for key, conn := range m.locks {
		if conn == b.conn {
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
	m.live[key] = o
	m.durable[key] = o
	m.synced[key] = m.ops
}
