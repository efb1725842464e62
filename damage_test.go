package checkpoint_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/internal/format"
	"github.com/gocheckpoint/checkpoint/internal/format/corpus"
	"github.com/gocheckpoint/checkpoint/storage"
	"github.com/stretchr/testify/require"
)

// A file of a format this version cannot read is not damage: its load is
// the format error, a save of its step is ErrExists, and it stays as it is.
func TestFileOfANewerFormatIsNeverQuarantined(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	// A format 4 (unknown: format 3 is the byte payload) that ends with a trailer that formats 1 and 2 do not have.
	future := []byte(`{"format":4,"step":1,"kind":"step","time":"2026-11-22T12:00:00Z","state":1,"digest":"blake3:00"}` + "\n")
	path := filepath.Join(dir, "step_00000001.json")
	require.NoError(t, os.WriteFile(path, future, 0o644))
	s := openStore[int](t, dir, checkpoint.NoSync())
	_, _, err := s.Load(ctx, 1)
	require.ErrorIs(t, err, format.ErrFormat)
	_, err = s.Save(ctx, 1, 1)
	require.ErrorIs(t, err, checkpoint.ErrExists)
	requireUntouched(t, path, future)
}

// corpusCase is one damaged step-2 file.
type corpusCase struct {
	name string
	file string // file name; step 2 of layout ("c", 3) unless stated
	data []byte
	// prepare, if set, makes the hostile entry itself instead of data.
	prepare func(t *testing.T, dir string)
}

func corruptCorpus(t *testing.T) []corpusCase {
	state, err := encodeState(corpusStateAt(2))
	require.NoError(t, err)
	good := corpus.Good(state)
	// The damaged bytes are the format's corpus; the hostile entries
	// where a file should be are the store's.
	var cases []corpusCase
	for _, c := range corpus.Cases(state) {
		cases = append(cases, corpusCase{name: c.Name, file: c.File, data: c.Data})
	}
	cases = append(cases,
		corpusCase{name: "a directory", file: "c_002.json", prepare: func(t *testing.T, dir string) {
			require.NoError(t, os.Mkdir(filepath.Join(dir, "c_002.json"), 0o755))
		}},
	)
	if canSymlink(t) {
		cases = append(cases,
			corpusCase{name: "a symlink to a good checkpoint outside", file: "c_002.json", prepare: func(t *testing.T, dir string) {
				outside := filepath.Join(t.TempDir(), "c_002.json")
				require.NoError(t, os.WriteFile(outside, good, 0o644))
				require.NoError(t, os.Symlink(outside, filepath.Join(dir, "c_002.json")))
			}},
			corpusCase{name: "a symlink to the good checkpoint of step 1", file: "c_002.json", prepare: func(t *testing.T, dir string) {
				require.NoError(t, os.Symlink("c_001.json", filepath.Join(dir, "c_002.json")))
			}},
			corpusCase{name: "a dangling symlink", file: "c_002.json", prepare: func(t *testing.T, dir string) {
				require.NoError(t, os.Symlink("../../../../etc/passwd", filepath.Join(dir, "c_002.json")))
			}},
		)
	}
	if haveFIFOs {
		cases = append(cases, corpusCase{name: "a FIFO", file: "c_002.json", prepare: func(t *testing.T, dir string) {
			mkfifo(t, filepath.Join(dir, "c_002.json"))
		}})
	}
	return cases
}

// corpusMaxRead is the read limit of the corpus stores: small, so that the
// bomb and the oversized file stay cheap to build.
const corpusMaxRead = corpus.MaxRead

// TestCorruptCorpusNeverLoadsAsAnotherState puts at step 2, beside a good
// checkpoint of step 1, every damaged file of the format's corpus
// (internal/format/corpus, which the format's own tests read too) and every
// entry that is not a regular file (a directory, symbolic links, a FIFO).
// Each load fails with ErrCorrupt naming the step and the file, or loads the
// right state (damage to a byte that does not matter, a gzip header field);
// none panics; List works; and Latest falls back to step 1.
func TestCorruptCorpusNeverLoadsAsAnotherState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	want1 := corpusStateAt(1)
	want2 := corpusStateAt(2)
	cases := corruptCorpus(t)
	root := t.TempDir()
	survivedIntact := 0
	for i, tc := range cases {
		dir := filepath.Join(root, fmt.Sprint(i))
		w := openStore[corpusState](t, dir, checkpoint.WithLayout("c", 3))
		_, err := w.Save(ctx, 1, want1)
		require.NoError(t, err)
		require.NoError(t, w.Close())
		if tc.prepare != nil {
			tc.prepare(t, dir)
		} else {
			require.NoError(t, os.WriteFile(filepath.Join(dir, tc.file), tc.data, 0o644))
		}

		s := openStore[corpusState](t, dir, checkpoint.WithLayout("c", 3), checkpoint.WithMaxReadSize(corpusMaxRead), checkpoint.ReadOnly())
		got, _, err := s.Load(ctx, 2)
		switch {
		case err == nil:
			// Damage that changes no byte that matters (a gzip header
			// field) may load, but only as the right state.
			require.Equal(t, want2, got, tc.name)
			survivedIntact++
		default:
			require.ErrorIs(t, err, checkpoint.ErrCorrupt, tc.name)
			var e *checkpoint.Error
			require.ErrorAs(t, err, &e, tc.name)
			require.Equal(t, int64(2), e.Step, tc.name)
			require.Equal(t, filepath.Join(dir, tc.file), e.Path, tc.name)
		}
		list, err := s.List(ctx)
		require.NoError(t, err, tc.name)
		require.NotEmpty(t, list, tc.name)

		got, info, err := s.Latest(ctx)
		require.NoError(t, err, tc.name)
		if info.Step == 2 {
			require.Equal(t, want2, got, tc.name)
		} else {
			require.Equal(t, int64(1), info.Step, tc.name)
			require.Equal(t, want1, got, tc.name)
		}
		require.NoError(t, s.Close())
	}
	t.Logf("%d corrupt or hostile files tried: none panicked or returned a wrong state; %d harmless (gzip header) changes loaded the right state", len(cases), survivedIntact)
	require.Greater(t, len(cases), 1000)
}

// fussyState has a decoder of its own, which records the bytes it is given
// and, like many hand-written decoders, trusts their shape: a byte the
// writer never puts there makes it index past its input.
type fussyState struct{ Turn int }

// fussySeen collects every input fussyState.UnmarshalJSON was given, by
// the test that set it (the key: a marker inside the state).
var fussySeen sync.Map

func (f *fussyState) UnmarshalJSON(b []byte) error {
	var v struct {
		Turn int    `json:"turn"`
		Mark string `json:"mark"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	if seen, ok := fussySeen.Load(v.Mark[:4]); ok {
		seen.(*sync.Map).Store(string(b), true)
	}
	if v.Mark[4] != 'z' {
		_ = b[len(b)] // the host's own bug: index out of range
	}
	f.Turn = v.Turn
	return nil
}

func (f fussyState) MarshalJSON() ([]byte, error) {
	return fmt.Appendf(nil, `{"turn":%d,"mark":"%sz"}`, f.Turn, fussyMark(f.Turn)), nil
}

func fussyMark(turn int) string { return fmt.Sprintf("m%03d", turn%1000) }

// A flipped byte inside the state of the newest checkpoint keeps it valid
// JSON: only the checksum tells. The state type's UnmarshalJSON must never
// see those bytes (it would panic on them), and Latest falls back past the
// file.
func TestDamagedBytesNeverReachTheStateTypesDecoder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for i, opts := range [][]checkpoint.Option{nil, {checkpoint.Gzip()}, {checkpoint.Zstd()}} {
		seen := new(sync.Map)
		base := 100 + i*10
		for turn := base; turn < base+2; turn++ {
			fussySeen.Store(fussyMark(turn), seen)
		}
		dir := t.TempDir()
		s := openStore[fussyState](t, dir, opts...)
		_, err := s.Save(ctx, 1, fussyState{Turn: base})
		require.NoError(t, err)
		info, err := s.Save(ctx, 2, fussyState{Turn: base + 1})
		require.NoError(t, err)
		raw := decompress(t, mustRead(t, info.Path))
		k := bytes.Index(raw, []byte(`z"}`))
		require.Positive(t, k)
		raw[k] = 'y' // the marker byte the decoder trusts
		require.NoError(t, os.WriteFile(info.Path, compressLike(t, info.Compression, raw), 0o644))

		var got fussyState
		require.NotPanics(t, func() { got, info, err = s.Latest(ctx) })
		require.NoError(t, err)
		require.Equal(t, int64(1), info.Step)
		require.Equal(t, base, got.Turn)
		require.NotPanics(t, func() { _, _, err = s.Load(ctx, 2) })
		require.ErrorIs(t, err, checkpoint.ErrCorrupt)
		require.True(t, format.IsDamage(err), "%v", err)
		seen.Range(func(k, _ any) bool {
			require.NotContains(t, k.(string), `y"}`, "the state type's decoder saw a file whose checksum fails")
			return true
		})
	}
}

// A good checkpoint of step 2 copied or linked to step 3's name is damage
// for that name: its load is ErrCorrupt, a save of step 3 moves it aside
// and saves, and step 2's checkpoint is untouched.
func TestMisplacedCheckpointIsMovedAsideForItsStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, place := range map[string]func(src, dst string) error{
		"a copy":      func(src, dst string) error { return copyPath(src, dst) },
		"a hard link": os.Link,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			s := openStore[int](t, dir, checkpoint.NoSync())
			two, err := s.Save(ctx, 2, 2)
			require.NoError(t, err)
			three := filepath.Join(dir, "step_00000003.json")
			require.NoError(t, place(two.Path, three))

			_, _, err = s.Load(ctx, 3)
			require.ErrorIs(t, err, checkpoint.ErrCorrupt)
			_, err = s.Save(ctx, 3, 3)
			require.NoError(t, err, "the misplaced file is damage for its name")
			v, _, err := s.Load(ctx, 3)
			require.NoError(t, err)
			require.Equal(t, 3, v)
			require.FileExists(t, three+checkpoint.QuarantineSuffix)
			v, _, err = s.Load(ctx, 2)
			require.NoError(t, err, "the checkpoint of step 2 is untouched")
			require.Equal(t, 2, v)
		})
	}
}

func copyPath(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

// A save over a directory at its checkpoint's name fails with ErrCorrupt
// and storage.ErrNotRegular saying what is there (never ErrExists), and
// moves nothing.
func TestDirectoryAtACheckpointNameIsAClearError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir, checkpoint.NoSync())
	require.NoError(t, os.Mkdir(filepath.Join(dir, "step_00000003.json"), 0o755))
	_, err := s.Save(ctx, 3, 3)
	require.Error(t, err)
	require.NotErrorIs(t, err, checkpoint.ErrExists)
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.ErrorIs(t, err, storage.ErrNotRegular)
	require.ErrorContains(t, err, "a directory")
	require.DirExists(t, filepath.Join(dir, "step_00000003.json"), "nothing is moved")
}

// Something at the rolling file's name that is not a regular file (a
// directory, a symbolic link, never followed) is damage of no known step:
// beside a checkpoint that loads, Latest returns that checkpoint and
// reports what is at the rolling name, whether or not the store writes a
// rolling file.
func TestLatestReportsANonRegularRollingFileBesideOneThatLoads(t *testing.T) {
	t.Parallel()
	makes := map[string]func(t *testing.T, path string){
		"a directory": func(t *testing.T, path string) { require.NoError(t, os.Mkdir(path, 0o755)) },
	}
	if canSymlink(t) {
		makes["symbolic link"] = func(t *testing.T, path string) {
			require.NoError(t, os.Symlink("step_00000001.json", path))
		}
	}
	for what, make := range makes {
		for name, opts := range map[string][]checkpoint.Option{"numbered": nil, "rolling": {checkpoint.SaveEvery(10), checkpoint.WithRolling()}} {
			t.Run(what+" "+name, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				dir := t.TempDir()
				w := openStore[int](t, dir, checkpoint.NoSync())
				_, err := w.Save(ctx, 1, 1)
				require.NoError(t, err)
				require.NoError(t, w.Close())
				make(t, filepath.Join(dir, "step_last.json"))

				var reported []error
				hooks := checkpoint.WithHooks(checkpoint.Hooks{OnError: func(err error) { reported = append(reported, err) }})
				s := openStore[int](t, dir, append([]checkpoint.Option{checkpoint.NoSync(), checkpoint.ReadOnly(), hooks}, opts...)...)
				v, info, err := s.Latest(ctx)
				require.NoError(t, err)
				require.Equal(t, 1, v)
				require.Equal(t, int64(1), info.Step)
				require.Len(t, reported, 1, "what is at the rolling name is reported")
				require.ErrorIs(t, reported[0], checkpoint.ErrCorrupt)
				require.ErrorContains(t, reported[0], "step_last.json")
				require.ErrorContains(t, reported[0], what)
			})
		}
	}
}

// TestLatestNamesTheOtherLayoutBesideADirectoryOfThatLayout: a store
// opened with the wrong layout on a directory of another layout's
// checkpoints is ErrInvalid naming that layout, never a fresh start, also
// beside a directory named like that layout's greatest checkpoint (a
// listing gives no type for it, and it is no sample whose header proves the
// layout).
func TestLatestNamesTheOtherLayoutBesideADirectoryOfThatLayout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	w := openStore[int](t, dir, checkpoint.WithLayout("turn", 3))
	for step := int64(1); step <= 3; step++ {
		_, err := w.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	require.NoError(t, os.Mkdir(filepath.Join(dir, "turn_999.json"), 0o755))
	s := openStore[int](t, dir, checkpoint.ReadOnly())
	_, _, err := s.Latest(ctx)
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	require.NotErrorIs(t, err, checkpoint.ErrNotFound)
	require.ErrorContains(t, err, `WithLayout("turn", 3)`)
}

// A writer's Open removes a stale regular temporary file of its names and
// leaves alone whatever else is at a temporary name: a symbolic link (to a
// file outside or to a checkpoint, never followed), a FIFO, a directory
// holding a file. The file outside is untouched, and the store loads and
// saves as before.
func TestOpenRemovesStaleTempsButNoNonRegularEntry(t *testing.T) {
	skipUnlessLinux(t)
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "precious")
	require.NoError(t, os.WriteFile(outside, []byte("keep me"), 0o644))

	s := openStore[int](t, dir, checkpoint.WithLayout("c", 3))
	_, err := s.Save(ctx, 1, 1)
	require.NoError(t, err)
	require.NoError(t, s.Close())

	link := filepath.Join(dir, checkpoint.TempPrefix("c_002.json")+"111")
	require.NoError(t, os.Symlink(outside, link))
	linkIn := filepath.Join(dir, checkpoint.TempPrefix("c_003.json")+"222")
	require.NoError(t, os.Symlink(filepath.Join(dir, "c_001.json"), linkIn))
	fifo := filepath.Join(dir, checkpoint.TempPrefix("c_004.json")+"333")
	mkfifo(t, fifo)
	sub := filepath.Join(dir, checkpoint.TempPrefix("c_005.json")+"444")
	require.NoError(t, os.Mkdir(sub, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(sub, "x"), []byte("x"), 0o644))
	stale := filepath.Join(dir, checkpoint.TempPrefix("c_006.json")+"555")
	require.NoError(t, os.WriteFile(stale, []byte("half"), 0o644))

	s = openStore[int](t, dir, checkpoint.WithLayout("c", 3))
	b, err := os.ReadFile(outside)
	require.NoError(t, err)
	require.Equal(t, "keep me", string(b))
	_, err = os.Stat(stale)
	require.ErrorIs(t, err, os.ErrNotExist, "a stale regular temporary file is removed")
	for _, p := range []string{link, linkIn, fifo, sub} {
		_, err := os.Lstat(p)
		require.NoError(t, err, "%s is not a regular file: left alone", p)
	}
	got, _, err := s.Load(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, 1, got)
	for step := int64(2); step <= 6; step++ {
		_, err := s.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 6)
}

// A writer's Open removes the stale temporary files of its names, and keeps
// a user's hidden files of names like them.
func TestOpenKeepsAUsersHiddenFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	user := []string{".notes.json2", ".result.json42", ".config.json.bak1"}
	stale := []string{checkpoint.TempName("step_00000001.json"), checkpoint.TempName("notes.json"), ".step_00000002.json77"}
	for _, name := range append(slices.Clone(user), stale...) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("{}"), 0o644))
	}
	openStore[int](t, dir, checkpoint.NoSync())
	names := dirNames(t, dir)
	for _, name := range user {
		require.Contains(t, names, name)
	}
	for _, name := range stale {
		require.NotContains(t, names, name)
	}
}

// A file of a step in another compression, put into the directory of a
// running writer after its first full scan (a documented blind spot), is
// never rewritten: it stays as it was put, or retention removes it as an
// old step. What List, Load and Latest say of it is logged.
func TestFileOfAnotherCompressionPutUnderAWriterIsNeverRewritten(t *testing.T) {
	skipUnlessLinux(t)
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	w := openStore[int](t, dir, checkpoint.WithLayout("c", 3), checkpoint.KeepLast(3))
	_, err := w.Save(ctx, 1, 1)
	require.NoError(t, err)

	other := openStore[int](t, t.TempDir(), checkpoint.WithLayout("c", 3), checkpoint.Gzip())
	info, err := other.Save(ctx, 2, 2000)
	require.NoError(t, err)
	theirs, err := os.ReadFile(info.Path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "c_002.json.gz"), theirs, 0o644))

	_, err = w.Save(ctx, 2, 2)
	t.Logf("save of step 2 beside a dropped-in c_002.json.gz: %v", err)
	got, linfo, err := w.Load(ctx, 2)
	t.Logf("Load(2) = %d from %s (%v)", got, filepath.Base(linfo.Path), err)
	got, linfo, err = w.Latest(ctx)
	t.Logf("Latest = %d from %s (%v)", got, filepath.Base(linfo.Path), err)
	list, err := w.List(ctx)
	require.NoError(t, err)
	for _, i := range list {
		t.Logf("listed %s step %d", filepath.Base(i.Path), i.Step)
	}
	for step := int64(3); step <= 6; step++ {
		_, err := w.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	// Nothing replaced: the dropped-in file is byte-identical or was
	// removed by retention as an old step (never rewritten).
	if b, err := os.ReadFile(filepath.Join(dir, "c_002.json.gz")); err == nil {
		require.Equal(t, theirs, b)
		t.Logf("c_002.json.gz survived retention after step 6 (KeepLast 3)")
	} else {
		t.Logf("c_002.json.gz removed by retention: %v", err)
	}
	t.Logf("names after step 6: %v", checkpointNames(t, dir))
	removed, err := w.Prune(ctx)
	require.NoError(t, err)
	t.Logf("a full Prune removed %d more; names: %v", len(removed), checkpointNames(t, dir))
}

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
		return envelopeBytes(format.Header{Format: 4, Step: 1, Kind: checkpoint.KindStep, Time: time.Now()}, []byte(`{}`))
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
