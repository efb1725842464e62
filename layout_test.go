package checkpoint

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gocheckpoint/checkpoint/internal/names"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint/dirstore"
)

func TestLayoutParse(t *testing.T) {
	t.Parallel()
	l := layout{prefix: "turn", digits: 3}
	tests := []struct {
		name string
		ok   bool
		want fileName
	}{
		{"turn_007.json", true, fileName{step: 7, kind: KindStep}},
		{"turn_007.json.gz", true, fileName{step: 7, kind: KindStep, comp: compressGzip}},
		{"turn_000.json", true, fileName{step: 0, kind: KindStep}},
		{"turn_1234.json", true, fileName{step: 1234, kind: KindStep}},
		{"turn_9223372036854775807.json", true, fileName{step: 1<<63 - 1, kind: KindStep}},
		{"turn_010.final.json", true, fileName{step: 10, kind: KindFinal}},
		{"turn_004.error.json", true, fileName{step: 4, kind: KindError, attempt: 1}},
		{"turn_004.error-2.json.gz", true, fileName{step: 4, kind: KindError, attempt: 2, comp: compressGzip}},
		{"turn_last.json", true, fileName{kind: KindRolling}},
		{"turn_last.json.gz", true, fileName{kind: KindRolling, comp: compressGzip}},
		{"turn_007.json.zst", true, fileName{step: 7, kind: KindStep, comp: compressZstd}},
		{"turn_010.final.json.zst", true, fileName{step: 10, kind: KindFinal, comp: compressZstd}},
		{"turn_last.json.zst", true, fileName{kind: KindRolling, comp: compressZstd}},

		{"turn_7.json", false, fileName{}},                    // not padded
		{"turn_0007.json", false, fileName{}},                 // padded too far
		{"turn_01234.json", false, fileName{}},                // leading zero beyond width
		{"turn_9223372036854775808.json", false, fileName{}},  // overflows int64
		{"turn_-07.json", false, fileName{}},                  // sign
		{"turn_+07.json", false, fileName{}},                  // sign
		{"turn_007.error-1.json", false, fileName{}},          // attempt 1 has no number
		{"turn_007.error-02.json", false, fileName{}},         // leading zero
		{"turn_007.error-x.json", false, fileName{}},          // not a number
		{"turn_007.step.json", false, fileName{}},             // the step kind has no suffix
		{"turn_007.rolling.json", false, fileName{}},          // the rolling file is turn_last
		{"turn_007.json.bak", false, fileName{}},              // extension
		{"turn_007.JSON", false, fileName{}},                  // case
		{"turn_.json", false, fileName{}},                     // no step
		{"Turn_007.json", false, fileName{}},                  // prefix case
		{"turn007.json", false, fileName{}},                   // separator
		{".turn_007.json123", false, fileName{}},              // temp
		{"step_00000007.json", false, fileName{}},             // another layout
		{"turn_007.final.error.json", false, fileName{}},      // two kinds
		{"turn_last.final.json", false, fileName{}},           // rolling has no kind
		{"turn_007.json.gz.json", false, fileName{}},          // double extension
		{"turn_007.json.zst.gz", false, fileName{}},           // double compression
		{"turn_007.json.zstd", false, fileName{}},             // not the zstd extension
		{"turn_007.zst", false, fileName{}},                   // not JSON
		{"turn_\u0667\u0660\u0660.json", false, fileName{}},   // non-ASCII digits
		{"turn_007.json/../turn_008.json", false, fileName{}}, // path
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := l.parse(tt.name)
			require.Equal(t, tt.ok, ok)
			if ok {
				require.Equal(t, tt.want, got)
				require.Equal(t, tt.name, l.format(got))
			}
		})
	}
}

func TestIsTemp(t *testing.T) {
	t.Parallel()
	b := openTestDir(t)
	l := layout{prefix: "turn", digits: 3}
	for name, want := range map[string]bool{
		".step_00000007.json.ckpt-tmp-123":     true, // the temp of a side file named step_00000007.json
		".notes.txt.json.ckpt-tmp-1":           true, // a side file's temp (side files end in .json)
		".turn_007.json5577006791947779410":    true, // a checkpoint's temp before the marker
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
		require.Equal(t, want, l.isTemp(b, name), name)
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
		l := layout{prefix: prefix, digits: digits}
		if l.validate() != nil {
			return
		}
		fn, ok := l.parse(name)
		if !ok {
			return
		}
		if got := l.format(fn); got != name {
			t.Fatalf("parse(%q) = %+v, which formats as %q", name, fn, got)
		}
		if l.isTemp(b, name) {
			t.Fatalf("%q is both a checkpoint and a temporary file", name)
		}
		if !names.Plain(name) || fn.step < 0 {
			t.Fatalf("accepted %q: %+v", name, fn)
		}
	})
}

// openTestDir opens a directory of its own as the store's Backend, for a
// test that asks it what its names mean (storage.TempOf).
func openTestDir(t testing.TB) Backend {
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
