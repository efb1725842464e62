package checkpoint_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/internal/format"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"
)

// Under a read limit of math.MaxInt64 (none), a checkpoint loads, and a
// save of its step is ErrExists and leaves it as it is.
func TestMaxInt64ReadLimitNeverReplacesAnIntactCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.WithMaxReadSize(math.MaxInt64), checkpoint.NoSync())
	info, err := s.Save(ctx, 1, 1)
	require.NoError(t, err)
	before, err := os.ReadFile(info.Path)
	require.NoError(t, err)

	v, _, err := s.Load(ctx, 1)
	require.NoError(t, err, "no limit reads the file")
	require.Equal(t, 1, v)
	_, err = s.Save(ctx, 1, 2)
	require.ErrorIs(t, err, checkpoint.ErrExists)
	requireUntouched(t, info.Path, before)
}

// A good checkpoint whose zstd window passes a store's smaller read limit
// is ErrCorrupt and too large to load there, but never moved aside nor
// replaced: a save of its step is ErrExists.
func TestZstdWindowOverALaterSmallerLimitIsNeverQuarantined(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	// A good checkpoint of 2 MiB of state in a frame of a 4 MiB window,
	// wider than the store's own writer uses, as the zstd tool writes.
	state, err := json.Marshal(randomText(1, 2<<20))
	require.NoError(t, err)
	var file bytes.Buffer
	enc, err := zstd.NewWriter(&file, zstd.WithWindowSize(4<<20), zstd.WithEncoderConcurrency(1))
	require.NoError(t, err)
	_, err = enc.Write(envelopeBytes(format.Header{Format: 1, Step: 1, Kind: checkpoint.KindStep, Time: time.Now()}, state))
	require.NoError(t, err)
	require.NoError(t, enc.Close())
	path := filepath.Join(dir, "step_00000001.json.zst")
	require.NoError(t, os.WriteFile(path, file.Bytes(), 0o644))
	got, _, err := openStore[string](t, dir, checkpoint.ReadOnly()).Load(ctx, 1)
	require.NoError(t, err)
	require.Len(t, got, 2<<20)

	small := openStore[string](t, dir, checkpoint.Zstd(), checkpoint.NoSync(), checkpoint.WithMaxReadSize(64<<10))
	_, _, err = small.Load(ctx, 1)
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.ErrorIs(t, err, format.ErrTooLarge)
	_, err = small.Save(ctx, 1, "replacement")
	require.ErrorIs(t, err, checkpoint.ErrExists, "a file too large to check here may be good")
	requireUntouched(t, path, file.Bytes())
}

// TestSaveRefusesACheckpointNoLoadCouldRead: a checkpoint whose bytes
// (decompressed: what a load counts) would pass the read limit could be
// saved but never loaded. Save refuses it before anything is written, with
// an ErrInvalid error that names the step, the size and the limit, for a
// plain, gzip or zstd store, an Async one and the rolling file; the
// checkpoints already there are untouched.
func TestSaveRefusesACheckpointNoLoadCouldRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const limit = 64 << 10
	for name, opts := range map[string][]checkpoint.Option{
		"plain": nil, "gzip": {checkpoint.Gzip()}, "zstd": {checkpoint.Zstd()}, "async": {checkpoint.Async(2)}, "rolling": {checkpoint.WithRolling(), checkpoint.SaveEvery(10)},
	} {
		dir := t.TempDir()
		s := openStore[string](t, dir, append(opts, checkpoint.WithMaxReadSize(limit))...)
		save := func(step int64, state string) error {
			if name == "rolling" {
				_, _, err := s.Tick(ctx, step, state)
				return err
			}
			_, err := s.Save(ctx, step, state)
			return err
		}
		// Fits with the envelope: saves and loads.
		require.NoError(t, save(1, strings.Repeat("s", limit-200)), name)
		require.NoError(t, s.Flush(ctx))
		before := snapshotDir(t, dir)
		// The state alone fits; with the envelope, not.
		err := save(2, strings.Repeat("s", limit-40))
		require.ErrorIs(t, err, checkpoint.ErrInvalid, name)
		require.NotErrorIs(t, err, checkpoint.ErrCorrupt, name)
		for _, want := range []string{"step 2", fmt.Sprint(limit), "read limit"} {
			require.Contains(t, err.Error(), want, name)
		}
		require.NoError(t, s.Flush(ctx), name)
		require.Equal(t, before, snapshotDir(t, dir), "%s: the refused save changed the directory", name)
		got, info, err := s.Latest(ctx)
		require.NoError(t, err, name)
		require.Equal(t, int64(1), info.Step, name)
		require.Len(t, got, limit-200, name)
		// A side file that ReadJSON would refuse is refused too.
		err = s.WriteJSON(ctx, "side.json", strings.Repeat("s", limit))
		require.ErrorIs(t, err, checkpoint.ErrInvalid, name)
		require.NoFileExists(t, filepath.Join(dir, "side.json"), name)
	}
}

// snapshotDir returns every file name in dir with its bytes.
func snapshotDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	out := map[string]string{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		out[e.Name()] = string(b)
	}
	return out
}

// gzipBomb returns a gzip file of members each inflating to size bytes of
// spaces: some 64 KiB per 64 MiB.
func gzipBomb(t testing.TB, members, size int) []byte {
	t.Helper()
	var member bytes.Buffer
	zw, err := gzip.NewWriterLevel(&member, gzip.BestSpeed)
	require.NoError(t, err)
	chunk := bytes.Repeat([]byte(" "), 1<<20)
	for n := 0; n < size; n += len(chunk) {
		_, err := zw.Write(chunk[:min(len(chunk), size-n)])
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	return bytes.Repeat(member.Bytes(), members)
}

// wideZstd returns a valid checkpoint of step inside a zstd frame that
// declares a window of 1<<windowLog bytes, stored in a raw block: a file of
// a few hundred bytes that asks a decoder for that much memory.
func wideZstd(step int64, windowLog int) []byte {
	env := envelopeBytes(format.Header{Format: 1, Step: step, Kind: checkpoint.KindStep, Time: time.Now()}, []byte(`"x"`))
	b := append([]byte{}, format.ZstdMagic...)
	b = append(b, 0x00, byte(windowLog-10)<<3) // no content size, no checksum; the window
	n := len(env)<<3 | 1                       // a last, raw block
	b = append(b, byte(n), byte(n>>8), byte(n>>16))
	return append(b, env...)
}

// TestReadOfABombCostsAtMostTheLimit measures every byte a load of a gzip
// bomb allocates: at most the read limit and 6 MiB (the decompressors, and
// the header read that finds the step's checkpoints, which reads up to 1 MiB
// of the bomb), where a buffer that doubles would allocate about four times
// the limit. It is not parallel: it reads the process's allocation counter.
func TestReadOfABombCostsAtMostTheLimit(t *testing.T) {
	const limit = 8 << 20
	require.Less(t, bombLoadAlloc(t, gzipBomb(t, 4, limit), limit), uint64(limit+6<<20), "bytes allocated by one load of a bomb")
}

// bombLoadAlloc puts bomb at step 1's gzip name in a new store of a string
// state read with limit, loads it, requires the load to fail as too large,
// and returns the bytes the load allocated. The caller is not parallel: it
// reads the process's allocation counter.
func bombLoadAlloc(t *testing.T, bomb []byte, limit int64) uint64 {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "step_00000001.json.gz"), bomb, 0o644))
	s := openStore[string](t, dir, checkpoint.WithMaxReadSize(limit), checkpoint.NoSync())
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, _, err := s.Load(context.Background(), 1)
	runtime.ReadMemStats(&after)
	require.ErrorIs(t, err, format.ErrTooLarge)
	return after.TotalAlloc - before.TotalAlloc
}

// TestBombsReadOneAfterAnotherCostOneLimitNotTwo reads two bombs in one
// Latest (as verify and Latest walk a directory): the garbage of the first
// read must be collected before the second grows, or the collector, paced
// by the heap it saw live during the first, lets the second take as much
// again: a peak of twice the limit, where a read may cost the limit and a
// few MiB. What is left on the heap after the call shows it. It is not
// parallel: it reads the process's heap.
func TestBombsReadOneAfterAnotherCostOneLimitNotTwo(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const limit = 24 << 20 // over format.CollectAfter
	bomb := gzipBomb(t, 2, limit/2+1<<20)
	for _, name := range []string{"step_00000001.json.gz", "step_00000002.json.gz"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), bomb, 0o644))
	}
	s := openStore[string](t, dir, checkpoint.WithMaxReadSize(limit), checkpoint.ReadOnly())
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, _, err := s.Latest(ctx)
	runtime.ReadMemStats(&after)
	require.ErrorIs(t, err, format.ErrTooLarge)
	held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	require.Less(t, held, int64(limit/4), "bytes of the bombs' reads still on the heap after Latest")
}

// stringBomb returns a gzip file of a few KiB that a streamed load takes
// for a checkpoint of format 2 whose state is one string of n bytes, and
// that has no end.
func stringBomb(t testing.TB, n int) []byte {
	t.Helper()
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, gzip.BestSpeed)
	require.NoError(t, err)
	_, err = zw.Write([]byte(`{"format":2,"step":1,"kind":"step","time":"2026-11-21T10:00:00Z","state":"`))
	require.NoError(t, err)
	chunk := bytes.Repeat([]byte("A"), 1<<20)
	for w := 0; w < n; w += len(chunk) {
		_, err := zw.Write(chunk[:min(len(chunk), n-w)])
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	return b.Bytes()
}

// TestStreamedLoadOfAStringBombCostsAtMostTheLimit measures every byte a
// load of a string bomb allocates, for a state type that streams: one JSON
// string longer than the limit, which a streaming decoder would hold whole
// in a buffer that doubles (five times the limit). The streamed read gives
// up once its buffer passes a small bound, and the buffered read costs the
// limit. It is not parallel: it reads the process's allocation counter.
func TestStreamedLoadOfAStringBombCostsAtMostTheLimit(t *testing.T) {
	const limit = 8 << 20
	bomb := stringBomb(t, limit+2<<20)
	require.Less(t, len(bomb), 64<<10)
	require.Less(t, bombLoadAlloc(t, bomb, limit), uint64(limit+6<<20), "bytes allocated by one load of a string bomb")
}

// A state of one long string loads whole, whichever way it is read.
func TestStateOfOneLongStringLoads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, opts := range [][]checkpoint.Option{nil, {checkpoint.Zstd()}} {
		s := openStore[[]string](t, t.TempDir(), opts...)
		want := []string{"a", strings.Repeat("x", format.MaxStreamBuffer+format.MaxStreamBuffer/2), "b"}
		_, err := s.Save(ctx, 1, want)
		require.NoError(t, err)
		for range 2 {
			got, _, err := s.Load(ctx, 1)
			require.NoError(t, err)
			require.Equal(t, want, got)
		}
	}
}

// loadAllocBeyondState returns the bytes one Load of step 1 of s
// allocates beyond the decoded state, whose size is decoded. The caller
// is not parallel: it reads the process's allocation counter.
func loadAllocBeyondState[T any](t *testing.T, s *checkpoint.Store[T], decoded func(T) int) int64 {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	got, _, err := s.Load(context.Background(), 1)
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	return int64(after.TotalAlloc-before.TotalAlloc) - int64(decoded(got))
}

// gzipMembers writes data as a gzip file of one member per part: the size
// its trailer declares is the last member's only.
func gzipMembers(t *testing.T, parts ...[]byte) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, part := range parts {
		zw, err := gzip.NewWriterLevel(&b, gzip.BestSpeed)
		require.NoError(t, err)
		_, err = zw.Write(part)
		require.NoError(t, err)
		require.NoError(t, zw.Close())
	}
	return b.Bytes()
}

// TestLoadCostsAboutTheLimitForOwnFilesAndAtMostTwiceForAnyFile measures
// the bytes one Load allocates beyond the decoded state (the README's
// promise, "Reading is bounded"). A file this package wrote (plain, gzip,
// zstd) declares its size: about the limit and a few MiB (slack). A file within
// the limit that declares no size or a wrong one (a gzip of two members,
// as `cat a.gz b.gz` makes) is read in chunks that are then joined, and a
// state of escaped characters (\u0041) or of one long number makes
// encoding/json copy it once more while it decodes: at most about twice
// the limit and a few MiB, however the file is made. Not parallel: it
// reads the process's allocation counter.
func TestLoadCostsAboutTheLimitForOwnFilesAndAtMostTwiceForAnyFile(t *testing.T) {
	const limit = 4 << 20
	slack := int64(3 << 20)
	if checkpoint.RaceEnabled {
		slack += limit // sync.Pool drops values at random: a pooled buffer may be allocated again
	}
	type timed struct {
		When time.Time `json:"when"` // not a plain type: read whole, never streamed
		S    string    `json:"s"`
		N    float64   `json:"n,omitempty"`
	}
	want := timed{When: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), S: strings.Repeat("x", limit-1<<20)}
	size := func(v timed) int { return len(v.S) }
	own := map[string][]checkpoint.Option{"plain": nil, "gzip": {checkpoint.Gzip()}, "zstd": {checkpoint.Zstd()}}
	if checkpoint.RaceEnabled {
		delete(own, "zstd") // the race detector makes compression much slower
	}
	for name, opts := range own {
		s := openStore[timed](t, t.TempDir(), append(opts, checkpoint.WithMaxReadSize(limit), checkpoint.NoSync())...)
		_, err := s.Save(context.Background(), 1, want)
		require.NoError(t, err)
		a := loadAllocBeyondState(t, s, size)
		t.Logf("own %s file: %.1f MiB beyond the state (limit %d MiB)", name, float64(a)/(1<<20), limit>>20)
		require.Less(t, a, limit+slack, "%s: bytes one load of a file this package wrote allocates beyond the state", name)
		require.NoError(t, s.Close())
	}

	hostile := map[string]func(t *testing.T, dir string) int{ // writes step 1, returns the state's decoded size
		"gzip of two members": func(t *testing.T, dir string) int {
			s := openStore[timed](t, dir, checkpoint.WithMaxReadSize(limit), checkpoint.NoSync())
			info, err := s.Save(context.Background(), 1, want)
			require.NoError(t, err)
			require.NoError(t, s.Close())
			data, err := os.ReadFile(info.Path)
			require.NoError(t, err)
			require.NoError(t, os.Remove(info.Path))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "step_00000001.json.gz"), gzipMembers(t, data[:len(data)-1], data[len(data)-1:]), 0o644))
			return len(want.S)
		},
		"escaped string": func(t *testing.T, dir string) int {
			n := (limit - 1<<10) / 6
			body := `{"format":2,"step":1,"kind":"step","time":"2026-11-21T10:00:00Z","state":{"when":"2026-01-01T00:00:00Z","s":"` + strings.Repeat(`\u0041`, n) + `"}`
			require.NoError(t, os.WriteFile(filepath.Join(dir, "step_00000001.json.gz"), gzipMembers(t, withTrailerV2(body)), 0o644))
			return n
		},
		"long number": func(t *testing.T, dir string) int {
			body := `{"format":2,"step":1,"kind":"step","time":"2026-11-21T10:00:00Z","state":{"when":"2026-01-01T00:00:00Z","s":"","n":0.1` + strings.Repeat("0", limit-2<<10) + `}`
			require.NoError(t, os.WriteFile(filepath.Join(dir, "step_00000001.json.gz"), gzipMembers(t, withTrailerV2(body)), 0o644))
			return 0
		},
	}
	for name, write := range hostile {
		dir := t.TempDir()
		decoded := write(t, dir)
		s := openStore[timed](t, dir, checkpoint.WithMaxReadSize(limit), checkpoint.NoSync())
		a := loadAllocBeyondState(t, s, func(timed) int { return decoded })
		t.Logf("%s: %.1f MiB beyond the state (limit %d MiB)", name, float64(a)/(1<<20), limit>>20)
		require.Less(t, a, 2*limit+slack, "%s: bytes one load allocates beyond the state", name)
		require.NoError(t, s.Close())
	}
}

// TestStoreKeepsNoLargeBufferOrDecoderAfterACall reads what an open store
// holds after large saves and loads, a bomb, a zstd file that declares a
// 512 MiB window and a save that its spare coders handle: nothing over
// format.MaxPooled may stay in its pools. It is not parallel: it reads the
// process's heap.
func TestStoreKeepsNoLargeBufferOrDecoderAfterACall(t *testing.T) {
	ctx := context.Background()
	const size = format.MaxPooled + 1<<20
	comps := []checkpoint.Option{checkpoint.Zstd(), checkpoint.Gzip()}
	if checkpoint.RaceEnabled {
		comps = comps[:1] // the race detector makes compression much slower
	}
	for _, comp := range comps {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "step_00000002.json.zst"), wideZstd(2, 29), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "step_00000003.json.gz"), gzipBomb(t, 1, 2*size+1), 0o644))
		heap := func() uint64 {
			var m runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m)
			return m.HeapAlloc
		}
		base := heap()
		s := openStore[string](t, dir, comp, checkpoint.NoSync(), checkpoint.WithMaxReadSize(2*size))
		state := strings.Repeat(randomText(2, 1<<10), size>>10) // quick to compress
		_, err := s.Save(ctx, 1, state)
		require.NoError(t, err)
		state = ""
		got, _, err := s.Load(ctx, 1)
		require.NoError(t, err)
		require.Len(t, got, size)
		got = ""
		_, _, err = s.Load(ctx, 2)
		require.ErrorIs(t, err, checkpoint.ErrCorrupt)
		_, _, err = s.Load(ctx, 3)
		require.ErrorIs(t, err, format.ErrTooLarge)
		// A file just under the window of the spare coders: they are
		// kept, and must stay small.
		_, err = s.Save(ctx, 4, randomText(4, format.ZstdWindow-1<<10))
		require.NoError(t, err)
		_, _, err = s.Latest(ctx)
		require.NoError(t, err)
		held := heap() - min(base, heap())
		t.Logf("held %d", held)
		// Each spare is at most format.MaxPooled, and all of them
		// together stay under the bound.
		require.Less(t, held, uint64(12<<20), "bytes an open store holds after its calls")
		for _, c := range s.IdleBufferCaps() {
			require.LessOrEqual(t, c, format.MaxPooled)
		}
		runtime.KeepAlive(s)
		require.Empty(t, state+got)
	}
}

// TestOurZstdWindowIsWithinTheSpareDecoder measures the windows our encoder
// writes: at most format.ZstdWindow, so that every checkpoint this package
// writes is read by a decoder the codec keeps (and well under format.MaxZstdWindow).
func TestOurZstdWindowIsWithinTheSpareDecoder(t *testing.T) {
	t.Parallel()
	c := format.NewCodec(format.CompressZstd, checkpoint.DefaultMaxReadSize)
	for _, size := range []int{10, 1 << 20, 9 << 20} {
		var buf bytes.Buffer
		state, err := json.Marshal(strings.Repeat(randomText(int64(size), 1<<10), size>>10+1))
		require.NoError(t, err)
		require.NoError(t, c.WriteEnvelope(&buf, format.Header{Format: 1, Step: 1, Kind: checkpoint.KindStep, Time: time.Now()}, state))
		var h zstd.Header
		require.NoError(t, h.Decode(buf.Bytes()))
		window := h.WindowSize
		if h.SingleSegment {
			window = h.FrameContentSize
		}
		require.LessOrEqual(t, window, uint64(format.ZstdWindow), "state of %d bytes", size)
		_, err = readEnvelope(bytes.NewReader(buf.Bytes()), checkpoint.DefaultMaxReadSize)
		require.NoError(t, err)
	}
}

// Meta past its bound is ErrInvalid saying so, and nothing is written;
// meta just under it saves.
func TestHugeMetaIsInvalid(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.NoSync())
	_, err := s.Save(ctx, 1, 1, checkpoint.WithMeta("notes", strings.Repeat("x", 2<<20)))
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	require.ErrorContains(t, err, "meta")
	require.Equal(t, []string{dirstore.LockName}, dirNames(t, dir), "nothing is written")
	// Just under the bound, with characters JSON escapes, it saves.
	_, err = s.Save(ctx, 1, 1, checkpoint.WithMeta("notes", strings.Repeat("<", checkpoint.MaxMetaSize/6-16)))
	require.NoError(t, err)
}

// TestEveryHeaderTheLibraryWritesListsAfterARestart writes the largest
// headers a caller can make: error records of 2 MiB texts whose every byte
// JSON escapes to six, and meta at its bound.
func TestEveryHeaderTheLibraryWritesListsAfterARestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	w, err := checkpoint.Open[int](dir, checkpoint.NoSync())
	require.NoError(t, err)
	huge := strings.Repeat("\x01", 2<<20)
	meta := strings.Repeat("\x01", checkpoint.MaxMetaSize/6-16)
	_, err = w.Save(ctx, 1, 1, checkpoint.WithMeta("notes", meta))
	require.NoError(t, err)
	_, err = w.SaveError(ctx, 2, 2, errors.New(huge))
	require.NoError(t, err)
	func() {
		defer func() { require.NotNil(t, recover()) }()
		defer w.SaveOnPanic(ctx, func() (int64, int) { return 3, 3 })
		panic(huge)
	}()
	require.NoError(t, w.Close())

	r := openStore[int](t, dir, checkpoint.NoSync())
	list, err := r.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 3)
	for _, info := range list {
		require.Equal(t, format.Version, info.Format, "%s lists with its header", info.Path)
	}
	for _, info := range list[1:] {
		require.Less(t, len(info.Error.Message), checkpoint.MaxErrorMessage+100)
		require.True(t, strings.HasSuffix(info.Error.Message, fmt.Sprintf("... [truncated: %d bytes in all]", len(huge))), "the cut is marked")
	}
	require.True(t, list[2].Error.Panic)
	require.LessOrEqual(t, len(list[2].Error.Stack), checkpoint.MaxErrorStack+100)
	require.Equal(t, meta, list[0].Meta["notes"])
}

// An error text cut to its bound ends on a whole UTF-8 sequence, marked with
// the text's length; a short text is kept whole.
func TestTruncateTextNeverSplitsAUTF8Sequence(t *testing.T) {
	t.Parallel()
	s := strings.Repeat("é", 10) // two bytes each
	got := checkpoint.TruncateText(s, 5)
	require.Equal(t, "éé... [truncated: 20 bytes in all]", got)
	require.Equal(t, "short", checkpoint.TruncateText("short", 5))
}

// A checkpoint whose header is too large for List to read (written
// elsewhere: the library bounds what it writes) lists without its header,
// and still loads by step and by its Info.
func TestCheckpointWithAHeaderTooLargeToListStillLoads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	// An error message longer than List reads of a header: the library
	// truncates what it writes (see ErrorRecord.bounded), so this file
	// comes from elsewhere.
	rec := &checkpoint.ErrorRecord{Message: strings.Repeat("x", 2<<20), Step: 3, Time: time.Now()}
	file := envelopeBytes(format.Header{Format: 1, Step: 3, Kind: checkpoint.KindError, Time: time.Now(), Error: rec}, []byte("3"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "step_00000003.error.json"), file, 0o644))

	r := openStore[int](t, dir, checkpoint.ReadOnly())
	list, err := r.List(ctx)
	require.NoError(t, err)
	require.Zero(t, list[0].Format, "the header was too large to list")
	v, _, err := r.Load(ctx, 3)
	require.NoError(t, err)
	require.Equal(t, 3, v)
	v, info, err := r.LoadExact(ctx, list[0])
	require.NoError(t, err)
	require.Equal(t, 3, v)
	require.Equal(t, 1, info.Format)
}

func TestIntactFileOverReadLimitIsNeverQuarantined(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[string](t, dir)
	info, err := s.Save(ctx, 1, strings.Repeat("x", 4096))
	require.NoError(t, err)
	before, err := os.ReadFile(info.Path)
	require.NoError(t, err)
	require.NoError(t, s.Close())

	small := openStore[string](t, dir, checkpoint.WithMaxReadSize(1024))
	_, _, err = small.Load(ctx, 1)
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.ErrorContains(t, err, "read limit")
	_, err = small.Save(ctx, 1, "replacement")
	require.ErrorIs(t, err, checkpoint.ErrExists)
	after, err := os.ReadFile(info.Path)
	require.NoError(t, err)
	require.Equal(t, before, after)
	require.NoFileExists(t, info.Path+".corrupt")
}

func TestZstdBombIsCorrupt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := format.Header{Format: 1, Step: 1, Kind: checkpoint.KindStep, Time: time.Now()}
	// 8 MiB of state that compresses to a few hundred bytes.
	state, err := json.Marshal(strings.Repeat("a", 8<<20))
	require.NoError(t, err)
	bomb := encodeBytes(h, state, format.CompressZstd)
	require.Less(t, len(bomb), 4<<10)

	// A frame that declares a window far beyond what our encoder uses
	// (maxZstdWindow) is refused before it is given memory, under any
	// read limit, and is no proof of damage.
	var wide bytes.Buffer
	enc, err := zstd.NewWriter(&wide, zstd.WithWindowSize(64<<20), zstd.WithEncoderConcurrency(1))
	require.NoError(t, err)
	_, err = enc.Write(envelopeBytes(h, state))
	require.NoError(t, err)
	require.NoError(t, enc.Close())

	for name, file := range map[string][]byte{"expands past the limit": bomb, "declares a huge window": wide.Bytes()} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "step_00000001.json.zst")
			require.NoError(t, os.WriteFile(path, file, 0o644))
			s := openStore[string](t, dir, checkpoint.WithMaxReadSize(1<<20), checkpoint.NoSync())
			_, _, err := s.Load(ctx, 1)
			require.ErrorIs(t, err, checkpoint.ErrCorrupt)
			_, _, err = s.Latest(ctx)
			require.ErrorIs(t, err, checkpoint.ErrCorrupt)
			_, err = s.Save(ctx, 1, "replacement")
			require.ErrorIs(t, err, checkpoint.ErrExists, "a file that may be good is never moved aside")
			require.NoFileExists(t, path+checkpoint.QuarantineSuffix)
			big := openStore[string](t, dir, checkpoint.ReadOnly())
			got, _, err := big.Load(ctx, 1)
			if name == "declares a huge window" {
				require.ErrorIs(t, err, format.ErrUnsupported)
				return
			}
			// The same file loads under a limit that fits it.
			require.NoError(t, err)
			require.Len(t, got, 8<<20)
		})
	}
}

// A session's Meta past what a reader of session.json takes (1 MiB) is
// refused by SetMeta and Create with ErrInvalid, as a store's meta past
// its bound is: the session stays as it was, and nothing is created.
func TestHugeSessionMetaIsInvalidAndDamagesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := openSessions(t, t.TempDir())
	_, err := r.Create(ctx, "user:1", map[string]string{"turn": "1"})
	require.NoError(t, err)
	playSessionSteps(t, r, "user:1", 1)
	huge := map[string]string{"notes": strings.Repeat("x", 1<<20)}

	err = r.SetMeta(ctx, "user:1", huge)
	s, gerr := r.Get(ctx, "user:1")
	require.NoError(t, gerr, "SetMeta (which returned %v) damaged the session", err)
	require.Equal(t, map[string]string{"turn": "1"}, s.Meta, "the session's meta is unchanged")
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	st, err := checkpoint.OpenSessionStore[int](r, "user:1")
	require.NoError(t, err)
	require.NoError(t, st.Close())

	_, err = r.Create(ctx, "big", huge)
	require.ErrorIs(t, err, checkpoint.ErrInvalid, "Create with meta no reader takes")
	_, err = r.Get(ctx, "big")
	require.ErrorIs(t, err, checkpoint.ErrNotFound, "nothing created")
	_, err = r.Create(ctx, "big", nil)
	require.NoError(t, err, "the ID is free")
}

// TestPayloadOfExactlyTheReadLimitReadsBack proves that a payload of
// exactly the store's read limit saves and reads back through OpenPayload
// and LatestPayload in every compression, that Load and Latest of it are
// ErrPayloadMismatch (not ErrCorrupt), and that one byte more is refused
// at save with ErrInvalid.
func TestPayloadOfExactlyTheReadLimitReadsBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const limit = 100 << 10
	eachCompression(t, func(t *testing.T, comp []checkpoint.Option) {
		s := openStore[[]byte](t, t.TempDir(), append(comp, checkpoint.WithMaxReadSize(limit))...)
		payload := payloadBytes(3, limit)
		_, err := s.SaveFrom(ctx, 1, writeAll(payload))
		require.NoError(t, err)
		requirePayload(t, s, 1, payload)
		r, _, err := s.LatestPayload(ctx)
		require.NoError(t, err)
		b, err := readPayload(t, r)
		require.NoError(t, err)
		require.True(t, bytes.Equal(b, payload))
		_, _, err = s.Load(ctx, 1)
		require.ErrorIs(t, err, checkpoint.ErrPayloadMismatch)
		_, _, err = s.Latest(ctx)
		require.ErrorIs(t, err, checkpoint.ErrPayloadMismatch)
		_, err = s.SaveFrom(ctx, 2, writeAll(append(payload, 1)))
		require.ErrorIs(t, err, checkpoint.ErrInvalid)
	})
}

// TestPayloadOverAReadersLimitIsNeverMovedAside proves that a store of a
// smaller read limit than the writer's reads an intact larger payload as
// ErrCorrupt but never moves it aside nor replaces it: LatestPayload falls
// back past it, a save of its step is ErrExists, and Prune leaves it as
// it was.
func TestPayloadOverAReadersLimitIsNeverMovedAside(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	eachCompression(t, func(t *testing.T, comp []checkpoint.Option) {
		dir := t.TempDir()
		w := openStore[[]byte](t, dir, comp...)
		_, err := w.SaveFrom(ctx, 1, writeAll([]byte("small")))
		require.NoError(t, err)
		info, err := w.SaveFrom(ctx, 2, writeAll(payloadBytes(1, 50<<10)))
		require.NoError(t, err)
		before := mustRead(t, info.Location)
		require.NoError(t, w.Close())

		s := openStore[[]byte](t, dir, append(comp, checkpoint.WithMaxReadSize(10<<10))...)
		r, _, err := s.OpenPayload(ctx, 2)
		if err == nil {
			_, err = readPayload(t, r)
		}
		require.ErrorIs(t, err, checkpoint.ErrCorrupt)
		r, got, err := s.LatestPayload(ctx)
		if err == nil {
			r.Close()
			require.Equal(t, int64(1), got.Step)
		}
		_, _, err = s.Load(ctx, 2)
		require.Error(t, err)
		_, err = s.SaveFrom(ctx, 2, writeAll([]byte("other")))
		require.ErrorIs(t, err, checkpoint.ErrExists)
		_, err = s.Save(ctx, 2, []byte("x"))
		require.ErrorIs(t, err, checkpoint.ErrExists)
		_, err = s.Prune(ctx)
		require.NoError(t, err)
		requireUntouched(t, info.Location, before)
	})
}
