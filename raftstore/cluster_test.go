package raftstore_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
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

const waitLong = 20 * time.Second // a bound on waits, never a delay

// node is one raft node of a test cluster.
type node struct {
	id    raft.ServerID
	raft  *raft.Raft
	fsm   *fsm
	logs  *raft.InmemStore
	snaps *raftstore.Store
	trans *raft.InmemTransport
}

// cluster is raft nodes on in-memory transports, each keeping its snapshots
// in a raftstore.Store of its own directory.
type cluster struct {
	nodes    []*node
	leaderCh chan raft.Observation
}

func nodeConfig(id raft.ServerID) *raft.Config {
	conf := raft.DefaultConfig()
	conf.LocalID = id
	conf.HeartbeatTimeout = 50 * time.Millisecond
	conf.ElectionTimeout = 50 * time.Millisecond
	conf.LeaderLeaseTimeout = 50 * time.Millisecond
	conf.CommitTimeout = 5 * time.Millisecond
	conf.SnapshotThreshold = 1 << 40 // snapshots only when a test asks
	conf.SnapshotInterval = time.Hour
	conf.TrailingLogs = 4
	conf.LogOutput = io.Discard
	return conf
}

// newNode starts a raft node whose snapshots are in dir. With a
// configuration, it bootstraps it.
func newNode(id raft.ServerID, dir string, blob int, retain int, opts ...checkpoint.Option) (*node, error) {
	snaps, err := raftstore.New(dir, retain, opts...)
	if err != nil {
		return nil, err
	}
	n := &node{id: id, fsm: newFSM(blob), logs: raft.NewInmemStore(), snaps: snaps}
	_, n.trans = raft.NewInmemTransport(raft.ServerAddress(id))
	n.raft, err = raft.NewRaft(nodeConfig(id), n.fsm, n.logs, n.logs, snaps, n.trans)
	if err != nil {
		_ = snaps.Close()
		return nil, err
	}
	return n, nil
}

func (n *node) shutdown() error {
	err := n.raft.Shutdown().Error()
	return errors.Join(err, n.snaps.Close())
}

// startCluster starts one node per directory and waits for a leader.
func startCluster(dirs []string, blob int, opts ...checkpoint.Option) (*cluster, error) {
	c := &cluster{leaderCh: make(chan raft.Observation, 16)}
	var conf raft.Configuration
	for i, dir := range dirs {
		id := raft.ServerID(fmt.Sprintf("node%d", i))
		n, err := newNode(id, dir, blob, 2, opts...)
		if err != nil {
			_ = c.shutdown()
			return nil, err
		}
		n.raft.RegisterObserver(raft.NewObserver(c.leaderCh, false, func(o *raft.Observation) bool {
			s, ok := o.Data.(raft.RaftState)
			return ok && s == raft.Leader
		}))
		c.nodes = append(c.nodes, n)
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: id, Address: raft.ServerAddress(id)})
	}
	c.connect()
	if err := c.nodes[0].raft.BootstrapCluster(conf).Error(); err != nil {
		_ = c.shutdown()
		return nil, err
	}
	if _, err := c.leader(); err != nil {
		_ = c.shutdown()
		return nil, err
	}
	return c, nil
}

func (c *cluster) connect() {
	for _, a := range c.nodes {
		for _, b := range c.nodes {
			if a != b {
				a.trans.Connect(b.trans.LocalAddr(), b.trans)
			}
		}
	}
}

// leader returns the leader, waiting for one to be elected.
func (c *cluster) leader() (*node, error) {
	timeout := time.NewTimer(waitLong)
	defer timeout.Stop()
	for {
		for _, n := range c.nodes {
			if n.raft.State() == raft.Leader {
				return n, nil
			}
		}
		select {
		case <-c.leaderCh:
		case <-timeout.C:
			return nil, errors.New("no leader elected")
		}
	}
}

// apply applies n commands through the leader and waits until every node
// applied them; it returns the number of commands applied in all.
func (c *cluster) apply(n int, tag string) (uint64, error) {
	var total uint64
	for i := 0; i < n; i++ {
		l, err := c.leader()
		if err != nil {
			return 0, err
		}
		f := l.raft.Apply([]byte(fmt.Sprintf("%s-%d", tag, i)), waitLong)
		if err := f.Error(); err != nil {
			i-- // leadership moved: apply it again
			continue
		}
		total = f.Response().(uint64)
	}
	for _, node := range c.nodes {
		if err := node.fsm.waitCount(total, waitLong); err != nil {
			return 0, fmt.Errorf("%s: %w", node.id, err)
		}
	}
	return total, nil
}

// snapshotAll snapshots every node, each as raft.Snapshot does.
func (c *cluster) snapshotAll() error {
	for _, n := range c.nodes {
		if err := n.raft.Snapshot().Error(); err != nil {
			return fmt.Errorf("%s: snapshot: %w", n.id, err)
		}
	}
	return nil
}

func (c *cluster) shutdown() error {
	var errs []error
	for _, n := range c.nodes {
		errs = append(errs, n.shutdown())
	}
	return errors.Join(errs...)
}

func TestClusterSnapshotsCompactsAndInstalls(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts []checkpoint.Option
	}{{"plain", nil}, {"zstd", []checkpoint.Option{checkpoint.Zstd()}}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testCluster(t, tc.opts...)
		})
	}
}

func testCluster(t *testing.T, opts ...checkpoint.Option) {
	const blob = 3 << 20
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	c, err := startCluster(dirs, blob, opts...)
	require.NoError(t, err)
	defer func() { require.NoError(t, c.shutdown()) }()

	_, err = c.apply(20, "first")
	require.NoError(t, err)
	require.NoError(t, c.snapshotAll())
	total, err := c.apply(20, "second")
	require.NoError(t, err)
	require.NoError(t, c.snapshotAll())
	want := c.nodes[0].fsm.state()

	for _, n := range c.nodes {
		require.Equal(t, want, n.fsm.state())
		list, err := n.snaps.List()
		require.NoError(t, err)
		require.Len(t, list, 2, "%s keeps its newest 2", n.id)
		require.Greater(t, list[0].Index, list[1].Index)
		if len(opts) == 0 {
			require.Greater(t, list[0].Size, int64(blob))
		} else {
			require.Positive(t, list[0].Size) // the size on disk: compressed
		}
		first, err := n.logs.FirstIndex()
		require.NoError(t, err)
		require.Greater(t, first, uint64(1), "%s compacted its log", n.id)

		// The newest snapshot restores a fresh FSM to the cluster's state.
		meta, r, err := n.snaps.Open(list[0].ID)
		require.NoError(t, err)
		f := newFSM(blob)
		require.NoError(t, f.Restore(r))
		require.Equal(t, want, f.state())
		require.Greater(t, meta.Size, int64(blob))
		if len(opts) == 0 {
			require.Equal(t, list[0].Size, meta.Size)
		}
	}

	// A new node is too far behind the compacted logs: the leader sends it
	// its snapshot (Open), which the new node writes through its own sink.
	nn, err := newNode("late", t.TempDir(), blob, 1, opts...)
	require.NoError(t, err)
	defer func() { require.NoError(t, nn.shutdown()) }()
	c.nodes = append(c.nodes, nn)
	c.connect()
	c.nodes = c.nodes[:len(c.nodes)-1]
	l, err := c.leader()
	require.NoError(t, err)
	require.NoError(t, l.raft.AddNonvoter(nn.id, nn.trans.LocalAddr(), 0, waitLong).Error())
	require.NoError(t, nn.fsm.waitCount(total, waitLong))
	require.Equal(t, want, nn.fsm.state())
	list, err := nn.snaps.List()
	require.NoError(t, err)
	require.Len(t, list, 1, "the installed snapshot is in the new node's store")
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

// TestNewRaftSkipsADamagedNewestSnapshot: raft.NewRaft on a store whose
// newest snapshot is damaged restores the next one (Open fails with
// ErrCorrupt before raft sees a byte), plain and zstd.
func TestNewRaftSkipsADamagedNewestSnapshot(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		opts []checkpoint.Option
	}{{"plain", nil}, {"zstd", []checkpoint.Option{checkpoint.Zstd()}}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
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

// TestNewRaftStartsFromAZstdSnapshotNearTheReadLimit: with zstd and retain
// 1, a snapshot just under the read limit that Close published (so the
// older one was reaped) is the one raft.NewRaft restores.
func TestNewRaftStartsFromAZstdSnapshotNearTheReadLimit(t *testing.T) {
	t.Parallel()
	s, err := raftstore.New(t.TempDir(), 1, checkpoint.Zstd(), checkpoint.WithMaxReadSize(4096))
	require.NoError(t, err)
	defer s.Close()
	snapshot(t, s, 1, 10, []byte("older"))
	data := bytes.Repeat([]byte{'n'}, 4000) // under the limit
	snapshot(t, s, 1, 20, data)
	got, err := startRaft(t, s)
	require.NoError(t, err)
	require.Equal(t, data, got)
}
