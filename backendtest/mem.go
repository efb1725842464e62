package backendtest

import (
	"errors"
	"fmt"
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
// storage.Backend (they pass Run and RunSessions), and CrashClone
// returns what a power cut would leave of it, which is what was made
// durable under the contract (see the package doc for how the contract is
// read). Its backends take the names of [A-Za-z0-9._-] only, as s3store
// does.
//
// A Mem models one of two kinds of storage. By default, object storage:
// its backends have the zero storage.Traits, implement no optional
// interface, make each change durable on its own, and their List tells
// each object's Size and Version. With MemLocal, a local directory: its
// backends claim Traits{Local: true}, implement storage.Unsynced,
// storage.GroupCommitter, storage.TempCleaner, storage.LockProber,
// storage.Linker and storage.ChildRemover, List names only, and a change
// made durable syncs its directory (see MemLocal).
//
// A Mem is safe for concurrent use. Its Open is an Opener: every backend it
// returns is a handle of its own on the same objects, child stores and
// locks, as processes share a directory.
type Mem struct {
	memConfig

	mu      sync.Mutex
	live    map[string]memObject // what calls see, by key: prefix + name, or prefix + child + "/" for a child made by Sub(create)
	durable map[string]memObject // what survives a power cut
	synced  map[string]int       // the number of the operation whose change of the key was made durable last
	pending []memChange          // the changes not made durable, oldest first
	locks   map[string]*memLock  // by the prefix of the store locked
	seq     int                  // the last Version given
	ops     int                  // mutating calls so far
	cutAt   int                  // the mutating call the power is cut at, 0 for none
	cut     bool
}

// memConfig is what a Mem's options set; a CrashClone keeps it.
type memConfig struct {
	noSync bool
	local  bool
	ttl    time.Duration // the lock is a lease of this ttl (MemLease)
	lose   string        // the one operation whose change is never made durable (a mutant, see export_test.go)
	mutant string        // the promise the Mem breaks (a mutant: see MemMutant in export_test.go)
}

func (c memConfig) is(mutant string) bool { return c.mutant == mutant }

type memObject struct {
	data    []byte // never written to once stored
	version string
	mod     time.Time
	bare    bool   // written by ReplaceUnsynced: its bytes were never synced (see TearUnsynced)
	tempOf  string // for a temporary object a cut write left behind, the name it was to publish
}

// memChange is one change that was not made durable: of the object
// under key (to its obj, or a removal when gone) in the directory dir,
// made by the mutating call numbered op. Each change of an op survives a
// power cut on its own (the removals of one Remove: a directory may
// persist any of them before its sync), unless it is one of an ordered op
// (a Rename, which puts the object at its new name and then removes the
// old): such a change survives only if the one before it did.
type memChange struct {
	op       int
	ordered  bool
	unsynced bool   // made by a call of storage.Unsynced: a sync of dir makes it durable
	dir      string // the prefix of the store whose directory holds the entry
	key      string
	obj      memObject
	gone     bool
}

// memOp is a kind of mutating call.
type memOp struct {
	name     string // "create", "replace", "remove", "rename" or "sub" (see NewMemLosing); "" for a refused call
	ordered  bool   // its changes survive a crash only in order (see memChange)
	unsynced bool   // it makes nothing durable (storage.Unsynced, and CreateUncommitted)
	temp     bool   // on a local Mem, it writes through a temporary object (see leaveTemps)
	synced   bool   // an unsynced op whose bytes are synced all the same: only its name is not durable (CreateUncommitted)
}

var (
	opCreate      = memOp{name: "create", temp: true}
	opReplace     = memOp{name: "replace", temp: true}
	opRemove      = memOp{name: "remove"}
	opRename      = memOp{name: "rename", ordered: true}
	opSub         = memOp{name: "sub"}
	opLink        = memOp{name: "link"}
	opRemoveChild = memOp{name: "remove child"}
	opRefused     = memOp{unsynced: true} // a refused call syncs nothing
	opReplaceU    = memOp{name: "replace", unsynced: true, temp: true}
	opRemoveU     = memOp{name: "remove", unsynced: true}
	opCreateU     = memOp{name: "create", unsynced: true, temp: true, synced: true}
	opCommit      = memOp{name: "commit"}
)

// memLock is a lock held by the handle conn.
type memLock struct {
	conn     *memConn
	closedAt time.Time // when conn was closed while holding the lock (MemLease)
}

// memConn is one handle, shared by the backends Sub returns from it.
type memConn struct {
	closed bool // guarded by Mem.mu
}

// A MemOption changes how a Mem behaves.
type MemOption interface {
	applyMem(*memConfig)
}

type memOptionFunc func(*memConfig)

func (f memOptionFunc) applyMem(c *memConfig) { f(c) }

// MemNoSync makes the Mem behave as a backend opened with
// checkpoint.NoSync: no change is ever made durable, so a CrashClone with
// an UnsyncedPercent of 0 holds only what the Mem held when NewMem made
// it: nothing.
func MemNoSync() MemOption {
	return memOptionFunc(func(c *memConfig) { c.noSync = true })
}

// MemLocal makes the Mem model a local directory, as the backend of
// package dirstore is one: its backends claim storage.Traits{Local: true}, List
// names only (Size -1, Version ""), write through temporary objects that
// a power cut during a Create or a Replace may leave behind and that
// RemoveTemps removes (storage.TempCleaner), tell whether the lock is
// held (LockState), link objects between sibling child stores durably
// (storage.Linker), remove an empty child store durably
// (storage.ChildRemover), and implement storage.Unsynced and
// storage.GroupCommitter.
//
// Each store (the root and each child) is a directory, and a call that
// makes its change durable syncs its store's directory (Sub with create,
// its parent's): that makes durable every earlier change an Unsynced call
// made of an entry of that directory, as a directory's fsync does. A
// ReplaceUnsynced or RemoveUnsynced makes nothing durable: its change
// survives a power cut if a later durable call of its directory synced
// it, and otherwise only as a change that was not made durable does (see
// CrashCloneConfig), whole or not at all (or torn, see TearUnsynced). A
// CreateUncommitted is such a change too, but never torn (the directory
// syncs its file's bytes), and a Commit is a call that syncs the
// directory and changes nothing else: a power cut during it makes
// nothing durable.
func MemLocal() MemOption {
	return memOptionFunc(func(c *memConfig) { c.local = true })
}

// MemLease makes the Mem's lock a lease of ttl, as s3store's is: a handle
// closed without unlocking (a process that died) keeps its locks until ttl
// has passed since its Close; without MemLease, its Close releases them,
// as closing a directory's lock file does.
func MemLease(ttl time.Duration) MemOption {
	return memOptionFunc(func(c *memConfig) { c.ttl = ttl })
}

// NewMem returns an empty Mem.
func NewMem(opts ...MemOption) *Mem {
	var c memConfig
	for _, o := range opts {
		o.applyMem(&c)
	}
	return newMem(c)
}

func newMem(c memConfig) *Mem {
	return &Mem{
		memConfig: c,
		live:      map[string]memObject{},
		durable:   map[string]memObject{},
		synced:    map[string]int{},
		locks:     map[string]*memLock{},
	}
}

// Open opens a new handle on m: a checkpoint.Backend of the root store,
// as another process opening the same directory would. Its Close releases
// the locks the handle holds, as closing a directory's lock file does
// (unless MemLease).
func (m *Mem) Open() (checkpoint.Backend, error) {
	if m.is("handles-not-shared") {
		m = newMem(m.memConfig)
	}
	return (&memBackend{m: m, conn: &memConn{}}).flavoured(), nil
}

// Ops returns how many mutating calls (Create, Replace, Remove, Rename,
// and Sub with create; of a local Mem also ReplaceUnsynced,
// RemoveUnsynced, Link, RemoveChild, and a RemoveTemps that finds
// something to remove) the handles of m have made so far that reached
// the storage: those refused (ErrExists, ErrConflict, a missing object or
// child) are counted, those that failed before (an invalid name, a failed
// write, an ended context) are not. Run a scenario once to count them,
// then again with CutPowerAt each of 1 to Ops()+1.
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
	// TearUnsynced makes the clone hold, of each object that a
	// ReplaceUnsynced wrote and that survives the crash, only the first
	// half of its bytes, under a new Version: the local directory's
	// ReplaceUnsynced syncs neither the file nor the directory, and a
	// later sync of the directory persists the file's entry, not its
	// bytes, which a power cut may leave empty or torn. (The
	// storage.Unsynced contract promises the old object or the new one;
	// a store that relies on no more than the directory keeps passes
	// with TearUnsynced too.)
	TearUnsynced bool
}

// CrashClone returns a new Mem holding what a power cut at this instant
// would leave of m: every change made durable (see the package doc), and
// of the others, in the order they were made, each with the probability
// cfg.UnsyncedPercent. The clone holds no lock, has its power on, and
// behaves as m does (the same options); m is left as it is.
func (m *Mem) CrashClone(cfg CrashCloneConfig) *Mem {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := newMem(m.memConfig)
	c.seq = m.seq
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
		if cfg.TearUnsynced && o.bare {
			o = c.newObject(o.data[:len(o.data)/2])
			c.live[k] = o
		}
		c.durable[k] = o
	}
	return c
}

// change applies one mutating call's changes, all of entries of the
// directory dir, to what calls see, and makes them durable unless the Mem
// does not sync, the call does not (op.unsynced, or it is the lost one),
// or the power is cut during it; a local Mem's call that makes its changes
// durable syncs dir (see MemLocal). It returns ErrPowerCut if the power
// was cut before or during the call, in which case it made changes only in
// the latter. m.mu is held.
func (m *Mem) change(op memOp, dir string, changes ...memChange) error {
	if m.cut {
		return ErrPowerCut
	}
	m.ops++
	n := m.ops
	cutNow := n == m.cutAt
	durable := !m.noSync && !op.unsynced && m.lose != op.name && !cutNow
	if durable && m.local {
		m.syncDir(dir)
	}
	for _, ch := range changes {
		ch.op, ch.ordered, ch.unsynced, ch.dir = n, op.ordered, op.unsynced, dir
		if ch.gone {
			delete(m.live, ch.key)
		} else {
			m.live[ch.key] = ch.obj
		}
		if durable {
			m.persist(ch)
		} else {
			m.pending = append(m.pending, ch)
		}
	}
	if cutNow {
		if m.local && op.temp {
			m.leaveTemps(n, dir, changes)
		}
		m.cut = true
		return ErrPowerCut
	}
	return nil
}

// leaveTemps adds to what a power cut may keep the temporary object of each
// write of changes, made by the call numbered op, which the cut interrupted
// before or after its publication, as a directory's temporary file is left
// when the power is cut between its creation and its rename. A temporary
// object is told from others by its tempOf, not by its name, as RemoveTemps
// promises. m.mu is held.
func (m *Mem) leaveTemps(op int, dir string, changes []memChange) {
	for _, ch := range changes {
		final := strings.TrimPrefix(ch.key, dir)
		obj := ch.obj
		obj.tempOf = final
		tmp := fmt.Sprintf(".%s.%d.mem-tmp", final, op) // a name no Create makes by accident
		m.pending = append(m.pending, memChange{op: op, dir: dir, key: dir + tmp, obj: obj})
	}
}

// persist makes ch durable. m.mu is held.
func (m *Mem) persist(ch memChange) {
	if ch.gone {
		delete(m.durable, ch.key)
	} else {
		m.durable[ch.key] = ch.obj
	}
	m.synced[ch.key] = ch.op
}

// syncDir makes durable every change of an entry of the directory dir
// that an Unsynced call made, as a directory's fsync does. A change that
// another call failed to make durable (a mutant's) stays so, as a file
// whose bytes were never synced does. m.mu is held.
func (m *Mem) syncDir(dir string) {
	left := m.pending[:0]
	for _, ch := range m.pending {
		switch {
		case ch.dir != dir || !ch.unsynced:
			left = append(left, ch)
		case ch.op > m.synced[ch.key]:
			m.persist(ch)
		}
	}
	clear(m.pending[len(left):])
	m.pending = left
}

// count counts a mutating call that changes nothing (refused), so that
// Ops does not depend on what a call finds; the power can be cut at it
// too. m.mu is held.
func (m *Mem) count() error {
	return m.change(opRefused, "")
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
	v := fmt.Sprintf("m%d", m.seq)
	if m.is("version-by-size") {
		v = fmt.Sprintf("size%d", len(data))
	}
	return memObject{data: data, version: v, mod: time.Now()}
}

const memNameChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-"

func (m *Mem) checkName(name string) error {
	if m.is("names-unchecked") && name != "" {
		return nil
	}
	if name == "" || name == "." || name == ".." || strings.Trim(name, memNameChars) != "" {
		return fmt.Errorf("mem: invalid name %q: %w", name, checkpoint.ErrInvalid)
	}
	return nil
}
