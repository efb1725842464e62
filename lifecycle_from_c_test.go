package checkpoint

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

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

func (u *unexportedWithText) MarshalText() ([]byte, error) { return []byte("x"), nil }

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
