package raftstore_test

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/gocheckpoint/checkpoint"
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

// TestSnapshotAtTheReadLimitOpens: a snapshot of exactly the read limit
// (checkpoint.WithMaxReadSize) is published and opens, plain and
// compressed: a snapshot that Close published is one Open reads.
func TestSnapshotAtTheReadLimitOpens(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		opts []checkpoint.Option
	}{{"plain", nil}, {"zstd", []checkpoint.Option{checkpoint.Zstd()}}, {"gzip", []checkpoint.Option{checkpoint.Gzip()}}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
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

// TestHeaderOverTheReadLimitIsListedAndOpens: a configuration larger than a
// small read limit (the limit bounds the payload, not the header): the
// snapshot is published, listed and opened.
func TestHeaderOverTheReadLimitIsListedAndOpens(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		opts []checkpoint.Option
	}{{"plain", nil}, {"zstd", []checkpoint.Option{checkpoint.Zstd()}}, {"gzip", []checkpoint.Option{checkpoint.Gzip()}}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, err := raftstore.New(t.TempDir(), 2, append(c.opts, checkpoint.WithMaxReadSize(4096))...)
			require.NoError(t, err)
			defer s.Close()
			conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: "a", Address: raft.ServerAddress(strings.Repeat("a", 20000))}}}
			sink, err := s.Create(1, 10, 1, conf, 1, nil)
			require.NoError(t, err)
			_, err = sink.Write([]byte("x"))
			require.NoError(t, err)
			require.NoError(t, sink.Close())
			list, err := s.List()
			require.NoError(t, err)
			require.Len(t, list, 1)
			require.Equal(t, conf, list[0].Configuration)
			_, got := readAll(t, s, sink.ID())
			require.Equal(t, []byte("x"), got)
		})
	}
}

// servers returns a configuration of n voters, with IDs such as node-0042
// and addresses such as node-0042.cluster.example.internal.svc:8300.
func servers(n int) raft.Configuration {
	var conf raft.Configuration
	for i := range n {
		id := fmt.Sprintf("node-%04d", i)
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(id + ".cluster.example.internal.svc:8300")})
	}
	return conf
}

// TestCreateRefusesAConfigurationOverTheLabelLimit: a configuration whose
// labels pass MaxLabelsSize fails Create itself (not Write or Close), with
// ErrInvalid saying how many servers and bytes; one of about 1000 servers
// of 40-byte addresses fits, and the store works on.
func TestCreateRefusesAConfigurationOverTheLabelLimit(t *testing.T) {
	t.Parallel()
	s := openers()[0].open(t, 2)
	_, err := s.Create(1, 10, 2, servers(1100), 9, nil)
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	require.ErrorContains(t, err, "create snapshot 2-10: the configuration is too large: 1100 servers take ")
	require.ErrorContains(t, err, fmt.Sprintf("more than the limit of %d", raftstore.MaxLabelsSize))

	conf := servers(990)
	sink, err := s.Create(1, 10, 2, conf, 9, nil)
	require.NoError(t, err)
	_, err = sink.Write([]byte("state"))
	require.NoError(t, err)
	require.NoError(t, sink.Close())
	list, err := s.List()
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, conf, list[0].Configuration)
}

// TestCreateAcceptsExactlyTheConfigurationsThatFit walks a configuration's
// size byte by byte across the label limit: every Create that succeeds
// gives a snapshot that Close publishes, List lists and Open opens, and
// every other fails with ErrInvalid; both happen.
func TestCreateAcceptsExactlyTheConfigurationsThatFit(t *testing.T) {
	t.Parallel()
	for _, o := range openers() {
		t.Run(o.name, func(t *testing.T) {
			t.Parallel()
			s := o.open(t, 1)
			accepted, refused := 0, 0
			// The labels take the address plus 53 bytes here.
			for n := raftstore.MaxLabelsSize - 60; n < raftstore.MaxLabelsSize-46; n++ {
				conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: "a", Address: raft.ServerAddress(strings.Repeat("a", n))}}}
				sink, err := s.Create(1, uint64(n), 1, conf, 1, nil)
				if err != nil {
					require.ErrorIs(t, err, checkpoint.ErrInvalid, "n=%d", n)
					refused++
					continue
				}
				accepted++
				_, err = sink.Write([]byte("x"))
				require.NoError(t, err, "n=%d", n)
				require.NoError(t, sink.Close(), "n=%d", n)
				list, err := s.List()
				require.NoError(t, err)
				require.Len(t, list, 1, "n=%d", n)
				require.Equal(t, sink.ID(), list[0].ID, "n=%d", n)
				require.Equal(t, conf, list[0].Configuration)
				_, got := readAll(t, s, sink.ID())
				require.Equal(t, []byte("x"), got)
			}
			require.NotZero(t, accepted)
			require.NotZero(t, refused)
		})
	}
}
