package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// xssID is a session ID that would run a script if a page wrote it as HTML.
const xssID = `<script>window.__xss=1</script>`

// serveFixture makes a root of sessions: "run" with steps 1 to steps (each
// a game state with a nested world), an error checkpoint at steps+1 and a
// damaged file at step 3; and a session xssID whose meta and state hold
// HTML. It returns the root's directory and the stored name of each.
func serveFixture(t testing.TB, steps int) (root string, run, xss string) {
	t.Helper()
	ctx := context.Background()
	root = t.TempDir()
	r, err := checkpoint.OpenSessions(root, checkpoint.NoSync())
	require.NoError(t, err)
	defer r.Close()
	sess, err := r.Create(ctx, "run", map[string]string{"game": "chess"})
	require.NoError(t, err)
	st, err := checkpoint.OpenSessionStore[map[string]any](r, sess.ID)
	require.NoError(t, err)
	for i := 1; i <= steps; i++ {
		state := map[string]any{
			"turn":    i,
			"players": []any{map[string]any{"name": "ann", "hp": 100 - i}, map[string]any{"name": "bob", "hp": 90}},
			"world":   map[string]any{"seed": 42, "a/b~c": "odd key", "log": strings.Repeat("x", 10)},
		}
		_, err := st.Save(ctx, int64(i), state, checkpoint.WithMeta("phase", fmt.Sprint(i%3)), checkpoint.WithMetric("score", float64(i)))
		require.NoError(t, err)
	}
	_, err = st.SaveError(ctx, int64(steps+1), map[string]any{"partial": "half a turn"}, errors.New("panic: index out of range [7] with length 3"))
	require.NoError(t, err)
	require.NoError(t, st.Close())
	run = storedName(sess.Dir)
	if steps >= 3 {
		// A flipped byte in step 3's state: the header reads, the checksum fails.
		p := filepath.Join(sess.Dir, "step_00000003.json")
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		b[len(b)-10] ^= 0x01
		require.NoError(t, os.WriteFile(p, b, 0o644))
	}

	xs, err := r.Create(ctx, xssID, map[string]string{"note": `<img src=x onerror="window.__xss=2">`})
	require.NoError(t, err)
	xst, err := checkpoint.OpenSessionStore[map[string]any](r, xs.ID)
	require.NoError(t, err)
	_, err = xst.Save(ctx, 1, map[string]any{"html": `<img src=x onerror="window.__xss=3">`}, checkpoint.WithMeta("<b>k</b>", `<script>window.__xss=4</script>`))
	require.NoError(t, err)
	require.NoError(t, xst.Close())
	return root, run, storedName(xs.Dir)
}

func TestServeSessionsTimelineAndCheckpoint(t *testing.T) {
	t.Parallel()
	root, run, xss := serveFixture(t, 12)
	s := startServe(t, root)

	var sessions struct{ Sessions []webSession }
	require.Equal(t, 200, s.get(t, "api/sessions", &sessions))
	require.Len(t, sessions.Sessions, 2)
	byKey := map[string]webSession{}
	for _, ws := range sessions.Sessions {
		byKey[ws.Key] = ws
	}
	assert.Equal(t, "run", byKey[run].ID)
	assert.Equal(t, 13, byKey[run].Checkpoints)
	assert.Equal(t, checkpoint.KindError, byKey[run].LastKind)
	assert.Positive(t, byKey[run].Size)
	assert.Equal(t, xssID, byKey[xss].ID, "the ID as given, as data")

	var tl timelineJSON
	require.Equal(t, 200, s.get(t, "api/timeline?session="+url.QueryEscape(run), &tl))
	require.Len(t, tl.Checkpoints, 13)
	assert.Equal(t, int64(1), tl.Checkpoints[0].Step)
	assert.Equal(t, checkpoint.KindError, tl.Checkpoints[12].Kind)
	require.NotNil(t, tl.Session)
	assert.Equal(t, "run", tl.Session.ID)

	// The retention rules' view: keep the newest 5 (the error checkpoint
	// is kept whatever the rules).
	require.Equal(t, 200, s.get(t, "api/timeline?keep_last=5&session="+url.QueryEscape(run), &tl))
	pruned := 0
	for _, ck := range tl.Checkpoints {
		if ck.Prune {
			pruned++
			assert.Less(t, ck.Step, int64(8), "a kept step is marked for pruning")
		}
	}
	assert.Equal(t, 7, pruned)
	assert.Equal(t, "keep_last=5", tl.Rules)
	require.Equal(t, 200, s.get(t, "api/timeline?keep_last=x&session="+url.QueryEscape(run), &tl))
	assert.Contains(t, tl.RulesError, "keep_last")

	var ck checkpointJSON
	require.Equal(t, 200, s.get(t, "api/checkpoint?session="+url.QueryEscape(run)+"&file=step_00000012.json", &ck))
	assert.Equal(t, int64(12), ck.Step)
	require.NotNil(t, ck.State)
	assert.Equal(t, "object", ck.State.Type)
	assert.Equal(t, 3, *ck.State.Count)
	assert.Equal(t, "0", ck.Meta["phase"])

	var errCk checkpointJSON
	require.Equal(t, 200, s.get(t, "api/checkpoint?session="+url.QueryEscape(run)+"&file=step_00000013.error.json", &errCk))
	require.NotNil(t, errCk.Error)
	assert.Contains(t, errCk.Error.Message, "index out of range")

	// A damaged file: a clear error, kind damaged, naming the file.
	var e struct{ Error, Kind string }
	assert.Equal(t, http.StatusUnprocessableEntity, s.get(t, "api/checkpoint?session="+url.QueryEscape(run)+"&file=step_00000003.json", &e))
	assert.Equal(t, "damaged", e.Kind)
	assert.Contains(t, e.Error, "step_00000003.json")
	// A missing file or session: not found.
	assert.Equal(t, http.StatusNotFound, s.get(t, "api/checkpoint?session="+url.QueryEscape(run)+"&file=step_00000099.json", &e))
	assert.Equal(t, "not_found", e.Kind)
	assert.Equal(t, http.StatusNotFound, s.get(t, "api/timeline?session=..", &e))
	assert.Equal(t, http.StatusNotFound, s.get(t, "api/timeline?session=nope", &e))
}

func TestServeStateTreeSearchAndDiff(t *testing.T) {
	t.Parallel()
	root, run, _ := serveFixture(t, 6)
	s := startServe(t, root)
	q := "session=" + url.QueryEscape(run) + "&file=step_00000006.json"

	var ch children
	require.Equal(t, 200, s.get(t, "api/node?"+q+"&path=/players", &ch))
	assert.Equal(t, "array", ch.Type)
	require.Len(t, ch.Children, 2)
	assert.Equal(t, "/players/0", ch.Children[0].Path)
	assert.Equal(t, "object", ch.Children[0].Type)
	require.Equal(t, 200, s.get(t, "api/node?"+q+"&path=/world&limit=1&offset=0", &ch))
	require.Len(t, ch.Children, 1)
	assert.True(t, ch.More)
	assert.Equal(t, "a/b~c", *ch.Children[0].Key)
	assert.Equal(t, "/world/a~1b~0c", ch.Children[0].Path)
	require.Equal(t, 200, s.get(t, "api/node?"+q+"&path=/world/a~1b~0c", &ch))
	assert.JSONEq(t, `"odd key"`, string(ch.Value))
	var e struct{ Error, Kind string }
	assert.Equal(t, http.StatusNotFound, s.get(t, "api/node?"+q+"&path=/players/9", &e))
	assert.Equal(t, http.StatusBadRequest, s.get(t, "api/node?"+q+"&path=players", &e))

	var found searchResults
	require.Equal(t, 200, s.get(t, "api/search?"+q+"&q=BOB", &found))
	require.Len(t, found.Results, 1)
	assert.Equal(t, "/players/1/name", found.Results[0].Path)
	require.Equal(t, 200, s.get(t, "api/search?"+q+"&q=hp", &found))
	require.Len(t, found.Results, 2)
	assert.Equal(t, "/players/0/hp", found.Results[0].Path)

	var d struct {
		Changes []change
	}
	require.Equal(t, 200, s.get(t, "api/diff?a_session="+url.QueryEscape(run)+"&a_file=step_00000005.json&b_session="+url.QueryEscape(run)+"&b_file=step_00000006.json", &d))
	var paths []string
	for _, c := range d.Changes {
		paths = append(paths, c.Op+" "+c.JQ+" "+*c.BPath)
	}
	assert.ElementsMatch(t, []string{"changed .players[0].hp /players/0/hp", "changed .turn /turn"}, paths)
}

func TestServeForksOnlyWithWriteAndTheCSRFToken(t *testing.T) {
	t.Parallel()
	root, run, _ := serveFixture(t, 4)
	post := func(s served, csrf, origin, body string) (int, map[string]any) {
		req, err := http.NewRequest(http.MethodPost, s.Base+"api/fork", strings.NewReader(body))
		require.NoError(t, err)
		req.AddCookie(&http.Cookie{Name: "checkpoint_token_" + portOf(t, s.Base), Value: s.Token})
		req.Header.Set("Content-Type", "application/json")
		if csrf != "" {
			req.Header.Set("X-Checkpoint-CSRF", csrf)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var out map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		return resp.StatusCode, out
	}
	body := `{"session":"` + run + `","step":2}`

	ro := startServe(t, root)
	var info infoJSON
	require.Equal(t, 200, ro.get(t, "api/info", &info))
	assert.False(t, info.Write)
	code, out := post(ro, info.CSRF, "", body)
	assert.Equal(t, http.StatusForbidden, code, "a read-only server forked: %v", out)

	rw := startServe(t, "--write", root)
	require.Equal(t, 200, rw.get(t, "api/info", &info))
	assert.True(t, info.Write)
	code, _ = post(rw, "", "", body)
	assert.Equal(t, http.StatusForbidden, code, "a fork without the CSRF token")
	code, _ = post(rw, info.CSRF, "http://evil.example", body)
	assert.Equal(t, http.StatusForbidden, code, "a fork from another origin")
	code, out = post(rw, info.CSRF, strings.TrimSuffix(rw.Base, "/"), body)
	require.Equal(t, http.StatusOK, code, "%v", out)
	sess := out["session"].(map[string]any)
	assert.Equal(t, "run", sess["parent"])
	assert.EqualValues(t, 2, sess["parent_step"])

	var sessions struct{ Sessions []webSession }
	require.Equal(t, 200, rw.get(t, "api/sessions", &sessions))
	assert.Len(t, sessions.Sessions, 3)

	// The root's claim was taken for the fork only: with the server
	// running, a program creates a session and writes the forked one.
	r, err := checkpoint.OpenSessions(root, checkpoint.NoSync())
	require.NoError(t, err)
	defer r.Close()
	_, err = r.Create(context.Background(), "after-the-fork", nil)
	require.NoError(t, err)
	st, err := checkpoint.OpenSessionStore[map[string]any](r, sess["id"].(string))
	require.NoError(t, err, "the fork's store is not held by the server")
	_, err = st.Save(context.Background(), 3, map[string]any{"turn": 3})
	require.NoError(t, err)
	require.NoError(t, st.Close())
	code, _ = post(rw, info.CSRF, "", `{"session":"`+run+`","step":77}`)
	assert.Equal(t, http.StatusNotFound, code, "a fork from a step with no checkpoint")
}

func TestServeReadsAStoreAWriterHolds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st, err := checkpoint.Open[map[string]int](dir, checkpoint.NoSync())
	require.NoError(t, err)
	defer st.Close()
	_, err = st.Save(context.Background(), 1, map[string]int{"a": 1})
	require.NoError(t, err)
	s := startServe(t, dir)
	var tl timelineJSON
	require.Equal(t, 200, s.get(t, "api/timeline?session=", &tl))
	require.Len(t, tl.Checkpoints, 1)
	// Live: a new save shows in the next answer, under another ETag.
	_, err = st.Save(context.Background(), 2, map[string]int{"a": 2})
	require.NoError(t, err)
	require.Equal(t, 200, s.get(t, "api/timeline?session=", &tl))
	require.Len(t, tl.Checkpoints, 2)
	var e struct{ Error, Kind string }
	assert.Equal(t, http.StatusBadRequest, s.get(t, "api/sessions", &e))
}

func TestServeAnswersAnUnchangedViewWithNotModified(t *testing.T) {
	t.Parallel()
	root, run, _ := serveFixture(t, 2)
	s := startServe(t, root)
	waitChecked(t, s, run) // until then, the view changes as files are checked
	get := func(etag string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, s.Base+"api/timeline?session="+url.QueryEscape(run)+"&token="+s.Token, nil)
		if etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}
	first := get("")
	require.Equal(t, 200, first.StatusCode)
	etag := first.Header.Get("ETag")
	require.NotEmpty(t, etag)
	assert.Equal(t, http.StatusNotModified, get(etag).StatusCode)
}

// A store whose storage fails gets a page with the storage's error, and
// the server goes on serving.
func TestServeReportsAStorageErrorAndKeepsServing(t *testing.T) {
	t.Parallel()
	root, run, _ := serveFixture(t, 4)
	var failing atomic.Bool
	remote := failingRemote(root, &failing, backendtest.OpOpen)
	s := startServeWith(t, []Remote{remote}, "test://root")
	q := "api/checkpoint?session=" + url.QueryEscape(run) + "&file=step_00000004.json"
	var ck checkpointJSON
	require.Equal(t, 200, s.get(t, q, &ck))
	failing.Store(true)
	var e struct{ Error, Kind string }
	assert.Equal(t, http.StatusBadGateway, s.get(t, "api/checkpoint?session="+url.QueryEscape(run)+"&file=step_00000002.json", &e))
	assert.Equal(t, "storage", e.Kind)
	assert.Contains(t, e.Error, "connection reset by peer")
	assert.Contains(t, e.Error, "step_00000002.json")
	failing.Store(false)
	require.Equal(t, 200, s.get(t, q, &ck))
}

// The timeline marks a damaged file whose header reads once the server
// has read it in full in the background: every file ends up checked.
func TestServeTimelineMarksEveryDamagedCheckpointOnceChecked(t *testing.T) {
	t.Parallel()
	root, run, _ := serveFixture(t, 8)
	s := startServe(t, root)
	tl := waitChecked(t, s, run)
	for _, ck := range tl.Checkpoints {
		if ck.Step == 3 {
			assert.Contains(t, ck.Damaged, "checksum", "step 3 is damaged")
		} else {
			assert.Empty(t, ck.Damaged, "step %d is good", ck.Step)
		}
	}
}

// waitChecked requests the timeline of the store key until the server has
// checked every checkpoint, and returns it.
func waitChecked(t *testing.T, s served, key string) timelineJSON {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var tl timelineJSON
		require.Equal(t, 200, s.get(t, "api/timeline?session="+url.QueryEscape(key), &tl))
		all := true
		for _, ck := range tl.Checkpoints {
			all = all && ck.Checked
		}
		if all {
			return tl
		}
		require.True(t, time.Now().Before(deadline), "the checkpoints were not all checked in 20 s")
	}
}

// An encrypted root is served with --identity; without it the timeline
// lists the files and opening one says which key it needs.
func TestServeReadsAnEncryptedRootWithItsIdentity(t *testing.T) {
	t.Parallel()
	k := newKey(t)
	root := encryptedSessions(t, k)

	s := startServe(t, "--identity", k.file, root)
	var ck checkpointJSON
	require.Equal(t, 200, s.get(t, "api/checkpoint?session=a&file=step_00000002.json", &ck))
	require.NotNil(t, ck.State)
	var ch children
	require.Equal(t, 200, s.get(t, "api/node?session=a&file=step_00000002.json&path=", &ch))
	require.Len(t, ch.Children, 1)
	assert.JSONEq(t, "2", string(ch.Children[0].Value))

	none := startServe(t, root)
	var e struct{ Error, Kind string }
	assert.Equal(t, http.StatusUnprocessableEntity, none.get(t, "api/checkpoint?session=a&file=step_00000002.json", &e))
	assert.Equal(t, "no_key", e.Kind)
	assert.Contains(t, e.Error, k.kid)
	assert.Contains(t, e.Error, "--identity")
}

// A session saved at a schema (WithSchema) forks: the fork reads its
// states as they were saved, as every read of the server does.
func TestServeForksASessionSavedAtASchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	r, err := checkpoint.OpenSessions(root, checkpoint.NoSync(), readSchemas(2))
	require.NoError(t, err)
	sess, err := r.Create(ctx, "game", nil)
	require.NoError(t, err)
	st, err := checkpoint.OpenSessionStore[json.RawMessage](r, sess.ID)
	require.NoError(t, err)
	for i := 1; i <= 3; i++ {
		_, err := st.Save(ctx, int64(i), json.RawMessage(fmt.Sprintf(`{"turn":%d}`, i)))
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())
	require.NoError(t, r.Close())

	s := startServe(t, "--write", root)
	var info infoJSON
	require.Equal(t, 200, s.get(t, "api/info", &info))
	req, err := http.NewRequest(http.MethodPost, s.Base+"api/fork?token="+s.Token, strings.NewReader(`{"session":"game","step":2}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Checkpoint-CSRF", info.CSRF)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	var out struct{ Session webSession }
	require.NoError(t, json.Unmarshal(body, &out))
	var tl timelineJSON
	require.Equal(t, 200, s.get(t, "api/timeline?session="+url.QueryEscape(out.Session.Key), &tl))
	require.Len(t, tl.Checkpoints, 2, "the fork holds steps 1 and 2")
}
