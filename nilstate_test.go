package checkpoint_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/stretchr/testify/require"
)

// roundTripNil saves a nil state of T (at steps 1 and 2, the second
// with Append) and loads it back through Load, LoadExact, Latest and a
// reopened store (whose List reads the header index), with opts.
func roundTripNil[T any](t *testing.T, opts ...checkpoint.Option) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[T](t, dir, opts...)
	var nilState T
	info, err := s.Save(ctx, 1, nilState)
	require.NoError(t, err)
	require.Equal(t, int64(1), info.Step)
	info, err = s.Append(ctx, nilState)
	require.NoError(t, err)
	require.Equal(t, int64(2), info.Step)
	v, _, err := s.Load(ctx, 1)
	require.NoError(t, err)
	require.Nil(t, v)
	v, got, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Nil(t, v)
	require.Equal(t, int64(2), got.Step)
	v, _, err = s.LoadExact(ctx, got)
	require.NoError(t, err)
	require.Nil(t, v)
	require.NoError(t, s.Close())

	r := openStore[T](t, dir, checkpoint.ReadOnly())
	infos, err := r.List(ctx)
	require.NoError(t, err)
	require.Len(t, infos, 2)
	for _, info := range infos {
		v, _, err := r.LoadExact(ctx, info)
		require.NoError(t, err)
		require.Nil(t, v)
	}
}

// A nil slice, map or pointer, and a nil interface value, saves and loads
// back as nil, in every compression.
func TestNilStateSavesAndLoadsBackAsNil(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string][]checkpoint.Option{"plain": nil, "gzip": {checkpoint.Gzip()}, "zstd": {checkpoint.Zstd()}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			roundTripNil[[]int](t, opts...)
			roundTripNil[map[string]gameState](t, opts...)
			roundTripNil[*gameState](t, opts...)
			roundTripNil[any](t, opts...)
		})
	}
}

// A checkpoint whose state is null, loaded by a store of a type that
// cannot be nil (a struct), is ErrCorrupt, never a zero value; the file is
// not moved aside (it is intact, and loads as nil into a pointer), and
// Latest falls back to the step before it.
func TestNullStateIntoAStructIsErrCorruptNotAZeroValue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	p := openStore[*gameState](t, dir)
	st := sampleState(1)
	_, err := p.Save(ctx, 1, &st)
	require.NoError(t, err)
	_, err = p.Save(ctx, 2, nil)
	require.NoError(t, err)
	require.NoError(t, p.Close())

	s := openStore[gameState](t, dir)
	v, _, err := s.Load(ctx, 2)
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.ErrorContains(t, err, "the state is null")
	require.Zero(t, v)
	v, info, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), info.Step, "Latest falls back past the state it cannot load")
	require.Equal(t, st, v)
	names := dirNames(t, dir)
	require.Contains(t, names, "step_00000002.json", "an intact file is never moved aside")
	require.NoError(t, s.Close())

	again := openStore[*gameState](t, dir, checkpoint.ReadOnly())
	got, _, err := again.Load(ctx, 2)
	require.NoError(t, err)
	require.Nil(t, got)
}

// nullMarshaler is a struct that encodes as null: a store of it could
// never load what it saved.
type nullMarshaler struct{ X int }

func (nullMarshaler) MarshalJSON() ([]byte, error) { return []byte("null"), nil }

// A state that encodes as null in a store whose type cannot be nil is
// refused before anything is written.
func TestSaveRefusesNullForATypeThatCannotBeNil(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[nullMarshaler](t, dir)
	_, err := s.Save(ctx, 1, nullMarshaler{})
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	require.ErrorContains(t, err, "encodes as null")
	_, err = s.Append(ctx, nullMarshaler{})
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		require.NotContains(t, e.Name(), "step_", "nothing was written")
	}
}

// A null state's file is still checked: a bad checksum or an emptied file
// is ErrCorrupt, as for any state.
func TestNullStateDamageIsErrCorrupt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[[]int](t, dir)
	_, err := s.Save(ctx, 1, nil)
	require.NoError(t, err)
	_, err = s.Save(ctx, 2, nil)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	one, two := filepath.Join(dir, "step_00000001.json"), filepath.Join(dir, "step_00000002.json")
	data, err := os.ReadFile(one)
	require.NoError(t, err)
	require.Contains(t, string(data), `"state":null`)
	require.NoError(t, os.WriteFile(one, []byte(string(data[:len(data)-11])+"00000000\"}\n"), 0o644))
	require.NoError(t, os.WriteFile(two, nil, 0o644))
	r := openStore[[]int](t, dir, checkpoint.ReadOnly())
	for _, step := range []int64{1, 2} {
		_, _, err := r.Load(ctx, step)
		require.ErrorIs(t, err, checkpoint.ErrCorrupt, "step %d", step)
	}
}

// The README/Save doc: "A nil state (a nil slice, map or pointer ...) is
// saved as null and loads back as nil." json.RawMessage is a slice: a
// host keeping opaque JSON state saves a nil one.
func TestNilRawMessageLoadsBackAsNil(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[json.RawMessage](t, t.TempDir())
	_, err := s.Save(ctx, 1, nil)
	require.NoError(t, err)
	v, _, err := s.Load(ctx, 1)
	require.NoError(t, err)
	require.Nil(t, v, "a nil slice loads back as nil, got %q", string(v))
}

type nullV0 struct{ N int }
type nullV1 struct{ Count int }

// WithSchema's doc: a load applies the migrations from the file's schema
// up to version; one that cannot be migrated is ErrMigration and "Latest
// stops there with that error instead of resuming from an older step,
// which would silently fork the history". A nil state saved at schema 0
// (a store of a pointer) is given to the migration, which turns it into a
// state of the new struct type.
func TestNullStateOfAnOlderSchemaIsMigratedIntoATypeThatCannotBeNil(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	p := openStore[*nullV0](t, dir)
	_, err := p.Save(ctx, 1, &nullV0{N: 7})
	require.NoError(t, err)
	_, err = p.Save(ctx, 2, nil)
	require.NoError(t, err)
	require.NoError(t, p.Close())

	mig := checkpoint.Migration{From: 0, Migrate: func(in json.RawMessage) (json.RawMessage, error) {
		if string(bytes.TrimSpace(in)) == "null" {
			return json.RawMessage(`{"Count":-1}`), nil
		}
		var v nullV0
		if err := json.Unmarshal(in, &v); err != nil {
			return nil, err
		}
		return json.Marshal(nullV1{Count: v.N})
	}}
	s := openStore[nullV1](t, dir, checkpoint.WithSchema(1, mig))
	v, info, err := s.Latest(ctx)
	require.NoError(t, err, "the migration handles null")
	require.Equal(t, int64(2), info.Step, "Latest resumed from an older step: the history forked silently")
	require.Equal(t, nullV1{Count: -1}, v)
}
