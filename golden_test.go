package checkpoint

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The files in testdata/v1 were written by this package when format version 1
// was current, and those in testdata/v2 when version 2 was. They must load
// forever: never regenerate or edit them. A new format version gets a new
// directory beside them, and these tests grow.

type goldenAgent struct {
	Name   string   `json:"name"`
	Memory []string `json:"memory"`
	HP     int      `json:"hp"`
}

type goldenState struct {
	Turn   int64                  `json:"turn"`
	Agents map[string]goldenAgent `json:"agents"`
	Log    []string               `json:"log"`
	Seen   time.Time              `json:"seen"`
}

func goldenStateAt(turn int64) goldenState {
	return goldenState{
		Turn: turn,
		Agents: map[string]goldenAgent{
			"dm":     {Name: "Maître du jeu", Memory: []string{"la crypte", "龍"}, HP: 0},
			"thorin": {Name: "Thorin", Memory: []string{}, HP: 12},
		},
		Log:  []string{"DM: You enter the crypt.", "Thorin: I light a torch 🔥"},
		Seen: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC),
	}
}

var goldenTime = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

type goldenFile struct {
	name string
	step int64
	kind Kind
	comp compression
	meta map[string]string
	err  *ErrorRecord
}

// goldenFiles are the golden checkpoints of every format version: the same
// names, steps and states in each version's directory.
var goldenFiles = []goldenFile{
	{name: "turn_006.json.zst", step: 6, kind: KindStep, comp: compressZstd, meta: map[string]string{"codec": "zstd"}},
	{name: "turn_007.json", step: 7, kind: KindStep, meta: map[string]string{"player": "ana", "scene": "crypt"}},
	{name: "turn_008.json.gz", step: 8, kind: KindStep, comp: compressGzip},
	{name: "turn_009.error.json", step: 9, kind: KindError, err: &ErrorRecord{
		Message: "generate reply: context deadline exceeded", Types: []string{"*fmt.wrapError", "context.deadlineExceededError"},
		Step: 9, Time: goldenTime,
	}},
	{name: "turn_010.final.json", step: 10, kind: KindFinal},
	{name: "turn_last.json", step: 11, kind: KindRolling},
}

// goldenFormats are the format versions of testdata: each has a directory.
var goldenFormats = []int{1, 2}

func goldenDir(format int) string { return filepath.Join("testdata", fmt.Sprintf("v%d", format)) }

func (g goldenFile) header(format int) header {
	return header{Format: format, Step: g.step, Kind: g.kind, Time: goldenTime, Meta: g.meta, Error: g.err}
}

// TestWriteGolden wrote testdata/vN when version N was current, and writes
// a golden file added to goldenFiles since (the zstd one came later). It
// never rewrites a file that exists, and runs only when asked:
// CHECKPOINT_WRITE_GOLDEN=v2 go test -run WriteGolden
func TestWriteGolden(t *testing.T) {
	t.Parallel()
	version := os.Getenv("CHECKPOINT_WRITE_GOLDEN")
	format := slices.IndexFunc(goldenFormats, func(f int) bool { return version == fmt.Sprintf("v%d", f) })
	if format < 0 {
		t.Skip("golden files are written once per format version")
	}
	format = goldenFormats[format]
	dir := goldenDir(format)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for _, g := range goldenFiles {
		path := filepath.Join(dir, g.name)
		if _, err := os.Stat(path); err == nil {
			continue
		}
		state, err := encodeState(goldenStateAt(g.step))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, encodeBytes(g.header(format), state, g.comp), 0o644))
	}
}

// TestGoldenLoads loads the golden files of every format version: what a
// store wrote once, a store reads forever.
func TestGoldenLoads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, format := range goldenFormats {
		t.Run(fmt.Sprintf("v%d", format), func(t *testing.T) {
			s := openStore[goldenState](t, goldenDir(format), WithLayout("turn", 3), ReadOnly())
			for _, g := range goldenFiles {
				t.Run(g.name, func(t *testing.T) {
					got, info, err := s.Load(ctx, g.step)
					require.NoError(t, err)
					require.Equal(t, goldenStateAt(g.step), got)
					require.Equal(t, g.name, info.Name())
					require.Equal(t, g.kind, info.Kind)
					require.Equal(t, g.comp.String(), info.Compression)
					require.Equal(t, format, info.Format)
					require.Equal(t, goldenTime, info.Time)
					require.Equal(t, g.meta, info.Meta)
					require.Equal(t, g.err, info.Error)
				})
			}
			list, err := s.List(ctx)
			require.NoError(t, err)
			require.Len(t, list, len(goldenFiles))
			_, info, err := s.Latest(ctx)
			require.NoError(t, err)
			require.Equal(t, KindRolling, info.Kind)
		})
	}
}

// TestGoldenWriterUnchanged proves that today's writer still produces every
// format version byte for byte (a store writes the newest; the older ones
// only here), so a format cannot drift unnoticed. (Gzip and zstd bytes may
// differ between compressor versions, so compressed files are compared
// after decompression, and today's compressed output must decompress to
// the same bytes.)
func TestGoldenWriterUnchanged(t *testing.T) {
	t.Parallel()
	for _, format := range goldenFormats {
		for _, g := range goldenFiles {
			t.Run(fmt.Sprintf("v%d/%s", format, g.name), func(t *testing.T) {
				onDisk, err := os.ReadFile(filepath.Join(goldenDir(format), g.name))
				require.NoError(t, err)
				want := decompress(t, onDisk)

				state, err := encodeState(goldenStateAt(g.step))
				require.NoError(t, err)
				require.Equal(t, string(want), string(encodeBytes(g.header(format), state, compressNone)))
				require.Equal(t, string(want), string(decompress(t, encodeBytes(g.header(format), state, g.comp))))
			})
		}
	}
}

// TestGoldenCompressedFilesAreStandard checks that the compressed golden
// files are what the command-line tools read: one gzip member, one zstd
// frame, detected by their magic numbers. If zstd or gzip is installed, it
// decompresses them with it.
func TestGoldenCompressedFilesAreStandard(t *testing.T) {
	t.Parallel()
	for _, format := range goldenFormats {
		for _, g := range goldenFiles {
			if g.comp == compressNone {
				continue
			}
			t.Run(fmt.Sprintf("v%d/%s", format, g.name), func(t *testing.T) {
				path := filepath.Join(goldenDir(format), g.name)
				onDisk, err := os.ReadFile(path)
				require.NoError(t, err)
				require.Equal(t, g.comp, sniff(onDisk))
				tool := map[compression]string{compressGzip: "gzip", compressZstd: "zstd"}[g.comp]
				if _, err := exec.LookPath(tool); err != nil {
					t.Skipf("%s is not installed", tool)
				}
				out, err := exec.Command(tool, "-dc", path).Output()
				require.NoError(t, err)
				require.Equal(t, decompress(t, onDisk), out)
				_, err = verify(out)
				require.NoError(t, err)
			})
		}
	}
}

// TestGoldenIsDocumentedFormat checks the README's recipe for verifying a
// checkpoint without this package, on a golden file of each format: the
// checksum after `,"checksum":"` covers every byte before it, SHA-256 in
// format 1, CRC-32C (Castagnoli, big-endian hex) in format 2.
func TestGoldenIsDocumentedFormat(t *testing.T) {
	t.Parallel()
	sums := map[int]func([]byte) string{
		1: func(b []byte) string { d := sha256.Sum256(b); return "sha256:" + hex.EncodeToString(d[:]) },
		2: func(b []byte) string {
			return fmt.Sprintf("crc32c:%08x", crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
		},
	}
	for _, format := range goldenFormats {
		t.Run(fmt.Sprintf("v%d", format), func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(goldenDir(format), "turn_007.json"))
			require.NoError(t, err)
			require.True(t, bytes.HasPrefix(b, []byte(fmt.Sprintf(`{"format":%d,`, format))))
			i := bytes.LastIndex(b, []byte(`,"checksum":"`))
			require.Positive(t, i)
			require.Equal(t, `,"checksum":"`+sums[format](b[:i])+"\"}\n", string(b[i:]))
			_, err = verify(b)
			require.NoError(t, err)
			b[3] ^= 1
			_, err = verify(b)
			require.ErrorIs(t, err, ErrCorrupt)
		})
	}
}

// goldenSessionsDir is a root of sessions written when session.json format 1
// was current: session 001 with turns 1 and 2, and 002 forked from it at
// turn 1 with caller fields.
var goldenSessionsDir = filepath.Join("testdata", "v1", "sessions")

// TestWriteGoldenSessionsV1 wrote testdata/v1/sessions once. It runs only
// when asked: CHECKPOINT_WRITE_GOLDEN=sessions-v1 go test -run WriteGoldenSessions
func TestWriteGoldenSessionsV1(t *testing.T) {
	t.Parallel()
	if os.Getenv("CHECKPOINT_WRITE_GOLDEN") != "sessions-v1" {
		t.Skip("golden files are written once per format version")
	}
	ctx := context.Background()
	require.NoError(t, os.RemoveAll(goldenSessionsDir))
	r, err := OpenSessions(goldenSessionsDir, WithLayout("turn", 3), withClock(func() time.Time { return goldenTime }))
	require.NoError(t, err)
	s, err := r.New(ctx, map[string]string{"campaign": "crypt"})
	require.NoError(t, err)
	st, err := OpenSession[goldenState](r, s.ID)
	require.NoError(t, err)
	for turn := int64(1); turn <= 2; turn++ {
		_, err := st.Save(ctx, turn, goldenStateAt(turn))
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())
	_, err = r.Fork(ctx, s.ID, 1, map[string]string{"campaign": "crypt", "branch": "left door"})
	require.NoError(t, err)
	require.NoError(t, r.Close())
	for _, lock := range []string{"001/" + lockName} {
		require.NoError(t, os.Remove(filepath.Join(goldenSessionsDir, lock)))
	}
}

func TestGoldenSessionsV1Load(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := openSessions(t, goldenSessionsDir, WithLayout("turn", 3), ReadOnly())
	list, err := r.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	one, two := list[1], list[0]
	if one.ID != "001" {
		one, two = two, one
	}
	require.NoError(t, one.Err)
	require.NoError(t, two.Err)
	require.Equal(t, "001", one.ID)
	require.Equal(t, goldenTime, one.Created)
	require.Equal(t, map[string]string{"campaign": "crypt"}, one.Meta)
	require.Equal(t, 2, one.Checkpoints)
	require.Equal(t, int64(2), one.LastStep)
	require.Empty(t, one.Parent)
	require.Equal(t, "002", two.ID)
	require.Equal(t, "001", two.Parent)
	require.Equal(t, int64(1), two.ParentStep)
	require.Equal(t, map[string]string{"campaign": "crypt", "branch": "left door"}, two.Meta)
	require.Equal(t, 1, two.Checkpoints)

	st, err := OpenSession[goldenState](r, "002")
	require.NoError(t, err)
	got, info, err := st.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), info.Step)
	require.Equal(t, goldenStateAt(1), got)
	require.NoError(t, st.Close())
}
