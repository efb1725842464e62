package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint/internal/testkit"
)

// The sample state and the directory listing are package testkit's.
type gameState = testkit.GameState

var sampleState = testkit.SampleState

// openStore opens a store with NoSync: most tests are about what a store
// does, not about what reaches the disk, and fsyncs would make the suite
// several times slower. The tests of durability (fault points, disk full,
// kills) use openDurableStore or Open.
func openStore[T any](t *testing.T, dir string, opts ...Option) *Store[T] {
	t.Helper()
	return openDurableStore[T](t, dir, append([]Option{NoSync()}, opts...)...)
}

// openDurableStore opens a store that fsyncs, as a program's would.
func openDurableStore[T any](t *testing.T, dir string, opts ...Option) *Store[T] {
	t.Helper()
	s, err := Open[T](dir, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func dirNames(t *testing.T, dir string) []string { return testkit.DirNames(t, dir) }

func TestRoundTripNestedState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		opts []Option
		comp compression
	}{
		{"plain", nil, compressNone},
		{"gzip", []Option{Gzip()}, compressGzip},
		{"zstd", []Option{Zstd()}, compressZstd},
		{"nosync", []Option{NoSync()}, compressNone},
		{"zstd nosync", []Option{Zstd(), NoSync()}, compressZstd},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := openStore[gameState](t, t.TempDir(), tt.opts...)
			want := sampleState(7)
			human := "Ana"
			want.Human = &human
			saved, err := s.Save(ctx, 7, want, WithMeta("player", "Ana"), WithMeta("scene", "tavern"))
			require.NoError(t, err)
			require.Equal(t, int64(7), saved.Step)
			require.Equal(t, KindStep, saved.Kind)
			require.Equal(t, tt.comp.String(), saved.Compression)
			require.Equal(t, tt.comp.String(), saved.Compression)
			require.Equal(t, "step_00000007"+tt.comp.Ext(), saved.Name())
			require.Equal(t, 2, saved.Format)
			require.Equal(t, map[string]string{"player": "Ana", "scene": "tavern"}, saved.Meta)
			fi, err := os.Stat(saved.Path)
			require.NoError(t, err)
			require.Equal(t, fi.Size(), saved.Size)
			raw, err := os.ReadFile(saved.Path)
			require.NoError(t, err)
			require.Equal(t, tt.comp, sniff(raw))

			got, info, err := s.Load(ctx, 7)
			require.NoError(t, err)
			require.Equal(t, want, got)
			require.Equal(t, saved, info)
		})
	}
}

func TestFileNamesFollowLayout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		opts []Option
		step int64
		want string
	}{
		{nil, 7, "step_00000007.json"},
		{[]Option{WithLayout("turn", 3)}, 7, "turn_007.json"},
		{[]Option{WithLayout("turn", 3)}, 1234, "turn_1234.json"},
		{[]Option{WithLayout("beat", 1), Gzip()}, 0, "beat_0.json.gz"},
		{[]Option{WithLayout("run-1.a", 5)}, 42, "run-1.a_00042.json"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			dir := t.TempDir()
			s := openStore[int](t, dir, tt.opts...)
			info, err := s.Save(ctx, tt.step, 1)
			require.NoError(t, err)
			require.Equal(t, filepath.Join(dir, tt.want), info.Path)
			require.Equal(t, tt.want, info.Name())
			require.FileExists(t, info.Path)
		})
	}
}

func TestInvalidLayoutIsRefused(t *testing.T) {
	t.Parallel()
	for _, l := range []struct {
		prefix string
		digits int
	}{{"", 3}, {".hidden", 3}, {"a/b", 3}, {"..", 3}, {"turn", 0}, {"turn", 20}, {strings.Repeat("x", 65), 3}} {
		_, err := Open[int](t.TempDir(), WithLayout(l.prefix, l.digits))
		require.ErrorIs(t, err, ErrInvalid, "layout %q %d", l.prefix, l.digits)
	}
	_, err := Open[int](t.TempDir(), Every(-1))
	require.ErrorIs(t, err, ErrInvalid)
	_, err = Open[int](t.TempDir(), KeepLast(-1))
	require.ErrorIs(t, err, ErrInvalid)
}

func TestOldCheckpointsUnchangedByLaterSaves(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[gameState](t, dir, WithLayout("turn", 3))
	_, err := s.Save(ctx, 1, sampleState(1))
	require.NoError(t, err)
	first, err := os.ReadFile(filepath.Join(dir, "turn_001.json"))
	require.NoError(t, err)
	fi1, err := os.Stat(filepath.Join(dir, "turn_001.json"))
	require.NoError(t, err)
	for turn := int64(2); turn <= 10; turn++ {
		_, err := s.Save(ctx, turn, sampleState(turn))
		require.NoError(t, err)
	}
	after, err := os.ReadFile(filepath.Join(dir, "turn_001.json"))
	require.NoError(t, err)
	require.Equal(t, first, after)
	fi2, err := os.Stat(filepath.Join(dir, "turn_001.json"))
	require.NoError(t, err)
	require.True(t, os.SameFile(fi1, fi2), "the file was replaced")
	require.Equal(t, fi1.ModTime(), fi2.ModTime())
}

func TestSaveExistingStepFailsAndKeepsFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, gzSecond := range []bool{false, true} {
		t.Run(fmt.Sprintf("second gzip=%v", gzSecond), func(t *testing.T) {
			dir := t.TempDir()
			s := openStore[gameState](t, dir)
			info, err := s.Save(ctx, 3, sampleState(3))
			require.NoError(t, err)
			before, err := os.ReadFile(info.Path)
			require.NoError(t, err)
			if gzSecond {
				require.NoError(t, s.Close())
				s = openStore[gameState](t, dir, Gzip())
			}
			_, err = s.Save(ctx, 3, sampleState(99))
			require.ErrorIs(t, err, ErrExists)
			require.Contains(t, err.Error(), "save step 3")
			after, err := os.ReadFile(info.Path)
			require.NoError(t, err)
			require.Equal(t, before, after)
			require.Equal(t, []string{".checkpoint.lock", "step_00000003.json"}, dirNames(t, dir))
			got, _, err := s.Load(ctx, 3)
			require.NoError(t, err)
			require.Equal(t, int64(3), got.Turn)
		})
	}
}

func TestLoadMissingStepIsNotFound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, WithLayout("turn", 3))
	_, _, err := s.Load(ctx, 4)
	require.ErrorIs(t, err, ErrNotFound)
	require.Contains(t, err.Error(), "load step 4")
	require.Contains(t, err.Error(), dir)
	_, err = s.Save(ctx, 5, 5)
	require.NoError(t, err)
	_, _, err = s.Load(ctx, 4)
	require.ErrorIs(t, err, ErrNotFound)
	_, _, err = s.Load(ctx, -1)
	require.ErrorIs(t, err, ErrInvalid)
}

// corruptions maps a description to a function that damages a plain
// checkpoint file's bytes.
var corruptions = map[string]func([]byte) []byte{
	"empty file":         func([]byte) []byte { return nil },
	"truncated half":     func(b []byte) []byte { return b[:len(b)/2] },
	"truncated one byte": func(b []byte) []byte { return b[:len(b)-1] },
	"bit flip in state": func(b []byte) []byte {
		i := bytes.Index(b, []byte(`"turn"`))
		b[i+2] ^= 0x01
		return b
	},
	"bit flip in header time": func(b []byte) []byte {
		i := bytes.Index(b, []byte(`"time":"2`))
		b[i+9] ^= 0x01
		return b
	},
	"wrong checksum": func(b []byte) []byte {
		i := bytes.Index(b, []byte(`"checksum":"crc32c:`)) + len(`"checksum":"crc32c:`)
		b[i] = map[bool]byte{true: '1', false: '0'}[b[i] == '0']
		return b
	},
	"not json": func([]byte) []byte { return []byte("hello, world\n") },
	"json without checksum": func([]byte) []byte {
		return []byte(`{"format":1,"step":1,"kind":"step","time":"2026-01-01T00:00:00Z","state":{}}` + "\n")
	},
	"wrong state type": func([]byte) []byte {
		return envelopeBytes(header{Format: 1, Step: 1, Kind: KindStep, Time: time.Now()}, []byte(`[1,2,3]`))
	},
	"null state": func([]byte) []byte {
		return envelopeBytes(header{Format: 1, Step: 1, Kind: KindStep, Time: time.Now()}, []byte(`null`))
	},
	"future format version": func([]byte) []byte {
		return envelopeBytes(header{Format: 3, Step: 1, Kind: KindStep, Time: time.Now()}, []byte(`{}`))
	},
	"header step differs from name": func([]byte) []byte {
		return envelopeBytes(header{Format: 1, Step: 2, Kind: KindStep, Time: time.Now()}, []byte(`{}`))
	},
	"gzip with bad crc": func(b []byte) []byte {
		z := encodeBytes(header{Format: 1, Step: 1, Kind: KindStep, Time: time.Now()}, []byte(`{"turn":1}`), compressGzip)
		z[len(z)-8] ^= 0xff // CRC-32 of the gzip trailer
		return z
	},
	"gzip truncated": func(b []byte) []byte {
		z := encodeBytes(header{Format: 1, Step: 1, Kind: KindStep, Time: time.Now()}, []byte(`{"turn":1}`), compressGzip)
		return z[:len(z)-10]
	},
	"zstd with bad checksum": func(b []byte) []byte {
		z := encodeBytes(header{Format: 1, Step: 1, Kind: KindStep, Time: time.Now()}, []byte(`{"turn":1}`), compressZstd)
		z[len(z)-1] ^= 0xff // the frame's content checksum
		return z
	},
	"zstd truncated": func(b []byte) []byte {
		z := encodeBytes(header{Format: 1, Step: 1, Kind: KindStep, Time: time.Now()}, []byte(`{"turn":1}`), compressZstd)
		return z[:len(z)-10]
	},
	"zstd magic only": func(b []byte) []byte { return zstdMagic },
}

func envelopeBytes(h header, state []byte) []byte { return encodeBytes(h, state, compressNone) }

func encodeBytes(h header, state []byte, comp compression) []byte {
	var buf bytes.Buffer
	if err := newCodec(comp, DefaultMaxReadSize).WriteEnvelope(&buf, h, state); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// encodeState returns a state's bytes as a store writes them.
func encodeState(v any) ([]byte, error) {
	buf, err := newCodec(compressNone, DefaultMaxReadSize).EncodeState(v)
	if err != nil {
		return nil, err
	}
	return bytes.Clone(buf.Bytes()), nil
}

// envelope is a whole checkpoint, its state still encoded.
type envelope struct {
	header
	State json.RawMessage
}

// readEnvelope reads and verifies a whole checkpoint, as a load does.
func readEnvelope(r io.Reader, max int64) (envelope, error) {
	var env envelope
	err := newCodec(compressNone, max).Read(r, -1, func(h header, state []byte) error {
		env = envelope{header: h, State: bytes.Clone(state)}
		return nil
	})
	return env, err
}

// decompress returns a file's decompressed bytes.
func decompress(t *testing.T, data []byte) []byte {
	t.Helper()
	r, _, release, err := newCodec(compressNone, DefaultMaxReadSize).Open(bytes.NewReader(data))
	require.NoError(t, err)
	defer release()
	out, err := io.ReadAll(r)
	require.NoError(t, err)
	return out
}

func TestLoadCorruptFileIsErrCorrupt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, damage := range corruptions {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := openStore[gameState](t, dir, WithLayout("turn", 3))
			info, err := s.Save(ctx, 1, sampleState(1))
			require.NoError(t, err)
			b, err := os.ReadFile(info.Path)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(info.Path, damage(b), 0o644))

			got, _, err := s.Load(ctx, 1)
			require.ErrorIs(t, err, ErrCorrupt)
			require.Zero(t, got)
			require.Contains(t, err.Error(), "load step 1 "+info.Path)
			var e *Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, "load", e.Op)
			require.Equal(t, int64(1), e.Step)

			_, _, err = s.Latest(ctx)
			require.ErrorIs(t, err, ErrCorrupt)
			require.NotErrorIs(t, err, ErrNotFound, "a store whose only checkpoint is damaged is not a fresh start")
		})
	}
}

func TestLatestSkipsCorruptNewest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	var reported []error
	s := openStore[gameState](t, dir, WithLayout("turn", 3), WithHooks(Hooks{OnError: func(err error) { reported = append(reported, err) }}))
	for turn := int64(1); turn <= 3; turn++ {
		_, err := s.Save(ctx, turn, sampleState(turn))
		require.NoError(t, err)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "turn_003.json"), []byte(`{"format":1,"st`), 0o644))
	got, info, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), info.Step)
	require.Equal(t, sampleState(2), got)
	require.Len(t, reported, 1)
	require.ErrorIs(t, reported[0], ErrCorrupt)
	require.Contains(t, reported[0].Error(), "turn_003.json")
}

func TestLatestAllCorruptReportsEveryFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, WithLayout("turn", 3))
	for turn := int64(1); turn <= 2; turn++ {
		info, err := s.Save(ctx, turn, 1)
		require.NoError(t, err)
		require.NoError(t, os.Truncate(info.Path, 10))
	}
	_, _, err := s.Latest(ctx)
	require.ErrorIs(t, err, ErrCorrupt)
	require.NotErrorIs(t, err, ErrNotFound)
	require.Contains(t, err.Error(), "turn_001.json")
	require.Contains(t, err.Error(), "turn_002.json")
}

func TestLatestEmptyStoreIsNotFound(t *testing.T) {
	t.Parallel()
	s := openStore[int](t, t.TempDir())
	_, _, err := s.Latest(context.Background())
	require.ErrorIs(t, err, ErrNotFound)
}

func TestLatestPicksHighestStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[int](t, t.TempDir(), WithLayout("t", 1))
	for _, step := range []int64{5, 100, 20, 9} { // 100 sorts before 20 by name, not by step
		_, err := s.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	v, info, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 100, v)
	require.Equal(t, int64(100), info.Step)
}

func TestListIgnoresTempAndForeignFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, WithLayout("turn", 3))
	for _, step := range []int64{2, 1, 10} {
		_, err := s.Save(ctx, step, int(step), WithMeta("n", fmt.Sprint(step)))
		require.NoError(t, err)
	}
	for _, name := range []string{
		".turn_004.json123456", // a temp file
		"turn_4.json",          // not this layout's padding
		"turn_-05.json",        // not a step
		"turn_005.json.bak",    // not a checkpoint extension
		"step_00000005.json",   // another layout
		"notes.txt",
		"turn_006.weird.json",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644))
	}
	require.NoError(t, os.Mkdir(filepath.Join(dir, "turn_007.json"), 0o755)) // a directory is not a checkpoint

	list, err := s.List(ctx)
	require.NoError(t, err)
	var steps []int64
	for _, info := range list {
		steps = append(steps, info.Step)
		require.Equal(t, map[string]string{"n": fmt.Sprint(info.Step)}, info.Meta)
		require.Equal(t, KindStep, info.Kind)
		require.False(t, info.Time.IsZero())
		require.Positive(t, info.Size)
	}
	require.Equal(t, []int64{1, 2, 10}, steps)
}

func TestListReadsHeadersNotStates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[string](t, dir, WithLayout("turn", 3))
	big := strings.Repeat("x", 3<<20)
	info, err := s.Save(ctx, 1, big, WithMeta("k", "v"))
	require.NoError(t, err)
	require.NoError(t, s.Close())

	// Damage the state only: the header stays readable, so a fresh reader's
	// List still describes the file (it never reads the state), while Load
	// notices the damage.
	f, err := os.OpenFile(info.Path, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("y"), 2<<20)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	r := openStore[string](t, dir, WithLayout("turn", 3), ReadOnly())
	list, err := r.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, map[string]string{"k": "v"}, list[0].Meta)
	require.Equal(t, info.Time, list[0].Time)
	_, _, err = r.Load(ctx, 1)
	require.ErrorIs(t, err, ErrCorrupt)
}

func TestOpenRemovesStaleTempsOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, WithLayout("turn", 3))
	_, err := s.Save(ctx, 1, 1)
	require.NoError(t, err)
	require.NoError(t, s.Close())

	stale := []string{".turn_002.json8812736", ".turn_last.json.gz77", ".result.json.ckpt-tmp-5", ".turn_002.json.ckpt-tmp-3"}
	foreign := []string{".bashrc", ".turn_002.json", "notes.json", ".x.json.tmp", "turn_003.json9", ".result.json5"}
	for _, name := range append(append([]string{}, stale...), foreign...) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("partial"), 0o644))
	}
	r := openStore[int](t, dir, WithLayout("turn", 3), ReadOnly())
	require.Len(t, dirNames(t, dir), 2+len(stale)+len(foreign), "a read-only open removes nothing")
	require.NoError(t, r.Close())

	openStore[int](t, dir, WithLayout("turn", 3))
	names := dirNames(t, dir)
	for _, name := range stale {
		require.NotContains(t, names, name)
	}
	for _, name := range append(foreign, "turn_001.json", ".checkpoint.lock") {
		require.Contains(t, names, name)
	}
}

func TestMixedCompressionStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	plain := openStore[gameState](t, dir, WithLayout("turn", 3))
	for turn := int64(1); turn <= 2; turn++ {
		_, err := plain.Save(ctx, turn, sampleState(turn))
		require.NoError(t, err)
	}
	require.NoError(t, plain.Close())

	gz := openStore[gameState](t, dir, WithLayout("turn", 3), Gzip())
	info, err := gz.Save(ctx, 3, sampleState(3))
	require.NoError(t, err)
	require.Equal(t, "turn_003.json.gz", info.Name())
	raw, err := os.ReadFile(info.Path)
	require.NoError(t, err)
	require.Equal(t, gzipMagic, raw[:2])
	require.NoError(t, gz.Close())

	zs := openStore[gameState](t, dir, WithLayout("turn", 3), Zstd())
	info, err = zs.Save(ctx, 4, sampleState(4))
	require.NoError(t, err)
	require.Equal(t, "turn_004.json.zst", info.Name())
	raw, err = os.ReadFile(info.Path)
	require.NoError(t, err)
	require.Equal(t, zstdMagic, raw[:4])
	// A step saved in another compression exists: never a second file.
	_, err = zs.Save(ctx, 3, sampleState(3))
	require.ErrorIs(t, err, ErrExists)
	_, err = zs.Save(ctx, 1, sampleState(1))
	require.ErrorIs(t, err, ErrExists)

	list, err := zs.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 4)
	var comps []string
	for _, info := range list {
		comps = append(comps, info.Compression)
	}
	require.Equal(t, []string{"", "", "gzip", "zstd"}, comps)
	for turn := int64(1); turn <= 4; turn++ {
		got, _, err := zs.Load(ctx, turn)
		require.NoError(t, err)
		require.Equal(t, sampleState(turn), got)
	}
	require.NoError(t, zs.Close())

	// Compression off again: the compressed files still load.
	again := openStore[gameState](t, dir, WithLayout("turn", 3))
	got, info, err := again.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, "zstd", info.Compression)
	require.Equal(t, sampleState(4), got)
	got, _, err = again.Load(ctx, 3)
	require.NoError(t, err)
	require.Equal(t, sampleState(3), got)
}

func TestUnencodableStateLeavesNoFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[any](t, dir)
	for name, state := range map[string]any{
		"channel": make(chan int),
		"NaN":     math.NaN(),
		"func":    func() {},
		"nil":     nil,
	} {
		_, err := s.Save(ctx, 1, state)
		require.ErrorIs(t, err, ErrInvalid, name)
		require.Contains(t, err.Error(), "save step 1", name)
	}
	require.Equal(t, []string{".checkpoint.lock"}, dirNames(t, dir))
	_, err := s.Save(ctx, -1, 1)
	require.ErrorIs(t, err, ErrInvalid)
	_, err = s.Save(ctx, 1, 1, WithMeta("", "x"))
	require.ErrorIs(t, err, ErrInvalid)
	require.Equal(t, []string{".checkpoint.lock"}, dirNames(t, dir))
}

func TestSecondWriterIsLockedReadOnlyWorks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	w := openStore[int](t, dir)
	_, err := Open[int](dir)
	require.ErrorIs(t, err, ErrLocked)
	// The error says what a reader should do instead, and who holds it.
	require.ErrorContains(t, err, "open it with ReadOnly()")
	if runtime.GOOS == "linux" {
		require.ErrorContains(t, err, "(by this process: close the other Store first)")
	}

	r := openStore[int](t, dir, ReadOnly())
	_, err = w.Save(ctx, 1, 10)
	require.NoError(t, err)
	v, _, err := r.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 10, v)
	_, err = w.Save(ctx, 2, 20)
	require.NoError(t, err)
	v, _, err = r.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 20, v)

	_, err = r.Save(ctx, 3, 30)
	require.ErrorIs(t, err, ErrReadOnly)
	require.ErrorIs(t, r.Delete(ctx, 1), ErrReadOnly)

	// The lock goes with Close.
	require.NoError(t, w.Close())
	w2, err := Open[int](dir)
	require.NoError(t, err)
	require.NoError(t, w2.Close())
}

func TestReadOnlyMissingDirIsNotFound(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "nope")
	_, err := Open[int](dir, ReadOnly())
	require.ErrorIs(t, err, ErrNotFound)
	require.NoDirExists(t, dir)
}

func TestOpenCreatesNestedDir(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "campaigns", "session_001")
	s := openStore[int](t, dir)
	_, err := s.Save(context.Background(), 1, 1)
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(dir, "step_00000001.json"))
}

func TestClosedStoreRefusesEverything(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open[int](t.TempDir())
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "a second Close is a no-op")
	_, err = s.Save(ctx, 1, 1)
	require.ErrorIs(t, err, ErrClosed)
	_, _, err = s.Load(ctx, 1)
	require.ErrorIs(t, err, ErrClosed)
	_, _, err = s.Latest(ctx)
	require.ErrorIs(t, err, ErrClosed)
	_, err = s.List(ctx)
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, s.Delete(ctx, 1), ErrClosed)
}

func TestCancelledContextDoesNoIO(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore[int](t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Save(ctx, 1, 1)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, []string{".checkpoint.lock"}, dirNames(t, dir))
	_, _, err = s.Load(ctx, 1)
	require.ErrorIs(t, err, context.Canceled)
	_, _, err = s.Latest(ctx)
	require.ErrorIs(t, err, context.Canceled)
}

func TestDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, WithLayout("turn", 3))
	for step := int64(1); step <= 3; step++ {
		_, err := s.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	_, err := s.SaveError(ctx, 2, 22, errors.New("boom"))
	require.NoError(t, err)
	require.NoError(t, s.Delete(ctx, 2))
	_, _, err = s.Load(ctx, 2)
	require.ErrorIs(t, err, ErrNotFound)
	require.ErrorIs(t, s.Delete(ctx, 2), ErrNotFound)
	require.Equal(t, []string{".checkpoint.lock", "turn_001.json", "turn_003.json"}, dirNames(t, dir))
	// A deleted step can be saved again.
	_, err = s.Save(ctx, 2, 222)
	require.NoError(t, err)
	v, _, err := s.Load(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, 222, v)
}

func TestStoreNeverLeavesItsDirectory(t *testing.T) {
	t.Parallel()
	requireSymlinks(t)
	ctx := context.Background()
	parent := t.TempDir()
	dir := filepath.Join(parent, "store")
	s := openStore[int](t, dir, WithLayout("turn", 3))
	outside := filepath.Join(parent, "secret.json")
	require.NoError(t, os.WriteFile(outside, envelopeBytes(header{Format: 1, Step: 5, Kind: KindStep, Time: time.Now()}, []byte(`5`)), 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "turn_005.json")))
	require.NoError(t, os.Symlink("../secret.json", filepath.Join(dir, "turn_006.json")))

	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Empty(t, list, "symlinks are not checkpoints")
	_, _, err = s.Load(ctx, 5)
	require.ErrorIs(t, err, ErrCorrupt, "a symlink is not followed")
	require.ErrorContains(t, err, "symbolic link")
	// Symbolic links at checkpoint names are damage, never followed and
	// never a fresh start.
	_, _, err = s.Latest(ctx)
	require.ErrorIs(t, err, ErrCorrupt)
	require.NotErrorIs(t, err, ErrNotFound)
	require.ErrorContains(t, err, "symbolic link")

	// Side-file names cannot climb out either.
	for _, name := range []string{"../secret.json", "/etc/x.json", "a/b.json", ".hidden.json", "x.txt", "turn_001.json", "turn_last.json"} {
		require.ErrorIs(t, s.WriteJSON(ctx, name, 1), ErrInvalid, name)
		var v int
		require.ErrorIs(t, s.ReadJSON(ctx, name, &v), ErrInvalid, name)
	}
	b, err := os.ReadFile(outside)
	require.NoError(t, err)
	require.Contains(t, string(b), `"state":5`)
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string][]Option{
		"gzip":       {Gzip()},
		"zstd":       {Zstd()},
		"zstd async": {Zstd(), Async(4)},
	} {
		t.Run(name, func(t *testing.T) { testConcurrentUse(t, opts...) })
	}
}

func testConcurrentUse(t *testing.T, opts ...Option) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[gameState](t, dir, opts...)
	const writers, perWriter = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers*perWriter*4)
	for w := 0; w < writers; w++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				step := int64(w*perWriter + i)
				if _, err := s.Save(ctx, step, sampleState(step)); err != nil {
					errs <- err
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				if _, _, err := s.Latest(ctx); err != nil && !errors.Is(err, ErrNotFound) {
					errs <- err
				}
				if _, err := s.List(ctx); err != nil {
					errs <- err
				}
				if _, _, err := s.Load(ctx, int64(i)); err != nil && !errors.Is(err, ErrNotFound) {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, s.Flush(ctx))
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, writers*perWriter)
	for i, info := range list {
		require.Equal(t, int64(i), info.Step)
		got, _, err := s.Load(ctx, info.Step)
		require.NoError(t, err)
		require.Equal(t, sampleState(info.Step), got)
	}
}

func TestCloseWaitsForOperationsInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open[int](dir)
	require.NoError(t, err)
	var wg sync.WaitGroup
	results := make(chan error, 50)
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Save(ctx, int64(i), i)
			results <- err
		}()
	}
	require.NoError(t, s.Close())
	wg.Wait()
	close(results)
	saved := 0
	for err := range results {
		if err == nil {
			saved++
		} else {
			require.ErrorIs(t, err, ErrClosed)
		}
	}
	// Every save that succeeded is whole on disk.
	r := openStore[int](t, dir, ReadOnly())
	list, err := r.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, saved)
	for _, info := range list {
		_, _, err := r.Load(ctx, info.Step)
		require.NoError(t, err)
	}
}

func TestEnvelopeIsPlainJSON(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[gameState](t, dir, WithLayout("turn", 3))
	info, err := s.Save(ctx, 7, sampleState(7), WithMeta("who", "ana"))
	require.NoError(t, err)
	b, err := os.ReadFile(info.Path)
	require.NoError(t, err)
	var doc map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b, &doc))
	require.Equal(t, `2`, string(doc["format"]))
	require.Equal(t, `7`, string(doc["step"]))
	require.Equal(t, `"step"`, string(doc["kind"]))
	require.Equal(t, `{"who":"ana"}`, string(doc["meta"]))
	require.Regexp(t, `^"crc32c:[0-9a-f]{8}"$`, string(doc["checksum"]))
	var st gameState
	require.NoError(t, json.Unmarshal(doc["state"], &st))
	require.Equal(t, sampleState(7), st)
}

// TestResumePastDamagedNewest is the whole recovery story: the newest
// checkpoint is damaged, Latest resumes from the one before, the host replays
// the lost step, and saving it works; the damaged file is kept aside.
func TestResumePastDamagedNewest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[gameState](t, dir, WithLayout("turn", 3))
	for turn := int64(1); turn <= 5; turn++ {
		_, err := s.Save(ctx, turn, sampleState(turn))
		require.NoError(t, err)
	}
	damaged := filepath.Join(dir, "turn_005.json")
	require.NoError(t, os.Truncate(damaged, 100))
	torn, err := os.ReadFile(damaged)
	require.NoError(t, err)

	_, info, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(4), info.Step)
	info, err = s.Save(ctx, 5, sampleState(5))
	require.NoError(t, err, "the replayed step saves over a damaged file")
	got, _, err := s.Load(ctx, 5)
	require.NoError(t, err)
	require.Equal(t, sampleState(5), got)
	kept, err := os.ReadFile(damaged + ".corrupt")
	require.NoError(t, err)
	require.Equal(t, torn, kept, "the damaged file is moved aside intact")

	// A good checkpoint is never moved: ErrExists.
	_, err = s.Save(ctx, 5, sampleState(5))
	require.ErrorIs(t, err, ErrExists)
	// Nor is a file of a future format version, which may be good.
	future := filepath.Join(dir, "turn_006.json")
	require.NoError(t, os.WriteFile(future, envelopeBytes(header{Format: 2, Step: 6, Kind: KindStep, Time: time.Now()}, []byte(`{}`)), 0o644))
	_, err = s.Save(ctx, 6, sampleState(6))
	require.ErrorIs(t, err, ErrExists)
	// A second damage of the same step gets its own quarantine name.
	require.NoError(t, os.Truncate(info.Path, 10))
	_, err = s.Save(ctx, 5, sampleState(5))
	require.NoError(t, err)
	require.FileExists(t, damaged+".corrupt-2")
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 6, "quarantined files are not checkpoints")
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

	small := openStore[string](t, dir, WithMaxReadSize(1024))
	_, _, err = small.Load(ctx, 1)
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, "read limit")
	_, err = small.Save(ctx, 1, "replacement")
	require.ErrorIs(t, err, ErrExists)
	after, err := os.ReadFile(info.Path)
	require.NoError(t, err)
	require.Equal(t, before, after)
	require.NoFileExists(t, info.Path+".corrupt")
}

func TestLoadNeverReturnsAnotherStepOfTheRollingFile(t *testing.T) {
	t.Parallel()
	// The loads hold the rolling file open while the ticks replace it: a
	// volume without NTFS's POSIX rename makes a replacement wait for them
	// (up to 1 s, see retryInUse), and a stream of loads can outlast that.
	skipUnderWine(t, "Wine 8 has no POSIX rename (FileRenameInformationEx): as on a FAT volume, a file that is open cannot be renamed over")
	ctx := context.Background()
	s := openStore[int](t, t.TempDir(), Every(0), WithRolling())
	_, _, err := s.Tick(ctx, 1, 1)
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for step := int64(2); step <= 400; step++ {
			if _, _, err := s.Tick(ctx, step, int(step)); err != nil {
				panic(err)
			}
		}
	}()
	wrong, loaded := 0, 0
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		list, err := s.List(ctx)
		require.NoError(t, err)
		if len(list) != 1 {
			continue
		}
		v, info, err := s.Load(ctx, list[0].Step)
		if errors.Is(err, ErrNotFound) {
			continue // the rolling file moved on: the honest answer
		}
		require.NoError(t, err)
		loaded++
		if int64(v) != list[0].Step || info.Step != list[0].Step {
			wrong++
		}
	}
	require.Zero(t, wrong, "Load(k) returned another step (%d loads)", loaded)
}

func TestInfoIsACopy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[int](t, t.TempDir())
	info, err := s.Save(ctx, 1, 1, WithMeta("k", "v"))
	require.NoError(t, err)
	info.Meta["k"] = "mutated by caller"
	_, err = s.SaveError(ctx, 2, 2, fmt.Errorf("x: %w", os.ErrClosed))
	require.NoError(t, err)

	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() { // under -race: each caller owns its Info
			defer wg.Done()
			list, err := s.List(ctx)
			if err != nil {
				panic(err)
			}
			list[0].Meta["k"] = fmt.Sprint(i)
			list[1].Error.Types[0] = fmt.Sprint(i)
		}()
	}
	wg.Wait()
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, "v", list[0].Meta["k"])
	require.Equal(t, "*fmt.wrapError", list[1].Error.Types[0])
}

func TestSecondCloseWaitsForTheFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	// The clock is read inside a save, with the save counted in flight:
	// blocking it holds a save in the middle.
	s, err := Open[int](dir, withClock(func() time.Time {
		once.Do(func() { close(entered); <-release })
		return time.Now()
	}))
	require.NoError(t, err)
	saved := make(chan error, 1)
	go func() { _, err := s.Save(ctx, 1, 1); saved <- err }()
	<-entered
	first := make(chan error, 1)
	go func() { first <- s.Close() }()
	for { // until the first Close has begun
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if closed {
			break
		}
		runtime.Gosched()
	}
	go func() {
		for i := 0; i < 100; i++ {
			runtime.Gosched()
		}
		close(release)
	}()
	require.NoError(t, s.Close())
	// Whichever Close returned, the lock is free once it has.
	again, err := Open[int](dir)
	require.NoError(t, err, "a Close returned before the store was closed")
	require.NoError(t, again.Close())
	require.NoError(t, <-first)
	require.NoError(t, <-saved)
}

// saveOnMarshal is a state whose encoding uses the store.
type saveOnMarshal struct{ s *Store[any] }

func (m saveOnMarshal) MarshalJSON() ([]byte, error) {
	if _, err := m.s.Save(context.Background(), 99, 99); err != nil {
		return nil, err
	}
	return []byte(`"encoded"`), nil
}

func TestStateEncodingRunsOutsideTheWriteLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[any](t, t.TempDir())
	_, err := s.Save(ctx, 1, saveOnMarshal{s})
	require.NoError(t, err)
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 99}, steps(list))
}

func TestConcurrentSavesOfOneStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Save(ctx, 7, i)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	ok := 0
	for err := range errs {
		if err == nil {
			ok++
		} else {
			require.ErrorIs(t, err, ErrExists)
		}
	}
	require.Equal(t, 1, ok)
	require.Equal(t, []string{".checkpoint.lock", "step_00000007.json"}, dirNames(t, dir))
}

func TestSaveErrorsNameTheFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[any](t, dir, WithLayout("turn", 3))
	path := filepath.Join(dir, "turn_001.json")
	_, err := s.Save(ctx, 1, make(chan int))
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, "checkpoint: save step 1 "+path+": invalid argument: encode state")
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.Save(cancelled, 1, 1)
	require.ErrorContains(t, err, "save step 1 "+path)
	require.NoError(t, s.Close())
	_, err = s.Save(ctx, 1, 1)
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorContains(t, err, "save step 1 "+path)
}

func TestSaveTimesGrowWhenTheClockStepsBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	noon := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	s := openStore[int](t, dir, withClock(func() time.Time { return noon }))
	_, err := s.SaveError(ctx, 5, 1, errors.New("boom"))
	require.NoError(t, err)
	require.NoError(t, s.Close())

	// A new process whose clock is an hour behind resumes from the error
	// checkpoint and saves the redone step: that save is the last one.
	s = openStore[int](t, dir, withClock(func() time.Time { return noon.Add(-time.Hour) }))
	_, info, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, KindError, info.Kind)
	saved, err := s.Save(ctx, 5, 2)
	require.NoError(t, err)
	require.True(t, saved.Time.After(info.Time))
	v, latest, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, v)
	require.Equal(t, KindStep, latest.Kind)
}

func TestListReportsUnreadableHeaderOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "step_00000001.json"), []byte("junk"), 0o644))
	var logs bytes.Buffer
	s := openStore[int](t, dir, ReadOnly(), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	for i := 0; i < 3; i++ {
		list, err := s.List(ctx)
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.Zero(t, list[0].Format, "an unreadable header is listed with format 0")
	}
	require.Equal(t, 1, strings.Count(logs.String(), "unreadable checkpoint header"))
}

func TestReaderCacheFollowsTheDirectory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	w := openStore[int](t, dir, KeepLast(2))
	r := openStore[int](t, dir, ReadOnly())
	for step := int64(0); step < 200; step++ {
		_, err := w.Save(ctx, step, 1)
		require.NoError(t, err)
		_, err = r.List(ctx)
		require.NoError(t, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	require.LessOrEqual(t, len(r.headers), 3)
}

// errHostBug is what panickyState's decoder panics with.
var errHostBug = errors.New("the host's decoder is broken")

// panickyState's decoder panics on some states: with an error on turn 13,
// with a string on turn 14.
type panickyState struct{ Turn int }

func (p *panickyState) UnmarshalJSON(b []byte) error {
	var v struct{ Turn int }
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch v.Turn {
	case 13:
		panic(errHostBug)
	case 14:
		panic("unlucky turn")
	}
	p.Turn = v.Turn
	return nil
}

// A panic in the state type's decoder, on a file that verified, fails that
// load with an error wrapping the panic's value (an ErrCorrupt error, as a
// decode failure is; the file is not moved aside): Latest falls back past
// it, and the store goes on and closes.
func TestPanicInTheStateTypesDecoderIsAnErrorAndCloseReturns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open[panickyState](dir, NoSync())
	require.NoError(t, err)
	for step, turn := range []int{1, 13, 14} {
		_, err := s.Save(ctx, int64(step), panickyState{Turn: turn})
		require.NoError(t, err)
	}
	var got panickyState
	var info Info
	require.NotPanics(t, func() { got, info, err = s.Latest(ctx) })
	require.NoError(t, err)
	require.Equal(t, int64(0), info.Step)
	require.Equal(t, 1, got.Turn)

	require.NotPanics(t, func() { got, _, err = s.Load(ctx, 1) })
	require.ErrorIs(t, err, errHostBug)
	require.ErrorIs(t, err, ErrCorrupt)
	require.False(t, isDamage(err), "a host's panic is no proof of damage: %v", err)
	require.Contains(t, err.Error(), "panic")
	require.Zero(t, got)
	require.NotPanics(t, func() { _, _, err = s.Load(ctx, 2) })
	require.ErrorIs(t, err, ErrCorrupt)
	require.Contains(t, err.Error(), "unlucky turn")
	require.FileExists(t, filepath.Join(dir, "step_00000001.json"))
	// A side file read into such a type too.
	require.NoError(t, s.WriteJSON(ctx, "side.json", panickyState{Turn: 13}))
	var side panickyState
	require.NotPanics(t, func() { err = s.ReadJSON(ctx, "side.json", &side) })
	require.ErrorIs(t, err, errHostBug)
	require.ErrorIs(t, err, ErrCorrupt)

	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return after a load whose decoder panicked")
	}
}
