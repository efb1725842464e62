//lint:file-ignore U1000 the state types of TestStateTypeWithNothingToEncodeIsRefused have unexported fields that nothing reads, on purpose

package checkpoint_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"

	"github.com/stretchr/testify/require"
)

// Open and OpenSessions of an empty directory name are ErrInvalid, never
// ErrNotFound.
func TestOpenOfEmptyDirIsInvalidNotNotFound(t *testing.T) {
	t.Parallel()
	for _, opts := range [][]checkpoint.Option{nil, {checkpoint.ReadOnly()}} {
		_, err := checkpoint.Open[int]("", opts...)
		require.ErrorIs(t, err, checkpoint.ErrInvalid)
		require.NotErrorIs(t, err, checkpoint.ErrNotFound)
		require.ErrorContains(t, err, "empty directory name")
		_, err = checkpoint.OpenSessions("", opts...)
		require.ErrorIs(t, err, checkpoint.ErrInvalid)
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

// Open and OpenSession refuse a state type that would encode to nothing
// (no exported field, nor a marshaler it would use), before writing
// anything; they accept every type that encodes something.
func TestStateTypeWithNothingToEncodeIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	refuse := func(open func() error, typ string) {
		t.Helper()
		err := open()
		require.ErrorIs(t, err, checkpoint.ErrInvalid, typ)
		require.ErrorContains(t, err, "state type "+typ+" has nothing to encode")
	}
	refuse(func() error { _, err := checkpoint.Open[onlyUnexported](dir, checkpoint.NoSync()); return err }, "checkpoint_test.onlyUnexported")
	refuse(func() error { _, err := checkpoint.Open[*onlyUnexported](dir, checkpoint.ReadOnly()); return err }, "*checkpoint_test.onlyUnexported")
	refuse(func() error { _, err := checkpoint.Open[embedsEmpty](dir, checkpoint.NoSync()); return err }, "checkpoint_test.embedsEmpty")
	refuse(func() error { _, err := checkpoint.Open[taggedOut](dir, checkpoint.NoSync()); return err }, "checkpoint_test.taggedOut")
	refuse(func() error { _, err := checkpoint.Open[selfEmbedding](dir, checkpoint.NoSync()); return err }, "checkpoint_test.selfEmbedding")
	refuse(func() error { _, err := checkpoint.Open[struct{}](dir, checkpoint.NoSync()); return err }, "struct {}")
	// A marshaler on the pointer is not used for a T that is not one: the
	// state is encoded as a value, which encoding/json cannot address.
	refuse(func() error { _, err := checkpoint.Open[unexportedWithText](dir, checkpoint.NoSync()); return err }, "checkpoint_test.unexportedWithText")
	require.Empty(t, dirNames(t, dir), "nothing is written, not even the lock")

	root, err := checkpoint.OpenSessions(t.TempDir(), checkpoint.NoSync())
	require.NoError(t, err)
	defer root.Close()
	sess, err := root.New(context.Background(), nil)
	require.NoError(t, err)
	refuse(func() error { _, err := checkpoint.OpenSessionStore[onlyUnexported](root, sess.ID); return err }, "checkpoint_test.onlyUnexported")

	accept := func(open func() (interface{ Close() error }, error), typ string) {
		t.Helper()
		s, err := open()
		require.NoError(t, err, typ)
		require.NoError(t, s.Close())
	}
	accept(func() (interface{ Close() error }, error) {
		return checkpoint.Open[map[string]int](dir, checkpoint.NoSync())
	}, "map")
	accept(func() (interface{ Close() error }, error) { return checkpoint.Open[[]int](dir, checkpoint.NoSync()) }, "slice")
	accept(func() (interface{ Close() error }, error) { return checkpoint.Open[any](dir, checkpoint.NoSync()) }, "interface")
	accept(func() (interface{ Close() error }, error) {
		return checkpoint.Open[json.RawMessage](dir, checkpoint.NoSync())
	}, "json.RawMessage")
	accept(func() (interface{ Close() error }, error) {
		return checkpoint.Open[time.Time](dir, checkpoint.NoSync())
	}, "time.Time")
	accept(func() (interface{ Close() error }, error) {
		return checkpoint.Open[unexportedWithMarshaler](dir, checkpoint.NoSync())
	}, "MarshalJSON")
	accept(func() (interface{ Close() error }, error) {
		return checkpoint.Open[*unexportedWithText](dir, checkpoint.NoSync())
	}, "MarshalText on the pointer, T a pointer")
	accept(func() (interface{ Close() error }, error) {
		return checkpoint.Open[embedsUnexported](dir, checkpoint.NoSync())
	}, "promoted exported field")
	accept(func() (interface{ Close() error }, error) {
		return checkpoint.Open[*embedsPointer](dir, checkpoint.NoSync())
	}, "embedded pointer")
	accept(func() (interface{ Close() error }, error) { return checkpoint.Open[int](dir, checkpoint.NoSync()) }, "int")

	// The accepted struct types round-trip their exported fields.
	s := openStore[embedsUnexported](t, dir, checkpoint.NoSync())
	ctx := context.Background()
	_, err = s.Save(ctx, 1, embedsUnexported{innerTurn: innerTurn{Turn: 7}, hidden: 1})
	require.NoError(t, err)
	v, _, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 7, v.Turn)
}
