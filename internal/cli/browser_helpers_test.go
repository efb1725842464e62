package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// The helpers of the browser tests of checkpoint serve: a server started
// in-process by the command itself, and one headless Chromium per test
// that saves a screenshot of every page it is asked to.

// browserTimeout bounds each browser test, from its browser's start to
// its last check; stepTimeout bounds one step (a wait, a click), leaving
// time to save a screenshot and the page's state when one fails.
const (
	browserTimeout = 60 * time.Second
	stepTimeout    = 20 * time.Second
)

// chromiumPath returns the Chromium the browser tests drive:
// $CHECKPOINT_CHROMIUM, else /usr/bin/chromium (Debian's chromium
// package, which .ci/run installs), else chromium on the PATH (on Windows
// only $CHECKPOINT_CHROMIUM). Without one
// the test is skipped, except in CI (CI=true) on Linux, where it fails:
// there .ci/run installs the browser, and a missing one must not pass for
// a tested page. Elsewhere (the Windows test binaries under Wine, the
// other platforms) CI installs none.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHECKPOINT_CHROMIUM"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("CHECKPOINT_CHROMIUM=%s: %v", p, err)
		}
		return p
	}
	// Not on Windows: under Wine, /usr/bin/chromium is the Linux browser,
	// which a Windows test binary cannot drive.
	if runtime.GOOS != "windows" {
		if _, err := os.Stat("/usr/bin/chromium"); err == nil {
			return "/usr/bin/chromium"
		}
		if p, err := exec.LookPath("chromium"); err == nil {
			return p
		}
	}
	const why = "no Chromium: neither $CHECKPOINT_CHROMIUM, /usr/bin/chromium nor chromium on the PATH (apt-get install chromium)"
	if os.Getenv("CI") == "true" && runtime.GOOS == "linux" {
		t.Fatal(why + "; CI=true needs the browser tests to run")
	}
	t.Skip(why)
	return ""
}

// screenshotDir is the one directory of a test run's screenshots:
// $CHECKPOINT_SCREENSHOTS if set, else a new temporary directory. It is
// made once, by the first test that saves a screenshot, and kept after
// the run for a person to look at.
var screenshotDir = sync.OnceValues(func() (string, error) {
	if d := os.Getenv("CHECKPOINT_SCREENSHOTS"); d != "" {
		return d, os.MkdirAll(d, 0o755)
	}
	return os.MkdirTemp("", "checkpoint-serve-screenshots-")
})

// A browser is one headless Chromium with one tab, for one test.
type browser struct {
	t   *testing.T
	ctx context.Context

	mu       sync.Mutex
	problems []string // uncaught exceptions and refusals by the page's CSP
	shots    int
}

// newBrowser starts a headless Chromium for t, with its own profile in a
// temporary directory and a fixed window size; it is stopped when t ends.
// Every action of the test must end within browserTimeout. When t ends, an
// uncaught exception of the page, or a refusal of its Content Security
// Policy (an inline script or style the page should not have), fails it.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	exe := chromiumPath(t)
	profile := t.TempDir()
	ctx, cancelTimeout := context.WithTimeout(context.Background(), browserTimeout)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox, // CI runs as root, where Chromium's sandbox cannot start
		chromedp.DisableGPU,
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 900),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	tabCtx, cancelTab := chromedp.NewContext(allocCtx)
	b := &browser{t: t, ctx: tabCtx}
	messages := chromedp.Console(tabCtx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() || m.Source == "security" || strings.Contains(m.Text, "Content Security Policy") {
				b.mu.Lock()
				b.problems = append(b.problems, fmt.Sprintf("%s (%s:%d)", m.Text, m.URL, m.Line+1))
				b.mu.Unlock()
			}
		}
	}()
	// Cleanups run last-registered first: the browser stops (and leaves
	// its profile directory) before t.TempDir's cleanup removes it.
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		cancelTimeout()
		<-done
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, p := range b.problems {
			t.Errorf("page: %s", p)
		}
	})
	return b
}

// do runs actions in the browser's tab; an error fails the test, naming
// what the test was doing.
func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.fail(what, err)
	}
}

// fail saves a screenshot and logs what the page shows, then fails the
// test with what it was doing and err.
func (b *browser) fail(what string, err error) {
	b.t.Helper()
	b.shot("failed")
	state, serr := chromedp.Run(b.ctx, chromedp.Evaluate[string](`JSON.stringify({
		hash: location.hash,
		view: document.querySelector('#view') && document.querySelector('#view').dataset,
		error: document.querySelector('#error') && document.querySelector('#error').innerText,
		text: document.body.innerText.slice(0, 2000)})`))
	if serr != nil {
		state = serr.Error()
	}
	b.t.Fatalf("%s: %v\npage: %s", what, err, state)
}

// open navigates to u and waits until the view named view has rendered
// its data (#view[data-view=view][data-ready="1"]), then saves a
// screenshot named after the view.
func (b *browser) open(u, view string) {
	b.t.Helper()
	b.do("open "+u, chromedp.Navigate(u))
	b.waitView(view)
}

// goTo goes to the hash route r of the page already open ("#/diff/..."),
// as a link of the page would; it does not wait for the new view.
func (b *browser) goTo(r string) {
	b.t.Helper()
	b.do("go to "+r, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = %s`, jsString(r))))
}

// waitView waits until #view shows the view named view with its data, and
// saves a screenshot of it.
func (b *browser) waitView(view string) {
	b.t.Helper()
	b.do("wait for the "+view+" view", chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#view[data-view=%q][data-ready="1"]`, view))))
	b.shot(view)
}

// click clicks the first element that matches the CSS selector sel, once
// it is visible.
func (b *browser) click(sel string) {
	b.t.Helper()
	b.do("click "+sel, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible))
}

// waitVisible waits until an element that matches sel is visible.
func (b *browser) waitVisible(sel string) {
	b.t.Helper()
	b.do("wait for "+sel, chromedp.WaitVisible(chromedp.CSS(sel)))
}

// text returns the text a person sees in the first element that matches
// sel (its innerText), once the element is visible.
func (b *browser) text(sel string) string {
	b.t.Helper()
	b.waitVisible(sel)
	return evalJS[string](b, fmt.Sprintf(`document.querySelector(%s).innerText`, jsString(sel)))
}

// count returns how many elements match sel now.
func (b *browser) count(sel string) int {
	b.t.Helper()
	return evalJS[int](b, fmt.Sprintf(`document.querySelectorAll(%s).length`, jsString(sel)))
}

// poll waits until the JavaScript expression expr is truthy in the page;
// what says what the test waits for. Waiting ends after stepTimeout.
func (b *browser) poll(what, expr string) {
	b.t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(stepTimeout))); err != nil {
		b.fail(fmt.Sprintf("wait until %s (%s)", what, expr), err)
	}
}

// evalJS evaluates the JavaScript expression expr in b's page and decodes
// its value into a T.
func evalJS[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// shot saves a PNG of the window (the part of the page a person sees
// first; a whole page of thousands of rows would be a slow, huge image) as
// <screenshotDir>/<test name>-<n>-<name>.png and logs where.
func (b *browser) shot(name string) {
	b.t.Helper()
	dir, err := screenshotDir()
	if err != nil {
		b.t.Errorf("screenshot directory: %v", err)
		return
	}
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	b.mu.Lock()
	b.shots++
	n := b.shots
	b.mu.Unlock()
	file := filepath.Join(dir, fmt.Sprintf("%s-%02d-%s.png", fileSafe(b.t.Name()), n, fileSafe(name)))
	if err := os.WriteFile(file, png, 0o644); err != nil {
		b.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	b.t.Logf("screenshot: %s", file)
}

var unsafeInFileName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

func fileSafe(s string) string { return unsafeInFileName.ReplaceAllString(s, "_") }

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x2028 || r == 0x2029:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// pageURL returns the URL of the page of srv at the hash route r
// ("#/timeline/long").
func pageURL(srv served, r string) string { return srv.URL + r }

// A plainResponse is what a plain HTTP request to the server got.
type plainResponse struct {
	code   int
	header http.Header
	body   string
}

// kind returns the "kind" of the JSON error in the body.
func (r plainResponse) kind(t *testing.T) string {
	t.Helper()
	var e struct {
		Error string `json:"error"`
		Kind  string `json:"kind"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.body), &e), "an API error is JSON: %s", r.body)
	require.NotEmpty(t, e.Error, "an API error says what went wrong: %s", r.body)
	return e.Kind
}

// rawGet requests path (relative to the server's root, with its query)
// with header and Host (req.Host; "" keeps the server's own), and nothing
// else: no token unless path or header has it.
func rawGet(t *testing.T, s served, path, host string, header http.Header) plainResponse {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.Base+path, nil)
	require.NoError(t, err)
	if host != "" {
		req.Host = host
	}
	for k, v := range header {
		req.Header[k] = v
	}
	return sendRequest(t, req)
}

// postJSON sends body as JSON to the API call path, with the token,
// header and, if csrf, the CSRF header api/info gives, as the page does.
func postJSON(t *testing.T, s served, path, body string, csrf bool, header http.Header) plainResponse {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.Base+path+"?token="+url.QueryEscape(s.Token), strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	if csrf {
		info := rawGet(t, s, "api/info?token="+url.QueryEscape(s.Token), "", nil)
		require.Equal(t, http.StatusOK, info.code, info.body)
		var v struct {
			CSRF string `json:"csrf"`
		}
		require.NoError(t, json.Unmarshal([]byte(info.body), &v))
		require.NotEmpty(t, v.CSRF, "api/info gives the CSRF token: %s", info.body)
		req.Header.Set("X-Checkpoint-CSRF", v.CSRF)
	}
	return sendRequest(t, req)
}

// sendRequest sends req, following no redirect, and reads the whole response.
func sendRequest(t *testing.T, req *http.Request) plainResponse {
	t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return plainResponse{code: resp.StatusCode, header: resp.Header, body: string(body)}
}

// decodeHashKey returns the session key of a route #/timeline/KEY.
func decodeHashKey(hash string) (string, error) {
	key, ok := strings.CutPrefix(hash, "#/timeline/")
	if !ok {
		return "", fmt.Errorf("%q is not a timeline's route", hash)
	}
	return url.PathUnescape(key)
}
