package raftstore_test

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/gocheckpoint/checkpoint/backendtest"
	"github.com/gocheckpoint/checkpoint/raftstore"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// crashData is the payload of the snapshot of index i.
func crashData(i uint64) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("<%d>", i)), 20_000)
}

// TestPowerCutAtAnyCallLeavesEveryListedSnapshotWhole cuts the power at
// every mutating call of a run of snapshots (with reaping) on both flavours
// of backendtest.Mem, and checks three crash images of each: every listed
// snapshot opens and holds its bytes, and the last snapshot whose Close
// returned nil is listed.
func TestPowerCutAtAnyCallLeavesEveryListedSnapshotWhole(t *testing.T) {
	t.Parallel()
	for _, flavour := range []struct {
		name string
		opts []backendtest.MemOption
	}{{"object", nil}, {"local", []backendtest.MemOption{backendtest.MemLocal()}}} {
		t.Run(flavour.name, func(t *testing.T) {
			t.Parallel()
			for cut := 1; ; cut++ {
				m := backendtest.NewMem(flavour.opts...)
				b, err := m.Open()
				require.NoError(t, err)
				s, err := raftstore.NewOnBackend(b, 2)
				require.NoError(t, err)
				m.CutPowerAt(cut)
				var acked uint64
				for i := uint64(1); i <= 4; i++ {
					if !createTolerant(s, i) {
						break
					}
					acked = i
				}
				_ = s.Close()
				if !m.PowerCut() {
					require.Equal(t, uint64(4), acked)
					t.Logf("cut the power at each of %d calls", cut-1)
					return
				}
				for _, cfg := range []backendtest.CrashCloneConfig{
					{UnsyncedPercent: 0},
					{UnsyncedPercent: 100},
					{UnsyncedPercent: 50, Rand: rand.New(rand.NewPCG(uint64(cut), 1))},
				} {
					checkCrashImage(t, m.CrashClone(cfg), acked, fmt.Sprintf("cut %d, %d%%", cut, cfg.UnsyncedPercent))
				}
			}
		})
	}
}

// createTolerant writes the snapshot of index i and reports whether its
// Close returned nil.
func createTolerant(s *raftstore.Store, i uint64) bool {
	sink, err := s.Create(raft.SnapshotVersionMax, i, 1, testConfig(), 1, nil)
	if err != nil {
		return false
	}
	data := crashData(i)
	for len(data) > 0 {
		n := min(len(data), 7000)
		if _, err := sink.Write(data[:n]); err != nil {
			_ = sink.Cancel()
			return false
		}
		data = data[n:]
	}
	return sink.Close() == nil
}

func checkCrashImage(t *testing.T, m *backendtest.Mem, acked uint64, what string) {
	t.Helper()
	b, err := m.Open()
	require.NoError(t, err, what)
	s, err := raftstore.NewOnBackend(b, 2)
	require.NoError(t, err, what)
	defer s.Close()
	list, err := s.List()
	require.NoError(t, err, what)
	if acked > 0 {
		require.NotEmpty(t, list, what)
		require.GreaterOrEqual(t, list[0].Index, acked, "%s: the last acknowledged snapshot survives", what)
	}
	for _, meta := range list {
		_, r, err := s.Open(meta.ID)
		require.NoError(t, err, "%s: %s", what, meta.ID)
		got, err := io.ReadAll(r)
		require.NoError(t, err, "%s: %s", what, meta.ID)
		require.NoError(t, r.Close())
		require.Equal(t, crashData(meta.Index), got, "%s: %s", what, meta.ID)
	}
	// The store takes new snapshots after the crash.
	require.True(t, createTolerant(s, acked+10), what)
}
