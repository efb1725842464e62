package raftstore_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/raftstore"
	"github.com/hashicorp/raft"
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

// With Zstd, the read limit counts the header too (the decompressed frame),
// the write limit only the payload: a snapshot of up to the limit is
// published (Close nil, so raft compacts its log) and then never opens
// (ErrCorrupt "larger than the read limit"): raft skips it at start-up or
// fails to start. Plain and Gzip hold.
//
// A snapshot that Close accepted must open: README "Size limit": "a larger
// snapshot fails its Close ... and nothing is published", implying that a
// snapshot Close published is within the limit and readable.
func TestAttackPayloadAtReadLimitOpens(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []checkpoint.Option
	}{{"plain", nil}, {"zstd", []checkpoint.Option{checkpoint.Zstd()}}, {"gzip", []checkpoint.Option{checkpoint.Gzip()}}} {
		t.Run(c.name, func(t *testing.T) {
			s, err := raftstore.New(t.TempDir(), 2, append(c.opts, checkpoint.WithMaxReadSize(1000))...)
			require.NoError(t, err)
			defer s.Close()
			data := bytes.Repeat([]byte{'z'}, 1000)
			id := snapshot(t, s, 1, 6, data)
			meta, got := readAll(t, s, id)
			require.Equal(t, data, got)
			require.EqualValues(t, 1000, meta.Size)
		})
	}
}

// Cancel of a second sink while a first one is open. Create's doc: "a second
// sink's writes wait until the first is closed or canceled"; nothing says
// Cancel waits, and raft's Cancel is "abandon". Observed: Cancel blocks until
// the first sink ends (its save goroutine must win the write lock to see
// the cancel). raft can hold two sinks at once (takeSnapshot in the snapshot
// goroutine, installSnapshot in the main loop): a follower's failed install
// then stalls raft's main loop for the whole local snapshot.
func TestAttackCancelOfSecondSinkWhileFirstOpen(t *testing.T) {
	s, err := raftstore.New(t.TempDir(), 2)
	require.NoError(t, err)
	first, err := s.Create(1, 5, 1, testConfig(), 1, nil)
	require.NoError(t, err)
	_, err = first.Write([]byte("first")) // the first holds the write lock
	require.NoError(t, err)
	second, err := s.Create(1, 6, 1, testConfig(), 1, nil)
	require.NoError(t, err)
	ok := within(t, 3*time.Second, "second.Cancel while first open", func() { _ = second.Cancel() })
	require.NoError(t, first.Close())
	if ok {
		require.NoError(t, s.Close())
	}
}

// Store.Close with two open sinks: "Close cancels the sinks still open
// (nothing of theirs is published) and releases the checkpoint store and its
// writer lock". Store.Close cancels the sinks in map order; when it cancels
// the second sink first, that Cancel waits for the first sink's save to end,
// which only the first's Close/Cancel (queued behind it) would end: Close
// never returns (about one run in two; the test tries 20 stores).
func TestAttackStoreCloseWithTwoOpenSinks(t *testing.T) {
	for i := 0; i < 20; i++ {
		s, err := raftstore.New(t.TempDir(), 2)
		require.NoError(t, err)
		first, err := s.Create(1, 5, 1, testConfig(), 1, nil)
		require.NoError(t, err)
		_, err = first.Write([]byte("first"))
		require.NoError(t, err)
		_, err = s.Create(1, 6, 1, testConfig(), 1, nil)
		require.NoError(t, err)
		if !within(t, 3*time.Second, "Store.Close with two open sinks", func() { _ = s.Close() }) {
			_ = first.Close() // unblocks it
			return
		}
	}
}

// A configuration whose JSON passes 64 KiB (checkpoint's label limit; about
// 1000 servers with 60-byte addresses, or one hostile address). README: "raft.conf the
// configuration as compact JSON"; nothing states a limit, and raft's
// FileSnapshotStore takes any configuration. raft.SnapshotStore's Create
// returns no error, so a snapshot of such a cluster can never be taken or
// installed: the log grows without bound and a lagging follower never
// catches up.
func TestAttackLargeConfigurationSnapshots(t *testing.T) {
	s, err := raftstore.New(t.TempDir(), 2)
	require.NoError(t, err)
	defer s.Close()
	conf := raft.Configuration{}
	for i := 0; i < 1100; i++ {
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter,
			ID: raft.ServerID(fmt.Sprintf("node-%04d", i)), Address: raft.ServerAddress(fmt.Sprintf("node-%04d.cluster.example.internal.svc:8300", i))})
	}
	sink, err := s.Create(1, 10, 2, conf, 9, nil)
	require.NoError(t, err)
	_, werr := sink.Write([]byte("state"))
	cerr := sink.Close()
	require.NoError(t, werr)
	require.NoError(t, cerr)
	list, err := s.List()
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, conf, list[0].Configuration)
}

// A JSON checkpoint at a snapshot's step (written by another program with
// the checkpoint library, say an operator tool's SaveFinal, while raftstore
// was not running) hides the snapshot from Open though List lists it: Open
// uses OpenPayload(step) ("the one saved last") instead of the listed entry.
// README: "Open of ... one that names no snapshot, checkpoint.ErrNotFound";
// this one names a listed snapshot. raft's restore then skips it.
func TestAttackForeignCheckpointAtSnapshotStepHidesIt(t *testing.T) {
	dir := t.TempDir()
	s, err := raftstore.New(dir, 2)
	require.NoError(t, err)
	id := snapshot(t, s, 1, 5, []byte("state"))
	require.NoError(t, s.Close())

	cp, err := checkpoint.Open[[]byte](dir)
	require.NoError(t, err)
	_, err = cp.SaveFinal(t.Context(), 0, []byte("foreign"))
	require.NoError(t, err)
	require.NoError(t, cp.Close())

	s, err = raftstore.New(dir, 2)
	require.NoError(t, err)
	defer s.Close()
	list, err := s.List()
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, id, list[0].ID)
	_, got := readAll(t, s, id)
	require.Equal(t, []byte("state"), got)
}

// A foreign checkpoint at step MaxInt64 (no raft labels, so "never
// removed"): the next step overflows.
func TestAttackForeignCheckpointAtMaxStep(t *testing.T) {
	dir := t.TempDir()
	cp, err := checkpoint.Open[[]byte](dir)
	require.NoError(t, err)
	_, err = cp.Save(t.Context(), math.MaxInt64, []byte("x"))
	require.NoError(t, err)
	require.NoError(t, cp.Close())
	s, err := raftstore.New(dir, 2)
	if err != nil {
		t.Logf("New: %v", err)
		return
	}
	defer s.Close()
	sink, err := s.Create(1, 10, 2, testConfig(), 1, nil)
	require.NoError(t, err)
	_, _ = sink.Write([]byte("x"))
	require.NoError(t, sink.Close(), "id %s", sink.ID())
}

// Disk full (a 1 MiB tmpfs: RAFTSTORE_ATTACK_TMPFS=dir, skipped otherwise).
// "Cancel publishes nothing"; "an unfinished one leaves at most a temporary
// file"; a Write after the save failed fails "with the save's error".
func TestAttackDiskFull(t *testing.T) {
	root := os.Getenv("RAFTSTORE_ATTACK_TMPFS")
	if root == "" {
		t.Skip("RAFTSTORE_ATTACK_TMPFS not set")
	}
	dir, err := os.MkdirTemp(root, "full")
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	s, err := raftstore.New(dir, 2)
	require.NoError(t, err)
	defer s.Close()
	first := snapshot(t, s, 1, 1, bytes.Repeat([]byte{1}, 300<<10))

	sink, err := s.Create(1, 2, 1, testConfig(), 1, nil)
	require.NoError(t, err)
	var werr error
	chunk := bytes.Repeat([]byte{2}, 64<<10)
	for i := 0; i < 32 && werr == nil; i++ {
		_, werr = sink.Write(chunk)
	}
	cerr := sink.Close()
	t.Logf("write: %v\nclose: %v", werr, cerr)
	require.Error(t, cerr)
	_, err = sink.Write(chunk)
	require.Error(t, err)
	require.Error(t, sink.Close())

	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range ents {
		t.Logf("left: %s", e.Name())
	}
	// The store works again once there is room.
	second := snapshot(t, s, 1, 3, bytes.Repeat([]byte{3}, 300<<10))
	list, err := s.List()
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, second, list[0].ID)
	require.Equal(t, first, list[1].ID)
	_, got := readAll(t, s, first)
	require.Equal(t, bytes.Repeat([]byte{1}, 300<<10), got)
}

// restoreFSM records what raft restores.
type restoreFSM struct {
	mu       sync.Mutex
	restored []byte
}

func (f *restoreFSM) Apply(*raft.Log) any { return nil }
func (f *restoreFSM) Snapshot() (raft.FSMSnapshot, error) {
	return nil, errors.New("not in this test")
}
func (f *restoreFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	f.mu.Lock()
	f.restored = b
	f.mu.Unlock()
	return err
}

// startRaft starts a raft node on snaps (in-memory logs and transport) and
// returns what its FSM restored.
func startRaft(t *testing.T, snaps raft.SnapshotStore) ([]byte, error) {
	t.Helper()
	conf := raft.DefaultConfig()
	conf.LocalID = "a"
	conf.LogOutput = io.Discard
	logs := raft.NewInmemStore()
	_, trans := raft.NewInmemTransport("addr-a")
	f := &restoreFSM{}
	r, err := raft.NewRaft(conf, f, logs, logs, snaps, trans)
	if err != nil {
		return nil, err
	}
	require.NoError(t, r.Shutdown().Error())
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.restored, nil
}

// README "Verified before raft sees a byte": "A damaged snapshot fails Open
// ...; at start-up raft then tries the next one in List's order." Holds
// (plain and zstd): kept because no other test starts raft.NewRaft on a
// damaged newest snapshot.
func TestAttackNewRaftSkipsDamagedNewest(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []checkpoint.Option
	}{{"plain", nil}, {"zstd", []checkpoint.Option{checkpoint.Zstd()}}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := raftstore.New(dir, 2, c.opts...)
			require.NoError(t, err)
			defer s.Close()
			older := bytes.Repeat([]byte("older "), 500)
			snapshot(t, s, 1, 10, older)
			snapshot(t, s, 1, 20, bytes.Repeat([]byte("newer "), 500))
			ents, err := os.ReadDir(dir)
			require.NoError(t, err)
			var newest string
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), "step_00000001") {
					newest = filepath.Join(dir, e.Name())
				}
			}
			require.NotEmpty(t, newest)
			b, err := os.ReadFile(newest)
			require.NoError(t, err)
			b[len(b)-40] ^= 0x10
			require.NoError(t, os.WriteFile(newest, b, 0o644))
			got, err := startRaft(t, s)
			require.NoError(t, err)
			require.Equal(t, older, got)
		})
	}
}

// The consequence of TestAttackPayloadAtReadLimitOpens for raft: with Zstd
// and retain 1, a snapshot Close accepted (so raft reaped the older one and
// compacted its log) makes raft.NewRaft fail: "failed to load any existing
// snapshots".
func TestAttackZstdSnapshotNearLimitStopsRaftStart(t *testing.T) {
	dir := t.TempDir()
	s, err := raftstore.New(dir, 1, checkpoint.Zstd(), checkpoint.WithMaxReadSize(4096))
	require.NoError(t, err)
	defer s.Close()
	snapshot(t, s, 1, 10, []byte("older"))
	data := bytes.Repeat([]byte{'n'}, 4000) // under the limit
	snapshot(t, s, 1, 20, data)
	got, err := startRaft(t, s)
	require.NoError(t, err)
	require.Equal(t, data, got)
}

// Create's doc: "The snapshots of one Store are written one at a time: a
// second sink's writes wait until the first is closed or canceled." The
// order is that in which the sinks' save goroutines win the checkpoint
// store's write lock, not that of Create: the first sink's Write may wait
// for the second sink, so a caller that creates two sinks and writes the
// first blocks forever. (Not raft's pattern: raft writes each sink from its
// own goroutine.)
func TestAttackFirstSinkWaitsForSecond(t *testing.T) {
	for i := 0; i < 50; i++ {
		s, err := raftstore.New(t.TempDir(), 3)
		require.NoError(t, err)
		first, err := s.Create(1, 5, 1, testConfig(), 1, nil)
		require.NoError(t, err)
		second, err := s.Create(1, 6, 1, testConfig(), 1, nil)
		require.NoError(t, err)
		if !within(t, 3*time.Second, fmt.Sprintf("first.Write with a second sink open (store %d)", i), func() { _, _ = first.Write([]byte("x")) }) {
			_ = second.Close() // unblocks it
			return
		}
		require.NoError(t, first.Close())
		require.NoError(t, second.Close())
		require.NoError(t, s.Close())
	}
}

// "IDs never collide ... two snapshots of the same term and index ... have
// IDs of their own." A snapshot older in raft's order than the newest is
// reaped at once; its step is the store's highest, so a reopened store
// (next step = highest listed + 1) gives the same step, and the same ID, to
// the next snapshot of that term and index.
func TestAttackReapedIDIsReusedAfterReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := raftstore.New(dir, 1)
	require.NoError(t, err)
	snapshot(t, s, 5, 100, []byte("newest"))
	old := snapshot(t, s, 3, 50, []byte("installed, reaped at once"))
	require.NoError(t, s.Close())
	s, err = raftstore.New(dir, 1)
	require.NoError(t, err)
	defer s.Close()
	again := snapshot(t, s, 3, 50, []byte("another"))
	require.NotEqual(t, old, again)
}

// raft's leader streams a snapshot it opened (sendInstallSnapshot) while its
// snapshot goroutine may publish a newer one and reap the opened one. On
// every opener, a reader returned by Open must still read the whole
// snapshot: the bytes Open's Size promised (raft's follower compares them
// with req.Size).
func TestAttackReaderSurvivesReap(t *testing.T) {
	for _, o := range openers() {
		t.Run(o.name, func(t *testing.T) {
			s := o.open(t, 1)
			data := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
			id := snapshot(t, s, 1, 10, data)
			meta, r, err := s.Open(id)
			require.NoError(t, err)
			defer r.Close()
			head := make([]byte, 100)
			_, err = io.ReadFull(r, head)
			require.NoError(t, err)
			snapshot(t, s, 1, 20, []byte("newer")) // reaps id
			rest, err := io.ReadAll(r)
			require.NoError(t, err)
			require.EqualValues(t, meta.Size, int64(len(head)+len(rest)))
			require.Equal(t, data, append(head, rest...))
		})
	}
}

// A configuration just under checkpoint's 64 KiB label limit: if Close
// publishes it, List must list it (and Open open it), else raft compacts
// its log after a snapshot it will never see.
func TestAttackConfigurationNearLabelLimitIsListed(t *testing.T) {
	for _, o := range openers() {
		t.Run(o.name, func(t *testing.T) {
			s := o.open(t, 2)
			listed := 0
			for n := 65536 - 120; n < 65536; n += 8 {
				addr := strings.Repeat("a", n)
				conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: "a", Address: raft.ServerAddress(addr)}}}
				sink, err := s.Create(1, uint64(n), 1, conf, 1, nil)
				require.NoError(t, err)
				_, werr := sink.Write([]byte("x"))
				if cerr := sink.Close(); cerr != nil || werr != nil {
					continue
				}
				list, err := s.List()
				require.NoError(t, err)
				require.NotEmpty(t, list, "n=%d", n)
				require.Equal(t, sink.ID(), list[0].ID, "n=%d", n)
				require.Equal(t, conf, list[0].Configuration)
				_, got := readAll(t, s, sink.ID())
				require.Equal(t, []byte("x"), got)
				listed++
			}
			require.NotZero(t, listed)
		})
	}
}

// A header larger than a (small) read limit: a snapshot Close published must
// be listed and open (see TestAttackPayloadAtReadLimitOpens).
func TestAttackHeaderOverReadLimit(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []checkpoint.Option
	}{{"plain", nil}, {"zstd", []checkpoint.Option{checkpoint.Zstd()}}, {"gzip", []checkpoint.Option{checkpoint.Gzip()}}} {
		t.Run(c.name, func(t *testing.T) {
			s, err := raftstore.New(t.TempDir(), 2, append(c.opts, checkpoint.WithMaxReadSize(4096))...)
			require.NoError(t, err)
			defer s.Close()
			conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: "a", Address: raft.ServerAddress(strings.Repeat("a", 20000))}}}
			sink, err := s.Create(1, 10, 1, conf, 1, nil)
			require.NoError(t, err)
			_, werr := sink.Write([]byte("x"))
			if cerr := sink.Close(); cerr != nil || werr != nil {
				t.Logf("refused: %v %v", werr, cerr)
				return
			}
			list, err := s.List()
			require.NoError(t, err)
			require.Len(t, list, 1)
			_, got := readAll(t, s, sink.ID())
			require.Equal(t, []byte("x"), got)
		})
	}
}

// README "Retention": "Checkpoints without raft metadata are never
// removed." Reaping calls checkpoint's Delete(step), which "removes every
// checkpoint of step (of any kind)": a foreign checkpoint that shares a
// reaped snapshot's step (here another program's SaveFinal, written while
// raftstore was not running) is deleted with it.
func TestAttackReapRemovesForeignCheckpointAtSameStep(t *testing.T) {
	dir := t.TempDir()
	s, err := raftstore.New(dir, 1)
	require.NoError(t, err)
	snapshot(t, s, 1, 5, []byte("state"))
	require.NoError(t, s.Close())

	cp, err := checkpoint.Open[[]byte](dir)
	require.NoError(t, err)
	_, err = cp.SaveFinal(t.Context(), 0, []byte("foreign, no raft labels"))
	require.NoError(t, err)
	require.NoError(t, cp.Close())

	s, err = raftstore.New(dir, 1)
	require.NoError(t, err)
	snapshot(t, s, 1, 6, []byte("newer")) // reaps 1-5-0
	require.NoError(t, s.Close())

	cp, err = checkpoint.Open[[]byte](dir)
	require.NoError(t, err)
	defer cp.Close()
	infos, err := cp.List(t.Context())
	require.NoError(t, err)
	var final bool
	for _, info := range infos {
		final = final || info.Kind == checkpoint.KindFinal
	}
	require.True(t, final, "the foreign final checkpoint of step 0 was removed: %v", infos)
}

// A second New on a directory in use (a second process, or a restart
// script racing the old node) fails with ErrLocked; it must not touch the
// first store's snapshot being written ("a stale temporary file that a
// crash left in dir is removed": this one is live). Holds.
func TestAttackLockedNewLeavesLiveSnapshotAlone(t *testing.T) {
	for _, o := range []string{"plain", "zstd"} {
		t.Run(o, func(t *testing.T) {
			dir := t.TempDir()
			var opts []checkpoint.Option
			if o == "zstd" {
				opts = append(opts, checkpoint.Zstd())
			}
			s, err := raftstore.New(dir, 2, opts...)
			require.NoError(t, err)
			defer s.Close()
			sink, err := s.Create(1, 5, 1, testConfig(), 1, nil)
			require.NoError(t, err)
			data := bytes.Repeat([]byte("live "), 100<<10)
			_, err = sink.Write(data[:len(data)/2])
			require.NoError(t, err)
			_, err = raftstore.New(dir, 2, opts...)
			require.ErrorIs(t, err, checkpoint.ErrLocked)
			_, err = sink.Write(data[len(data)/2:])
			require.NoError(t, err)
			require.NoError(t, sink.Close())
			_, got := readAll(t, s, sink.ID())
			require.Equal(t, data, got)
		})
	}
}
