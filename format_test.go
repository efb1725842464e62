package checkpoint

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint/internal/format/corpus"
	"github.com/stretchr/testify/require"
)

// The golden checkpoints of every format version are in
// internal/format/testdata/vN, beside the format, whose tests prove them
// byte for byte (golden_test.go there). They must load forever: here, a
// store loads them, as a program would.

type goldenState = corpus.GoldenState

var (
	goldenStateAt = corpus.GoldenStateAt
	goldenTime    = corpus.GoldenTime
	goldenFiles   = corpus.GoldenFiles
	goldenFormats = corpus.GoldenFormats
)

func goldenDir(format int) string {
	return corpus.GoldenDir(filepath.Join("internal", "format"), format)
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
				t.Run(g.Name, func(t *testing.T) {
					got, info, err := s.Load(ctx, g.Step)
					require.NoError(t, err)
					require.Equal(t, goldenStateAt(g.Step), got)
					require.Equal(t, g.Name, info.Name())
					require.Equal(t, g.Kind, info.Kind)
					require.Equal(t, g.Comp.String(), info.Compression)
					require.Equal(t, format, info.Format)
					require.Equal(t, goldenTime, info.Time)
					require.Equal(t, g.Meta, info.Meta)
					require.Equal(t, g.Err, info.Error)
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
