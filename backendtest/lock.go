package backendtest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
)

func (s *suite) lockCases() []testCase {
	cs := []testCase{
		{"LockExcludesOtherWriters", s.testLockExcludesOtherWriters},
		{"LockRaceHasOneWinner", s.testLockRaceHasOneWinner},
		{"LockIsPerStore", s.testLockIsPerStore},
	}
	if s.cfg.leaseTTL > 0 {
		cs = append(cs, testCase{"AbandonedLeaseExpires", s.testAbandonedLeaseExpires})
	}
	return cs
}

func lock(t *testing.T, b checkpoint.Backend) func() error {
	t.Helper()
	unlock, err := b.Lock(t.Context())
	if err != nil {
		t.Fatalf("Lock %s: %v", b.Locate(""), err)
	}
	if unlock == nil {
		t.Fatalf("Lock %s returned a nil unlock and no error", b.Locate(""))
	}
	return unlock
}

func unlock(t *testing.T, b checkpoint.Backend, unlock func() error) {
	t.Helper()
	if err := unlock(); err != nil {
		t.Fatalf("unlock %s: %v", b.Locate(""), err)
	}
}

func requireLocked(t *testing.T, what string, b checkpoint.Backend) {
	t.Helper()
	unlock, err := b.Lock(t.Context())
	if err == nil {
		_ = unlock()
		t.Fatalf("%s: Lock succeeded while another writer holds the lock", what)
	}
	if !errors.Is(err, checkpoint.ErrLocked) {
		t.Fatalf("%s: %v; want an error wrapping ErrLocked", what, err)
	}
}

// While one writer holds the lock, Lock fails with ErrLocked on another
// handle on the same store (another process) and on the holder's own
// handle (another Store on it); once unlocked, another can take it.
func (s *suite) testLockExcludesOtherWriters(t *testing.T) {
	bs := s.handles(t, 2)
	a, b := bs[0], bs[1]
	unlockA := lock(t, a)
	requireLocked(t, "Lock on another handle", b)
	requireLocked(t, "Lock again on the holder's handle", a)
	unlock(t, a, unlockA)

	unlockB := lock(t, b)
	requireLocked(t, "Lock on the first handle after the second took it", a)
	unlock(t, b, unlockB)

	unlock(t, a, lock(t, a))
}

// Of writers on two handles that Lock at once, exactly one holds the lock.
func (s *suite) testLockRaceHasOneWinner(t *testing.T) {
	bs := s.handles(t, 2)
	for round := range 3 {
		unlocks := make([]func() error, 8)
		errs := parallel(len(unlocks), func(i int) error {
			var err error
			unlocks[i], err = bs[i%2].Lock(t.Context())
			return err
		})
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: Locks %d and %d both succeeded", round, winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, checkpoint.ErrLocked):
				t.Fatalf("round %d: losing Lock %d: %v; want an error wrapping ErrLocked", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: all %d concurrent Locks failed; one must win", round, len(unlocks))
		}
		unlock(t, bs[winner%2], unlocks[winner])
	}
}

// A child store (a session) has a lock of its own: a writer of the parent
// does not exclude a writer of a child, nor children each other, but two
// writers of one child exclude each other.
func (s *suite) testLockIsPerStore(t *testing.T) {
	bs := s.handles(t, 2)
	parent := lock(t, bs[0])
	oneA := sub(t, bs[0], "one", true)
	oneB := sub(t, bs[1], "one", true)
	two := sub(t, bs[1], "two", true)
	unlockOne := lock(t, oneB)
	unlockTwo := lock(t, two)
	requireLocked(t, "Lock of a child held on another handle", oneA)
	requireLocked(t, "Lock of the parent held on another handle", bs[1])
	unlock(t, oneB, unlockOne)
	unlock(t, oneA, lock(t, oneA))
	unlock(t, two, unlockTwo)
	unlock(t, bs[0], parent)
}

// A lease whose holder was closed without unlocking (a process that died)
// expires: another handle takes the lock within a few ttl, and not while
// the holder is alive.
func (s *suite) testAbandonedLeaseExpires(t *testing.T) {
	ttl := s.cfg.leaseTTL
	open := s.newStore(t)
	a, err := open()
	if err != nil {
		t.Fatalf("open a handle: %v", err)
	}
	b := openHandle(t, open)
	if _, err := a.Lock(t.Context()); err != nil {
		a.Close()
		t.Fatalf("Lock: %v", err)
	}
	requireLocked(t, "Lock on another handle while the lease is held", b)
	if err := a.Close(); err != nil {
		t.Fatalf("Close the holder: %v", err)
	}
	// Waiting for a lease to expire is waiting for time to pass; the poll
	// interval only bounds how late the expiry is seen.
	deadline := time.Now().Add(leaseWait(ttl))
	for {
		unlockB, err := b.Lock(t.Context())
		if err == nil {
			unlock(t, b, unlockB)
			return
		}
		if !errors.Is(err, checkpoint.ErrLocked) {
			t.Fatalf("Lock while an abandoned lease expires: %v; want an error wrapping ErrLocked", err)
		}
		if time.Now().After(deadline) {
			t.Fatal(fmt.Errorf("a lease of ttl %v abandoned by a closed holder was not taken over within %v: %w", ttl, leaseWait(ttl), err))
		}
		time.Sleep(ttl / 10)
	}
}

// leaseWait is how long after its holder was closed an abandoned lease
// must have been taken over: its ttl, and room for the holder's last
// renewal, clock steps and the round trips of the polls.
func leaseWait(ttl time.Duration) time.Duration { return 5*ttl + time.Second }
