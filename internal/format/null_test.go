package format

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// nullEnvelope returns a checkpoint of step 2 whose state is null, as
// WriteEnvelope writes it with comp.
func nullEnvelope(t *testing.T, comp Compression, schema int) []byte {
	t.Helper()
	c := NewCodec(comp, corpusMaxRead)
	state, err := c.EncodeState(nil)
	require.NoError(t, err)
	require.Equal(t, "null", state.String(), "a nil state encodes as null")
	var buf bytes.Buffer
	h := Header{Format: Version, Schema: schema, Step: 2, Kind: KindStep, Time: time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)}
	require.NoError(t, c.WriteEnvelope(&buf, h, state.Bytes()))
	return buf.Bytes()
}

// A null state loads as nil into every type that can be nil, the streamed
// way as the buffered way, and its header reads as any header does; into
// a type that cannot be nil it is ErrCorrupt (not proof of damage: the
// bytes are intact), never a zero value.
func TestNullStateLoadsAsNilOnlyWhereTheTypeCanBeNil(t *testing.T) {
	t.Parallel()
	sc := &Schema{}
	for _, comp := range Compressions {
		data := nullEnvelope(t, comp, 0)
		c := NewCodec(comp, corpusMaxRead)

		bs, ss := loadBufferedComp[[]int](t, data, sc), loadStreamed[[]int](c, data, sc, stepIs(2))
		require.NoError(t, bs.err)
		sameOutcome(t, "[]int", bs, ss)
		require.Nil(t, ss.v)

		bm, sm := loadBufferedComp[map[string]int](t, data, sc), loadStreamed[map[string]int](c, data, sc, stepIs(2))
		require.NoError(t, bm.err)
		sameOutcome(t, "map", bm, sm)
		require.Nil(t, sm.v)

		bp, sp := loadBufferedComp[*corpusState](t, data, sc), loadStreamed[*corpusState](c, data, sc, stepIs(2))
		require.NoError(t, bp.err)
		sameOutcome(t, "pointer", bp, sp)
		require.Nil(t, sp.v)

		ba, sa := loadBufferedComp[any](t, data, sc), loadStreamed[any](c, data, sc, stepIs(2))
		require.NoError(t, ba.err)
		sameOutcome(t, "any", ba, sa)
		require.Nil(t, sa.v)

		br, sr := loadBufferedComp[json.RawMessage](t, data, sc), loadStreamed[json.RawMessage](c, data, sc, stepIs(2))
		require.NoError(t, br.err)
		sameOutcome(t, "RawMessage", br, sr)

		for name, got := range map[string][2]error{
			"struct": {loadBufferedComp[corpusState](t, data, sc).err, loadStreamed[corpusState](c, data, sc, stepIs(2)).err},
			"int":    {loadBufferedComp[int](t, data, sc).err, loadStreamed[int](c, data, sc, stepIs(2)).err},
			"string": {loadBufferedComp[string](t, data, sc).err, loadStreamed[string](c, data, sc, stepIs(2)).err},
			"array":  {loadBufferedComp[[2]int](t, data, sc).err, loadStreamed[[2]int](c, data, sc, stepIs(2)).err},
		} {
			for i, err := range got {
				require.ErrorIs(t, err, ErrCorrupt, "%s (%d)", name, i)
				require.ErrorContains(t, err, "the state is null", "%s (%d)", name, i)
				require.False(t, IsDamage(err), "%s (%d): a null state is no proof of damage", name, i)
			}
		}
	}

	// The header of a null state's file reads as any other's.
	data := nullEnvelope(t, CompressNone, 0)
	h, _, err := ParseHeader(data)
	require.NoError(t, err)
	require.Equal(t, int64(2), h.Step)
	_, state, err := ParseEnvelope(data)
	require.NoError(t, err)
	require.Equal(t, "null", string(state))
}

// loadBufferedComp is loadBuffered for a file of any compression.
func loadBufferedComp[T any](t *testing.T, data []byte, sc *Schema) loaded[T] {
	t.Helper()
	var out loaded[T]
	out.err = NewCodec(CompressNone, corpusMaxRead).Read(bytes.NewReader(data), int64(len(data)), func(h Header, state []byte) error {
		out.h = h
		if err := stepIs(2)(h); err != nil {
			return err
		}
		return sc.Decode(h.Schema, state, &out.v)
	})
	return out
}

// A null state's damage is still damage: a bad checksum, a truncated
// file, an empty state.
func TestNullStateDamageIsStillDamage(t *testing.T) {
	t.Parallel()
	sc := &Schema{}
	c := NewCodec(CompressNone, corpusMaxRead)
	good := nullEnvelope(t, CompressNone, 0)
	for name, data := range map[string][]byte{
		"bad checksum":   bytes.Replace(good, []byte(`"state":null`), []byte(`"state":nulL`), 1),
		"truncated":      good[:len(good)-5],
		"empty":          {},
		"empty state":    withTrailerV2(string(good[:bytes.Index(good, []byte(`null`))])),
		"state replaced": bytes.Replace(good, []byte(`"state":null`), []byte(`"state":"nul"`), 1),
	} {
		b, s := loadBuffered[[]int](data, sc, corpusMaxRead, stepIs(2)), loadStreamed[[]int](c, data, sc, stepIs(2))
		require.ErrorIs(t, b.err, ErrCorrupt, name)
		require.True(t, IsDamage(b.err), "%s: %v", name, b.err)
		sameOutcome(t, name, b, s)
	}
}

// A null state loads as nil into a nilable type at every schema, without
// migrations; into a type that cannot be nil, one of an older schema goes
// through the migrations and one of the store's schema is ErrCorrupt; a
// newer schema's null is still refused.
func TestNullStateSkipsMigrationsOnlyIntoANilableType(t *testing.T) {
	t.Parallel()
	called := false
	sc := &Schema{Version: 2, Migrations: []Migration{
		{From: 0, Migrate: func(json.RawMessage) (json.RawMessage, error) { called = true; return nil, errors.New("no") }},
		{From: 1, Migrate: func(json.RawMessage) (json.RawMessage, error) { called = true; return nil, errors.New("no") }},
	}}
	require.NoError(t, sc.Validate())
	var v []int
	require.NoError(t, sc.Decode(0, []byte("null"), &v))
	require.Nil(t, v)
	require.False(t, called)
	var st corpusState
	require.ErrorIs(t, sc.Decode(1, []byte("null"), &st), ErrMigration)
	require.True(t, called, "a null of an older schema into a struct is migrated")
	require.ErrorIs(t, sc.Decode(2, []byte("null"), &st), ErrCorrupt)
	require.ErrorIs(t, sc.Decode(3, []byte("null"), &v), ErrNewerSchema)

	// A type whose UnmarshalJSON keeps null (json.RawMessage) loads nil.
	var raw json.RawMessage = json.RawMessage("x")
	require.NoError(t, sc.Decode(2, []byte("null"), &raw))
	require.Nil(t, raw)
}
