//lint:file-ignore U1000 the state types of TestStateTypeWithNothingToEncodeIsRefused have unexported fields that nothing reads, on purpose

package checkpoint

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The mistakes a new user makes in the first hour, each answered with an
// error that says what was wrong.

func TestSaveOfNegativeStepNamesNoImpossibleFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStore[int](t, dir, NoSync())
	_, err := s.Save(context.Background(), -1, 1)
	require.ErrorIs(t, err, ErrInvalid)
	require.Equal(t, "checkpoint: save step -1 "+dir+": invalid argument: negative step -1: steps are 0 or more", err.Error())
	require.NotContains(t, err.Error(), "-1.json")
}

func TestOpenOfEmptyDirIsInvalidNotNotFound(t *testing.T) {
	t.Parallel()
	for _, opts := range [][]Option{nil, {ReadOnly()}} {
		_, err := Open[int]("", opts...)
		require.ErrorIs(t, err, ErrInvalid)
		require.NotErrorIs(t, err, ErrNotFound)
		require.ErrorContains(t, err, "empty directory name")
		_, err = OpenSessions("", opts...)
		require.ErrorIs(t, err, ErrInvalid)
	}
}

func TestLatestErrorOfManyDamagedFilesIsBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// The 2,000 files gave a 300 KB error; 200 are as many lines.
	for step := 1; step <= 200; step++ {
		writeRaw(t, filepath.Join(dir, fmt.Sprintf("step_%08d.json", step)), "damaged")
	}
	s := openStore[int](t, dir, NoSync(), ReadOnly())
	_, _, err := s.Latest(context.Background())
	require.ErrorIs(t, err, ErrCorrupt)
	require.NotErrorIs(t, err, ErrNotFound)
	msg := err.Error()
	require.Less(t, len(msg), 2000, "a few lines, not one per file:\n%s", msg)
	require.Contains(t, msg, "none of the 200 checkpoints loads")
	require.Contains(t, msg, "step_00000200.json", "the newest is named")
	require.True(t, strings.HasSuffix(msg, "\nand 195 more"), msg)
	require.Len(t, strings.Split(msg, "\n"), maxListed+1)
}

func writeRaw(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}

func TestWrongLayoutIsNotAFreshStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	w := openStore[int](t, dir, WithLayout("turn", 3), NoSync())
	for turn := int64(1); turn <= 3; turn++ {
		_, err := w.Save(ctx, turn, int(turn))
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())

	s := openStore[int](t, dir, NoSync())
	for name, latest := range map[string]func(context.Context) (int, Info, error){"Latest": s.Latest, "LatestClean": s.LatestClean} {
		_, _, err := latest(ctx)
		require.ErrorIs(t, err, ErrInvalid, name)
		require.NotErrorIs(t, err, ErrNotFound, "%s: ErrNotFound would mean a fresh start", name)
		require.ErrorContains(t, err, `no checkpoint of this store's layout step/8, but 3 files of layout turn/3 (turn_003.json): open the store with WithLayout("turn", 3)`)
	}
	// The right layout still opens the directory as it was.
	v, _, err := openStore[int](t, dir, WithLayout("turn", 3), ReadOnly()).Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, v)
}

// The other layout is recognised from every file it names, not from its
// newest alone: a truncated newest checkpoint, or a damaged rolling file,
// beside good ones is still no fresh start.
func TestWrongLayoutWithADamagedNewestFileIsNotAFreshStart(t *testing.T) {
	t.Parallel()
	for damaged, good := range map[string]string{"turn_020.json": "turn_019.json", "turn_last.json": "turn_020.json"} {
		t.Run(damaged, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dir := t.TempDir()
			w := openStore[int](t, dir, WithLayout("turn", 3), Every(1), WithRolling(), NoSync())
			for turn := int64(1); turn <= 20; turn++ {
				_, err := w.Save(ctx, turn, int(turn))
				require.NoError(t, err)
			}
			if damaged == "turn_last.json" {
				require.NoError(t, w.Close())
				w = openStore[int](t, dir, WithLayout("turn", 3), Every(100), WithRolling(), NoSync())
				_, _, err := w.Tick(ctx, 21, 21)
				require.NoError(t, err)
			}
			require.NoError(t, w.Close())
			path := filepath.Join(dir, damaged)
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(path, data[:len(data)/3], 0o644))

			s := openStore[int](t, dir, NoSync())
			_, _, err = s.Latest(ctx)
			require.ErrorIs(t, err, ErrInvalid)
			require.NotErrorIs(t, err, ErrNotFound, "ErrNotFound would mean a fresh start")
			require.ErrorContains(t, err, `files of layout turn/3 (`+good+`): open the store with WithLayout("turn", 3)`)
		})
	}
}

func TestFreshStoreWithSideFileNamedLikeACheckpointStartsFresh(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	writeRaw(t, filepath.Join(dir, "report_2024.json"), `{"year":2024}`)
	s := openStore[int](t, dir, NoSync())
	_, _, err := s.Latest(ctx)
	require.ErrorIs(t, err, ErrNotFound, "a side file is no checkpoint of another layout")

	// A store whose only checkpoint is an error checkpoint: LatestClean
	// finds nothing clean, in the right layout.
	_, err = s.SaveError(ctx, 1, 1, fmt.Errorf("boom"))
	require.NoError(t, err)
	_, _, err = s.LatestClean(ctx)
	require.ErrorIs(t, err, ErrNotFound)
}

type (
	onlyUnexported struct {
		turn  int
		score int
	}
	unexportedWithMarshaler struct{ turn int }
	unexportedWithText      struct{ turn int }
	innerTurn               struct{ Turn int }
	embedsUnexported        struct {
		innerTurn
		hidden int
	}
	embedsPointer struct {
		*innerTurn
	}
	embedsEmpty struct {
		onlyUnexported
		skipped int `json:"-"`
	}
	taggedOut struct {
		Turn int `json:"-"`
	}
	selfEmbedding struct {
		*selfEmbedding
		n int
	}
)

func (u unexportedWithMarshaler) MarshalJSON() ([]byte, error) { return json.Marshal(u.turn) }
func (u *unexportedWithText) MarshalText() ([]byte, error)     { return []byte("x"), nil }

func TestStateTypeWithNothingToEncodeIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	refuse := func(open func() error, typ string) {
		t.Helper()
		err := open()
		require.ErrorIs(t, err, ErrInvalid, typ)
		require.ErrorContains(t, err, "state type "+typ+" has nothing to encode")
	}
	refuse(func() error { _, err := Open[onlyUnexported](dir, NoSync()); return err }, "checkpoint.onlyUnexported")
	refuse(func() error { _, err := Open[*onlyUnexported](dir, ReadOnly()); return err }, "*checkpoint.onlyUnexported")
	refuse(func() error { _, err := Open[embedsEmpty](dir, NoSync()); return err }, "checkpoint.embedsEmpty")
	refuse(func() error { _, err := Open[taggedOut](dir, NoSync()); return err }, "checkpoint.taggedOut")
	refuse(func() error { _, err := Open[selfEmbedding](dir, NoSync()); return err }, "checkpoint.selfEmbedding")
	refuse(func() error { _, err := Open[struct{}](dir, NoSync()); return err }, "struct {}")
	// A marshaler on the pointer is not used for a T that is not one: the
	// state is encoded as a value, which encoding/json cannot address.
	refuse(func() error { _, err := Open[unexportedWithText](dir, NoSync()); return err }, "checkpoint.unexportedWithText")
	require.Empty(t, dirNames(t, dir), "nothing is written, not even the lock")

	root, err := OpenSessions(t.TempDir(), NoSync())
	require.NoError(t, err)
	defer root.Close()
	sess, err := root.New(context.Background(), nil)
	require.NoError(t, err)
	refuse(func() error { _, err := OpenSession[onlyUnexported](root, sess.ID); return err }, "checkpoint.onlyUnexported")

	accept := func(open func() (interface{ Close() error }, error), typ string) {
		t.Helper()
		s, err := open()
		require.NoError(t, err, typ)
		require.NoError(t, s.Close())
	}
	accept(func() (interface{ Close() error }, error) { return Open[map[string]int](dir, NoSync()) }, "map")
	accept(func() (interface{ Close() error }, error) { return Open[[]int](dir, NoSync()) }, "slice")
	accept(func() (interface{ Close() error }, error) { return Open[any](dir, NoSync()) }, "interface")
	accept(func() (interface{ Close() error }, error) { return Open[json.RawMessage](dir, NoSync()) }, "json.RawMessage")
	accept(func() (interface{ Close() error }, error) { return Open[time.Time](dir, NoSync()) }, "time.Time")
	accept(func() (interface{ Close() error }, error) { return Open[unexportedWithMarshaler](dir, NoSync()) }, "MarshalJSON")
	accept(func() (interface{ Close() error }, error) { return Open[*unexportedWithText](dir, NoSync()) }, "MarshalText on the pointer, T a pointer")
	accept(func() (interface{ Close() error }, error) { return Open[embedsUnexported](dir, NoSync()) }, "promoted exported field")
	accept(func() (interface{ Close() error }, error) { return Open[*embedsPointer](dir, NoSync()) }, "embedded pointer")
	accept(func() (interface{ Close() error }, error) { return Open[int](dir, NoSync()) }, "int")

	// The accepted struct types round-trip their exported fields.
	s := openStore[embedsUnexported](t, dir, NoSync())
	ctx := context.Background()
	_, err = s.Save(ctx, 1, embedsUnexported{innerTurn: innerTurn{Turn: 7}, hidden: 1})
	require.NoError(t, err)
	v, _, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 7, v.Turn)
}

func TestPruneKindsOfStepOrRollingIsInvalid(t *testing.T) {
	t.Parallel()
	for _, k := range []Kind{KindStep, KindRolling, "final "} {
		_, err := Open[int](t.TempDir(), KeepLast(1), PruneKinds(k))
		require.ErrorIs(t, err, ErrInvalid, k)
		require.ErrorContains(t, err, fmt.Sprintf("PruneKinds(%q)", k))
	}
	s, err := Open[int](t.TempDir(), KeepLast(1), PruneKinds(KindFinal, KindError))
	require.NoError(t, err)
	require.NoError(t, s.Close())
}
