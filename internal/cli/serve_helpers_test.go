package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest"
	"github.com/gocheckpoint/checkpoint/dirstore"
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
	s, _ := startServeCtxWith(t, context.Background(), remotes, args...)
	return s
}

// startServeCtx is startServe that also stops when ctx is done; stopped is
// closed once the command has returned.
func startServeCtx(t testing.TB, ctx context.Context, args ...string) (s served, stopped <-chan struct{}) {
	t.Helper()
	return startServeCtxWith(t, ctx, nil, args...)
}

func startServeCtxWith(t testing.TB, ctx context.Context, remotes []Remote, args ...string) (served, <-chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	stderr := &syncWriter{}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		runContext(ctx, time.Now(), append([]string{"serve", "--addr", "127.0.0.1:0"}, args...), pw, stderr, remotes)
		pw.CloseWithError(io.EOF)
	}()
	t.Cleanup(func() {
		cancel()
		<-stopped
	})
	line, err := bufio.NewReader(pr).ReadString('\n')
	go io.Copy(io.Discard, pr)
	require.NoError(t, err, "serve printed no URL; stderr: %s", stderr)
	raw, ok := strings.CutPrefix(strings.TrimSpace(line), "checkpoint serve: ")
	require.True(t, ok, "serve printed %q", line)
	u, err := url.Parse(raw)
	require.NoError(t, err)
	return served{URL: raw, Base: u.Scheme + "://" + u.Host + "/", Token: u.Query().Get("token"), stderr: stderr}, stopped
}

// failingRemote is a Remote of scheme "test" whose test://root/NAME is the
// directory root/NAME, read-only, whose operations of the kinds given fail
// with a reset connection while failing is set.
func failingRemote(root string, failing *atomic.Bool, kinds ...backendtest.OpKind) Remote {
	return Remote{Scheme: "test", Open: func(ctx context.Context, loc string) (checkpoint.Backend, error) {
		dir := filepath.Join(root, filepath.FromSlash(strings.TrimSuffix(strings.TrimPrefix(loc, "test://root"), "/")))
		b, err := dirstore.Open(dir, dirstore.ReadOnly())
		if err != nil {
			return nil, err
		}
		return backendtest.Inject(b, func(op backendtest.Op) error {
			if failing.Load() && slices.Contains(kinds, op.Kind) {
				return errors.New("connection reset by peer")
			}
			return nil
		}), nil
	}}
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
