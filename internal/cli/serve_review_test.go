package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/gocheckpoint/checkpoint/backendtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The server lets a page opened at http://localhost:PORT read (its Host is
// one of the server's own), so a fork from that page, whose Origin is
// http://localhost:PORT, must go through too.
func TestServeForksFromAPageOpenedAtLocalhost(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeSmallRoot(t, dir, "source", 3)
	srv := startServe(t, "--write", dir)
	port := portOf(t, srv.Base)
	info := rawGet(t, srv, "api/info?token="+url.QueryEscape(srv.Token), "localhost:"+port, nil)
	require.Equal(t, http.StatusOK, info.code, "the page opened at localhost reads")
	resp := postJSON(t, srv, "api/fork", `{"session":"source","step":2}`, true,
		http.Header{"Origin": {"http://localhost:" + port}})
	assert.Equal(t, http.StatusOK, resp.code, resp.body)
}

// A byte payload whose bytes were damaged after its header: the
// checkpoint's page must say it is damaged (422), as for a JSON state.
func TestServeCheckpointOfADamagedBytePayloadIsDamaged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeServeStore(t, dir)
	p := filepath.Join(dir, "step_00000003.json")
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	b[len(b)-100] ^= 0x01 // inside the payload, past the header
	require.NoError(t, os.WriteFile(p, b, 0o644))
	srv := startServe(t, dir)
	r := rawGet(t, srv, "api/checkpoint?session=&file=step_00000003.json&token="+url.QueryEscape(srv.Token), "", nil)
	assert.Equal(t, http.StatusUnprocessableEntity, r.code, r.body)
	assert.Equal(t, "damaged", r.kind(t))
}

// A search for "hp" finds every key "hp", also one inside a container
// whose own key matched.
func TestSearchStateFindsMatchesInsideAMatchedKey(t *testing.T) {
	t.Parallel()
	got, err := searchState(context.Background(), []byte(`{"hp_table":{"hp":3,"x":"hp low"}}`), "hp", 10)
	require.NoError(t, err)
	var paths []string
	for _, r := range got.Results {
		paths = append(paths, r.Path)
	}
	assert.Equal(t, []string{"/hp_table", "/hp_table/hp", "/hp_table/x"}, paths)
}

// A root whose storage fails while the server looks a session up: the
// answer is the storage's error (502, kind storage), not "no session"
// (404), which would tell the user the session is gone.
func TestServeSaysAStorageErrorNotNotFoundWhenTheRootDoesNotList(t *testing.T) {
	t.Parallel()
	root, run, _ := serveFixture(t, 2)
	var failing atomic.Bool
	remote := failingRemote(root, &failing, backendtest.OpList, backendtest.OpChildren, backendtest.OpOpen)
	s := startServeWith(t, []Remote{remote}, "test://root")
	failing.Store(true)
	var e struct{ Error, Kind string }
	code := s.get(t, "api/timeline?session="+url.QueryEscape(run), &e)
	assert.Equal(t, http.StatusBadGateway, code, e.Error)
	assert.Equal(t, "storage", e.Kind)
}

// The diff page lists a change by its jq path, and the tree shows each
// node's jq path, both computed by the server: one spelling for every key,
// odd ones included, or a path copied from the tree is not in the list.
func TestServeDiffPathIsTheTreesPath(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"a/b", "<b>&", "x y", `\u2028`, `\u001b[31m`, "~0", "01", ""} {
		var k string
		require.NoError(t, json.Unmarshal([]byte(`"`+key+`"`), &k))
		kj, _ := json.Marshal(k)
		sa := []byte(`{"w":{` + string(kj) + `:[1]}}`)
		sb := []byte(`{"w":{` + string(kj) + `:[2]}}`)
		a, err := decodeJSON(sa)
		require.NoError(t, err)
		b, err := decodeJSON(sb)
		require.NoError(t, err)
		changes, _ := diffChanges(a, b)
		require.Len(t, changes, 1, key)
		node, err := nodeAt(sb, *changes[0].BPath)
		require.NoError(t, err, key)
		assert.Equal(t, changes[0].JQ, node.JQ, "key %q", key)
		page, err := childrenAt(sb, "/w", 0, 10)
		require.NoError(t, err)
		kids, err := childrenAt(sb, page.Children[0].Path, 0, 10)
		require.NoError(t, err)
		assert.Equal(t, changes[0].JQ, kids.Children[0].JQ, "key %q", key)
		found, err := searchState(context.Background(), sb, "2", 10)
		require.NoError(t, err)
		require.Len(t, found.Results, 1, key)
		assert.Equal(t, changes[0].JQ, found.Results[0].JQ, "key %q", key)
	}
}

// Served without --identity, an encrypted store's files are not damaged:
// the timeline must not mark them so (ls says "needs key", verify exits
// with the key's code, not the damage's).
func TestServeTimelineDoesNotCallAMissingKeyDamage(t *testing.T) {
	t.Parallel()
	k := newKey(t)
	root := encryptedSessions(t, k)
	s := startServe(t, root)
	tl := waitChecked(t, s, "a")
	require.NotEmpty(t, tl.Checkpoints)
	for _, ck := range tl.Checkpoints {
		assert.Empty(t, ck.Damaged, "%s is not damaged", ck.File)
		assert.Contains(t, ck.NoKey, "no identity", "%s needs a key", ck.File)
	}
}
