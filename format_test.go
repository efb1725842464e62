package checkpoint_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/internal/format"
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
			s := openStore[goldenState](t, goldenDir(format), checkpoint.WithLayout("turn", 3), checkpoint.ReadOnly())
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
			require.Equal(t, checkpoint.KindRolling, info.Kind)
		})
	}
}

// goldenSessionsDir is a root of sessions of session.json format 1:
// session 001 with turns 1 and 2, and 002 forked from it at turn 1 with
// caller fields.
var goldenSessionsDir = filepath.Join("testdata", "v1", "sessions")

// TestWriteGoldenSessionsV1 writes testdata/v1/sessions. It runs only
// when asked: CHECKPOINT_WRITE_GOLDEN=sessions-v1 go test -run WriteGoldenSessions
func TestWriteGoldenSessionsV1(t *testing.T) {
	t.Parallel()
	if os.Getenv("CHECKPOINT_WRITE_GOLDEN") != "sessions-v1" {
		t.Skip("golden files are written once per format version")
	}
	ctx := context.Background()
	require.NoError(t, os.RemoveAll(goldenSessionsDir))
	r, err := checkpoint.OpenSessions(goldenSessionsDir, checkpoint.WithLayout("turn", 3), checkpoint.WithClock(func() time.Time { return goldenTime }))
	require.NoError(t, err)
	s, err := r.New(ctx, map[string]string{"campaign": "crypt"})
	require.NoError(t, err)
	st, err := checkpoint.OpenSessionStore[goldenState](r, s.ID)
	require.NoError(t, err)
	for turn := int64(1); turn <= 2; turn++ {
		_, err := st.Save(ctx, turn, goldenStateAt(turn))
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())
	_, err = r.Fork(ctx, s.ID, 1, map[string]string{"campaign": "crypt", "branch": "left door"})
	require.NoError(t, err)
	require.NoError(t, r.Close())
	for _, lock := range []string{"001/" + dirstore.LockName} {
		require.NoError(t, os.Remove(filepath.Join(goldenSessionsDir, lock)))
	}
}

func TestGoldenSessionsV1Load(t *testing.T) {
	t.Parallel()
	requireGoldenSessions(t, goldenSessionsDir)
}

// requireGoldenSessions proves that the root of sessions dir, opened with
// opts, holds what goldenSessionsDir does.
func requireGoldenSessions(t *testing.T, dir string, opts ...checkpoint.Option) {
	t.Helper()
	ctx := context.Background()
	r := openSessions(t, dir, append([]checkpoint.Option{checkpoint.WithLayout("turn", 3), checkpoint.ReadOnly()}, opts...)...)
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

	st, err := checkpoint.OpenSessionStore[goldenState](r, "002")
	require.NoError(t, err)
	got, info, err := st.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), info.Step)
	require.Equal(t, goldenStateAt(1), got)
	require.NoError(t, st.Close())
}

func TestEnvelopeIsPlainJSON(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[gameState](t, dir, checkpoint.WithLayout("turn", 3))
	info, err := s.Save(ctx, 7, sampleState(7), checkpoint.WithMeta("who", "ana"))
	require.NoError(t, err)
	b, err := os.ReadFile(info.Path)
	require.NoError(t, err)
	var doc map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b, &doc))
	require.Equal(t, `2`, string(doc["format"]))
	require.Equal(t, `7`, string(doc["step"]))
	require.Equal(t, `"step"`, string(doc["kind"]))
	require.Equal(t, `{"who":"ana"}`, string(doc["meta"]))
	require.Regexp(t, `^"crc32c:[0-9a-f]{8}"$`, string(doc["checksum"]))
	var st gameState
	require.NoError(t, json.Unmarshal(doc["state"], &st))
	require.Equal(t, sampleState(7), st)
}

func TestEncodedStateIsWhatMarshalWrites(t *testing.T) {
	t.Parallel()
	c := format.NewCodec(format.CompressNone, checkpoint.DefaultMaxReadSize)
	for _, v := range []any{
		sampleState(3),
		map[string]any{"html": "<b>&</b>", "float": 1.5, "nil": nil},
		json.RawMessage(`{"raw": [1, 2]}`),
		"\u2028 line separator",
		42,
	} {
		want, err := json.Marshal(v)
		require.NoError(t, err)
		buf, err := c.EncodeState(v)
		require.NoError(t, err)
		require.Equal(t, string(want), buf.String())
		c.PutBuffer(buf)
	}
	buf, err := c.EncodeState(nil) // a nil state: the store decides whether its type can load it
	require.NoError(t, err)
	require.Equal(t, "null", buf.String())
	_, err = c.EncodeState(make(chan int))
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
}

// testdata/v1/schema holds golden files of format 1 with a schema:
// turn_001.json at schema 1, whose agents had
// "health" where schema 2 (goldenState) has "hp", and turn_002.json at
// schema 2. They must load forever: never regenerate or edit them.
var goldenSchemaDir = filepath.Join("testdata", "v1", "schema")

type goldenAgentV1 struct {
	Name   string   `json:"name"`
	Memory []string `json:"memory"`
	Health int      `json:"health"`
}

type goldenSchemaFile struct {
	h     format.Header
	state []byte
}

// goldenSchemaFiles are the golden files of goldenSchemaDir and the header
// and state each was written with.
func goldenSchemaFiles(t *testing.T) map[string]goldenSchemaFile {
	t.Helper()
	v2 := goldenStateAt(2)
	v1 := map[string]any{"turn": int64(1), "log": goldenStateAt(1).Log, "seen": goldenStateAt(1).Seen}
	agents := make(map[string]goldenAgentV1)
	for id, a := range goldenStateAt(1).Agents {
		agents[id] = goldenAgentV1{Name: a.Name, Memory: a.Memory, Health: a.HP}
	}
	v1["agents"] = agents
	s1, err := encodeState(v1)
	require.NoError(t, err)
	s2, err := encodeState(v2)
	require.NoError(t, err)
	return map[string]goldenSchemaFile{
		"turn_001.json": {format.Header{Format: 1, Schema: 1, Step: 1, Kind: checkpoint.KindStep, Time: goldenTime}, s1},
		"turn_002.json": {format.Header{Format: 1, Schema: 2, Step: 2, Kind: checkpoint.KindStep, Time: goldenTime, Meta: map[string]string{"release": "2"}}, s2},
	}
}

// goldenHealthToHP is the migration of the golden files from schema 1 to 2.
var goldenHealthToHP = checkpoint.Migration{From: 1, Migrate: func(in json.RawMessage) (json.RawMessage, error) {
	return editJSON(in, func(m map[string]json.RawMessage) error {
		var agents map[string]map[string]json.RawMessage
		if err := json.Unmarshal(m["agents"], &agents); err != nil {
			return err
		}
		for _, a := range agents {
			a["hp"] = a["health"]
			delete(a, "health")
		}
		var err error
		m["agents"], err = json.Marshal(agents)
		return err
	})
}}

// TestWriteGoldenSchemaV1 writes testdata/v1/schema. It never rewrites
// a file that exists, and runs only when asked:
// CHECKPOINT_WRITE_GOLDEN=schema-v1 go test -run WriteGoldenSchema
func TestWriteGoldenSchemaV1(t *testing.T) {
	if os.Getenv("CHECKPOINT_WRITE_GOLDEN") != "schema-v1" {
		t.Skip("golden files are written once per format version")
	}
	require.NoError(t, os.MkdirAll(goldenSchemaDir, 0o755))
	for name, g := range goldenSchemaFiles(t) {
		path := filepath.Join(goldenSchemaDir, name)
		if _, err := os.Stat(path); err == nil {
			continue
		}
		require.NoError(t, os.WriteFile(path, envelopeBytes(g.h, g.state), 0o644))
	}
}

func TestGoldenSchemaV1Loads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[goldenState](t, goldenSchemaDir, checkpoint.WithLayout("turn", 3), checkpoint.ReadOnly(), checkpoint.StrictDecoding(), checkpoint.WithSchema(2, goldenHealthToHP))
	for step, schema := range map[int64]int{1: 1, 2: 2} {
		got, info, err := s.Load(ctx, step)
		require.NoError(t, err)
		require.Equal(t, goldenStateAt(step), got)
		require.Equal(t, 1, info.Format)
		require.Equal(t, schema, info.Schema)
		require.Equal(t, goldenTime, info.Time)
	}
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, map[string]string{"release": "2"}, list[1].Meta)

	// A store of schema 1 reads the first and refuses the second.
	old := openStore[json.RawMessage](t, goldenSchemaDir, checkpoint.WithLayout("turn", 3), checkpoint.ReadOnly(), checkpoint.WithSchema(1))
	_, _, err = old.Load(ctx, 1)
	require.NoError(t, err)
	_, _, err = old.Latest(ctx)
	require.ErrorIs(t, err, checkpoint.ErrNewerSchema)
}

// TestGoldenSchemaV1WriterUnchanged proves that today's writer puts the
// schema where the golden files have it, byte for byte.
func TestGoldenSchemaV1WriterUnchanged(t *testing.T) {
	t.Parallel()
	for name, g := range goldenSchemaFiles(t) {
		onDisk, err := os.ReadFile(filepath.Join(goldenSchemaDir, name))
		require.NoError(t, err)
		require.Equal(t, string(onDisk), string(envelopeBytes(g.h, g.state)), name)
	}
	dir := t.TempDir()
	info := saveAt(t, dir, 2, goldenStateAt(2), checkpoint.WithSchema(2, goldenHealthToHP), checkpoint.WithClock(func() time.Time { return goldenTime }))
	b, err := os.ReadFile(info.Path)
	require.NoError(t, err)
	g := goldenSchemaFiles(t)["turn_002.json"]
	g.h.Meta = nil
	g.h.Format = format.Version
	require.Equal(t, string(envelopeBytes(g.h, g.state)), string(b))
}
