package checkpoint_test

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/internal/format"
	"github.com/gocheckpoint/checkpoint/internal/names"
	"github.com/stretchr/testify/require"
)

// A layout's parser accepts exactly the names the layout writes, and each
// parsed name formats back to itself.
func TestParseNameAcceptsExactlyTheNamesTheLayoutWrites(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ok   bool
		want checkpoint.FileName
	}{
		{"turn_007.json", true, checkpoint.FileName{Step: 7, Kind: checkpoint.KindStep}},
		{"turn_007.json.gz", true, checkpoint.FileName{Step: 7, Kind: checkpoint.KindStep, Comp: format.CompressGzip}},
		{"turn_000.json", true, checkpoint.FileName{Step: 0, Kind: checkpoint.KindStep}},
		{"turn_1234.json", true, checkpoint.FileName{Step: 1234, Kind: checkpoint.KindStep}},
		{"turn_9223372036854775807.json", true, checkpoint.FileName{Step: 1<<63 - 1, Kind: checkpoint.KindStep}},
		{"turn_010.final.json", true, checkpoint.FileName{Step: 10, Kind: checkpoint.KindFinal}},
		{"turn_004.error.json", true, checkpoint.FileName{Step: 4, Kind: checkpoint.KindError, Attempt: 1}},
		{"turn_004.error-2.json.gz", true, checkpoint.FileName{Step: 4, Kind: checkpoint.KindError, Attempt: 2, Comp: format.CompressGzip}},
		{"turn_last.json", true, checkpoint.FileName{Kind: checkpoint.KindRolling}},
		{"turn_last.json.gz", true, checkpoint.FileName{Kind: checkpoint.KindRolling, Comp: format.CompressGzip}},
		{"turn_007.json.zst", true, checkpoint.FileName{Step: 7, Kind: checkpoint.KindStep, Comp: format.CompressZstd}},
		{"turn_010.final.json.zst", true, checkpoint.FileName{Step: 10, Kind: checkpoint.KindFinal, Comp: format.CompressZstd}},
		{"turn_last.json.zst", true, checkpoint.FileName{Kind: checkpoint.KindRolling, Comp: format.CompressZstd}},

		{"turn_7.json", false, checkpoint.FileName{}},                    // not padded
		{"turn_0007.json", false, checkpoint.FileName{}},                 // padded too far
		{"turn_01234.json", false, checkpoint.FileName{}},                // leading zero beyond width
		{"turn_9223372036854775808.json", false, checkpoint.FileName{}},  // overflows int64
		{"turn_-07.json", false, checkpoint.FileName{}},                  // sign
		{"turn_+07.json", false, checkpoint.FileName{}},                  // sign
		{"turn_007.error-1.json", false, checkpoint.FileName{}},          // attempt 1 has no number
		{"turn_007.error-02.json", false, checkpoint.FileName{}},         // leading zero
		{"turn_007.error-x.json", false, checkpoint.FileName{}},          // not a number
		{"turn_007.step.json", false, checkpoint.FileName{}},             // the step kind has no suffix
		{"turn_007.rolling.json", false, checkpoint.FileName{}},          // the rolling file is turn_last
		{"turn_007.json.bak", false, checkpoint.FileName{}},              // extension
		{"turn_007.JSON", false, checkpoint.FileName{}},                  // case
		{"turn_.json", false, checkpoint.FileName{}},                     // no step
		{"Turn_007.json", false, checkpoint.FileName{}},                  // prefix case
		{"turn007.json", false, checkpoint.FileName{}},                   // separator
		{".turn_007.json123", false, checkpoint.FileName{}},              // temp
		{"step_00000007.json", false, checkpoint.FileName{}},             // another layout
		{"turn_007.final.error.json", false, checkpoint.FileName{}},      // two kinds
		{"turn_last.final.json", false, checkpoint.FileName{}},           // rolling has no kind
		{"turn_007.json.gz.json", false, checkpoint.FileName{}},          // double extension
		{"turn_007.json.zst.gz", false, checkpoint.FileName{}},           // double compression
		{"turn_007.json.zstd", false, checkpoint.FileName{}},             // not the zstd extension
		{"turn_007.zst", false, checkpoint.FileName{}},                   // not JSON
		{"turn_\u0667\u0660\u0660.json", false, checkpoint.FileName{}},   // non-ASCII digits
		{"turn_007.json/../turn_008.json", false, checkpoint.FileName{}}, // path
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := checkpoint.ParseName("turn", 3, tt.name)
			require.Equal(t, tt.ok, ok)
			if ok {
				require.Equal(t, tt.want, got)
				require.Equal(t, tt.name, checkpoint.FormatName("turn", 3, got))
			}
		})
	}
}

// A store takes for its temporary files only the marked temps of its
// checkpoints and side files, never a user's hidden file.
func TestStoreTakesOnlyItsOwnMarkedTempsForTemps(t *testing.T) {
	t.Parallel()
	b := openTestDir(t)
	for name, want := range map[string]bool{
		".step_00000007.json.ckpt-tmp-123":     true, // the temp of a side file named step_00000007.json
		".notes.txt.json.ckpt-tmp-1":           true, // a side file's temp (side files end in .json)
		".turn_007.json5577006791947779410":    true, // a checkpoint's temp without the marker
		".turn_007.json.ckpt-tmp-55770067919":  true,
		".turn_last.json.gz123":                true,
		".result.json.ckpt-tmp-42":             true,
		".result.json42":                       false, // a user's hidden file, not a marked temp
		".step_00000007.json123":               false, // a side file's name and digits: a user may keep it
		".notes.json2":                         false,
		".session.json.ckpt-tmp-1":             false, // Sessions removes these, under its lock
		".ckpt-tmp-12":                         false,
		".turn_007.json.ckpt-tmp-":             false, // no random suffix
		".turn_007.json":                       false, // no random suffix
		"turn_007.json123":                     false, // no dot
		".checkpoint.lock":                     false,
		".bashrc":                              false,
		".notes.txt123":                        false,
		"..json1":                              false,
		".x/../y.json1":                        false,
		".turn_007.json.tmp":                   false,
		".turn_007.json123abc":                 false,
		".json123":                             false,
		"":                                     false,
		".":                                    false,
		". turn_007.json1":                     false,
		".turn_007.json.gz5577006791947779410": true,
	} {
		require.Equal(t, want, checkpoint.IsTemp("turn", 3, b, name), name)
	}
}

// FuzzParseName checks the file name parser: a name it accepts is exactly
// the name the store would write for what it parsed (so two names never
// mean one checkpoint), a temporary name is never a checkpoint, and no
// accepted name can leave the directory. The seed corpus is in
// testdata/fuzz/FuzzParseName.
//
//	go test -run '^$' -fuzz FuzzParseName -fuzztime 60s .
func FuzzParseName(f *testing.F) {
	for _, name := range []string{"turn_007.json", "turn_007.json.gz", "turn_010.final.json", "turn_004.error-2.json",
		"turn_last.json", "turn_1234.json", ".turn_007.json123", "turn_007.json.corrupt", "turn_-1.json", "turn_007.error-1.json"} {
		f.Add("turn", 3, name)
	}
	f.Add("step", 8, "step_00000001.json")
	f.Add("a.b", 1, "a.b_9.final.json.gz")
	b := openTestDir(f)
	f.Fuzz(func(t *testing.T, prefix string, digits int, name string) {
		if !checkpoint.ValidLayout(prefix, digits) {
			return
		}
		fn, ok := checkpoint.ParseName(prefix, digits, name)
		// Latest's scan passes over a name whose bound is below a step
		// it found: the bound of an accepted name is its step (any step
		// for the rolling file), and never refuses one.
		bound, boundOK, fromBytes, bytesOK := checkpoint.StepBound(prefix, digits, name)
		if bound != fromBytes || boundOK != bytesOK {
			t.Fatalf("stepBound(%q) = %d, %v, but of its bytes %d, %v", name, bound, boundOK, fromBytes, bytesOK)
		}
		if !ok {
			return
		}
		if !boundOK || fn.Kind == checkpoint.KindRolling && bound != math.MaxInt64 || fn.Kind != checkpoint.KindRolling && bound != fn.Step {
			t.Fatalf("parse(%q) = %+v, but stepBound says %d, %v", name, fn, bound, boundOK)
		}
		if got := checkpoint.FormatName(prefix, digits, fn); got != name {
			t.Fatalf("parse(%q) = %+v, which formats as %q", name, fn, got)
		}
		if checkpoint.IsTemp(prefix, digits, b, name) {
			t.Fatalf("%q is both a checkpoint and a temporary file", name)
		}
		if !names.Plain(name) || fn.Step < 0 {
			t.Fatalf("accepted %q: %+v", name, fn)
		}
	})
}

// openTestDir opens a directory of its own as the store's Backend, for a
// test that asks it what its names mean (storage.TempOf).
func openTestDir(t testing.TB) checkpoint.Backend {
	t.Helper()
	b, err := dirstore.Open(t.TempDir(), dirstore.NoSync())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestFileNamesFollowLayout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		opts []checkpoint.Option
		step int64
		want string
	}{
		{nil, 7, "step_00000007.json"},
		{[]checkpoint.Option{checkpoint.WithLayout("turn", 3)}, 7, "turn_007.json"},
		{[]checkpoint.Option{checkpoint.WithLayout("turn", 3)}, 1234, "turn_1234.json"},
		{[]checkpoint.Option{checkpoint.WithLayout("beat", 1), checkpoint.Gzip()}, 0, "beat_0.json.gz"},
		{[]checkpoint.Option{checkpoint.WithLayout("run-1.a", 5)}, 42, "run-1.a_00042.json"},
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

func TestOpenRefusesAnInvalidLayoutOrPolicy(t *testing.T) {
	t.Parallel()
	for _, l := range []struct {
		prefix string
		digits int
	}{{"", 3}, {".hidden", 3}, {"a/b", 3}, {"..", 3}, {"turn", 0}, {"turn", 20}, {strings.Repeat("x", 65), 3}} {
		_, err := checkpoint.Open[int](t.TempDir(), checkpoint.WithLayout(l.prefix, l.digits))
		require.ErrorIs(t, err, checkpoint.ErrInvalid, "layout %q %d", l.prefix, l.digits)
	}
	_, err := checkpoint.Open[int](t.TempDir(), checkpoint.SaveEvery(-1))
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	_, err = checkpoint.Open[int](t.TempDir(), checkpoint.KeepLast(-1))
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
}
