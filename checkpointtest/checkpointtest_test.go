package checkpointtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/checkpointtest"
	"github.com/stretchr/testify/require"
)

type petV1 struct {
	Name string `json:"name"`
	Legs int    `json:"legs"`
}

// petV2 renamed legs to feet.
type petV2 struct {
	Name string `json:"name"`
	Feet int    `json:"feet"`
}

var legsToFeet = checkpoint.Migration{From: 1, Migrate: func(in json.RawMessage) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(in, &m); err != nil {
		return nil, err
	}
	m["feet"] = m["legs"]
	delete(m, "legs")
	return json.Marshal(m)
}}

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	errors []string
	fatal  bool
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	r.mu.Lock()
	r.fatal = true
	r.mu.Unlock()
	runtime.Goexit()
}

// loadAll runs LoadAll with a recorder, as a test would run it.
func loadAll[T any](t *testing.T, dir string, opts ...checkpoint.Option) ([]checkpointtest.Loaded[T], *recorder) {
	r := &recorder{TB: t}
	var out []checkpointtest.Loaded[T]
	done := make(chan struct{})
	go func() {
		defer close(done)
		out = checkpointtest.LoadAll[T](r, dir, opts...)
	}()
	<-done
	return out, r
}

func save[T any](t *testing.T, dir string, step int64, state T, opts ...checkpoint.Option) string {
	t.Helper()
	st, err := checkpoint.Open[T](dir, append(opts, checkpoint.NoSync(), checkpoint.WithLayout("pet", 3))...)
	require.NoError(t, err)
	info, err := st.Save(context.Background(), step, state)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	return info.Location
}

func TestLoadAllMigratesEveryFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	save(t, dir, 1, petV1{Name: "Rex", Legs: 4}, checkpoint.WithSchema(1))
	save(t, dir, 2, petV2{Name: "Tweety", Feet: 2}, checkpoint.WithSchema(2, legsToFeet))
	before, err := os.ReadDir(dir)
	require.NoError(t, err)

	got := checkpointtest.LoadAll[petV2](t, dir, checkpoint.WithLayout("pet", 3), checkpoint.WithSchema(2, legsToFeet))
	require.Len(t, got, 2)
	require.Equal(t, petV2{Name: "Rex", Feet: 4}, got[0].State)
	require.Equal(t, 1, got[0].Info.Schema)
	require.Equal(t, petV2{Name: "Tweety", Feet: 2}, got[1].State)
	require.Equal(t, 2, got[1].Info.Schema)
	after, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Equal(t, before, after, "LoadAll wrote to the golden directory")
}

func TestLoadAllReportsEachFileThatDoesNotLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := save(t, dir, 1, petV2{Name: "Rex", Feet: 4}, checkpoint.WithSchema(2, legsToFeet))
	// A release that renamed legs to feet without a new schema version.
	unbumped := save(t, dir, 2, petV1{Name: "Tom", Legs: 4}, checkpoint.WithSchema(2, legsToFeet))
	newer := save(t, dir, 3, petV2{Name: "Nemo"}, checkpoint.WithSchema(3, legsToFeet, checkpoint.Migration{From: 2, Migrate: func(in json.RawMessage) (json.RawMessage, error) { return in, nil }}))
	damaged := save(t, dir, 4, petV2{Name: "Polly", Feet: 2}, checkpoint.WithSchema(2, legsToFeet))
	b, err := os.ReadFile(damaged)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(damaged, []byte(strings.Replace(string(b), "Polly", "Molly", 1)), 0o644))

	got, r := loadAll[petV2](t, dir, checkpoint.WithLayout("pet", 3), checkpoint.WithSchema(2, legsToFeet))
	require.False(t, r.fatal)
	require.Len(t, got, 1)
	require.Equal(t, good, got[0].Info.Location)
	require.Len(t, r.errors, 3, "%q", r.errors)
	require.Contains(t, r.errors[0], unbumped)
	require.Contains(t, r.errors[0], `unknown field "legs"`)
	require.Contains(t, r.errors[1], newer)
	require.Contains(t, r.errors[1], "newer schema")
	require.Contains(t, r.errors[2], damaged)
	require.Contains(t, r.errors[2], "checksum mismatch")
}

func TestLoadAllStopsOnDirectoryWithoutCheckpoints(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	save(t, dir, 1, petV2{Name: "Rex"})

	_, r := loadAll[petV2](t, dir) // the default layout, not pet/3
	require.True(t, r.fatal)
	require.Equal(t, []string{"checkpointtest: no checkpoint of the store's layout in " + dir + " (it holds files of layout pet/3: pass its WithLayout option)"}, r.errors)

	_, r = loadAll[petV2](t, filepath.Join(dir, "missing"))
	require.True(t, r.fatal)
	require.Contains(t, r.errors[0], "checkpoint not found")
}
