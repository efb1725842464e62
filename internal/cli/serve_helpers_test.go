package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// served is a checkpoint serve started by a test.
type served struct {
	URL    string // as printed: http://127.0.0.1:PORT/?token=T
	Base   string // http://127.0.0.1:PORT/
	Token  string
	stderr *syncWriter
}

// startServe runs `checkpoint serve --addr 127.0.0.1:0 ARGS...` until the
// test ends, and returns the URL it printed.
func startServe(t testing.TB, args ...string) served {
	t.Helper()
	return startServeWith(t, nil, args...)
}

// startServeWith is startServe with remotes, for locations SCHEME://...
func startServeWith(t testing.TB, remotes []Remote, args ...string) served {
	t.Helper()
	return startServeOn(t, "127.0.0.1:0", remotes, args...)
}

func startServeOn(t testing.TB, addr string, remotes []Remote, args ...string) served {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	stderr := &syncWriter{}
	done := make(chan int, 1)
	go func() {
		code := runContext(ctx, time.Now(), append([]string{"serve", "--addr", addr}, args...), pw, stderr, remotes)
		pw.CloseWithError(io.EOF)
		done <- code
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	line, err := bufio.NewReader(pr).ReadString('\n')
	go io.Copy(io.Discard, pr)
	require.NoError(t, err, "serve printed no URL; stderr: %s", stderr)
	raw, ok := strings.CutPrefix(strings.TrimSpace(line), "checkpoint serve: ")
	require.True(t, ok, "serve printed %q", line)
	u, err := url.Parse(raw)
	require.NoError(t, err)
	return served{URL: raw, Base: u.Scheme + "://" + u.Host + "/", Token: u.Query().Get("token"), stderr: stderr}
}

// syncWriter serialises writes to w, and reads of what was written.
type syncWriter struct {
	mu sync.Mutex
	w  strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.String()
}

// get requests the API path p (with the token) and decodes its JSON answer
// into v, returning the status.
func (s served) get(t testing.TB, p string, v any) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.Base+p, nil)
	require.NoError(t, err)
	req.AddCookie(&http.Cookie{Name: "checkpoint_token_" + portOf(t, s.Base), Value: s.Token})
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if v != nil {
		require.NoError(t, json.Unmarshal(body, v), "GET %s: %s", p, body)
	}
	return resp.StatusCode
}

func portOf(t testing.TB, base string) string {
	u, err := url.Parse(base)
	require.NoError(t, err)
	return u.Port()
}
