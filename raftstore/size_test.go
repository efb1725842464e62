package raftstore_test

import (
	"fmt"
	"io"
	"testing"

	"github.com/gocheckpoint/checkpoint/raftstore"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// TestSnapshotTakesNoMoreDiskThanFileSnapshotStore writes the same snapshot
// with raft's FileSnapshotStore and a Store, for clusters of several sizes:
// the Store's directory holds no more bytes (its header against meta.json).
func TestSnapshotTakesNoMoreDiskThanFileSnapshotStore(t *testing.T) {
	t.Parallel()
	for _, servers := range []int{0, 1, 3, 7} {
		var conf raft.Configuration
		for i := range servers {
			id := fmt.Sprintf("node-%d.example.internal", i)
			conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(id + ":8300")})
		}
		write := func(s raft.SnapshotStore) {
			_, trans := raft.NewInmemTransport("")
			sink, err := s.Create(raft.SnapshotVersionMax, 123456789, 42, conf, 123456, trans)
			require.NoError(t, err)
			_, err = sink.Write(make([]byte, 1000))
			require.NoError(t, err)
			require.NoError(t, sink.Close())
		}
		fileDir, ourDir := t.TempDir(), t.TempDir()
		fs, err := raft.NewFileSnapshotStore(fileDir, 1, io.Discard)
		require.NoError(t, err)
		write(fs)
		ours, err := raftstore.New(ourDir, 1)
		require.NoError(t, err)
		write(ours)
		require.NoError(t, ours.Close())
		file, our := dirBytes(t, fileDir), dirBytes(t, ourDir)
		t.Logf("%d servers: FileSnapshotStore %d bytes, raftstore %d", servers, file, our)
		require.LessOrEqual(t, our, file, "%d servers", servers)
	}
}
