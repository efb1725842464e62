package cli

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tests of this file attack checkpoint serve's promises (the contract
// in issue 25): each is named after the promise it checks.

// attackClient never follows a redirect and never shares connections with
// another test, so that a redirect is seen as such and a test can close
// its idle connections.
func attackClient() *http.Client {
	return &http.Client{
		Transport:     &http.Transport{DisableKeepAlives: true},
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// reply is an answer as a test sees it; err is set when the connection
// failed (a handler's panic closes it: io.EOF).
type reply struct {
	code   int
	header http.Header
	body   []byte
	err    error
}

func (r reply) String() string {
	if r.err != nil {
		return "error " + r.err.Error()
	}
	b := r.body
	if len(b) > 300 {
		b = b[:300]
	}
	return fmt.Sprintf("%d %s", r.code, b)
}

// attackReq sends req with the cookie token when withToken.
func (s served) do(t testing.TB, c *http.Client, req *http.Request, withToken bool) reply {
	t.Helper()
	if withToken {
		req.AddCookie(&http.Cookie{Name: "checkpoint_token_" + portOf(t, s.Base), Value: s.Token})
	}
	resp, err := c.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{code: resp.StatusCode, header: resp.Header, body: b, err: err}
}

// call requests method on the raw path p (not cleaned: as written) with the
// token.
func (s served) call(t testing.TB, method, p string, body io.Reader, hdr map[string]string) reply {
	t.Helper()
	req, err := http.NewRequest(method, s.Base, body)
	require.NoError(t, err)
	req.URL.Opaque = "//" + req.URL.Host + "/" + strings.TrimPrefix(p, "/")
	if i := strings.IndexByte(p, '?'); i >= 0 {
		req.URL.Opaque = "//" + req.URL.Host + "/" + strings.TrimPrefix(p[:i], "/")
		req.URL.RawQuery = p[i+1:]
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return s.do(t, attackClient(), req, true)
}

// rawHTTP sends a request written by hand and returns the status line.
func rawHTTP(t testing.TB, base, request string) string {
	t.Helper()
	u, err := url.Parse(base)
	require.NoError(t, err)
	conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = io.WriteString(conn, request)
	require.NoError(t, err)
	line, err := bufio.NewReader(conn).ReadString('\n')
	require.NoError(t, err, "no answer to %q", request)
	return strings.TrimSpace(line)
}

// assertNoCORS fails if an answer carries any Access-Control-Allow-* header.
func assertNoCORS(t testing.TB, h http.Header, what string) {
	t.Helper()
	for k := range h {
		assert.False(t, strings.HasPrefix(strings.ToLower(k), "access-control-"), "%s: CORS header %s: %s", what, k, h.Get(k))
	}
}

var allRoutes = []string{"", "api/info", "api/sessions", "api/timeline?session=run", "api/checkpoint?session=run&file=step_00000002.json",
	"api/node?session=run&file=step_00000002.json&path=", "api/search?session=run&file=step_00000002.json&q=a",
	"api/diff?a_session=run&a_file=step_00000001.json&b_session=run&b_file=step_00000002.json", "api/fork", "static/app.js", "static/app.css"}

func TestAttackEveryRouteAndMethodNeedsTheToken(t *testing.T) {
	t.Parallel()
	root, _, _ := serveFixture(t, 2)
	s := startServe(t, root)
	port := portOf(t, s.Base)
	c := attackClient()
	secret := "chess" // the session's meta: must never show without the token
	for _, p := range allRoutes {
		for _, m := range []string{"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"} {
			type variant struct {
				name  string
				query string
				ck    *http.Cookie
			}
			for _, v := range []variant{
				{"no token", "", nil},
				{"empty token", "token=", nil},
				{"Token spelled Token", "Token=" + s.Token, nil},
				{"token spelled access_token", "access_token=" + s.Token, nil},
				{"token in an upper-case name", "TOKEN=" + s.Token, nil},
				{"token cut short", "token=" + s.Token[:len(s.Token)-1], nil},
				{"token with a suffix", "token=" + s.Token + "x", nil},
				{"empty cookie", "", &http.Cookie{Name: "checkpoint_token_" + port, Value: ""}},
				{"cookie of another port", "", &http.Cookie{Name: "checkpoint_token_1" + port, Value: s.Token}},
				{"cookie without a port", "", &http.Cookie{Name: "checkpoint_token", Value: s.Token}},
				{"cookie named token", "", &http.Cookie{Name: "token", Value: s.Token}},
			} {
				u := s.Base + p
				if v.query != "" {
					if strings.Contains(u, "?") {
						u += "&" + v.query
					} else {
						u += "?" + v.query
					}
				}
				req, err := http.NewRequest(m, u, nil)
				require.NoError(t, err)
				if m == "OPTIONS" {
					req.Header.Set("Origin", "http://evil.example")
					req.Header.Set("Access-Control-Request-Method", "POST")
					req.Header.Set("Access-Control-Request-Headers", "x-checkpoint-csrf, content-type")
				}
				if v.ck != nil {
					req.AddCookie(v.ck)
				}
				r := s.do(t, c, req, false)
				require.NoError(t, r.err, "%s /%s (%s)", m, p, v.name)
				assert.Equal(t, http.StatusForbidden, r.code, "%s /%s (%s): %s", m, p, v.name, r)
				assert.NotContains(t, string(r.body), secret, "%s /%s (%s) shows data", m, p, v.name)
				assert.Empty(t, r.header.Values("Set-Cookie"), "%s /%s (%s) sets a cookie", m, p, v.name)
				assertNoCORS(t, r.header, m+" /"+p)
			}
		}
	}
	// Path tricks, without the token: refused before any routing.
	tricks := []string{"//api/info", "/api/../api/info", "/./api/info", "/static/../serve.go", "/static/..%2fserve.go",
		"/%2e%2e/serve.go", "/static/%2e%2e/serve.go", "/static/index.html", "/API/INFO", "/Api/Sessions", "/api/info/", "/index.html", "/web/index.html"}
	for _, p := range tricks {
		req, err := http.NewRequest("GET", s.Base, nil)
		require.NoError(t, err)
		req.URL.Opaque = "//" + req.URL.Host + p
		r := s.do(t, c, req, false)
		require.NoError(t, r.err, p)
		assert.Equal(t, http.StatusForbidden, r.code, "GET %s without a token: %s", p, r)
	}
	// With the token, a trick reaches no file but the page's own.
	for _, p := range tricks {
		r := s.call(t, "GET", p, nil, nil)
		require.NoError(t, r.err, p)
		assert.NotEqual(t, http.StatusOK, r.code, "GET %s: %s", p, r)
		assert.NotContains(t, string(r.body), "package cli", "GET %s serves Go source", p)
	}
	// HEAD and OPTIONS with the token: no CORS, never a body of data on OPTIONS.
	for _, p := range allRoutes {
		for _, m := range []string{"HEAD", "OPTIONS"} {
			r := s.call(t, m, p, nil, map[string]string{"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"})
			require.NoError(t, r.err)
			assertNoCORS(t, r.header, m+" /"+p+" with the token")
			assert.Less(t, r.code, 500, "%s /%s: %s", m, p, r)
		}
	}
}

func TestAttackHostCheckRefusesRebindingNames(t *testing.T) {
	t.Parallel()
	root, _, _ := serveFixture(t, 1)
	s := startServe(t, root)
	port := portOf(t, s.Base)
	c := attackClient()
	get := func(host string) reply {
		req, err := http.NewRequest("GET", s.Base+"api/info?token="+s.Token, nil)
		require.NoError(t, err)
		req.Host = host
		return s.do(t, c, req, false)
	}
	// Loopback addresses in any spelling are no rebinding: only a name can be
	// made to resolve to this machine.
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "[::1]:" + port, "LOCALHOST:" + port, "[::ffff:127.0.0.1]:" + port, "[0:0:0:0:0:0:0:1]:" + port} {
		r := get(host)
		assert.Equal(t, http.StatusOK, r.code, "Host %s: %s", host, r)
	}
	for _, host := range []string{
		"127.0.0.1.evil:" + port, "127.0.0.1.evil.example:" + port, "localhost.:" + port, "localhost.evil:" + port,
		"evil.localhost:" + port, "127.0.0.1", "localhost", "127.0.0.1:1" + port, "127.0.0.1:" + port + ".evil",
		"127.1:" + port, "2130706433:" + port, "[::ffff:10.0.0.1]:" + port, "10.0.0.1:" + port,
		"::1:" + port, "[::1]", "0.0.0.0:" + port, "127.0.0.1:" + port + "@evil", "evil.example",
	} {
		r := get(host)
		if r.err != nil {
			continue // the client refused to send it: nothing reached the server
		}
		assert.Equal(t, http.StatusForbidden, r.code, "Host %q: %s", host, r)
		assert.NotContains(t, string(r.body), "csrf", "Host %q: %s", host, r)
	}
	// No Host at all (HTTP/1.0), and two of them.
	line := rawHTTP(t, s.Base, "GET /api/info?token="+s.Token+" HTTP/1.0\r\n\r\n")
	assert.Contains(t, line, " 403 ", "HTTP/1.0 without a Host")
	line = rawHTTP(t, s.Base, "GET /api/info?token="+s.Token+" HTTP/1.1\r\nHost: evil.example\r\nHost: 127.0.0.1:"+port+"\r\nConnection: close\r\n\r\n")
	assert.NotContains(t, line, " 200 ", "two Host headers")
	// An absolute URI whose host is the server's but a Host header of another name.
	line = rawHTTP(t, s.Base, "GET http://127.0.0.1:"+port+"/api/info?token="+s.Token+" HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")
	t.Logf("absolute URI with Host evil.example: %s", line)
}

// treeHash returns every entry under dir: its name, mode, size and the
// hash of its bytes (a symlink: its target; a FIFO is never opened).
func treeHash(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		desc := fi.Mode().String()
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			desc += fmt.Sprintf(" %d %s", len(b), hex.EncodeToString(sum[:]))
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			desc += " -> " + target
		}
		out[rel] = desc
		return nil
	})
	require.NoError(t, err)
	return out
}

// assertSameTree fails with the differences if before and after differ.
func assertSameTree(t testing.TB, before, after map[string]string, what string) {
	t.Helper()
	var diffs []string
	for k, v := range before {
		if w, ok := after[k]; !ok {
			diffs = append(diffs, "removed "+k)
		} else if w != v {
			diffs = append(diffs, "changed "+k+": "+v+" -> "+w)
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			diffs = append(diffs, "added "+k)
		}
	}
	sort.Strings(diffs)
	assert.Empty(t, diffs, "%s: the tree changed", what)
}

// hostileRoot is serveFixture's root (a damaged file at step 3) plus a
// session whose session.json is garbage, a truncated checkpoint, a stray
// temporary file, and a session a writer holds open (its claim taken). It
// returns the root, run's key and a func that closes the writer.
func hostileRoot(t *testing.T) (root, run string, keys []string) {
	t.Helper()
	ctx := context.Background()
	root, run, xss := serveFixture(t, 4)
	r, err := checkpoint.OpenSessions(root, checkpoint.NoSync())
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	broken, err := r.Create(ctx, "broken", nil)
	require.NoError(t, err)
	bst, err := checkpoint.OpenSessionStore[map[string]int](r, broken.ID)
	require.NoError(t, err)
	_, err = bst.Save(ctx, 1, map[string]int{"a": 1})
	require.NoError(t, err)
	_, err = bst.Save(ctx, 2, map[string]int{"a": 2})
	require.NoError(t, err)
	require.NoError(t, bst.Close())
	require.NoError(t, os.WriteFile(filepath.Join(broken.Dir, "session.json"), []byte("{not json"), 0o644))
	p := filepath.Join(broken.Dir, "step_00000002.json")
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p, b[:len(b)/2], 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(broken.Dir, ".step_00000003.json.tmp123"), []byte("half"), 0o644))

	live, err := r.Create(ctx, "live", nil)
	require.NoError(t, err)
	lst, err := checkpoint.OpenSessionStore[map[string]int](r, live.ID, checkpoint.NoSync())
	require.NoError(t, err)
	_, err = lst.Save(ctx, 1, map[string]int{"a": 1})
	require.NoError(t, err)
	t.Cleanup(func() { lst.Close() })
	return root, run, []string{run, xss, storedName(broken.Dir), storedName(live.Dir)}
}

// readEverything requests every read API of every store keys names, and
// fork (which must be refused or, with write, be the only write); it
// fails on a 5xx or a broken connection.
func readEverything(t *testing.T, s served, keys []string) {
	t.Helper()
	c := attackClient()
	get := func(p string) reply {
		req, err := http.NewRequest("GET", s.Base+p, nil)
		require.NoError(t, err)
		r := s.do(t, c, req, true)
		require.NoError(t, r.err, "GET %s", p)
		assert.Less(t, r.code, 500, "GET %s: %s", p, r)
		return r
	}
	get("api/info")
	get("api/sessions")
	get("")
	get("static/app.js")
	for _, key := range keys {
		k := url.QueryEscape(key)
		var tl timelineJSON
		r := get("api/timeline?session=" + k)
		if r.code != 200 {
			continue
		}
		require.NoError(t, json.Unmarshal(r.body, &tl))
		get("api/timeline?keep_last=1&keep_every=2&prune_kinds=final,error&session=" + k)
		var prev string
		for _, ck := range tl.Checkpoints {
			f := url.QueryEscape(ck.File)
			q := "session=" + k + "&file=" + f
			get("api/checkpoint?" + q)
			get("api/node?" + q + "&path=")
			get("api/search?" + q + "&q=a")
			if prev != "" {
				get("api/diff?a_session=" + k + "&a_file=" + prev + "&b_session=" + k + "&b_file=" + f)
			}
			prev = f
		}
		if len(tl.Checkpoints) > 0 {
			waitChecked(t, s, key)
		}
	}
}

func TestAttackReadAPIsNeverWriteWithoutWrite(t *testing.T) {
	t.Parallel()
	root, run, keys := hostileRoot(t)
	before := treeHash(t, root)
	t.Cleanup(func() { assertSameTree(t, before, treeHash(t, root), "after the server stopped") })
	s := startServe(t, root)
	readEverything(t, s, keys)
	var info infoJSON
	require.Equal(t, 200, s.get(t, "api/info", &info))
	r := s.call(t, "POST", "api/fork", strings.NewReader(`{"session":"`+run+`","step":2}`),
		map[string]string{"Content-Type": "application/json", "X-Checkpoint-CSRF": info.CSRF})
	assert.Equal(t, http.StatusForbidden, r.code, "%s", r)
	assertSameTree(t, before, treeHash(t, root), "after every read API")
}

func TestAttackReadAPIsNeverWriteToAStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := checkpoint.Open[map[string]int](dir, checkpoint.NoSync())
	require.NoError(t, err)
	defer st.Close() // held open: the store is locked by a writer
	for i := 1; i <= 4; i++ {
		_, err = st.Save(ctx, int64(i), map[string]int{"a": i})
		require.NoError(t, err)
	}
	p := filepath.Join(dir, "step_00000002.json")
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	b[len(b)-5] ^= 1
	require.NoError(t, os.WriteFile(p, b, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "step_00000003.json"), []byte("garbage"), 0o644))
	before := treeHash(t, dir)
	t.Cleanup(func() { assertSameTree(t, before, treeHash(t, dir), "after the server stopped") })
	s := startServe(t, "--write", dir)
	readEverything(t, s, []string{""})
	tl := waitChecked(t, s, "")
	damaged := 0
	for _, ck := range tl.Checkpoints {
		if ck.Damaged != "" {
			damaged++
		}
	}
	assert.Equal(t, 2, damaged, "%+v", tl.Checkpoints)
	assertSameTree(t, before, treeHash(t, dir), "after every read API")
}

func TestAttackWithWriteOnlyAForkWrites(t *testing.T) {
	t.Parallel()
	root, run, keys := hostileRoot(t)
	before := treeHash(t, root)
	s := startServe(t, "--write", root)
	readEverything(t, s, keys)
	assertSameTree(t, before, treeHash(t, root), "--write, after every read API")
	var info infoJSON
	require.Equal(t, 200, s.get(t, "api/info", &info))
	r := s.call(t, "POST", "api/fork", strings.NewReader(`{"session":"`+run+`","step":2}`),
		map[string]string{"Content-Type": "application/json", "X-Checkpoint-CSRF": info.CSRF})
	require.Equal(t, http.StatusOK, r.code, "%s", r)
	after := treeHash(t, root)
	tops := map[string]bool{}
	for k, v := range after {
		if old, ok := before[k]; ok {
			if old != v && k != "." {
				// A directory's mode is all the tree keeps of it.
				assert.Equal(t, old, v, "the fork changed %s", k)
			}
			continue
		}
		tops[strings.SplitN(k, string(filepath.Separator), 2)[0]] = true
	}
	for k := range before {
		_, ok := after[k]
		assert.True(t, ok, "the fork removed %s", k)
	}
	assert.Len(t, tops, 1, "a fork adds one session directory: %v", tops)
}

// validKinds are the error kinds of the contract.
var validKinds = map[string]bool{"not_found": true, "damaged": true, "no_key": true, "locked": true, "bad_request": true, "forbidden": true, "storage": true}

// assertJSONError fails unless r is an error answer of the contract: a
// 4xx (or a documented 5xx), JSON with a kind, nosniff.
func assertJSONError(t testing.TB, r reply, what string) {
	t.Helper()
	if !assert.NoError(t, r.err, what) {
		return
	}
	assert.GreaterOrEqual(t, r.code, 400, "%s: %s", what, r)
	assert.True(t, strings.HasPrefix(r.header.Get("Content-Type"), "application/json"), "%s: Content-Type %q: %s", what, r.header.Get("Content-Type"), r)
	assert.Equal(t, "nosniff", r.header.Get("X-Content-Type-Options"), what)
	var e struct{ Error, Kind string }
	if assert.NoError(t, json.Unmarshal(r.body, &e), "%s: %s", what, r) {
		assert.True(t, validKinds[e.Kind], "%s: kind %q", what, e.Kind)
		assert.NotEmpty(t, e.Error, what)
	}
}

func TestAttackSessionKeysAndFileNamesCannotEscapeTheRoot(t *testing.T) {
	t.Parallel()
	root, run, _ := serveFixture(t, 3)
	other, orun, _ := serveFixture(t, 2) // another root: nothing of it may be read
	s := startServe(t, root)
	okFile := "step_00000002.json"
	keys := []string{"..", ".", "../" + filepath.Base(other) + "/" + orun, "/", other, filepath.Join(other, orun), "run/../" + run,
		run + "/", "/" + run, run + "\x00", "\x00", `..\` + run, `a\b`, "%2e%2e", "..%2f" + run, "~", "~root", "CON", run + "/..",
		"." + run, run + "/step_00000002.json", strings.Repeat("a", 5000), "\xff\xfe", "session.json"}
	for _, key := range keys {
		for _, p := range []string{"api/timeline?session=", "api/checkpoint?file=" + okFile + "&session=", "api/node?file=" + okFile + "&path=&session=",
			"api/search?q=a&file=" + okFile + "&session=", "api/diff?a_session=" + url.QueryEscape(run) + "&a_file=" + okFile + "&b_file=" + okFile + "&b_session="} {
			r := s.call(t, "GET", p+url.QueryEscape(key), nil, nil)
			assertJSONError(t, r, fmt.Sprintf("%s%q", p, key))
			assert.NotContains(t, string(r.body), `"checkpoints"`, "%s%q", p, key)
		}
	}
	files := []string{"../session.json", "session.json", "/etc/passwd", "../../" + filepath.Base(other) + "/" + orun + "/" + okFile,
		filepath.Join(other, orun, okFile), okFile + "/../" + okFile, "./" + okFile, okFile + "\x00", okFile + "\x00.txt", `..\` + okFile,
		"..", ".", "", "/", okFile + "/", "STEP_00000002.JSON", "step_00000002.json.tmp", "%2e%2e%2fsession.json", "\xff"}
	for _, f := range files {
		for _, p := range []string{"api/checkpoint", "api/node", "api/search"} {
			r := s.call(t, "GET", p+"?q=a&session="+url.QueryEscape(run)+"&file="+url.QueryEscape(f), nil, nil)
			assertJSONError(t, r, fmt.Sprintf("%s file %q", p, f))
		}
	}
}

func TestAttackSymlinksOutOfTheRootAreNotFollowedSilently(t *testing.T) {
	t.Parallel()
	root, run, _ := serveFixture(t, 2)
	other, orun, _ := serveFixture(t, 2)
	// A session directory that is a symlink to a store of another root,
	// and a checkpoint file that is a symlink to a file of it.
	require.NoError(t, os.Symlink(filepath.Join(other, orun), filepath.Join(root, "linked")))
	require.NoError(t, os.Symlink(filepath.Join(other, orun, "step_00000001.json"), filepath.Join(root, run, "step_00000005.json")))
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(root, run, "step_00000006.json")))
	before, beforeOther := treeHash(t, root), treeHash(t, other)
	s := startServe(t, root)
	var sessions struct{ Sessions []webSession }
	require.Equal(t, 200, s.get(t, "api/sessions", &sessions))
	for _, ws := range sessions.Sessions {
		t.Logf("session %q id %q error %q", ws.Key, ws.ID, ws.Error)
	}
	for _, ws := range sessions.Sessions {
		assert.NotEqual(t, "linked", ws.Key, "a symlink is listed as a session")
	}
	tl := waitChecked(t, s, run)
	for _, ck := range tl.Checkpoints {
		t.Logf("%s step %d damaged %q", ck.File, ck.Step, ck.Damaged)
	}
	r := s.call(t, "GET", "api/checkpoint?session="+url.QueryEscape(run)+"&file=step_00000006.json", nil, nil)
	assert.NotContains(t, string(r.body), "root:", "/etc/passwd's text in an answer: %s", r)
	assertSameTree(t, before, treeHash(t, root), "root")
	assertSameTree(t, beforeOther, treeHash(t, other), "the symlinks' targets")
}

// A FIFO or a directory named like a checkpoint never hangs a request, the
// background checker, or the server's stop.
func TestAttackAFIFONamedLikeACheckpointNeverHangsTheServer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st, err := checkpoint.Open[map[string]int](dir, checkpoint.NoSync())
	require.NoError(t, err)
	for i := 1; i <= 3; i++ {
		_, err = st.Save(context.Background(), int64(i), map[string]int{"a": i})
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())
	if err := mkfifo(filepath.Join(dir, "step_00000005.json")); err != nil {
		t.Skipf("no FIFO: %v", err)
	}
	require.NoError(t, os.Mkdir(filepath.Join(dir, "step_00000006.json"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "step_00000006.json", "x"), []byte("x"), 0o644))
	before := treeHash(t, dir)

	ctx, cancel := context.WithCancel(context.Background())
	s, stopped := startServeCtx(t, ctx, dir)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c := attackClient()
		c.Timeout = 3 * time.Second
		for _, p := range []string{"api/timeline?session=", "api/checkpoint?session=&file=step_00000005.json", "api/node?session=&file=step_00000005.json",
			"api/checkpoint?session=&file=step_00000006.json", "api/checkpoint?session=&file=step_00000002.json",
			"api/diff?a_session=&a_file=step_00000005.json&b_session=&b_file=step_00000002.json"} {
			req, _ := http.NewRequest("GET", s.Base+p, nil)
			r := s.do(t, c, req, true)
			assert.NoError(t, r.err, "GET %s (a FIFO in the store)", p)
			if r.err == nil {
				assert.Less(t, r.code, 500, "GET %s: %s", p, r)
			}
		}
		tl := waitChecked(t, s, "")
		for _, ck := range tl.Checkpoints {
			t.Logf("%s damaged %q", ck.File, ck.Damaged)
		}
	}()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("requests on a store with a FIFO hang")
	}
	cancel()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the server does not stop: its checker hangs on the FIFO")
	}
	assertSameTree(t, before, treeHash(t, dir), "a store with a FIFO")
}

func TestAttackForkRefusesForgedRequests(t *testing.T) {
	t.Parallel()
	root, run, keys := hostileRoot(t)
	broken := keys[2]
	other, orun, _ := serveFixture(t, 2)
	s := startServe(t, "--write", root)
	var info infoJSON
	require.Equal(t, 200, s.get(t, "api/info", &info))
	before := treeHash(t, root)
	good := `{"session":"` + run + `","step":2}`
	js := "application/json"
	type forged struct {
		name    string
		body    string
		hdr     map[string]string
		code    int // 0: any 4xx
		withTok bool
	}
	big := `{"session":"` + run + `","step":2,"meta":{"x":"` + strings.Repeat("a", 10<<20) + `"}}`
	cases := []forged{
		{"no CSRF header", good, map[string]string{"Content-Type": js}, 403, true},
		{"an empty CSRF header", good, map[string]string{"Content-Type": js, "X-Checkpoint-CSRF": ""}, 403, true},
		{"a wrong CSRF header", good, map[string]string{"Content-Type": js, "X-Checkpoint-CSRF": info.CSRF + "x"}, 403, true},
		{"the token as CSRF", good, map[string]string{"Content-Type": js, "X-Checkpoint-CSRF": s.Token}, 403, true},
		{"CSRF in the query only", good, map[string]string{"Content-Type": js}, 403, true},
		{"form-encoded", "session=" + run + "&step=2", map[string]string{"Content-Type": "application/x-www-form-urlencoded", "X-Checkpoint-CSRF": info.CSRF}, 403, true},
		{"text/plain", good, map[string]string{"Content-Type": "text/plain", "X-Checkpoint-CSRF": info.CSRF}, 403, true},
		{"multipart", good, map[string]string{"Content-Type": "multipart/form-data; boundary=x", "X-Checkpoint-CSRF": info.CSRF}, 403, true},
		{"no Content-Type", good, map[string]string{"X-Checkpoint-CSRF": info.CSRF}, 403, true},
		{"another Origin", good, map[string]string{"Content-Type": js, "X-Checkpoint-CSRF": info.CSRF, "Origin": "http://evil.example"}, 403, true},
		{"Origin null", good, map[string]string{"Content-Type": js, "X-Checkpoint-CSRF": info.CSRF, "Origin": "null"}, 403, true},
		{"an Origin of another port", good, map[string]string{"Content-Type": js, "X-Checkpoint-CSRF": info.CSRF, "Origin": "http://127.0.0.1:1"}, 403, true},
		{"no token", good, map[string]string{"Content-Type": js, "X-Checkpoint-CSRF": info.CSRF}, 403, false},
		{"a body of 10 MB", big, map[string]string{"Content-Type": js, "X-Checkpoint-CSRF": info.CSRF}, 400, true},
		{"unknown fields", `{"session":"` + run + `","step":2,"evil":1}`, map[string]string{"Content-Type": js, "X-Checkpoint-CSRF": info.CSRF}, 400, true},
		{"not JSON", `{"session":`, map[string]string{"Content-Type": js, "X-Checkpoint-CSRF": info.CSRF}, 400, true},
		{"an empty body", ``, map[string]string{"Content-Type": js, "X-Checkpoint-CSRF": info.CSRF}, 400, true},
		{"null", `null`, map[string]string{"Content-Type": js, "X-Checkpoint-CSRF": info.CSRF}, 400, true},
		{"no step", `{"session":"` + run + `"}`, map[string]string{"Content-Type": js, "X-Checkpoint-CSRF": info.CSRF}, 400, true},
		{"a negative step", `{"session":"` + run + `","step":-1}`, map[string]string{"Content-Type": js, "X-Checkpoint-CSRF": info.CSRF}, 0, true},
		{"a huge step", `{"session":"` + run + `","step":99999999999999999999999}`, map[string]string{"Content-Type": js, "X-Checkpoint-CSRF": info.CSRF}, 400, true},
		{"a fractional step", `{"session":"` + run + `","step":1.5}`, map[string]string{"Content-Type": js, "X-Checkpoint-CSRF": info.CSRF}, 400, true},
		{"a string step", `{"session":"` + run + `","step":"2"}`, map[string]string{"Content-Type": js, "X-Checkpoint-CSRF": info.CSRF}, 400, true},
		{"a step with no checkpoint", `{"session":"` + run + `","step":77}`, map[string]string{"Content-Type": js, "X-Checkpoint-CSRF": info.CSRF}, 404, true},
		{"a path to another root", `{"session":` + jsonString(filepath.Join(other, orun)) + `,"step":1}`, map[string]string{"Content-Type": js, "X-Checkpoint-CSRF": info.CSRF}, 404, true},
		{"a traversal", `{"session":"../` + filepath.Base(other) + `/` + orun + `","step":1}`, map[string]string{"Content-Type": js, "X-Checkpoint-CSRF": info.CSRF}, 404, true},
		{"a damaged session", `{"session":"` + broken + `","step":1}`, map[string]string{"Content-Type": js, "X-Checkpoint-CSRF": info.CSRF}, 422, true},
		{"a session by its ID, not its key", `{"session":"` + xssID + `","step":1}`, map[string]string{"Content-Type": js, "X-Checkpoint-CSRF": info.CSRF}, 404, true},
		{"the damaged step", `{"session":"` + run + `","step":3}`, map[string]string{"Content-Type": js, "X-Checkpoint-CSRF": info.CSRF}, 0, true},
		{"meta not strings", `{"session":"` + run + `","step":2,"meta":{"a":1}}`, map[string]string{"Content-Type": js, "X-Checkpoint-CSRF": info.CSRF}, 400, true},
	}
	c := attackClient()
	for _, f := range cases {
		for _, m := range []string{"POST", "PUT"} {
			req, err := http.NewRequest(m, s.Base+"api/fork", strings.NewReader(f.body))
			require.NoError(t, err)
			for k, v := range f.hdr {
				req.Header.Set(k, v)
			}
			if f.name == "CSRF in the query only" {
				req.URL.RawQuery = "csrf=" + url.QueryEscape(info.CSRF) + "&X-Checkpoint-CSRF=" + url.QueryEscape(info.CSRF)
			}
			r := s.do(t, c, req, f.withTok)
			if r.err != nil && f.body == big {
				// The server answered before reading 10 MB and closed
				// the connection: a refusal too (the tree is checked below).
				continue
			}
			require.NoError(t, r.err, f.name)
			assertNoCORS(t, r.header, f.name)
			if m == "PUT" {
				assert.GreaterOrEqual(t, r.code, 400, "PUT api/fork (%s): %s", f.name, r)
				continue
			}
			if f.withTok {
				assertJSONError(t, r, f.name)
			}
			if f.code != 0 {
				assert.Equal(t, f.code, r.code, "%s: %s", f.name, r)
			} else {
				assert.True(t, r.code >= 400 && r.code < 500, "%s: %s", f.name, r)
			}
		}
	}
	assertSameTree(t, before, treeHash(t, root), "after forged forks")
	// A preflight from another origin gets no CORS answer.
	r := s.call(t, "OPTIONS", "api/fork", nil, map[string]string{"Origin": "http://evil.example", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "x-checkpoint-csrf"})
	assertNoCORS(t, r.header, "OPTIONS api/fork")
	assert.NotEqual(t, http.StatusOK, r.code, "%s", r)
}

// The sessions layer never takes a symlink in a root for a session (it is
// not listed); the API must not read the store it points to either.
func TestAttackASymlinkedSessionDirIsNotServed(t *testing.T) {
	t.Parallel()
	root, _, _ := serveFixture(t, 2)
	other, orun, _ := serveFixture(t, 2)
	require.NoError(t, os.Symlink(filepath.Join(other, orun), filepath.Join(root, "linked")))
	s := startServe(t, root)
	for _, p := range []string{"api/timeline?session=linked", "api/checkpoint?session=linked&file=step_00000001.json"} {
		r := s.call(t, "GET", p, nil, nil)
		assertJSONError(t, r, p)
		assert.Equal(t, http.StatusNotFound, r.code, "GET %s reads a store outside the root through a symlink: %s", p, r)
	}
}

func TestAttackForkRefusesABodyWithTrailingData(t *testing.T) {
	t.Parallel()
	root, run, _ := serveFixture(t, 2)
	s := startServe(t, "--write", root)
	var info infoJSON
	require.Equal(t, 200, s.get(t, "api/info", &info))
	before := treeHash(t, root)
	for _, body := range []string{`{"session":"` + run + `","step":2}{"session":"x"}`, `{"session":"` + run + `","step":2} garbage`} {
		r := s.call(t, "POST", "api/fork", strings.NewReader(body), map[string]string{"Content-Type": "application/json", "X-Checkpoint-CSRF": info.CSRF})
		assertJSONError(t, r, body)
		assert.Equal(t, http.StatusBadRequest, r.code, "%s: %s", body, r)
	}
	assertSameTree(t, before, treeHash(t, root), "after forks with trailing data")
}

// rawStateStore saves states into a store and returns its directory and
// the file of each state, by name.
func rawStateStore(t testing.TB, states map[string][]byte, order []string) (string, map[string]string) {
	t.Helper()
	dir := t.TempDir()
	st, err := checkpoint.Open[json.RawMessage](dir, checkpoint.NoSync())
	require.NoError(t, err)
	defer st.Close()
	files := map[string]string{}
	for i, name := range order {
		info, err := st.Save(context.Background(), int64(i+1), json.RawMessage(states[name]))
		if err != nil {
			t.Logf("state %s does not save: %v", name, err)
			continue
		}
		files[name] = info.Name()
	}
	return dir, files
}

func TestAttackHostileStatesGetAnAnswerNotAPanic(t *testing.T) {
	t.Parallel()
	deep := func(n int, open, close string) []byte {
		return []byte(strings.Repeat(open, n) + "1" + strings.Repeat(close, n))
	}
	states := map[string][]byte{
		"plain":     []byte(`{"a":1,"b":[1,2,3],"c":{"d":"x"}}`),
		"deep100k":  deep(100000, "[", "]"),
		"deep1k":    deep(1000, "[", "]"),
		"deepobj1k": deep(1000, `{"a/~":`, "}"),
		"hugestr":   []byte(`{"s":"` + strings.Repeat("é", 20000) + `","t":"` + strings.Repeat("a", 2001) + `"}`),
		"keys":      []byte("{\"a/b\":1,\"~\":2,\"~1\":3,\"\":4,\"\xff\xfe\":5,\"dup\":1,\"dup\":2,\"big\":1e999,\"neg\":-1e999,\"tiny\":1e-999,\"n\":123456789012345678901234567890,\"s\":\"\xff\",\"esc\":\"\\ud800\",\"nul\":\"a\\u0000b\"}"),
		"scalar":    []byte(`"just a string"`),
		"null":      []byte(`null`),
		"wide":      []byte(`[` + strings.TrimSuffix(strings.Repeat(`0,`, 3000), ",") + `]`),
	}
	order := []string{"plain", "deep100k", "deep1k", "deepobj1k", "hugestr", "keys", "scalar", "null", "wide"}
	dir, files := rawStateStore(t, states, order)
	s := startServe(t, dir)
	c := attackClient()
	get := func(p string) reply {
		req, err := http.NewRequest("GET", s.Base+p, nil)
		require.NoError(t, err)
		start := time.Now()
		r := s.do(t, c, req, true)
		if d := time.Since(start); d > time.Second {
			t.Logf("GET %.200s took %v", p, d)
		}
		require.NoError(t, r.err, "GET %s: the connection broke (a panic?)", p)
		assert.Less(t, r.code, 500, "GET %s: %s", p, r)
		if r.code >= 400 {
			assertJSONError(t, r, p)
		}
		return r
	}
	q := func(name string) string { return "session=&file=" + url.QueryEscape(files[name]) }
	for _, name := range order {
		f, ok := files[name]
		if !ok {
			continue
		}
		get("api/checkpoint?" + q(name))
		ptrs := []string{"", "/", "//", "~", "/~", "/~2", "/~1", "/~0", "/01", "/-", "/0/", "/0", "/99999999999999999999", "/-1",
			"/+1", "/1e0", "/ 1", "/a/b", "/a~1b", "/\xff\xfe", "/" + strings.Repeat("0/", 500) + "0", "/" + strings.Repeat("a~1~0/", 500)}
		if name == "hugestr" || name == "scalar" || name == "null" {
			ptrs = []string{"", "/s", "/t", "/"}
		}
		for _, ptr := range ptrs {
			get("api/node?" + q(name) + "&path=" + url.QueryEscape(ptr))
		}
		for _, o := range []string{"offset=-1", "offset=x", "offset=99999999999999999999", "offset=9223372036854775807", "limit=0", "limit=-1", "limit=5001", "limit=9223372036854775807", "offset=1&limit=1"} {
			get("api/node?" + q(name) + "&path=&" + o)
		}
		for _, needle := range []string{"a", "1", "~", "/", "\xff", "é", "\x00", "null", strings.Repeat("a", 2001)} {
			get("api/search?" + q(name) + "&q=" + url.QueryEscape(needle))
		}
		for _, other := range []string{"plain", "keys", name} {
			if strings.HasPrefix(name, "deep") && strings.HasPrefix(other, "deep") {
				continue // TestAttackDiffOfNestedArraysAnswersInTime
			}
			if g, ok := files[other]; ok {
				get("api/diff?a_session=&a_file=" + url.QueryEscape(f) + "&b_session=&b_file=" + url.QueryEscape(g))
			}
		}
	}
}

// Every path an answer names (a child's, a search result's, a diff's)
// opens with api/node.
func TestAttackEveryPathTheAPIReturnsOpens(t *testing.T) {
	t.Parallel()
	states := map[string][]byte{
		"a": []byte("{\"a/b\":{\"x\":1},\"~\":[1],\"~1\":{\"y\":2},\"\":{\"z\":3},\"\xff\xfe\":{\"w\":4},\"sp ace\":{\"v\":5}}"),
		"b": []byte("{\"a/b\":{\"x\":2},\"~\":[2],\"~1\":{\"y\":3},\"\":{\"z\":4},\"\xff\xfe\":{\"w\":5},\"sp ace\":{\"v\":6}}"),
	}
	dir, files := rawStateStore(t, states, []string{"a", "b"})
	require.Len(t, files, 2)
	s := startServe(t, dir)
	open := func(file, ptr, from string) {
		var ch children
		r := s.call(t, "GET", "api/node?session=&file="+url.QueryEscape(file)+"&path="+url.QueryEscape(ptr), nil, nil)
		require.NoError(t, r.err)
		if assert.Equal(t, 200, r.code, "the path %q that %s returned does not open: %s", ptr, from, r) {
			require.NoError(t, json.Unmarshal(r.body, &ch))
			assert.Equal(t, ptr, ch.Path)
		}
	}
	var root children
	require.Equal(t, 200, s.get(t, "api/node?session=&file="+url.QueryEscape(files["a"])+"&path=", &root))
	for _, ch := range root.Children {
		open(files["a"], ch.Path, "api/node")
	}
	var found searchResults
	for _, needle := range []string{"x", "y", "z", "w", "v", "1"} {
		require.Equal(t, 200, s.get(t, "api/search?session=&file="+url.QueryEscape(files["a"])+"&q="+needle, &found))
		for _, res := range found.Results {
			open(files["a"], res.Path, "api/search")
		}
	}
	var d struct{ Changes []change }
	require.Equal(t, 200, s.get(t, "api/diff?a_session=&a_file="+url.QueryEscape(files["a"])+"&b_session=&b_file="+url.QueryEscape(files["b"]), &d))
	assert.Len(t, d.Changes, 6)
	for _, c := range d.Changes {
		open(files["a"], *c.APath, "api/diff (a_path)")
		open(files["b"], *c.BPath, "api/diff (b_path)")
	}
}

func TestAttackNodePagingPastTheEndHasNoMore(t *testing.T) {
	t.Parallel()
	dir, files := rawStateStore(t, map[string][]byte{"a": []byte(`[1,2,3]`)}, []string{"a"})
	s := startServe(t, dir)
	for _, o := range []string{"offset=3", "offset=1000", "offset=9223372036854775000", "offset=9223372036854775807"} {
		var ch children
		r := s.call(t, "GET", "api/node?session=&file="+files["a"]+"&path=&"+o, nil, nil)
		require.NoError(t, r.err)
		if r.code != 200 {
			assertJSONError(t, r, o)
			continue
		}
		require.NoError(t, json.Unmarshal(r.body, &ch))
		assert.Empty(t, ch.Children, o)
		assert.False(t, ch.More, "%s: more past the end, the page would ask for ever: %s", o, r)
	}
}

// A diff of two states of nested arrays (a matrix of 20 dimensions) that
// differ in one leaf answers in time.
func TestAttackDiffOfNestedArraysAnswersInTime(t *testing.T) {
	t.Parallel()
	nested := func(leaf string) []byte { return []byte(strings.Repeat("[", 20) + leaf + strings.Repeat("]", 20)) }
	dir, files := rawStateStore(t, map[string][]byte{"a": nested("1"), "b": nested("2")}, []string{"a", "b"})
	s := startServe(t, dir)
	c := attackClient()
	c.Timeout = 3 * time.Second
	req, err := http.NewRequest("GET", s.Base+"api/diff?a_session=&a_file="+files["a"]+"&b_session=&b_file="+files["b"], nil)
	require.NoError(t, err)
	r := s.do(t, c, req, true)
	require.NoError(t, r.err, "a diff of two 20-deep arrays")
	assert.Equal(t, 200, r.code, "%s", r)
	var d struct {
		Exact   bool
		Changes []change
	}
	require.NoError(t, json.Unmarshal(r.body, &d))
	assert.False(t, d.Exact, "the answer says arrays were compared index by index")
	require.Len(t, d.Changes, 1)
	assert.Equal(t, "."+strings.Repeat("[0]", 20), d.Changes[0].JQ)
}

func TestAttackErrorsAreJSONWithAKindAndNeverHTML(t *testing.T) {
	t.Parallel()
	root, run, xss := serveFixture(t, 3)
	s := startServe(t, root)
	k := url.QueryEscape(run)
	cases := map[string]int{
		"api/timeline?session=" + url.QueryEscape(xssID):                                                            404,
		"api/timeline?session=nope":                                                                                 404,
		"api/timeline":                                                                                              404,
		"api/checkpoint?session=" + k:                                                                               400,
		"api/checkpoint?session=" + k + "&file=" + url.QueryEscape(xssID):                                           404,
		"api/checkpoint?session=" + k + "&file=step_00000003.json":                                                  422,
		"api/node?session=" + k + "&file=step_00000002.json&path=" + url.QueryEscape(xssID):                         400,
		"api/node?session=" + k + "&file=step_00000002.json&path=/" + url.QueryEscape(xssID):                        404,
		"api/node?session=" + k + "&file=step_00000003.json":                                                        422,
		"api/search?session=" + k + "&file=step_00000002.json&q=":                                                   400,
		"api/search?session=" + k + "&file=step_00000002.json&q=%20":                                                400,
		"api/diff?a_session=" + k + "&a_file=step_00000002.json&b_session=" + url.QueryEscape(xss) + "&b_file=nope": 404,
		"api/diff?a_session=" + k + "&a_file=step_00000002.json&b_session=" + k + "&b_file=step_00000003.json":      422,
	}
	for p, code := range cases {
		r := s.call(t, "GET", p, nil, nil)
		assertJSONError(t, r, p)
		assert.Equal(t, code, r.code, "%s: %s", p, r)
		assert.NotContains(t, string(r.body), "<script>", "%s: the ID unescaped in a JSON answer", p)
		assertNoCORS(t, r.header, p)
	}
	// Every answer, good or bad, carries nosniff and the CSP; JSON is
	// application/json.
	for _, p := range []string{"api/info", "api/sessions", "api/timeline?session=" + url.QueryEscape(xss)} {
		r := s.call(t, "GET", p, nil, nil)
		require.Equal(t, 200, r.code, "%s: %s", p, r)
		assert.True(t, strings.HasPrefix(r.header.Get("Content-Type"), "application/json"), p)
		assert.Equal(t, "nosniff", r.header.Get("X-Content-Type-Options"), p)
		assert.Contains(t, r.header.Get("Content-Security-Policy"), "default-src 'none'", p)
		assert.NotContains(t, string(r.body), "<script>", "%s: the session's ID unescaped", p)
	}
	// The page and the refusals never echo what a request sent.
	for _, p := range []string{"?token=" + url.QueryEscape(xssID), "api/nope?x=" + url.QueryEscape(xssID), "%3Cscript%3E"} {
		req, err := http.NewRequest("GET", s.Base, nil)
		require.NoError(t, err)
		req.URL.Opaque = "//" + req.URL.Host + "/" + p
		r := s.do(t, attackClient(), req, false)
		require.NoError(t, r.err)
		assert.NotContains(t, string(r.body), "<script>", "%s echoes the request", p)
		assert.False(t, strings.HasPrefix(r.header.Get("Content-Type"), "text/html"), "%s: a refusal as HTML", p)
	}
}

// Errors of an API route that does not exist or a wrong method are the
// API's JSON errors too (the contract: every error of the API is JSON).
func TestAttackUnknownAPIRoutesAnswerJSON(t *testing.T) {
	t.Parallel()
	root, _, _ := serveFixture(t, 1)
	s := startServe(t, root)
	for _, c := range []struct{ m, p string }{{"GET", "api/nope"}, {"GET", "api/fork"}, {"POST", "api/info"}, {"DELETE", "api/sessions"}} {
		r := s.call(t, c.m, c.p, nil, nil)
		assertJSONError(t, r, c.m+" "+c.p)
	}
}

// Not parallel: it counts the process's goroutines.
func TestAttackConcurrentReadsWhileAWriterSavesAndPrunesAndNoGoroutineLeaks(t *testing.T) {
	before := runtime.NumGoroutine()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := checkpoint.Open[map[string]any](dir, checkpoint.NoSync(), checkpoint.KeepLast(3))
	require.NoError(t, err)
	_, err = st.Save(ctx, 1, map[string]any{"step": 1, "list": []int{1}})
	require.NoError(t, err)

	sctx, stop := context.WithCancel(ctx)
	s, stopped := startServeCtx(t, sctx, dir)
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	writerDone := make(chan struct{})
	quit := make(chan struct{})
	go func() {
		defer close(writerDone)
		for i := int64(2); ; i++ {
			select {
			case <-quit:
				return
			default:
			}
			if _, err := st.Save(ctx, i, map[string]any{"step": i, "list": []int64{i, i * 2}}); err != nil {
				t.Errorf("save %d: %v", i, err)
				return
			}
		}
	}()

	var mu sync.Mutex
	codes := map[string]int{}
	var bad []string
	note := func(p string, r reply) {
		mu.Lock()
		defer mu.Unlock()
		key := fmt.Sprint(r.code)
		if r.err != nil {
			key = "error"
		}
		codes[key]++
		if r.err != nil || r.code >= 500 || r.code == http.StatusUnprocessableEntity {
			bad = append(bad, fmt.Sprintf("GET %s: %s", p, r))
		}
	}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 12; i++ {
				get := func(p string) reply {
					req, _ := http.NewRequest("GET", s.Base+p, nil)
					r := s.do(t, c, req, true)
					note(p, r)
					return r
				}
				r := get("api/timeline?session=&keep_last=2")
				var tl timelineJSON
				if r.code != 200 || json.Unmarshal(r.body, &tl) != nil || len(tl.Checkpoints) == 0 {
					continue
				}
				first, last := tl.Checkpoints[0].File, tl.Checkpoints[len(tl.Checkpoints)-1].File
				get("api/checkpoint?session=&file=" + last)
				get("api/node?session=&path=/list&file=" + first)
				get("api/search?session=&q=1&file=" + last)
				get("api/diff?a_session=&b_session=&a_file=" + first + "&b_file=" + last)
			}
		}()
	}
	wg.Wait()
	close(quit)
	<-writerDone
	require.NoError(t, st.Close())
	t.Logf("answers: %v", codes)
	assert.Empty(t, bad, "errors other than not_found while a writer saves and prunes")

	stop()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not stop")
	}
	tr.CloseIdleConnections()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // polling the count: nothing to wait on
	}
	t.Logf("goroutines %d -> %d", before, runtime.NumGoroutine())
	if n := runtime.NumGoroutine(); n > before+3 {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Errorf("%d goroutines before the server, %d after it stopped:\n%s", before, n, buf)
	}
}

// The page may be opened at any host name the server answers (localhost,
// [::1]): its fork then comes from that origin, which is the server's own.
func TestAttackForkFromThePageAtLocalhostIsAccepted(t *testing.T) {
	t.Parallel()
	root, run, _ := serveFixture(t, 2)
	s := startServe(t, "--write", root)
	var info infoJSON
	require.Equal(t, 200, s.get(t, "api/info", &info))
	port := portOf(t, s.Base)
	for _, host := range []string{"localhost:" + port, "[::1]:" + port} {
		req, err := http.NewRequest("POST", s.Base+"api/fork", strings.NewReader(`{"session":"`+run+`","step":2}`))
		require.NoError(t, err)
		req.Host = host
		req.Header.Set("Origin", "http://"+host)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Checkpoint-CSRF", info.CSRF)
		r := s.do(t, attackClient(), req, true)
		require.NoError(t, r.err)
		assert.Equal(t, 200, r.code, "a fork from the page at %s: %s", host, r)
	}
}

// A state of 50 MB: the checkpoint, a node, a search and a diff answer
// without a gross blow-up of the heap.
func TestAttackA50MBStateAnswersWithoutAMemoryBlowUp(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("a 50 MB state: too slow with -short or -race")
	}
	t.Parallel()
	var b strings.Builder
	b.WriteString(`{"items":[`)
	item := `{"name":"` + strings.Repeat("n", 80) + `","v":12345},`
	for b.Len() < 50<<20 {
		b.WriteString(item)
	}
	b.WriteString(`{"name":"last","v":0}],"tail":"end"}`)
	big := []byte(b.String())
	b.Reset()
	dir, files := rawStateStore(t, map[string][]byte{"big": big, "small": []byte(`{"tail":"x"}`)}, []string{"big", "small"})
	require.Len(t, files, 2)
	big = nil
	s := startServe(t, dir)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	start := ms.Sys
	c := attackClient()
	c.Timeout = 30 * time.Second
	for _, p := range []string{"api/checkpoint?session=&file=" + files["big"], "api/node?session=&path=/items&limit=5000&offset=400000&file=" + files["big"],
		"api/search?session=&q=last&file=" + files["big"], "api/diff?a_session=&b_session=&a_file=" + files["small"] + "&b_file=" + files["big"]} {
		req, _ := http.NewRequest("GET", s.Base+p, nil)
		r := s.do(t, c, req, true)
		require.NoError(t, r.err, p)
		assert.Equal(t, 200, r.code, "%s: %s", p, r)
		assert.Less(t, len(r.body), 5<<20, "%s: an answer of %d bytes", p, len(r.body))
	}
	runtime.ReadMemStats(&ms)
	t.Logf("Sys %d MB -> %d MB", start>>20, ms.Sys>>20)
	assert.Less(t, ms.Sys-min(ms.Sys, start), uint64(1<<30), "the heap grew by more than 1 GB for a 50 MB state")
}

func TestAttackRetentionRulesOfAnyValueGetAnAnswer(t *testing.T) {
	t.Parallel()
	root, run, _ := serveFixture(t, 4)
	s := startServe(t, root)
	for _, rule := range []string{"keep_last=0", "keep_last=-1", "keep_last=99999999999999999999", "keep_last=2147483649", "keep_every=0", "keep_every=-3",
		"keep_every=9223372036854775807", "keep_within=0s", "keep_within=-1h", "keep_within=9999999999h", "keep_within=1ns", "keep_within=x",
		"keep_one_per=0s", "keep_one_per=-1s", "keep_one_per=1ns", "keep_one_per=9999999999h", "keep_one_per=x", "prune_kinds=", "prune_kinds=bogus",
		"prune_kinds=final,error,step,rolling", "prune_kinds=,,,", "keep_last=1&keep_every=1&keep_within=1ns&keep_one_per=1ns&prune_kinds=error"} {
		r := s.call(t, "GET", "api/timeline?session="+url.QueryEscape(run)+"&"+rule, nil, nil)
		require.NoError(t, r.err, "%s: the connection broke (a panic?)", rule)
		assert.Less(t, r.code, 500, "%s: %s", rule, r)
		if r.code >= 400 {
			assertJSONError(t, r, rule)
		}
	}
}

func TestAttackTheTokenCookieIsHttpOnlyStrictAndPortBound(t *testing.T) {
	t.Parallel()
	root, _, _ := serveFixture(t, 1)
	s := startServe(t, root)
	req, err := http.NewRequest("GET", s.URL, nil)
	require.NoError(t, err)
	resp, err := attackClient().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	cookies := resp.Cookies()
	require.Len(t, cookies, 1)
	ck := cookies[0]
	assert.Equal(t, "checkpoint_token_"+portOf(t, s.Base), ck.Name)
	assert.True(t, ck.HttpOnly, "HttpOnly")
	assert.Equal(t, http.SameSiteStrictMode, ck.SameSite)
	assert.Equal(t, "/", ck.Path)
	assert.Empty(t, ck.Domain, "a Domain would send it to other hosts")
	assert.Equal(t, "no-referrer", resp.Header.Get("Referrer-Policy"), "the URL's token must not leak in a Referer")
	assert.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"))
}

// A session removed (or replaced) on disk while the server keeps its store
// open: the next answers say so, with no 5xx and no stale checkpoint.
func TestAttackASessionRemovedWhileCachedIsNotServedStale(t *testing.T) {
	t.Parallel()
	root, run, _ := serveFixture(t, 3)
	s := startServe(t, root)
	k := url.QueryEscape(run)
	var tl timelineJSON
	require.Equal(t, 200, s.get(t, "api/timeline?session="+k, &tl))
	require.NotEmpty(t, tl.Checkpoints)
	require.Equal(t, 200, s.get(t, "api/checkpoint?session="+k+"&file=step_00000002.json", nil))
	waitChecked(t, s, run) // the background checker done with the session's files
	require.NoError(t, os.RemoveAll(filepath.Join(root, run)))
	for _, p := range []string{"api/timeline?session=" + k, "api/checkpoint?session=" + k + "&file=step_00000001.json",
		"api/node?session=" + k + "&file=step_00000001.json&path=", "api/sessions", "api/timeline?session=" + k} {
		r := s.call(t, "GET", p, nil, nil)
		require.NoError(t, r.err, p)
		assert.Less(t, r.code, 500, "%s: %s", p, r)
		assert.NotContains(t, string(r.body), `"step":1`, "%s: a removed session's checkpoint: %s", p, r)
	}
}

// jsonString returns s as a JSON string.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
