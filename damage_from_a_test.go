package checkpoint_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/internal/format"
	"github.com/stretchr/testify/require"
)

// The first List of a store opens every file with no stat before it (see
// fill): the open itself must refuse what is not a regular file, a
// symbolic link inside the directory above all, which os.Root follows.
func TestFirstListOpensNoSymlinkFIFOOrDirectoryAtACheckpointName(t *testing.T) {
	t.Parallel()
	requireSymlinks(t)
	ctx := context.Background()
	dir := t.TempDir()
	w := openStore[corpusState](t, dir, checkpoint.WithLayout("c", 3))
	one, err := w.Save(ctx, 1, corpusStateAt(1))
	require.NoError(t, err)
	two, err := w.Save(ctx, 2, corpusStateAt(2))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	// Step 2's good checkpoint moves to a name that is no checkpoint's,
	// and a symbolic link takes its place: following it would list and
	// load step 2 from a file that is not the store's.
	require.NoError(t, os.Rename(two.Path, filepath.Join(dir, "elsewhere.json")))
	require.NoError(t, os.Symlink("elsewhere.json", two.Path))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "c_003.json"), 0o755))
	if haveFIFOs {
		mkfifo(t, filepath.Join(dir, "c_004.json"))
	}

	s := openStore[corpusState](t, dir, checkpoint.WithLayout("c", 3), checkpoint.ReadOnly())
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1, "%+v", list)
	require.Equal(t, one.Path, list[0].Path)
	_, _, err = s.Load(ctx, 2)
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.ErrorContains(t, err, "symbolic link")
	got, info, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), info.Step)
	require.Equal(t, corpusStateAt(1), got)
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
		return envelopeBytes(format.Header{Format: 1, Step: 1, Kind: checkpoint.KindStep, Time: time.Now()}, []byte(`[1,2,3]`))
	},
	"null state": func([]byte) []byte {
		return envelopeBytes(format.Header{Format: 1, Step: 1, Kind: checkpoint.KindStep, Time: time.Now()}, []byte(`null`))
	},
	"future format version": func([]byte) []byte {
		return envelopeBytes(format.Header{Format: 3, Step: 1, Kind: checkpoint.KindStep, Time: time.Now()}, []byte(`{}`))
	},
	"header step differs from name": func([]byte) []byte {
		return envelopeBytes(format.Header{Format: 1, Step: 2, Kind: checkpoint.KindStep, Time: time.Now()}, []byte(`{}`))
	},
	"gzip with bad crc": func(b []byte) []byte {
		z := encodeBytes(format.Header{Format: 1, Step: 1, Kind: checkpoint.KindStep, Time: time.Now()}, []byte(`{"turn":1}`), format.CompressGzip)
		z[len(z)-8] ^= 0xff // CRC-32 of the gzip trailer
		return z
	},
	"gzip truncated": func(b []byte) []byte {
		z := encodeBytes(format.Header{Format: 1, Step: 1, Kind: checkpoint.KindStep, Time: time.Now()}, []byte(`{"turn":1}`), format.CompressGzip)
		return z[:len(z)-10]
	},
	"zstd with bad checksum": func(b []byte) []byte {
		z := encodeBytes(format.Header{Format: 1, Step: 1, Kind: checkpoint.KindStep, Time: time.Now()}, []byte(`{"turn":1}`), format.CompressZstd)
		z[len(z)-1] ^= 0xff // the frame's content checksum
		return z
	},
	"zstd truncated": func(b []byte) []byte {
		z := encodeBytes(format.Header{Format: 1, Step: 1, Kind: checkpoint.KindStep, Time: time.Now()}, []byte(`{"turn":1}`), format.CompressZstd)
		return z[:len(z)-10]
	},
	"zstd magic only": func(b []byte) []byte { return format.ZstdMagic },
}

func TestLoadCorruptFileIsErrCorrupt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, damage := range corruptions {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := openStore[gameState](t, dir, checkpoint.WithLayout("turn", 3))
			info, err := s.Save(ctx, 1, sampleState(1))
			require.NoError(t, err)
			b, err := os.ReadFile(info.Path)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(info.Path, damage(b), 0o644))

			got, _, err := s.Load(ctx, 1)
			require.ErrorIs(t, err, checkpoint.ErrCorrupt)
			require.Zero(t, got)
			require.Contains(t, err.Error(), "load step 1 "+info.Path)
			var e *checkpoint.Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, "load", e.Op)
			require.Equal(t, int64(1), e.Step)

			_, _, err = s.Latest(ctx)
			require.ErrorIs(t, err, checkpoint.ErrCorrupt)
			require.NotErrorIs(t, err, checkpoint.ErrNotFound, "a store whose only checkpoint is damaged is not a fresh start")
		})
	}
}

func TestStoreNeverLeavesItsDirectory(t *testing.T) {
	t.Parallel()
	requireSymlinks(t)
	ctx := context.Background()
	parent := t.TempDir()
	dir := filepath.Join(parent, "store")
	s := openStore[int](t, dir, checkpoint.WithLayout("turn", 3))
	outside := filepath.Join(parent, "secret.json")
	require.NoError(t, os.WriteFile(outside, envelopeBytes(format.Header{Format: 1, Step: 5, Kind: checkpoint.KindStep, Time: time.Now()}, []byte(`5`)), 0o644))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "turn_005.json")))
	require.NoError(t, os.Symlink("../secret.json", filepath.Join(dir, "turn_006.json")))

	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Empty(t, list, "symlinks are not checkpoints")
	_, _, err = s.Load(ctx, 5)
	require.ErrorIs(t, err, checkpoint.ErrCorrupt, "a symlink is not followed")
	require.ErrorContains(t, err, "symbolic link")
	// Symbolic links at checkpoint names are damage, never followed and
	// never a fresh start.
	_, _, err = s.Latest(ctx)
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.NotErrorIs(t, err, checkpoint.ErrNotFound)
	require.ErrorContains(t, err, "symbolic link")

	// Side-file names cannot climb out either.
	for _, name := range []string{"../secret.json", "/etc/x.json", "a/b.json", ".hidden.json", "x.txt", "turn_001.json", "turn_last.json"} {
		require.ErrorIs(t, s.WriteJSON(ctx, name, 1), checkpoint.ErrInvalid, name)
		var v int
		require.ErrorIs(t, s.ReadJSON(ctx, name, &v), checkpoint.ErrInvalid, name)
	}
	b, err := os.ReadFile(outside)
	require.NoError(t, err)
	require.Contains(t, string(b), `"state":5`)
}

// TestResumePastDamagedNewest is the whole recovery story: the newest
// checkpoint is damaged, Latest resumes from the one before, the host replays
// the lost step, and saving it works; the damaged file is kept aside.
func TestResumePastDamagedNewest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[gameState](t, dir, checkpoint.WithLayout("turn", 3))
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
	require.ErrorIs(t, err, checkpoint.ErrExists)
	// Nor is a file of a future format version, which may be good.
	future := filepath.Join(dir, "turn_006.json")
	require.NoError(t, os.WriteFile(future, envelopeBytes(format.Header{Format: 2, Step: 6, Kind: checkpoint.KindStep, Time: time.Now()}, []byte(`{}`)), 0o644))
	_, err = s.Save(ctx, 6, sampleState(6))
	require.ErrorIs(t, err, checkpoint.ErrExists)
	// A second damage of the same step gets its own quarantine name.
	require.NoError(t, os.Truncate(info.Path, 10))
	_, err = s.Save(ctx, 5, sampleState(5))
	require.NoError(t, err)
	require.FileExists(t, damaged+".corrupt-2")
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 6, "quarantined files are not checkpoints")
}
