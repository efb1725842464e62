package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/stretchr/testify/require"
)

// The timing rows: the sessions page of a root of 1,000 sessions
// and the timeline of a run of 10,000 checkpoints, each answered in under
// 200 ms once the page has loaded (ns/op is one answer, after a first,
// untimed one):
//
//	go test -run '^$' -bench BenchmarkServe -benchtime 20x ./internal/cli

func BenchmarkServeSessionsOf1000(b *testing.B) {
	ctx := context.Background()
	root := b.TempDir()
	r, err := checkpoint.OpenSessions(root, checkpoint.NoSync())
	require.NoError(b, err)
	for i := range 1000 {
		sess, err := r.Create(ctx, fmt.Sprintf("player-%04d", i), map[string]string{"level": fmt.Sprint(i % 7)})
		require.NoError(b, err)
		st, err := checkpoint.OpenSessionStore[map[string]int](r, sess.ID)
		require.NoError(b, err)
		for step := int64(1); step <= 3; step++ {
			_, err := st.Save(ctx, step, map[string]int{"hp": i}, checkpoint.WithMetric("score", float64(step)))
			require.NoError(b, err)
		}
		require.NoError(b, st.Close())
	}
	require.NoError(b, r.Close())
	benchGet(b, startServe(b, root), "api/sessions?")
}

func BenchmarkServeTimelineOf10000(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	st, err := checkpoint.Open[map[string]int](dir, checkpoint.NoSync())
	require.NoError(b, err)
	for step := int64(1); step <= 10000; step++ {
		_, err := st.Save(ctx, step, map[string]int{"turn": int(step)}, checkpoint.WithMeta("phase", "play"))
		require.NoError(b, err)
	}
	require.NoError(b, st.Close())
	benchGet(b, startServe(b, dir), "api/timeline?session=")
}

// benchGet times GETs of the API path p, after one untimed first load.
func benchGet(b *testing.B, s served, p string) {
	get := func() {
		req, err := http.NewRequest(http.MethodGet, s.Base+p+"&token="+s.Token, nil)
		require.NoError(b, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(b, err)
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(b, http.StatusOK, resp.StatusCode)
		b.SetBytes(n)
	}
	get()
	b.ResetTimer()
	for b.Loop() {
		get()
	}
}

// BenchmarkServeNodeOf100MBState times expanding the big array of a 100 MB
// state once it is loaded: what a click on a node waits for.
//
//	go test -run '^$' -bench BenchmarkServeNodeOf100MB -benchtime 5x ./internal/cli
func BenchmarkServeNodeOf100MBState(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	st, err := checkpoint.Open[map[string]any](dir, checkpoint.NoSync())
	require.NoError(b, err)
	entities := make([]any, 0, 780_000)
	for i := range cap(entities) {
		entities = append(entities, map[string]any{"id": i, "name": fmt.Sprintf("entity-%d", i), "pos": []float64{float64(i), 1.5, -2.25}, "tags": []string{"npc", "idle"}, "hp": 100, "inventory": map[string]int{"gold": i % 97, "arrows": 12}})
	}
	_, err = st.Save(ctx, 1, map[string]any{"turn": 1, "entities": entities})
	require.NoError(b, err)
	require.NoError(b, st.Close())
	infos, _ := checkpoint.Open[map[string]any](dir, checkpoint.ReadOnly())
	all, _ := infos.List(ctx)
	b.Logf("state file: %.1f MB", float64(all[0].Size)/1e6)
	infos.Close()
	s := startServe(b, dir)
	benchGet(b, s, "api/checkpoint?session=&file=step_00000001.json&x=")
	b.Run("children", func(b *testing.B) {
		benchGet(b, s, "api/node?session=&file=step_00000001.json&path=/entities&offset=250000&limit=500")
	})
	b.Run("search", func(b *testing.B) {
		benchGet(b, s, "api/search?session=&file=step_00000001.json&q=entity-499999")
	})
}
