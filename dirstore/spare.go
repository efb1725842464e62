package dirstore

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// spareTemp holds the files that a directory's next durable writes start
// from ("spares"): empty files with no name yet, created while the
// directory's last writes waited for their fsyncs, as many as writes were
// under way at once (an Async batch writes its files together), at most
// maxSpares. Creating a file is dear on some file systems
// (ext4 without a journal, after many removals: 0.1-1 ms of the kernel's
// time on one core), and a durable write spends about as long waiting for
// the disk with its core idle, so the next write finds its file made.
//
// The spare has no name (Linux's O_TMPFILE) until a write takes it: it then
// gets the write's temporary name (tempName), and step 1 of the publish
// protocol is done. Until then no listing shows it and nothing can remove
// it; the writer's exit or kill frees it at once, with nothing left in the
// directory, and after a power cut the file system frees it when mounted
// again (ext4 with a journal, XFS, btrfs; ext4 without one, at its fsck).
//
// A directory makes spares only where creating a file is dear (spareMin,
// timed on its own creations), only while it holds its writer lock, and
// only for durable writes (fileIO.spare); the lock's release and Close
// close the spares, once those being made are. Where the file system or
// the system refuses an unnamed file, or naming one (linkat through
// /proc/self/fd), the directory stops making spares until its lock is
// taken again.
type spareTemp struct {
	mu      sync.Mutex
	on      bool          // the directory holds its lock: spares are kept
	fs      []tempFile    // the spares made
	making  int           // spares being made
	made    chan struct{} // closed, and made anew, whenever a making ends
	writing int           // durable writes of the directory under way

	refused atomic.Bool // the system refused an unnamed file or its naming
	// cost is how long the directory's creations of a file take (a
	// write's, or a spare's; see created), in nanoseconds: spares are made
	// while it is spareMin or more.
	cost atomic.Int64
	// always makes spares whatever the cost (tests).
	always atomic.Bool
}

// maxSpares bounds the spares a directory keeps: as many as its writes
// that were under way at once (an Async batch writes its files together),
// at most this many, each a file descriptor.
const maxSpares = 8

// spareMin is the time a creation of a file must have taken for a
// directory to make spares. Making one costs a link (through /proc) and,
// on a file system with a journal, puts the creation into the journal
// commit of the fsync it runs beside: where creating a file is cheap (46
// µs on an ext4 with a journal), that costs a save more than it saves
// (1.16 of the hand-written save at 10 KB, against 1.03 without). Where it
// is dear (260-370 µs on an ext4 without a journal after many removals),
// the spare wins.
const spareMin = 150 * time.Microsecond

// created records that creating a file took d. The cost follows a moving
// average of the creations timed (an eighth of the way to each, the first
// taken whole), so that one creation that happens to be cheap (a spare
// made in a fresh block group) or dear (a creation queued behind others)
// does not turn spares off or on.
func (s *spareTemp) created(d time.Duration) {
	if s == nil {
		return
	}
	for {
		old := s.cost.Load()
		cost := max(int64(d), 1)
		if old != 0 {
			cost = max(old+(int64(d)-old)/8, 1)
		}
		if s.cost.CompareAndSwap(old, cost) {
			return
		}
	}
}

// worth reports whether creating a file costs enough to make spares.
func (s *spareTemp) worth() bool {
	return s.always.Load() || s.cost.Load() >= int64(spareMin)
}

// spareMaker makes and names spares: the directory's system calls on Linux
// (fdOps).
type spareMaker interface {
	// makeSpare creates a file with no name in the directory.
	makeSpare() (tempFile, error)
	// nameSpare gives the spare f a temporary name for name (tempName),
	// and returns it.
	nameSpare(f tempFile, name string) (string, error)
	// refusal reports whether err, of makeSpare or nameSpare, says that
	// the system will not make or name spares at all (rather than not
	// now: a full disk).
	refusal(err error) bool
}

// begin records a durable write of the directory under way, and returns
// its end: the spares made are as many as such writes.
func (s *spareTemp) begin() (end func()) {
	if s == nil {
		return func() {}
	}
	s.mu.Lock()
	s.writing++
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.writing--
		s.mu.Unlock()
	}
}

// ended wakes the waiters for a spare being made; the caller holds s.mu.
func (s *spareTemp) ended() {
	if s.made != nil {
		close(s.made)
		s.made = nil
	}
}

// await waits for the next making of a spare to end; the caller holds
// s.mu, which await releases while it waits.
func (s *spareTemp) await() {
	if s.made == nil {
		s.made = make(chan struct{})
	}
	made := s.made
	s.mu.Unlock()
	<-made
	s.mu.Lock()
}

// take returns a spare with a temporary name for name, waiting for one
// being made if none is ready (as a write waits for a creation of its own:
// without a deadline). ok is false if there is none (never one
// from a nil s), or it could not be named (the write then creates its file
// as without one).
func (s *spareTemp) take(dir dirOps, name string) (f tempFile, tmp string, ok bool) {
	if s == nil {
		return nil, "", false
	}
	s.mu.Lock()
	for len(s.fs) == 0 && s.making > 0 {
		s.await()
	}
	if len(s.fs) > 0 { // the oldest first
		f = s.fs[0]
		s.fs = slices.Delete(s.fs, 0, 1)
	}
	s.mu.Unlock()
	if f == nil {
		return nil, "", false
	}
	m, _ := dir.(spareMaker)
	if m == nil {
		_ = f.Close()
		return nil, "", false
	}
	tmp, err := m.nameSpare(f, name)
	if err == nil {
		return f, tmp, true
	}
	if m.refusal(err) {
		s.refused.Store(true)
	}
	_ = f.Close()
	return nil, "", false
}

// state reports whether a spare waits in s, and whether one is being made.
func (s *spareTemp) state() (ready, making bool) {
	if s == nil {
		return false, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.fs) > 0, s.making > 0
}

// fill starts making spares in dir, each on a goroutine, until there are
// as many made and being made as writes under way (at most maxSpares). A
// spare that finds s off once made is closed; a creation that fails leaves
// none (the next write creates its file itself, and reports its failure).
func (s *spareTemp) fill(dir dirOps) {
	m, _ := dir.(spareMaker)
	if s == nil || m == nil || s.refused.Load() || !s.worth() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.on {
		return
	}
	for range min(max(s.writing, 1), maxSpares) - len(s.fs) - s.making {
		s.making++
		go func() {
			began := time.Now()
			f, err := m.makeSpare()
			if err == nil {
				s.created(time.Since(began))
			}
			if err != nil && m.refusal(err) {
				s.refused.Store(true)
			}
			s.mu.Lock()
			kept := err == nil && s.on
			if kept {
				s.fs = append(s.fs, f)
			}
			if err == nil && !kept {
				_ = f.Close() // before the making ends: stop waits for it
			}
			s.making--
			s.ended()
			s.mu.Unlock()
		}()
	}
}

// start turns spares on: the directory holds its lock. A refusal is
// forgotten: the directory may be another by now (a child store made
// again), or the refusal of the moment (a directory removed).
func (s *spareTemp) start() {
	s.mu.Lock()
	s.on = true
	s.mu.Unlock()
	s.refused.Store(false)
}

// stop turns spares off, waits for the spares being made and closes
// every spare, which frees them.
func (s *spareTemp) stop() {
	s.mu.Lock()
	s.on = false
	for s.making > 0 {
		s.await() // a spare made now sees s off, and is closed
	}
	fs := s.fs
	s.fs = nil
	s.mu.Unlock()
	for _, f := range fs {
		_ = f.Close()
	}
}
