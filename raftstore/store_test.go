package raftstore_test

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest"
	"github.com/gocheckpoint/checkpoint/raftstore"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// testConfig is a configuration of three voters.
func testConfig() raft.Configuration {
	return raft.Configuration{Servers: []raft.Server{
		{Suffrage: raft.Voter, ID: "a", Address: "addr-a"},
		{Suffrage: raft.Nonvoter, ID: "b", Address: "addr-b"},
		{Suffrage: raft.Staging, ID: "c", Address: "addr-c"},
	}}
}

// opener makes a store for a test: on a directory, or on a Mem backend.
type opener struct {
	name string
	open func(t *testing.T, retain int, opts ...checkpoint.Option) *raftstore.Store
}

func openers() []opener {
	return []opener{
		{"dir", func(t *testing.T, retain int, opts ...checkpoint.Option) *raftstore.Store {
			s, err := raftstore.New(t.TempDir(), retain, opts...)
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			return s
		}},
		{"zstd", func(t *testing.T, retain int, opts ...checkpoint.Option) *raftstore.Store {
			s, err := raftstore.New(t.TempDir(), retain, append(opts, checkpoint.Zstd())...)
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			return s
		}},
		{"mem", func(t *testing.T, retain int, opts ...checkpoint.Option) *raftstore.Store {
			b, err := backendtest.NewMem().Open()
			require.NoError(t, err)
			s, err := raftstore.NewOnBackend(b, retain, opts...)
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			return s
		}},
	}
}

// snapshot writes data as a snapshot of (term, index) in pieces and closes it.
func snapshot(t *testing.T, s *raftstore.Store, term, index uint64, data []byte) string {
	t.Helper()
	sink, err := s.Create(raft.SnapshotVersionMax, index, term, testConfig(), 2, nil)
	require.NoError(t, err)
	for len(data) > 0 {
		n := min(len(data), 1000)
		w, err := sink.Write(data[:n])
		require.NoError(t, err)
		require.Equal(t, n, w)
		data = data[n:]
	}
	require.NoError(t, sink.Close())
	return sink.ID()
}

func readAll(t *testing.T, s *raftstore.Store, id string) (*raft.SnapshotMeta, []byte) {
	t.Helper()
	meta, r, err := s.Open(id)
	require.NoError(t, err)
	defer r.Close()
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	return meta, got
}

func TestRoundTripKeepsBytesAndMeta(t *testing.T) {
	t.Parallel()
	for _, o := range openers() {
		t.Run(o.name, func(t *testing.T) {
			t.Parallel()
			s := o.open(t, 3)
			data := bytes.Repeat([]byte("raft snapshot "), 10_000)
			id := snapshot(t, s, 3, 10, data)

			list, err := s.List()
			require.NoError(t, err)
			require.Len(t, list, 1)
			require.Equal(t, id, list[0].ID)
			require.Equal(t, uint64(3), list[0].Term)
			require.Equal(t, uint64(10), list[0].Index)
			require.Equal(t, uint64(2), list[0].ConfigurationIndex)
			require.Equal(t, testConfig(), list[0].Configuration)
			require.Equal(t, raft.SnapshotVersion(raft.SnapshotVersionMax), list[0].Version)
			if o.name != "zstd" {
				require.Equal(t, int64(len(data)), list[0].Size)
			}

			meta, got := readAll(t, s, id)
			require.Equal(t, data, got)
			require.Equal(t, int64(len(data)), meta.Size)
			require.Equal(t, testConfig(), meta.Configuration)
			require.Equal(t, id, meta.ID)
		})
	}
}

func TestEmptySnapshotRoundTrips(t *testing.T) {
	t.Parallel()
	s := openers()[0].open(t, 1)
	id := snapshot(t, s, 1, 1, nil)
	meta, got := readAll(t, s, id)
	require.Empty(t, got)
	require.Zero(t, meta.Size)
}

func TestCancelPublishesNothing(t *testing.T) {
	t.Parallel()
	for _, o := range openers() {
		t.Run(o.name, func(t *testing.T) {
			t.Parallel()
			s := o.open(t, 2)
			sink, err := s.Create(1, 5, 1, testConfig(), 1, nil)
			require.NoError(t, err)
			_, err = sink.Write([]byte("partial"))
			require.NoError(t, err)
			require.NoError(t, sink.Cancel())
			require.NoError(t, sink.Cancel(), "a second Cancel does nothing")

			list, err := s.List()
			require.NoError(t, err)
			require.Empty(t, list)
			_, _, err = s.Open(sink.ID())
			require.ErrorIs(t, err, checkpoint.ErrNotFound)

			_, err = sink.Write([]byte("x"))
			require.ErrorIs(t, err, raftstore.ErrSinkClosed)
			require.ErrorIs(t, sink.Close(), raftstore.ErrSinkClosed)
		})
	}
}

func TestSinkAfterCloseFailsCleanly(t *testing.T) {
	t.Parallel()
	s := openers()[0].open(t, 2)
	sink, err := s.Create(1, 5, 1, testConfig(), 1, nil)
	require.NoError(t, err)
	_, err = sink.Write([]byte("whole"))
	require.NoError(t, err)
	require.NoError(t, sink.Close())
	require.NoError(t, sink.Close(), "a second Close returns the first one's result (raft closes after Persist did)")
	_, err = sink.Write([]byte("late"))
	require.ErrorIs(t, err, raftstore.ErrSinkClosed)
	require.ErrorIs(t, sink.Cancel(), raftstore.ErrSinkClosed)
	_, got := readAll(t, s, sink.ID())
	require.Equal(t, []byte("whole"), got, "nothing after Close reaches the snapshot")
}

func TestListIsNewestFirstByTermThenIndex(t *testing.T) {
	t.Parallel()
	s := openers()[0].open(t, 10)
	// Created out of raft's order: the list follows (term, index, creation).
	idB := snapshot(t, s, 2, 5, []byte("b"))
	idA := snapshot(t, s, 1, 100, []byte("a"))
	idD := snapshot(t, s, 2, 7, []byte("d"))
	idC := snapshot(t, s, 2, 5, []byte("c")) // same term and index as b, later
	require.NotEqual(t, idB, idC, "two snapshots of one (term, index) have IDs of their own")

	list, err := s.List()
	require.NoError(t, err)
	var ids []string
	for _, m := range list {
		ids = append(ids, m.ID)
	}
	require.Equal(t, []string{idD, idC, idB, idA}, ids)
	_, got := readAll(t, s, idB)
	require.Equal(t, []byte("b"), got)
	_, got = readAll(t, s, idC)
	require.Equal(t, []byte("c"), got)
}

func TestRetainReapsAfterClose(t *testing.T) {
	t.Parallel()
	for _, o := range openers() {
		t.Run(o.name, func(t *testing.T) {
			t.Parallel()
			s := o.open(t, 2)
			var ids []string
			for i := uint64(1); i <= 5; i++ {
				ids = append(ids, snapshot(t, s, 1, i*10, []byte{byte(i)}))
			}
			list, err := s.List()
			require.NoError(t, err)
			require.Len(t, list, 2)
			require.Equal(t, ids[4], list[0].ID)
			require.Equal(t, ids[3], list[1].ID)
			for _, id := range ids[:3] {
				_, _, err := s.Open(id)
				require.ErrorIs(t, err, checkpoint.ErrNotFound, "reaped %s", id)
			}
			// An older snapshot by raft's order is reaped at once, even when
			// it is the newest created.
			old := snapshot(t, s, 1, 1, []byte("old"))
			_, _, err = s.Open(old)
			require.ErrorIs(t, err, checkpoint.ErrNotFound)
		})
	}
}

func TestBadArgumentsAreInvalid(t *testing.T) {
	t.Parallel()
	_, err := raftstore.New(t.TempDir(), 0)
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	require.ErrorContains(t, err, "retain 0")
	b, err := backendtest.NewMem().Open()
	require.NoError(t, err)
	_, err = raftstore.NewOnBackend(b, -1)
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	_, err = raftstore.NewOnBackend(nil, 1)
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	_, err = raftstore.New("", 1)
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	require.ErrorContains(t, err, `open ""`)
}

func TestUnsupportedVersionIsInvalid(t *testing.T) {
	t.Parallel()
	s := openers()[0].open(t, 1)
	_, err := s.Create(raft.SnapshotVersionMax+1, 1, 1, testConfig(), 1, nil)
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
}

func TestOpenOfBadIDFails(t *testing.T) {
	t.Parallel()
	s := openers()[0].open(t, 2)
	id := snapshot(t, s, 4, 9, []byte("x"))
	for _, bad := range []string{"", "x", "4-9", "4-9-0-1", "4-9-x", "04-9-0", "4-9--1", "+4-9-0", "1-2-3/../x"} {
		_, _, err := s.Open(bad)
		require.ErrorIs(t, err, checkpoint.ErrInvalid, "%q", bad)
		require.ErrorContains(t, err, "open snapshot")
	}
	for _, unknown := range []string{"4-9-1", "4-8-0", "5-9-0"} {
		_, _, err := s.Open(unknown)
		require.ErrorIs(t, err, checkpoint.ErrNotFound, "%q", unknown)
		require.ErrorContains(t, err, unknown)
	}
	_, got := readAll(t, s, id)
	require.Equal(t, []byte("x"), got)
}

// TestDamagedSnapshotFailsOpen flips a payload byte on disk: Open fails with
// ErrCorrupt before handing out a byte, as FileSnapshotStore's CRC check does.
func TestDamagedSnapshotFailsOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := raftstore.New(dir, 3)
	require.NoError(t, err)
	defer s.Close()
	good := snapshot(t, s, 1, 1, bytes.Repeat([]byte{'g'}, 5000))
	bad := snapshot(t, s, 1, 2, bytes.Repeat([]byte{'p'}, 5000))

	list, err := s.List()
	require.NoError(t, err)
	require.Len(t, list, 2)
	// The newest file holds bad's payload: damage one byte in its middle.
	files, err := filepath.Glob(filepath.Join(dir, "*"))
	require.NoError(t, err)
	var newest string
	for _, f := range files {
		if b, _ := os.ReadFile(f); bytes.Contains(b, []byte("ppppp")) {
			newest = f
		}
	}
	require.NotEmpty(t, newest)
	b, err := os.ReadFile(newest)
	require.NoError(t, err)
	i := bytes.Index(b, []byte("ppppp")) + 2500
	b[i] = 'q'
	require.NoError(t, os.WriteFile(newest, b, 0o644))

	list, err = s.List()
	require.NoError(t, err)
	require.Len(t, list, 2, "List reads headers only: a damaged payload is listed")
	require.Equal(t, bad, list[0].ID)
	_, _, err = s.Open(bad)
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.ErrorContains(t, err, bad)
	_, got := readAll(t, s, good)
	require.Len(t, got, 5000)
}

func TestConcurrentSnapshotsDoNotCollide(t *testing.T) {
	t.Parallel()
	s := openers()[0].open(t, 10)
	var wg sync.WaitGroup
	ids := make([]string, 4)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sink, err := s.Create(1, 7, 2, testConfig(), 1, nil)
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := sink.Write([]byte{byte('a' + i)}); err != nil {
				t.Error(err)
			}
			if err := sink.Close(); err != nil {
				t.Error(err)
			}
			ids[i] = sink.ID()
		}()
	}
	wg.Wait()
	for i, id := range ids {
		_, got := readAll(t, s, id)
		require.Equal(t, []byte{byte('a' + i)}, got)
	}
	list, err := s.List()
	require.NoError(t, err)
	require.Len(t, list, 4)
}

// TestReopenContinuesNumbering checks that a store reopened after snapshots
// lists them and gives new snapshots IDs of their own.
func TestReopenContinuesNumbering(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := raftstore.New(dir, 5)
	require.NoError(t, err)
	first := snapshot(t, s, 1, 1, []byte("one"))
	require.NoError(t, s.Close())

	s, err = raftstore.New(dir, 5)
	require.NoError(t, err)
	defer s.Close()
	second := snapshot(t, s, 1, 1, []byte("two"))
	require.NotEqual(t, first, second)
	_, got := readAll(t, s, first)
	require.Equal(t, []byte("one"), got)
	_, got = readAll(t, s, second)
	require.Equal(t, []byte("two"), got)
}

// TestListSkipsCheckpointsWithoutRaftMeta puts checkpoints that are no
// snapshot of this package in the store's directory: a JSON state, payloads
// with no or malformed labels, and a file whose header is damaged. List
// skips them, as FileSnapshotStore skips a snapshot whose meta it cannot
// read, and Open of their IDs is ErrNotFound.
func TestListSkipsCheckpointsWithoutRaftMeta(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cp, err := checkpoint.Open[[]byte](dir)
	require.NoError(t, err)
	ctx := t.Context()
	_, err = cp.Save(ctx, 0, []byte("a state"))
	require.NoError(t, err)
	write := func(w io.Writer) error { _, err := w.Write([]byte("bytes")); return err }
	for step, labels := range [][]checkpoint.SaveOption{
		nil,
		{checkpoint.WithMeta(raftstore.LabelMeta, "1 2 3"), checkpoint.WithMeta(raftstore.LabelConfiguration, "[]")},
		{checkpoint.WithMeta(raftstore.LabelMeta, "1 2 3 04"), checkpoint.WithMeta(raftstore.LabelConfiguration, "[]")},
		{checkpoint.WithMeta(raftstore.LabelMeta, "9 2 3 4"), checkpoint.WithMeta(raftstore.LabelConfiguration, "[]")},
		{checkpoint.WithMeta(raftstore.LabelMeta, "1 2 3 4"), checkpoint.WithMeta(raftstore.LabelConfiguration, `[[7,"a","b"]]`)},
		{checkpoint.WithMeta(raftstore.LabelMeta, "1 2 3 4"), checkpoint.WithMeta(raftstore.LabelConfiguration, `[[0,"a"]]`)},
		{checkpoint.WithMeta(raftstore.LabelMeta, "1 2 3 4")},
	} {
		_, err := cp.SaveFrom(ctx, int64(step+1), write, labels...)
		require.NoError(t, err)
	}
	require.NoError(t, cp.Close())
	require.NoError(t, os.WriteFile(filepath.Join(dir, "step_00000099.json"), []byte("{not a header"), 0o644))

	s, err := raftstore.New(dir, 5)
	require.NoError(t, err)
	defer s.Close()
	list, err := s.List()
	require.NoError(t, err)
	require.Empty(t, list)
	for _, id := range []string{"2-3-0", "2-3-2", "2-3-5", "2-3-7"} {
		_, _, err := s.Open(id)
		require.ErrorIs(t, err, checkpoint.ErrNotFound, id)
	}
	// A new snapshot takes a step after all of them, and reaping leaves
	// them alone.
	id := snapshot(t, s, 1, 1, []byte("mine"))
	require.Equal(t, "1-1-100", id)
	list, err = s.List()
	require.NoError(t, err)
	require.Len(t, list, 1)
}

func TestConfigurationWithAnyStringsRoundTrips(t *testing.T) {
	t.Parallel()
	s := openers()[0].open(t, 1)
	conf := raft.Configuration{Servers: []raft.Server{
		{Suffrage: raft.Voter, ID: `q"uote\back`, Address: "ünï 🚀:8300"},
		{Suffrage: raft.Staging, ID: "", Address: "[::1]:1"},
	}}
	sink, err := s.Create(1, 2, 3, conf, 1, nil)
	require.NoError(t, err)
	require.NoError(t, sink.Close())
	list, err := s.List()
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, conf, list[0].Configuration)
}

func TestCloseCancelsOpenSinks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := raftstore.New(dir, 2)
	require.NoError(t, err)
	sink, err := s.Create(1, 5, 1, testConfig(), 1, nil)
	require.NoError(t, err)
	_, err = sink.Write([]byte("never published"))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, err = sink.Write([]byte("x"))
	require.ErrorIs(t, err, raftstore.ErrSinkClosed)
	require.Error(t, sink.Close())

	late, err := s.Create(1, 6, 1, testConfig(), 1, nil)
	require.NoError(t, err)
	_, _ = late.Write([]byte("x"))
	require.ErrorIs(t, late.Close(), checkpoint.ErrClosed)

	s, err = raftstore.New(dir, 2)
	require.NoError(t, err)
	defer s.Close()
	list, err := s.List()
	require.NoError(t, err)
	require.Empty(t, list)
}

// TestSnapshotOverTheReadLimitIsRefused: a snapshot larger than the store's
// read limit (checkpoint.WithMaxReadSize, 1 GiB by default) fails its Close
// with ErrInvalid and publishes nothing.
func TestSnapshotOverTheReadLimitIsRefused(t *testing.T) {
	t.Parallel()
	s := openers()[0].open(t, 2, checkpoint.WithMaxReadSize(1000))
	sink, err := s.Create(1, 5, 1, testConfig(), 1, nil)
	require.NoError(t, err)
	_, _ = sink.Write(make([]byte, 1001)) // may fail already
	require.ErrorIs(t, sink.Close(), checkpoint.ErrInvalid)
	list, err := s.List()
	require.NoError(t, err)
	require.Empty(t, list)
	snapshot(t, s, 1, 6, make([]byte, 1000))
}

// TestOpenIgnoresAForeignCheckpointOfTheSnapshotsStep: another program's
// checkpoint at a snapshot's step (here a SaveFinal of a JSON state, saved
// last) neither hides the snapshot from Open nor makes List lose it: Open
// opens exactly the snapshot List lists.
func TestOpenIgnoresAForeignCheckpointOfTheSnapshotsStep(t *testing.T) {
	t.Parallel()
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
	meta, got := readAll(t, s, id)
	require.Equal(t, []byte("state"), got)
	require.Equal(t, id, meta.ID)
	require.Equal(t, testConfig(), meta.Configuration)
	require.EqualValues(t, len("state"), meta.Size)
}

// TestReapLeavesAForeignCheckpointOfTheSameStep: reaping removes exactly
// the reaped snapshot; another program's checkpoint of its step (a
// SaveFinal saved while raftstore was not running) stays, as every
// checkpoint without raft metadata does.
func TestReapLeavesAForeignCheckpointOfTheSameStep(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := raftstore.New(dir, 1)
	require.NoError(t, err)
	reaped := snapshot(t, s, 1, 5, []byte("state"))
	require.NoError(t, s.Close())

	cp, err := checkpoint.Open[[]byte](dir)
	require.NoError(t, err)
	_, err = cp.SaveFinal(t.Context(), 0, []byte("foreign, no raft labels"))
	require.NoError(t, err)
	require.NoError(t, cp.Close())

	s, err = raftstore.New(dir, 1)
	require.NoError(t, err)
	newer := snapshot(t, s, 1, 6, []byte("newer")) // reaps 1-5-0
	_, _, err = s.Open(reaped)
	require.ErrorIs(t, err, checkpoint.ErrNotFound)
	require.NoError(t, s.Close())

	cp, err = checkpoint.Open[[]byte](dir)
	require.NoError(t, err)
	defer cp.Close()
	infos, err := cp.List(t.Context())
	require.NoError(t, err)
	var kinds []string
	for _, info := range infos {
		kinds = append(kinds, fmt.Sprintf("%d/%v", info.Step, info.Kind == checkpoint.KindFinal))
	}
	require.ElementsMatch(t, []string{"0/true", "1/false"}, kinds, "newer is %s", newer)
	state, _, err := cp.LoadExact(t.Context(), infos[slices.IndexFunc(infos, func(i checkpoint.Info) bool { return i.Kind == checkpoint.KindFinal })])
	require.NoError(t, err)
	require.Equal(t, []byte("foreign, no raft labels"), state)
}

// TestCreateFailsWhenNoStepIsLeft: a foreign checkpoint at step
// math.MaxInt64 leaves no step for a snapshot: Create fails with
// ErrInvalid, saying so, and never wraps around to a negative step; a
// checkpoint at math.MaxInt64-1 leaves exactly one.
func TestCreateFailsWhenNoStepIsLeft(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		step int64
		left int
	}{{math.MaxInt64, 0}, {math.MaxInt64 - 1, 1}} {
		t.Run(strconv.FormatInt(c.step, 10), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cp, err := checkpoint.Open[[]byte](dir)
			require.NoError(t, err)
			_, err = cp.Save(t.Context(), c.step, []byte("x"))
			require.NoError(t, err)
			require.NoError(t, cp.Close())
			s, err := raftstore.New(dir, 2)
			require.NoError(t, err)
			defer s.Close()
			for range c.left {
				id := snapshot(t, s, 1, 10, []byte("last"))
				require.Equal(t, "1-10-"+strconv.FormatInt(math.MaxInt64, 10), id)
			}
			_, err = s.Create(1, 11, 2, testConfig(), 1, nil)
			require.ErrorIs(t, err, checkpoint.ErrInvalid)
			require.ErrorContains(t, err, "create snapshot 2-11: no step left")
			require.Len(t, listedIDs(t, s), c.left)
		})
	}
}

// TestLockedNewLeavesALiveSnapshotAlone: a second New on a directory in use
// (a second process, or a restart script racing the old node) fails with
// ErrLocked and leaves the temporary file of the snapshot being written
// alone: it is published whole.
func TestLockedNewLeavesALiveSnapshotAlone(t *testing.T) {
	t.Parallel()
	for _, o := range []string{"plain", "zstd"} {
		t.Run(o, func(t *testing.T) {
			t.Parallel()
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

// TestOpenReaderSurvivesReaping: raft's leader streams a snapshot it opened
// (sendInstallSnapshot) while its snapshot goroutine may publish a newer one
// and reap the opened one: the reader still reads the whole snapshot, the
// Size Open promised.
func TestOpenReaderSurvivesReaping(t *testing.T) {
	t.Parallel()
	for _, o := range openers() {
		t.Run(o.name, func(t *testing.T) {
			t.Parallel()
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
			_, _, err = s.Open(id)
			require.ErrorIs(t, err, checkpoint.ErrNotFound)
			rest, err := io.ReadAll(r)
			require.NoError(t, err)
			require.EqualValues(t, meta.Size, int64(len(head)+len(rest)))
			require.Equal(t, data, append(head, rest...))
		})
	}
}
