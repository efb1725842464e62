package checkpoint_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/internal/format"
	"github.com/stretchr/testify/require"
)

// A hero's state went through three schemas:
//
//	0: {"name":"Ana","hp":7,"max_hp":12}
//	1: {"name":"Ana","health":7,"max_health":12}       (fields renamed)
//	2: {"name":"Ana","health":{"now":7,"max":12}}        (fields merged)
type heroV0 struct {
	Name  string `json:"name"`
	HP    int    `json:"hp"`
	MaxHP int    `json:"max_hp"`
}

type heroV1 struct {
	Name      string `json:"name"`
	Health    int    `json:"health"`
	MaxHealth int    `json:"max_health"`
}

type health struct {
	Now int `json:"now"`
	Max int `json:"max"`
}

type heroV2 struct {
	Name   string `json:"name"`
	Health health `json:"health"`
}

// editJSON decodes an object, lets edit change its fields and encodes it.
func editJSON(in json.RawMessage, edit func(m map[string]json.RawMessage) error) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(in, &m); err != nil {
		return nil, err
	}
	if err := edit(m); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// heroMigrations upgrade a hero from schema 0 to 2.
var heroMigrations = []checkpoint.Migration{
	{From: 0, Migrate: func(in json.RawMessage) (json.RawMessage, error) {
		return editJSON(in, func(m map[string]json.RawMessage) error {
			m["health"], m["max_health"] = m["hp"], m["max_hp"]
			delete(m, "hp")
			delete(m, "max_hp")
			return nil
		})
	}},
	{From: 1, Migrate: func(in json.RawMessage) (json.RawMessage, error) {
		return editJSON(in, func(m map[string]json.RawMessage) error {
			h, err := json.Marshal(map[string]json.RawMessage{"now": m["health"], "max": m["max_health"]})
			m["health"] = h
			delete(m, "max_health")
			return err
		})
	}},
}

// saveAt saves state as step in dir with a store of the given options, and
// closes it, as one release of a program would.
func saveAt[T any](t *testing.T, dir string, step int64, state T, opts ...checkpoint.Option) checkpoint.Info {
	t.Helper()
	s, err := checkpoint.Open[T](dir, append([]checkpoint.Option{checkpoint.NoSync()}, opts...)...)
	require.NoError(t, err)
	info, err := s.Save(context.Background(), step, state)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	return info
}

// heroStoreOf writes steps 1, 2 and 3 at schemas 0, 1 and 2, as three
// releases of a program would.
func heroStoreOf(t *testing.T) string {
	dir := t.TempDir()
	saveAt(t, dir, 1, heroV0{Name: "Ana", HP: 7, MaxHP: 12})
	saveAt(t, dir, 2, heroV1{Name: "Ana", Health: 8, MaxHealth: 12}, checkpoint.WithSchema(1, heroMigrations[0]))
	saveAt(t, dir, 3, heroV2{Name: "Ana", Health: health{9, 12}}, checkpoint.WithSchema(2, heroMigrations...))
	return dir
}

// fileBytes returns every file of dir and its bytes.
func fileBytes(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := make(map[string]string)
	for _, name := range dirNames(t, dir) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		out[name] = string(b)
	}
	return out
}

func TestSchemaIsRecordedInHeaderAndOmittedWithout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	plain := saveAt(t, dir, 1, heroV0{Name: "Ana"})
	with := saveAt(t, dir, 2, heroV2{Name: "Ana"}, checkpoint.WithSchema(2, heroMigrations...))

	b, err := os.ReadFile(plain.Path)
	require.NoError(t, err)
	require.NotContains(t, string(b), `"schema"`, "a file saved without WithSchema has no schema field, as before schemas")
	require.Zero(t, plain.Schema)
	b, err = os.ReadFile(with.Path)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(b), `{"format":2,"schema":2,"step":2,`), string(b))
	require.Equal(t, 2, with.Schema)

	s := openStore[json.RawMessage](t, dir, checkpoint.ReadOnly(), checkpoint.WithSchema(2, heroMigrations...))
	list, err := s.List(context.Background())
	require.NoError(t, err)
	require.Equal(t, []int{0, 2}, []int{list[0].Schema, list[1].Schema}, "List reports each file's schema without decoding it")
}

func TestMigrationsApplyInOrder(t *testing.T) {
	t.Parallel()
	type trail struct {
		Steps []string `json:"steps"`
	}
	// Each migration appends its name; given out of order, they run in
	// the order of From.
	step := func(from int) checkpoint.Migration {
		return checkpoint.Migration{From: from, Migrate: func(in json.RawMessage) (json.RawMessage, error) {
			var tr trail
			if err := json.Unmarshal(in, &tr); err != nil {
				return nil, err
			}
			tr.Steps = append(tr.Steps, fmt.Sprintf("%d>%d", from, from+1))
			return json.Marshal(tr)
		}}
	}
	dir := t.TempDir()
	saveAt(t, dir, 1, trail{Steps: []string{"saved at 0"}})
	saveAt(t, dir, 2, trail{Steps: []string{"saved at 2"}}, checkpoint.WithSchema(2, step(0), step(1)))

	s := openStore[trail](t, dir, checkpoint.WithSchema(4, step(3), step(1), step(0), step(2)), checkpoint.NoSync())
	ctx := context.Background()
	got, info, err := s.Load(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, []string{"saved at 0", "0>1", "1>2", "2>3", "3>4"}, got.Steps)
	require.Zero(t, info.Schema, "Info.Schema is the file's schema")
	got, info, err = s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"saved at 2", "2>3", "3>4"}, got.Steps)
	require.Equal(t, 2, info.Schema)
}

func TestFileOfEachSchemaLoadsInOneStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := heroStoreOf(t)
	s := openStore[heroV2](t, dir, checkpoint.WithSchema(2, heroMigrations...), checkpoint.NoSync())

	for step, want := range map[int64]heroV2{
		1: {Name: "Ana", Health: health{7, 12}},
		2: {Name: "Ana", Health: health{8, 12}},
		3: {Name: "Ana", Health: health{9, 12}},
	} {
		got, info, err := s.Load(ctx, step)
		require.NoError(t, err, "step %d", step)
		require.Equal(t, want, got, "step %d", step)
		require.Equal(t, int(step-1), info.Schema)
	}
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 3)
	for i, info := range list {
		require.Equal(t, i, info.Schema)
		got, _, err := s.LoadExact(ctx, info)
		require.NoError(t, err)
		require.Equal(t, i+7, got.Health.Now)
	}
	// A new save goes on at the store's schema.
	info, err := s.Save(ctx, 4, heroV2{Name: "Ana", Health: health{10, 12}})
	require.NoError(t, err)
	require.Equal(t, 2, info.Schema)
}

func TestNewerSchemaIsRefusedByLoadLatestAndLoadExact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := heroStoreOf(t) // steps 1-3 at schemas 0-2
	before := fileBytes(t, dir)
	newer := filepath.Join(dir, "step_00000003.json")

	// A downgraded program: it reads schema 1 and older.
	s := openStore[heroV1](t, dir, checkpoint.WithSchema(1, heroMigrations[0]), checkpoint.NoSync())
	requireNewer := func(err error, op string) {
		t.Helper()
		require.ErrorIs(t, err, checkpoint.ErrNewerSchema)
		require.NotErrorIs(t, err, checkpoint.ErrCorrupt)
		require.ErrorContains(t, err, "checkpoint: "+op+" step 3 "+newer+": ")
		require.ErrorContains(t, err, "the file has schema 2, this store reads schema 1 and older")
	}
	_, _, err := s.Load(ctx, 3)
	requireNewer(err, "load")
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, list[2].Schema)
	_, _, err = s.LoadExact(ctx, list[2])
	requireNewer(err, "load")
	// Latest stops at it: resuming from step 2 would fork the history.
	_, _, err = s.Latest(ctx)
	requireNewer(err, "latest")
	_, _, err = s.LatestClean(ctx)
	requireNewer(err, "latest clean")

	// The older steps still load, migrated.
	got, _, err := s.Load(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, heroV1{Name: "Ana", Health: 7, MaxHealth: 12}, got)

	// It is not damage: a save of its step is ErrExists, and the file is
	// not moved aside.
	_, err = s.Save(ctx, 3, heroV1{Name: "Ana"})
	require.ErrorIs(t, err, checkpoint.ErrExists)
	require.Equal(t, before, fileBytes(t, dir), "nothing was moved aside or changed")
}

func TestFailingMigrationIsErrMigrationAndLatestStops(t *testing.T) {
	t.Parallel()
	errNoHealth := errors.New("no health")
	fails := func(in json.RawMessage) (json.RawMessage, error) { return nil, errNoHealth }
	for _, tc := range []struct {
		name    string
		migrate func(json.RawMessage) (json.RawMessage, error)
		says    string
		is      error
	}{
		{"error", fails, "migration from schema 1 to 2: no health", errNoHealth},
		{"invalid JSON", func(json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`{"health":`), nil },
			"migration from schema 1 to 2: it returned invalid JSON", nil},
		{"null", func(json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`null`), nil },
			"migration from schema 1 to 2: it returned null", nil},
		{"panic", func(json.RawMessage) (json.RawMessage, error) { panic("index out of range") },
			"migration from schema 1 to 2: panic: index out of range", nil},
		{"does not decode", func(json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`{"health":"full"}`), nil },
			"the state migrated from schema 1 to 2 does not decode: json: cannot unmarshal", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dir := heroStoreOf(t)
			// Step 4 at schema 1 is newer than step 3 at schema 2: the
			// program was downgraded for a while.
			saveAt(t, dir, 4, heroV1{Name: "Ana", Health: 6, MaxHealth: 12}, checkpoint.WithSchema(1, heroMigrations[0]))
			before := fileBytes(t, dir)
			path := filepath.Join(dir, "step_00000004.json")

			s := openStore[heroV2](t, dir, checkpoint.WithSchema(2, heroMigrations[0], checkpoint.Migration{From: 1, Migrate: tc.migrate}), checkpoint.NoSync())
			_, _, err := s.Load(ctx, 4)
			require.ErrorIs(t, err, checkpoint.ErrMigration)
			require.NotErrorIs(t, err, checkpoint.ErrCorrupt)
			if tc.is != nil {
				require.ErrorIs(t, err, tc.is)
			}
			require.ErrorContains(t, err, "checkpoint: load step 4 "+path+": schema migration failed: "+tc.says)

			_, _, err = s.Latest(ctx)
			require.ErrorIs(t, err, checkpoint.ErrMigration, "Latest must not fall back to step 3")
			require.ErrorContains(t, err, "checkpoint: latest step 4 "+path+": ")

			_, err = s.Save(ctx, 4, heroV2{Name: "Ana"})
			require.ErrorIs(t, err, checkpoint.ErrExists)
			require.Equal(t, before, fileBytes(t, dir), "the file is untouched")

			got, _, err := s.Load(ctx, 3)
			require.NoError(t, err, "a file of the store's schema needs no migration")
			require.Equal(t, 9, got.Health.Now)
		})
	}
}

func TestFileOlderThanChainIsErrMigration(t *testing.T) {
	t.Parallel()
	dir := heroStoreOf(t)
	// This release dropped support for schema 0: its chain starts at 1.
	s := openStore[heroV2](t, dir, checkpoint.WithSchema(2, heroMigrations[1]), checkpoint.NoSync())
	_, _, err := s.Load(context.Background(), 1)
	require.ErrorIs(t, err, checkpoint.ErrMigration)
	require.ErrorContains(t, err, "the file has schema 0 and no migration starts there (the oldest schema this store migrates from is 1)")
	_, _, err = s.Load(context.Background(), 2)
	require.NoError(t, err)

	// Without migrations, only the store's own schema loads.
	s = openStore[heroV2](t, dir, checkpoint.WithSchema(2), checkpoint.ReadOnly())
	_, _, err = s.Load(context.Background(), 2)
	require.ErrorIs(t, err, checkpoint.ErrMigration)
	_, _, err = s.Load(context.Background(), 3)
	require.NoError(t, err)
}

func TestBrokenChainIsRefusedAtOpen(t *testing.T) {
	t.Parallel()
	id := func(in json.RawMessage) (json.RawMessage, error) { return in, nil }
	m := func(from int) checkpoint.Migration { return checkpoint.Migration{From: from, Migrate: id} }
	for _, tc := range []struct {
		name    string
		version int
		chain   []checkpoint.Migration
		says    string
	}{
		{"gap", 4, []checkpoint.Migration{m(0), m(1), m(3)}, "WithSchema(4): migration from schema 3: the chain has a gap: no migration from schema 2"},
		{"gap at the end", 3, []checkpoint.Migration{m(0), m(1)}, "WithSchema(3): the chain has a gap: no migration from schema 2"},
		{"two from one version", 3, []checkpoint.Migration{m(0), m(1), m(2), m(1)}, "WithSchema(3): migration from schema 1: given twice"},
		{"From at the version", 2, []checkpoint.Migration{m(0), m(1), m(2)}, "WithSchema(2): migration from schema 2: From must be below the version 2"},
		{"From above the version", 1, []checkpoint.Migration{m(0), m(5)}, "WithSchema(1): migration from schema 5: From must be below the version 1"},
		{"negative From", 1, []checkpoint.Migration{m(-1), m(0)}, "WithSchema(1): migration from schema -1: From must be 0 or more"},
		{"nil Migrate", 2, []checkpoint.Migration{m(0), {From: 1}}, "WithSchema(2): migration from schema 1: Migrate is nil"},
		{"negative version", -1, nil, "WithSchema(-1): the version must be 0 or more"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "store")
			_, err := checkpoint.Open[heroV2](dir, checkpoint.WithSchema(tc.version, tc.chain...))
			require.ErrorIs(t, err, checkpoint.ErrInvalid)
			require.ErrorContains(t, err, tc.says)
			require.NoDirExists(t, dir, "a refused Open creates nothing")
			_, err = checkpoint.OpenSessions(dir, checkpoint.WithSchema(tc.version, tc.chain...))
			require.ErrorIs(t, err, checkpoint.ErrInvalid)
		})
	}
	// A chain may start above 0, and a version may have none.
	for _, opt := range []checkpoint.Option{checkpoint.WithSchema(3, m(2), m(1)), checkpoint.WithSchema(3), checkpoint.WithSchema(0)} {
		s, err := checkpoint.Open[heroV2](t.TempDir(), opt, checkpoint.NoSync())
		require.NoError(t, err)
		require.NoError(t, s.Close())
	}
}

func TestMigratingLoadsLeaveFilesUnchanged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := heroStoreOf(t)
	before := fileBytes(t, dir)
	stats := make(map[string]os.FileInfo)
	for name := range before {
		fi, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		stats[name] = fi
	}

	s := openStore[heroV2](t, dir, checkpoint.WithSchema(2, heroMigrations...), checkpoint.KeepLast(10), checkpoint.NoSync())
	for step := int64(1); step <= 3; step++ {
		_, _, err := s.Load(ctx, step)
		require.NoError(t, err)
	}
	list, err := s.List(ctx)
	require.NoError(t, err)
	for _, info := range list {
		_, _, err := s.LoadExact(ctx, info)
		require.NoError(t, err)
	}
	_, _, err = s.Latest(ctx)
	require.NoError(t, err)
	_, err = s.Prune(ctx)
	require.NoError(t, err)
	require.NoError(t, s.Close())

	after := fileBytes(t, dir)
	require.Equal(t, before, after, "a migrating load rewrote a file")
	for name, fi := range stats {
		now, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		require.True(t, os.SameFile(fi, now), "%s was replaced", name)
		require.Equal(t, fi.ModTime(), now.ModTime(), "%s was written", name)
	}
}

// A migration gets a copy of the state it may keep and change: the read
// buffer it came from is reused by the next load.
func TestMigrationMayKeepItsInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	saveAt(t, dir, 1, heroV0{Name: "Ana", HP: 7, MaxHP: 12})
	saveAt(t, dir, 2, heroV0{Name: "Bo", HP: 3, MaxHP: 5})
	var kept []json.RawMessage
	s := openStore[json.RawMessage](t, dir, checkpoint.WithSchema(1, checkpoint.Migration{From: 0, Migrate: func(in json.RawMessage) (json.RawMessage, error) {
		kept = append(kept, in)
		return in, nil
	}}), checkpoint.ReadOnly())
	for step := int64(1); step <= 2; step++ {
		_, _, err := s.Load(ctx, step)
		require.NoError(t, err)
	}
	require.JSONEq(t, `{"name":"Ana","hp":7,"max_hp":12}`, string(kept[0]))
	require.JSONEq(t, `{"name":"Bo","hp":3,"max_hp":5}`, string(kept[1]))
}

func TestStrictDecodingRefusesUnknownFields(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	// Schema 0 renamed hp to health without a new schema version.
	saveAt(t, dir, 1, heroV0{Name: "Ana", HP: 7, MaxHP: 12})
	path := filepath.Join(dir, "step_00000001.json")

	// By default the unknown fields are dropped: the health silently
	// loads as 0.
	lax := openStore[heroV1](t, dir, checkpoint.ReadOnly())
	got, _, err := lax.Load(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, heroV1{Name: "Ana"}, got)

	strict := openStore[heroV1](t, dir, checkpoint.ReadOnly(), checkpoint.StrictDecoding())
	_, _, err = strict.Load(ctx, 1)
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.ErrorContains(t, err, "checkpoint: load step 1 "+path+": corrupt checkpoint: decode state: json: unknown field \"hp\"")

	// A migration that leaves a field behind is caught too, as ErrMigration.
	leaky := checkpoint.Migration{From: 0, Migrate: func(in json.RawMessage) (json.RawMessage, error) {
		return editJSON(in, func(m map[string]json.RawMessage) error {
			m["health"], m["max_health"] = m["hp"], m["max_hp"]
			delete(m, "hp")
			return nil
		})
	}}
	migrated := openStore[heroV1](t, dir, checkpoint.ReadOnly(), checkpoint.StrictDecoding(), checkpoint.WithSchema(1, leaky))
	_, _, err = migrated.Load(ctx, 1)
	require.ErrorIs(t, err, checkpoint.ErrMigration)
	require.ErrorContains(t, err, "the state migrated from schema 0 to 1 does not decode: json: unknown field \"max_hp\"")
	migrated = openStore[heroV1](t, dir, checkpoint.ReadOnly(), checkpoint.StrictDecoding(), checkpoint.WithSchema(1, heroMigrations[0]))
	got, _, err = migrated.Load(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, heroV1{Name: "Ana", Health: 7, MaxHealth: 12}, got)
}

func TestNegativeSchemaInHeaderIsCorrupt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	state, err := encodeState(heroV0{Name: "Ana"})
	require.NoError(t, err)
	h := format.Header{Format: 1, Schema: -1, Step: 1, Kind: checkpoint.KindStep, Time: goldenTime}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "step_00000001.json"), envelopeBytes(h, state), 0o644))
	s := openStore[heroV0](t, dir, checkpoint.ReadOnly())
	_, _, err = s.Load(context.Background(), 1)
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.ErrorContains(t, err, "negative schema -1")
}

func TestAsyncSessionsAndForkCarryTheSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("async", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		saveAt(t, dir, 1, heroV0{Name: "Ana", HP: 7, MaxHP: 12})
		s := openStore[heroV2](t, dir, checkpoint.WithSchema(2, heroMigrations...), checkpoint.Async(2), checkpoint.NoSync())
		got, _, err := s.Latest(ctx)
		require.NoError(t, err)
		require.Equal(t, health{7, 12}, got.Health)
		queued, err := s.Save(ctx, 2, got)
		require.NoError(t, err)
		require.Equal(t, 2, queued.Schema, "the queued save's Info")
		require.NoError(t, s.Flush(ctx))
		list, err := s.List(ctx)
		require.NoError(t, err)
		require.Equal(t, []int{0, 2}, []int{list[0].Schema, list[1].Schema})
		b, err := os.ReadFile(list[1].Path)
		require.NoError(t, err)
		require.Contains(t, string(b), `"schema":2,`)
	})

	t.Run("sessions and fork", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		old := openSessions(t, dir, checkpoint.NoSync())
		sess, err := old.New(ctx, nil)
		require.NoError(t, err)
		st, err := checkpoint.OpenSessionStore[heroV0](old, sess.ID)
		require.NoError(t, err)
		_, err = st.Save(ctx, 1, heroV0{Name: "Ana", HP: 7, MaxHP: 12})
		require.NoError(t, err)
		require.NoError(t, st.Close())
		require.NoError(t, old.Close())

		r := openSessions(t, dir, checkpoint.NoSync(), checkpoint.WithSchema(2, heroMigrations...))
		st2, s, err := checkpoint.ResumeLatestSession[heroV2](ctx, r)
		require.NoError(t, err)
		got, info, err := st2.Latest(ctx)
		require.NoError(t, err)
		require.Equal(t, health{7, 12}, got.Health)
		require.Zero(t, info.Schema)
		info, err = st2.Save(ctx, 2, got)
		require.NoError(t, err)
		require.Equal(t, 2, info.Schema)
		require.NoError(t, st2.Close())

		// Fork checks the checkpoint of its step with the root's schema:
		// step 1 is migrated, step 2 is the root's own.
		for _, step := range []int64{1, 2} {
			fork, err := r.Fork(ctx, s.ID, step, nil)
			require.NoError(t, err, "fork at %d", step)
			fst, err := checkpoint.OpenSessionStore[heroV2](r, fork.ID)
			require.NoError(t, err)
			got, info, err := fst.Latest(ctx)
			require.NoError(t, err)
			require.Equal(t, step, info.Step)
			require.Equal(t, int(2*(step-1)), info.Schema, "the fork's file keeps its schema")
			require.Equal(t, health{7, 12}, got.Health)
			require.NoError(t, fst.Close())
		}

		// A root that reads only schema 0 refuses to fork a newer step.
		r0 := openSessions(t, dir, checkpoint.NoSync())
		_, err = r0.Fork(ctx, s.ID, 2, nil)
		require.ErrorIs(t, err, checkpoint.ErrNewerSchema)
	})
}

// TestPayloadOfANewerSchemaIsErrNewerSchema proves that SaveFrom records
// the store's schema in the payload's header, and that a store of an
// older schema (an older release) opening that payload gets
// ErrNewerSchema, never its bytes.
func TestPayloadOfANewerSchemaIsErrNewerSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	newer := openStore[[]byte](t, dir, checkpoint.WithSchema(2, checkpoint.Migration{From: 1, Migrate: func(b json.RawMessage) (json.RawMessage, error) { return b, nil }}))
	info, err := newer.SaveFrom(ctx, 1, writeAll([]byte("v2 bytes")))
	require.NoError(t, err)
	require.NoError(t, newer.Close())
	require.Equal(t, 2, info.Schema, "the payload saved by a store WithSchema(2) records its schema")

	older := openStore[[]byte](t, dir, checkpoint.WithSchema(1))
	r, _, err := older.OpenPayload(ctx, 1)
	if err == nil {
		b, _ := readPayload(t, r)
		t.Fatalf("an older release read a newer release's payload %q with no ErrNewerSchema", b)
	}
	require.ErrorIs(t, err, checkpoint.ErrNewerSchema)
}
