package raftstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/raftstore"
	"github.com/stretchr/testify/require"
)

// within runs f and fails the test if it has not returned after d: a
// detector of hangs, not a synchronisation.
func within(t *testing.T, d time.Duration, what string, f func()) bool {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		t.Errorf("%s: still blocked after %v (deadlock)", what, d)
		return false
	}
}

// listedIDs returns the IDs List returns, newest first.
func listedIDs(t *testing.T, s *raftstore.Store) []string {
	t.Helper()
	list, err := s.List()
	require.NoError(t, err)
	var ids []string
	for _, m := range list {
		ids = append(ids, m.ID)
	}
	return ids
}

// TestSinksWriteInCreateOrder: the first sink created never waits for a
// later one, whichever sink's goroutine runs first (tried on 50 stores).
func TestSinksWriteInCreateOrder(t *testing.T) {
	t.Parallel()
	for i := range 50 {
		s, err := raftstore.New(t.TempDir(), 3)
		require.NoError(t, err)
		first, err := s.Create(1, 5, 1, testConfig(), 1, nil)
		require.NoError(t, err)
		second, err := s.Create(1, 6, 1, testConfig(), 1, nil)
		require.NoError(t, err)
		if !within(t, 3*time.Second, fmt.Sprintf("first.Write with a second sink open (store %d)", i), func() {
			_, err := first.Write([]byte("first"))
			require.NoError(t, err)
			require.NoError(t, first.Close())
		}) {
			_ = second.Cancel() // unblocks it
			return
		}
		_, err = second.Write([]byte("second"))
		require.NoError(t, err)
		require.NoError(t, second.Close())
		require.Equal(t, []string{second.ID(), first.ID()}, listedIDs(t, s))
		require.NoError(t, s.Close())
	}
}

// TestCancelOfAWaitingSinkReturnsAtOnce: Cancel of a sink whose turn has
// not come (the first sink is being written) returns without waiting for
// the first, publishes nothing, and a third sink still waits for the first
// only (raft may hold a snapshot sink and an install sink at once).
func TestCancelOfAWaitingSinkReturnsAtOnce(t *testing.T) {
	t.Parallel()
	for _, o := range openers() {
		t.Run(o.name, func(t *testing.T) {
			t.Parallel()
			s := o.open(t, 3)
			first, err := s.Create(1, 5, 1, testConfig(), 1, nil)
			require.NoError(t, err)
			_, err = first.Write([]byte("first")) // its save holds the store
			require.NoError(t, err)
			second, err := s.Create(1, 6, 1, testConfig(), 1, nil)
			require.NoError(t, err)
			third, err := s.Create(1, 7, 1, testConfig(), 1, nil)
			require.NoError(t, err)
			if !within(t, 3*time.Second, "second.Cancel while first open", func() { require.NoError(t, second.Cancel()) }) {
				_ = first.Close()
				return
			}
			require.NoError(t, second.Cancel(), "a second Cancel does nothing")
			_, err = second.Write([]byte("x"))
			require.ErrorIs(t, err, raftstore.ErrSinkClosed)
			require.ErrorIs(t, second.Close(), raftstore.ErrSinkClosed)

			_, err = first.Write([]byte(" more"))
			require.NoError(t, err)
			require.NoError(t, first.Close())
			_, err = third.Write([]byte("third"))
			require.NoError(t, err)
			require.NoError(t, third.Close())
			require.Equal(t, []string{third.ID(), first.ID()}, listedIDs(t, s))
			_, got := readAll(t, s, first.ID())
			require.Equal(t, []byte("first more"), got)
			_, _, err = s.Open(second.ID())
			require.ErrorIs(t, err, checkpoint.ErrNotFound)
		})
	}
}

// TestCloseWithTwoOpenSinksCancelsBoth: Store.Close cancels every open
// sink, whatever order it meets them in (tried on 20 stores), and returns;
// nothing of them is published.
func TestCloseWithTwoOpenSinksCancelsBoth(t *testing.T) {
	t.Parallel()
	for i := range 20 {
		dir := t.TempDir()
		s, err := raftstore.New(dir, 2)
		require.NoError(t, err)
		first, err := s.Create(1, 5, 1, testConfig(), 1, nil)
		require.NoError(t, err)
		_, err = first.Write([]byte("first"))
		require.NoError(t, err)
		second, err := s.Create(1, 6, 1, testConfig(), 1, nil)
		require.NoError(t, err)
		if !within(t, 3*time.Second, fmt.Sprintf("Store.Close with two open sinks (store %d)", i), func() { require.NoError(t, s.Close()) }) {
			_ = first.Close() // unblocks it
			return
		}
		require.ErrorIs(t, first.Close(), raftstore.ErrSinkClosed)
		require.ErrorIs(t, second.Close(), raftstore.ErrSinkClosed)
		s, err = raftstore.New(dir, 2)
		require.NoError(t, err)
		require.Empty(t, listedIDs(t, s))
		require.NoError(t, s.Close())
	}
}

// TestCloseOfTheStoreWhileASinkWaitsInClose: a sink closed while the one
// before it is open waits for its turn; Store.Close cancels the first and
// returns once the second is published or canceled, and the second's Close
// says which (nil: it is listed after a reopen).
func TestCloseOfTheStoreWhileASinkWaitsInClose(t *testing.T) {
	t.Parallel()
	for i := range 10 {
		dir := t.TempDir()
		s, err := raftstore.New(dir, 2)
		require.NoError(t, err)
		first, err := s.Create(1, 5, 1, testConfig(), 1, nil)
		require.NoError(t, err)
		_, err = first.Write([]byte("first"))
		require.NoError(t, err)
		second, err := s.Create(1, 6, 1, testConfig(), 1, nil)
		require.NoError(t, err)
		closed := make(chan error, 1)
		go func() { closed <- second.Close() }()
		if !within(t, 3*time.Second, fmt.Sprintf("Store.Close with a sink in Close (store %d)", i), func() { require.NoError(t, s.Close()) }) {
			_ = first.Close()
			return
		}
		err = <-closed
		s, err2 := raftstore.New(dir, 2)
		require.NoError(t, err2)
		if err == nil {
			require.Equal(t, []string{second.ID()}, listedIDs(t, s))
		} else {
			require.ErrorIs(t, err, raftstore.ErrSinkClosed)
			require.Empty(t, listedIDs(t, s))
		}
		require.NoError(t, s.Close())
	}
}
