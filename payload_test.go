package checkpoint_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/stretchr/testify/require"
)

// payloadBytes returns n pseudo-random bytes of seed.
func payloadBytes(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.UintN(256))
	}
	return b
}

// writeAll returns a payload write function that writes b in pieces.
func writeAll(b []byte) func(io.Writer) error {
	return func(w io.Writer) error {
		for rest := b; len(rest) > 0; {
			k := min(len(rest), 1000)
			if _, err := w.Write(rest[:k]); err != nil {
				return err
			}
			rest = rest[k:]
		}
		return nil
	}
}

// readPayload reads a payload reader to its end and closes it.
func readPayload(t *testing.T, r io.ReadCloser) ([]byte, error) {
	t.Helper()
	defer func() { require.NoError(t, r.Close()) }()
	return io.ReadAll(r)
}

// requirePayload checks that step's payload in s reads back, verified, as
// want.
func requirePayload[T any](t *testing.T, s *checkpoint.Store[T], step int64, want []byte) {
	t.Helper()
	r, _, err := s.OpenPayload(context.Background(), step)
	require.NoError(t, err)
	got, err := readPayload(t, r)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got), "step %d's payload: %d bytes, want %d", step, len(got), len(want))
}

// TestSaveFromRoundTripsInEveryCompression proves that a byte payload
// saved by SaveFrom reads back byte for byte through OpenPayload and
// LatestPayload, in every compression, with an Info that says what it is
// from the header alone (List).
func TestSaveFromRoundTripsInEveryCompression(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, comp := range []checkpoint.Option{nil, checkpoint.Gzip(), checkpoint.Zstd()} {
		t.Run(fmt.Sprint(comp), func(t *testing.T) {
			t.Parallel()
			var opts []checkpoint.Option
			if comp != nil {
				opts = append(opts, comp)
			}
			s := openStore[[]byte](t, t.TempDir(), opts...)
			payload := payloadBytes(1, 200<<10)
			info, err := s.SaveFrom(ctx, 4, writeAll(payload), checkpoint.WithMeta("term", "2"))
			require.NoError(t, err)
			require.Equal(t, checkpoint.PayloadBytes, info.Payload)
			require.Equal(t, int64(len(payload)), info.PayloadSize)
			require.Equal(t, 3, info.Format)
			require.Equal(t, int64(4), info.Step)

			r, got, err := s.OpenPayload(ctx, 4)
			require.NoError(t, err)
			require.Equal(t, info.Time, got.Time)
			require.Equal(t, checkpoint.PayloadBytes, got.Payload)
			if comp == nil {
				require.Equal(t, int64(len(payload)), got.PayloadSize)
			} else {
				require.Equal(t, int64(-1), got.PayloadSize)
			}
			b, err := readPayload(t, r)
			require.NoError(t, err)
			require.True(t, bytes.Equal(payload, b))

			r, got, err = s.LatestPayload(ctx)
			require.NoError(t, err)
			require.Equal(t, int64(4), got.Step)
			b, err = readPayload(t, r)
			require.NoError(t, err)
			require.True(t, bytes.Equal(payload, b))

			// A new store lists it from its header.
			list, err := openStore[[]byte](t, s.Location(), append(opts, checkpoint.ReadOnly())...).List(ctx)
			require.NoError(t, err)
			require.Len(t, list, 1)
			require.Equal(t, checkpoint.PayloadBytes, list[0].Payload)
			require.Equal(t, int64(-1), list[0].PayloadSize)
			require.Equal(t, map[string]string{"term": "2"}, list[0].Meta)
			require.Equal(t, info.Size, list[0].Size)
		})
	}
}

// TestSaveFromStoresTheRawBytes proves the payload is stored as it is,
// without base64: a plain file is the header, the payload's bytes and the
// trailer, and the README's way of verifying a file verifies it.
func TestSaveFromStoresTheRawBytes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore[[]byte](t, dir)
	payload := []byte("\x00\xffraw,\"checksum\":\"bytes\n")
	info, err := s.SaveFrom(context.Background(), 1, writeAll(payload))
	require.NoError(t, err)
	data := mustRead(t, info.Location)
	require.True(t, strings.HasPrefix(string(data), `{"format":3,"step":1,"kind":"step","time":"`))
	i := bytes.Index(data, []byte(`"state":`)) + len(`"state":`)
	require.Equal(t, payload, data[i:i+len(payload)])
	require.Len(t, data, i+len(payload)+len(`,"checksum":"crc32c:00000000"}`+"\n"))
	// d[:rindex(',"checksum":"')] is what the CRC-32C covers.
	verifyLikeTheREADME(t, data)
}

// TestSaveFromNeverReplaces proves a payload save of a step that has a
// checkpoint is ErrExists and leaves the file as it was, and that its
// write function is not called again.
func TestSaveFromNeverReplaces(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[int](t, t.TempDir())
	info, err := s.Save(ctx, 2, 7)
	require.NoError(t, err)
	before := mustRead(t, info.Location)
	_, err = s.SaveFrom(ctx, 2, writeAll([]byte("other")))
	require.ErrorIs(t, err, checkpoint.ErrExists)
	requireUntouched(t, info.Location, before)
	info, err = s.SaveFrom(ctx, 3, writeAll([]byte("first")))
	require.NoError(t, err)
	before = mustRead(t, info.Location)
	calls := 0
	_, err = s.SaveFrom(ctx, 3, func(w io.Writer) error { calls++; _, err := w.Write([]byte("second")); return err })
	require.ErrorIs(t, err, checkpoint.ErrExists)
	require.LessOrEqual(t, calls, 1)
	requireUntouched(t, info.Location, before)
}

// TestSaveFromThatFailsLeavesNothing proves that a write function that
// fails, panics or writes more than the read limit fails the save with an
// error naming the step, and leaves no checkpoint and no temporary file.
func TestSaveFromThatFailsLeavesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	boom := errors.New("boom")
	for name, tc := range map[string]struct {
		write func(io.Writer) error
		want  error
	}{
		"error":     {func(w io.Writer) error { w.Write([]byte("partial")); return boom }, boom},
		"panic":     {func(w io.Writer) error { w.Write([]byte("partial")); panic("kaput") }, checkpoint.ErrInvalid},
		"too large": {writeAll(make([]byte, 5000)), checkpoint.ErrInvalid},
		"nil":       {nil, checkpoint.ErrInvalid},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			s := openStore[[]byte](t, dir, checkpoint.WithMaxReadSize(4096))
			_, err := s.SaveFrom(ctx, 9, tc.write)
			require.ErrorIs(t, err, tc.want)
			var ce *checkpoint.Error
			require.ErrorAs(t, err, &ce)
			require.Equal(t, int64(9), ce.Step)
			require.Equal(t, []string{".checkpoint.lock"}, dirNames(t, dir))
		})
	}
}

// TestLoadOfAPayloadIsAMismatchNotDamage proves that Load and Latest of a
// JSON store meeting a byte payload that verifies fail with
// ErrPayloadMismatch: no silent misread (the payload is valid JSON of the
// store's type here), no fallback to the older state, and the file is not
// moved aside. A damaged payload is skipped as damage.
func TestLoadOfAPayloadIsAMismatchNotDamage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[map[string]int](t, dir)
	_, err := s.Save(ctx, 1, map[string]int{"turn": 1})
	require.NoError(t, err)
	info, err := s.SaveFrom(ctx, 2, writeAll([]byte(`{"turn":2}`)))
	require.NoError(t, err)
	_, _, err = s.Load(ctx, 2)
	require.ErrorIs(t, err, checkpoint.ErrPayloadMismatch)
	require.NotErrorIs(t, err, checkpoint.ErrCorrupt)
	_, _, err = s.Latest(ctx)
	require.ErrorIs(t, err, checkpoint.ErrPayloadMismatch)
	require.FileExists(t, info.Location)

	// Damaged, it is damage: Latest goes back to step 1.
	data := mustRead(t, info.Location)
	data[len(data)-15] ^= 1
	require.NoError(t, os.WriteFile(info.Location, data, 0o644))
	v, got, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), got.Step)
	require.Equal(t, map[string]int{"turn": 1}, v)
}

// TestLatestPayloadFallsBackPastDamage proves that LatestPayload skips a
// damaged newest payload (reporting it) and returns the newest that
// verifies, and that it stops at a JSON state that verifies.
func TestLatestPayloadFallsBackPastDamage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	var reported []error
	s := openStore[int](t, dir, checkpoint.WithHooks(checkpoint.Hooks{OnError: func(err error) { reported = append(reported, err) }}))
	for step := int64(1); step <= 3; step++ {
		_, err := s.SaveFrom(ctx, step, writeAll(payloadBytes(uint64(step), 100<<10)))
		require.NoError(t, err)
	}
	list, err := s.List(ctx)
	require.NoError(t, err)
	data := mustRead(t, list[2].Location)
	data[len(data)/2] ^= 0x40
	require.NoError(t, os.WriteFile(list[2].Location, data, 0o644))

	r, info, err := s.LatestPayload(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), info.Step)
	b, err := readPayload(t, r)
	require.NoError(t, err)
	require.Equal(t, payloadBytes(2, 100<<10), b)
	require.Len(t, reported, 1)
	require.ErrorIs(t, reported[0], checkpoint.ErrCorrupt)

	// The damaged one read directly fails at its end, naming its step.
	r, _, err = s.OpenPayload(ctx, 3)
	require.NoError(t, err)
	_, err = readPayload(t, r)
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	var ce *checkpoint.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, int64(3), ce.Step)

	// OpenPayloadExact reaches a payload by its Info.
	r, info, err = s.OpenPayloadExact(ctx, list[0])
	require.NoError(t, err)
	require.Equal(t, list[0].Time, info.Time)
	b, err = readPayload(t, r)
	require.NoError(t, err)
	require.Equal(t, payloadBytes(1, 100<<10), b)
	gone := list[0]
	gone.Time = gone.Time.Add(1)
	_, _, err = s.OpenPayloadExact(ctx, gone)
	require.ErrorIs(t, err, checkpoint.ErrNotFound)

	// A JSON state newer than every payload stops the walk.
	_, err = s.Save(ctx, 4, 4)
	require.NoError(t, err)
	_, _, err = s.LatestPayload(ctx)
	require.ErrorIs(t, err, checkpoint.ErrPayloadMismatch)
	_, _, err = s.OpenPayload(ctx, 4)
	require.ErrorIs(t, err, checkpoint.ErrPayloadMismatch)
	_, _, err = s.OpenPayload(ctx, 5)
	require.ErrorIs(t, err, checkpoint.ErrNotFound)
	require.ErrorContains(t, err, "open payload step 5")
}

// TestSaveFromIsRetained proves that retention rules count byte payloads
// as any checkpoint, and that AppendFrom takes the step after the newest.
func TestSaveFromIsRetained(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[[]byte](t, t.TempDir(), checkpoint.KeepLast(2))
	for range 4 {
		_, err := s.AppendFrom(ctx, writeAll([]byte("x")))
		require.NoError(t, err)
	}
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{3, 4}, steps(list))
}

// TestSaveFromOnAMemBackendSurvivesPowerCuts proves payload saves with a
// retention rule on backendtest.Mem (object storage and a local
// directory), cut at each of their calls: every crash image (what was made
// durable, all that reached the storage, a random half of the rest) holds
// the newest two payloads whose saves returned, whole, and every
// checkpoint it lists verifies with the bytes its save wrote.
func TestSaveFromOnAMemBackendSurvivesPowerCuts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	payloads := [][]byte{payloadBytes(1, 3000), payloadBytes(2, 70<<10), nil, payloadBytes(4, 10)}
	opts := []checkpoint.Option{checkpoint.Gzip(), checkpoint.KeepLast(2)}
	run := func(m *backendtest.Mem) (saved int, err error) {
		b, err := m.Open()
		if err != nil {
			return 0, err
		}
		s, err := checkpoint.OpenBackend[[]byte](b, opts...)
		if err != nil {
			return 0, err
		}
		defer s.Close()
		for i, p := range payloads {
			if _, err := s.SaveFrom(ctx, int64(i+1), writeAll(p)); err != nil {
				return saved, err
			}
			saved++
		}
		return saved, nil
	}
	for _, local := range []bool{false, true} {
		var memOpts []backendtest.MemOption
		if local {
			memOpts = append(memOpts, backendtest.MemLocal())
		}
		m := backendtest.NewMem(memOpts...)
		_, err := run(m)
		require.NoError(t, err)
		n := m.Ops()
		require.Positive(t, n)
		for cut := 1; cut <= n+1; cut++ {
			m := backendtest.NewMem(memOpts...)
			m.CutPowerAt(cut)
			saved, err := run(m)
			require.True(t, err == nil || m.PowerCut(), "cut %d: %v", cut, err)
			images := []backendtest.CrashCloneConfig{{UnsyncedPercent: 0}, {UnsyncedPercent: 100}, {UnsyncedPercent: 50, Rand: rand.New(rand.NewPCG(uint64(cut), 3))}}
			for _, cfg := range images {
				where := fmt.Sprintf("cut %d of %d (local %v, %d%% of unsynced kept)", cut, n, local, cfg.UnsyncedPercent)
				b, err := m.CrashClone(cfg).Open()
				require.NoError(t, err)
				s, err := checkpoint.OpenBackend[[]byte](b, opts...)
				require.NoError(t, err, where)
				list, err := s.List(ctx)
				require.NoError(t, err, where)
				listed := map[int64]bool{}
				for _, info := range list {
					listed[info.Step] = true
					require.Equal(t, checkpoint.PayloadBytes, info.Payload, where)
					r, _, err := s.OpenPayloadExact(ctx, info)
					require.NoError(t, err, where)
					got, err := readPayload(t, r)
					require.NoError(t, err, "%s: step %d does not verify", where, info.Step)
					require.True(t, bytes.Equal(payloads[info.Step-1], got), "%s: step %d holds other bytes", where, info.Step)
				}
				for step := max(saved-1, 1); step <= saved; step++ {
					require.True(t, listed[int64(step)], "%s: the save of step %d returned, and it is gone", where, step)
				}
				s.Close()
			}
		}
	}
}

// verifyLikeTheREADME checks data as the README says anyone can:
// crc32c(d[:rindex(d, ',"checksum":"')]) is the trailer's.
func verifyLikeTheREADME(t *testing.T, data []byte) {
	t.Helper()
	i := bytes.LastIndex(data, []byte(`,"checksum":"`))
	require.Positive(t, i)
	want := fmt.Sprintf(`,"checksum":"crc32c:%08x"}`+"\n", crc32c(data[:i]))
	require.Equal(t, want, string(data[i:]))
}

func crc32c(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }

// TestSaveFromMovesADamagedPayloadAside proves that a save of a step whose
// payload is provably damaged moves it aside (as Save does for a damaged
// state), and that a good payload in the way is ErrExists, untouched.
func TestSaveFromMovesADamagedPayloadAside(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[[]byte](t, dir, checkpoint.Zstd())
	info, err := s.SaveFrom(ctx, 5, writeAll(payloadBytes(5, 50<<10)))
	require.NoError(t, err)
	good := mustRead(t, info.Location)
	_, err = s.SaveFrom(ctx, 5, writeAll([]byte("again")))
	require.ErrorIs(t, err, checkpoint.ErrExists)
	requireUntouched(t, info.Location, good)

	bad := bytes.Clone(good)
	bad[len(bad)/2] ^= 0x10
	require.NoError(t, os.WriteFile(info.Location, bad, 0o644))
	_, err = s.SaveFrom(ctx, 5, writeAll([]byte("again")))
	require.NoError(t, err)
	require.Equal(t, bad, mustRead(t, info.Location+".corrupt"))
	requirePayload(t, s, 5, []byte("again"))
}

// TestSaveFromWithAsyncPublishesTheQueueFirst proves that SaveFrom on an
// Async store is synchronous and publishes the saves queued before it
// first, so that writes take effect in order.
func TestSaveFromWithAsyncPublishesTheQueueFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[[]byte](t, t.TempDir(), checkpoint.Async(8))
	for step := int64(1); step <= 3; step++ {
		_, err := s.Save(ctx, step, []byte{byte(step)})
		require.NoError(t, err)
	}
	info, err := s.SaveFrom(ctx, 4, writeAll([]byte("payload")))
	require.NoError(t, err)
	require.Positive(t, info.Size, "published when SaveFrom returns")
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2, 3, 4}, steps(list))
	info, err = s.AppendFrom(ctx, writeAll([]byte("next")))
	require.NoError(t, err)
	require.Equal(t, int64(5), info.Step)
}

// TestPayloadsAreListedFromTheHeaderIndex proves that a store of enough
// byte payloads writes the header index, and that a later store's first
// List reads the payloads' headers from it, opening no checkpoint, with the
// same answer as a List without it.
func TestPayloadsAreListedFromTheHeaderIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	w, err := checkpoint.Open[int](dir, checkpoint.NoSync())
	require.NoError(t, err)
	for step := int64(1); step <= indexedStoreSteps; step++ {
		_, err := w.SaveFrom(ctx, step, writeAll([]byte{byte(step)}))
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	require.FileExists(t, filepath.Join(dir, checkpoint.IndexName))
	want := listWithoutIndex(t, dir)

	s, c := countingReader(t, dir)
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Zero(t, c.checkpointOpens(), "every header came from the index")
	require.Equal(t, want, list)
	for _, info := range list {
		require.Equal(t, checkpoint.PayloadBytes, info.Payload)
		require.Equal(t, 3, info.Format)
	}
}

// TestSaveFromWriterUsedLateNeverReachesTheFile proves that a write to the
// payload's io.Writer after the write function returned, from another
// goroutine, fails and leaves the saved checkpoint as it was.
func TestSaveFromWriterUsedLateNeverReachesTheFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[[]byte](t, t.TempDir())
	var kept io.Writer
	info, err := s.SaveFrom(ctx, 1, func(w io.Writer) error { kept = w; _, err := w.Write([]byte("early")); return err })
	require.NoError(t, err)
	before := mustRead(t, info.Location)
	done := make(chan error)
	go func() { _, err := kept.Write([]byte("late")); done <- err }()
	require.ErrorIs(t, <-done, checkpoint.ErrInvalid)
	requireUntouched(t, info.Location, before)
	requirePayload(t, s, 1, []byte("early"))
}

// TestSaveFromOverTheReadLimitFailsEvenIfWriteIgnoresTheError proves that
// a write function that writes more than the read limit fails the save
// with ErrInvalid and publishes nothing, even when it ignores the error
// its Write returned and returns nil.
func TestSaveFromOverTheReadLimitFailsEvenIfWriteIgnoresTheError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[[]byte](t, dir, checkpoint.WithMaxReadSize(4096))
	_, err := s.SaveFrom(ctx, 1, func(w io.Writer) error {
		w.Write(make([]byte, 4000))
		w.Write(make([]byte, 200)) // refused, ignored
		w.Write(make([]byte, 10))  // would fit
		return nil
	})
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	requireNoTemps(t, dir)
}

// TestSaveFromWhoseWriteEndsItsGoroutineLeavesNothing proves that a write
// function that ends its goroutine (runtime.Goexit, as t.FailNow does)
// publishes nothing and leaves no temporary file, in every compression,
// and that the store stays usable: the next save goes through.
func TestSaveFromWhoseWriteEndsItsGoroutineLeavesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	eachCompression(t, func(t *testing.T, comp []checkpoint.Option) {
		dir := t.TempDir()
		s := openStore[[]byte](t, dir, comp...)
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.SaveFrom(ctx, 1, func(w io.Writer) error {
				w.Write(payloadBytes(1, 100<<10))
				runtime.Goexit()
				return nil
			})
		}()
		waitFor(t, done)
		requireNoTemps(t, dir)

		saved := make(chan struct{})
		var err error
		go func() {
			defer close(saved)
			_, err = s.SaveFrom(ctx, 2, writeAll([]byte("next")))
		}()
		waitFor(t, saved)
		require.NoError(t, err)
		list, err := s.List(ctx)
		require.NoError(t, err)
		require.Equal(t, []int64{2}, steps(list), "only the save whose write returned is published")
	})
}

// TestSaveFromCancelledDuringWriteIsAllOrNothing proves that a save whose
// context is cancelled while write runs either fails with
// context.Canceled, leaving no checkpoint and no temporary file, or
// succeeds with the whole payload.
func TestSaveFromCancelledDuringWriteIsAllOrNothing(t *testing.T) {
	t.Parallel()
	eachCompression(t, func(t *testing.T, comp []checkpoint.Option) {
		dir := t.TempDir()
		s := openStore[[]byte](t, dir, comp...)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		info, err := s.SaveFrom(ctx, 1, func(w io.Writer) error {
			w.Write(payloadBytes(1, 70<<10))
			cancel()
			_, err := w.Write(payloadBytes(2, 70<<10))
			return err
		})
		if err != nil {
			require.ErrorIs(t, err, context.Canceled)
			requireNoTemps(t, dir)
			return
		}
		r, _, err := s.OpenPayload(context.Background(), info.Step)
		require.NoError(t, err)
		b, err := readPayload(t, r)
		require.NoError(t, err)
		require.Len(t, b, 140<<10)
	})
}

// TestSaveFromWriteMayReadTheStore proves that the write function of
// SaveFrom may read the store it saves to (List, LatestPayload) without
// hanging, e.g. to copy the previous payload into the new one.
func TestSaveFromWriteMayReadTheStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[[]byte](t, t.TempDir())
	_, err := s.SaveFrom(ctx, 1, writeAll([]byte("one")))
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err = s.SaveFrom(ctx, 2, func(w io.Writer) error {
			if _, err := s.List(ctx); err != nil {
				return err
			}
			r, _, err := s.LatestPayload(ctx)
			if err != nil {
				return err
			}
			defer r.Close()
			_, err = io.Copy(w, r)
			return err
		})
	}()
	waitFor(t, done)
	require.NoError(t, err)
	requirePayload(t, s, 2, []byte("one"))
}

// TestOpenPayloadExactOfAReplacedCheckpointIsNotFound proves that
// OpenPayloadExact of an Info whose file now holds another checkpoint of
// that step (a payload or a JSON state saved since) is ErrNotFound, in
// every compression, and never reads the newer one.
func TestOpenPayloadExactOfAReplacedCheckpointIsNotFound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	eachCompression(t, func(t *testing.T, comp []checkpoint.Option) {
		s := openStore[[]byte](t, t.TempDir(), comp...)
		old, err := s.SaveFrom(ctx, 1, writeAll([]byte("old")))
		require.NoError(t, err)
		_, err = s.SaveFrom(ctx, 2, writeAll([]byte("two")))
		require.NoError(t, err)
		_, err = s.Truncate(ctx, 0)
		require.NoError(t, err)
		_, err = s.SaveFrom(ctx, 1, writeAll([]byte("new")))
		require.NoError(t, err)
		r, got, err := s.OpenPayloadExact(ctx, old)
		if err == nil {
			b, _ := readPayload(t, r)
			t.Fatalf("OpenPayloadExact of a replaced checkpoint read %q (%v)", b, got.Time)
		}
		require.ErrorIs(t, err, checkpoint.ErrNotFound)
		// A JSON state now at that name: ErrNotFound too, not a mismatch.
		_, err = s.Truncate(ctx, 0)
		require.NoError(t, err)
		_, err = s.Save(ctx, 1, []byte("state"))
		require.NoError(t, err)
		_, _, err = s.OpenPayloadExact(ctx, old)
		require.ErrorIs(t, err, checkpoint.ErrNotFound)
	})
}

// TestPayloadReaderClosedEarlyOrSharedNeverReadsClean proves that a
// payload reader closed before its end returns ErrClosed, never io.EOF,
// and may be closed twice; and that two goroutines reading one reader
// together read exactly the payload's length and both end with io.EOF.
func TestPayloadReaderClosedEarlyOrSharedNeverReadsClean(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	eachCompression(t, func(t *testing.T, comp []checkpoint.Option) {
		s := openStore[[]byte](t, t.TempDir(), comp...)
		payload := payloadBytes(4, 300<<10)
		_, err := s.SaveFrom(ctx, 1, writeAll(payload))
		require.NoError(t, err)

		r, _, err := s.OpenPayload(ctx, 1)
		require.NoError(t, err)
		buf := make([]byte, 100)
		_, err = io.ReadFull(r, buf)
		require.NoError(t, err)
		require.NoError(t, r.Close())
		require.NoError(t, r.Close())
		n, err := r.Read(buf)
		require.Zero(t, n)
		require.ErrorIs(t, err, checkpoint.ErrClosed)
		_, err = r.Read(buf)
		require.ErrorIs(t, err, checkpoint.ErrClosed)

		r, _, err = s.OpenPayload(ctx, 1)
		require.NoError(t, err)
		var mu sync.Mutex
		total := 0
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for g := range errs {
			wg.Go(func() {
				b := make([]byte, 777)
				for {
					n, err := r.Read(b)
					mu.Lock()
					total += n
					mu.Unlock()
					if err != nil {
						errs[g] = err
						return
					}
				}
			})
		}
		wg.Wait()
		require.NoError(t, r.Close())
		require.Equal(t, len(payload), total)
		require.Equal(t, io.EOF, errs[0])
		require.Equal(t, io.EOF, errs[1])
	})
}

// TestSaveFromWriterKeptFromASaveNeverReachesTheNextOne proves that an
// io.Writer kept from one SaveFrom and used while the next SaveFrom
// streams fails and writes nothing, to either file: the next payload holds
// exactly what its own write function wrote.
func TestSaveFromWriterKeptFromASaveNeverReachesTheNextOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	eachCompression(t, func(t *testing.T, comp []checkpoint.Option) {
		s := openStore[[]byte](t, t.TempDir(), comp...)
		var kept io.Writer
		_, err := s.SaveFrom(ctx, 1, func(w io.Writer) error { kept = w; _, err := w.Write([]byte("one")); return err })
		require.NoError(t, err)
		_, err = s.SaveFrom(ctx, 2, func(w io.Writer) error {
			if _, err := w.Write([]byte("two-a")); err != nil {
				return err
			}
			if n, err := kept.Write([]byte("EVIL")); err == nil || n != 0 {
				t.Errorf("a kept writer wrote %d bytes during the next save (%v)", n, err)
			}
			_, err := w.Write([]byte("two-b"))
			return err
		})
		require.NoError(t, err)
		requirePayload(t, s, 2, []byte("two-atwo-b"))
		requirePayload(t, s, 1, []byte("one"))
	})
}

// replayingBackend calls a Create's write function twice, as a backend
// that retried an upload by writing again would (the Backend contract
// says Create calls it at most once).
type replayingBackend struct{ checkpoint.Backend }

func (r replayingBackend) Create(ctx context.Context, name string, write func(io.Writer) error) (checkpoint.Object, error) {
	_ = write(io.Discard) // a first attempt, lost
	return r.Backend.Create(ctx, name, write)
}

// TestSaveFromIsNeverPublishedFromASecondCallOfItsWrite: a backend that
// calls SaveFrom's write function again gets an ErrInvalid from the second
// call, so the save fails and publishes nothing, instead of a checkpoint
// of what a one-shot stream gives a second time (nothing) under a valid
// checksum.
func TestSaveFromIsNeverPublishedFromASecondCallOfItsWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := dirstore.Open(t.TempDir(), dirstore.NoSync())
	require.NoError(t, err)
	s, err := checkpoint.OpenBackend[[]byte](replayingBackend{b})
	require.NoError(t, err)
	defer s.Close()
	src := strings.NewReader("the raft snapshot") // streams once
	_, err = s.SaveFrom(ctx, 1, func(w io.Writer) error { _, err := io.Copy(w, src); return err })
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	_, _, err = s.OpenPayload(ctx, 1)
	require.ErrorIs(t, err, checkpoint.ErrNotFound)
}
