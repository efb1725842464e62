package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/s3store/internal/s3test"
)

// The server dies (kill -9) under a writer: its saves fail with an error
// naming the object, nothing torn is left, and once the server is back
// the same writer saves again (a renewal that gets through proves nobody
// took over) and a reader sees every acknowledged save. It kills and
// restarts a server of its own, versitygw, whatever server the environment
// names: without versitygw it skips, or fails under CI=true.
func TestServerKilledMidSaveFailsClearlyAndARestartRecovers(t *testing.T) {
	t.Parallel()
	if _, err := s3test.Versitygw(); err != nil {
		msg := fmt.Sprintf("this test kills and restarts a versitygw of its own: %v; install it with %q", err, s3test.InstallCmd)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + " (CI=true, so this fails rather than skips)")
		}
		t.Skip(msg)
	}
	dir := t.TempDir()
	addr, err := s3test.FreeAddr()
	require.NoError(t, err)
	secret := randomHex(16)
	launch := func() *s3test.Server {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := s3test.Launch(ctx, addr, dir, "s3storekill", secret)
		require.NoError(t, err)
		return s
	}
	gw := launch()
	defer func() { gw.Close() }()
	srv := serverOf(gw)
	f := &fixture{t: t, srv: srv, bucket: "s3store-" + randomHex(8), count: &counter{rt: http0()}}
	f.client = srv.client(f.count)
	ctx := context.Background()
	_, err = f.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &f.bucket})
	require.NoError(t, err)

	w, err := openStore(t, f, "run")
	require.NoError(t, err)
	pad := strings.Repeat("x", 4<<20) // a save long enough to be killed in
	acked := int64(0)
	for step := int64(1); step <= 2; step++ {
		_, err := w.Save(ctx, step, state{Step: step, Pad: pad})
		require.NoError(t, err)
		acked = step
	}
	// Kill the server while saves are being sent.
	saved := make(chan error, 1)
	go func() {
		var err error
		for step := int64(3); err == nil; step++ {
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err = w.Save(sctx, step, state{Step: step, Pad: pad})
			cancel()
			if err == nil {
				acked = step
			}
		}
		saved <- err
	}()
	gw.Close() // kill -9
	err = <-saved
	require.Error(t, err)
	require.Contains(t, err.Error(), "s3://"+f.bucket+"/run/step_", "the error names the object")
	t.Logf("save with the server gone: %v", err)

	gw = launch()
	// Within the lease's deadline (or after a renewal gets through) the
	// writer saves again; it may have to wait for one renewal.
	var next error
	for try := 0; try < 50; try++ {
		_, next = w.Save(ctx, acked+1, state{Step: acked + 1})
		if next == nil || !errors.Is(next, checkpoint.ErrLocked) {
			break
		}
		time.Sleep(testTTL / 10) // waiting for the writer's next renewal, which is on a timer
	}
	require.NoError(t, next, "the writer saves again once the server is back")
	acked++
	r, err := openStore(t, f, "run", checkpoint.ReadOnly())
	require.NoError(t, err)
	defer r.Close()
	infos, err := r.List(ctx)
	require.NoError(t, err)
	for _, in := range infos {
		_, _, err := r.LoadExact(ctx, in)
		require.NoError(t, err, "step %d", in.Step)
	}
	_, info, err := r.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, acked, info.Step)
	require.NoError(t, w.Close())
}

// cancelMidBody cancels its ctx once a PUT of a key ending in suffix has
// had half its body read by the HTTP client: a ctx cancelled mid-upload.
type cancelMidBody struct {
	rt     http.RoundTripper
	suffix string
	cancel context.CancelFunc
}

func (c *cancelMidBody) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, c.suffix) && r.Body != nil && r.ContentLength > 0 {
		r.Body = &halfThenCancel{ReadCloser: r.Body, left: r.ContentLength / 2, cancel: c.cancel}
	}
	return c.rt.RoundTrip(r)
}

type halfThenCancel struct {
	io.ReadCloser
	left   int64
	cancel context.CancelFunc
}

func (h *halfThenCancel) Read(p []byte) (int, error) {
	if h.left <= 0 {
		h.cancel() // the caller gives up; the transport notices
	}
	n, err := h.ReadCloser.Read(p[:min(int64(len(p)), max(h.left, 1))])
	h.left -= int64(n)
	return n, err
}

// A Create whose ctx is cancelled mid-upload fails with an error that
// names the object and wraps context.Canceled, leaves nothing (not even
// a part) under the name, and the name can be created afterwards.
func TestCreateCancelledMidUploadLeavesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cut := &cancelMidBody{rt: http0(), suffix: "/step-1", cancel: cancel}
	b, err := New(f.clientThrough(cut), f.bucket, "run", LeaseTTL(testTTL))
	require.NoError(t, err)
	defer b.Close()
	unlock, err := b.Lock(context.Background())
	require.NoError(t, err)
	defer unlock()
	body := bytes.Repeat([]byte("0123456789abcdef"), 1<<18) // 4 MiB
	_, err = b.Create(ctx, "step-1", bytesOf(body))
	require.Error(t, err)
	require.ErrorIs(t, err, context.Canceled)
	require.Contains(t, err.Error(), "s3://"+f.bucket+"/run/step-1")

	reader := f.backend("run")
	objs, err := reader.List(context.Background())
	require.NoError(t, err)
	require.Empty(t, names(objs), "a cancelled upload left an object")
	_, err = reader.Stat(context.Background(), "step-1")
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, err = b.Create(context.Background(), "step-1", bytesOf(body[:10]))
	require.NoError(t, err)
	data, _ := readAll(t, reader, "step-1")
	require.Equal(t, body[:10], data)
}
