package dirstore

import (
	"sync"
	"sync/atomic"
	"time"
)

// spareTemp holds the file that a directory's next durable write starts
// from: an empty file with no name yet, created while the directory's last
// write waited for its fsync. Creating a file is dear on some file systems
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
// close the spare, once a spare being made is. Where the file system or
// the system refuses an unnamed file, or naming one (linkat through
// /proc/self/fd), the directory stops making spares until its lock is
// taken again.
type spareTemp struct {
	mu     sync.Mutex
	on     bool          // the directory holds its lock: spares are kept
	f      tempFile      // the spare, or nil
	making chan struct{} // closed once the spare being made is; nil if none is

	refused atomic.Bool // the system refused an unnamed file or its naming
	// cost is how long the directory's last creation of a file took (a
	// write's, or a spare's), in nanoseconds: spares are made while it is
	// spareMin or more.
	cost atomic.Int64
	// always makes spares whatever the cost (tests).
	always bool
}

// spareMin is the time a creation of a file must have taken for a
// directory to make spares. Making one costs a link (through /proc) and,
// on a file system with a journal, puts the creation into the journal
// commit of the fsync it runs beside: where creating a file is cheap (46
// µs on an ext4 with a journal), that costs a save more than it saves
// (1.16 of the hand-written save at 10 KB, against 1.03 without). Where it
// is dear (260-370 µs on an ext4 without a journal after many removals),
// the spare wins.
const spareMin = 150 * time.Microsecond

// created records that creating a file took d.
func (s *spareTemp) created(d time.Duration) {
	if s != nil {
		s.cost.Store(int64(d))
	}
}

// worth reports whether creating a file costs enough to make spares.
func (s *spareTemp) worth() bool {
	return s.always || s.cost.Load() >= int64(spareMin)
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

// take returns the spare with a temporary name for name, and empties the
// slot; it waits for a spare being made. ok is false if there is no spare
// (never one from a nil s), or it could not be named (the write then
// creates its file as without one).
func (s *spareTemp) take(dir dirOps, name string) (f tempFile, tmp string, ok bool) {
	if s == nil {
		return nil, "", false
	}
	s.mu.Lock()
	making := s.making
	s.mu.Unlock()
	if making != nil {
		<-making
	}
	s.mu.Lock()
	f, s.f = s.f, nil
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
	return s.f != nil, s.making != nil
}

// fill starts making a spare in dir, on a goroutine, unless there is one
// or one is being made. A spare that finds the slot off once made is
// closed; a creation that fails leaves none (the next write creates its
// file itself, and reports its failure).
func (s *spareTemp) fill(dir dirOps) {
	m, _ := dir.(spareMaker)
	if s == nil || m == nil || s.refused.Load() || !s.worth() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.on || s.f != nil || s.making != nil {
		return
	}
	done := make(chan struct{})
	s.making = done
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
		s.making = nil
		kept := err == nil && s.on
		if kept {
			s.f = f
		}
		s.mu.Unlock()
		if err == nil && !kept {
			_ = f.Close()
		}
		close(done) // after the Close: stop waits for it
	}()
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

// stop turns spares off, waits for a spare being made and closes the
// spare, if any, which frees it.
func (s *spareTemp) stop() {
	s.mu.Lock()
	s.on = false
	making := s.making
	s.mu.Unlock()
	if making != nil {
		<-making // the spare made sees s off, and is closed
	}
	s.mu.Lock()
	f := s.f
	s.f = nil
	s.mu.Unlock()
	if f != nil {
		_ = f.Close()
	}
}
