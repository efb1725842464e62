package s3store

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
)

// bodyBytes counts the response body bytes read for keys ending in suffix.
type bodyBytes struct {
	rt     http.RoundTripper
	suffix string
	n      atomic.Int64
}

func (c *bodyBytes) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.rt.RoundTrip(r)
	if err == nil && strings.HasSuffix(r.URL.Path, c.suffix) {
		resp.Body = &countingBody{ReadCloser: resp.Body, n: &c.n}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// A checkpoint-named object past the store's read limit (hand-written, or
// a bomb) is not read: Latest falls back to the newest checkpoint that
// fits, Load of it is ErrCorrupt naming the limit, as locally, and the
// reader reads almost none of its bytes.
func TestCheckpointPastTheReadLimitIsNotDownloaded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	w, err := openStore(t, f, "run", checkpoint.WithMaxReadSize(1<<20))
	require.NoError(t, err)
	defer w.Close()
	for step := int64(1); step <= 2; step++ {
		_, err := w.Save(ctx, step, state{Step: step})
		require.NoError(t, err)
	}
	f.rawPut("run/step_00000009.json", bytes.Repeat([]byte("{"), 64<<20))
	counted := &bodyBytes{rt: http0(), suffix: "/step_00000009.json"}
	rb, err := New(f.clientThrough(counted), f.bucket, "run")
	require.NoError(t, err)
	r, err := checkpoint.OpenBackend[state](rb, checkpoint.ReadOnly(), checkpoint.WithMaxReadSize(1<<20))
	require.NoError(t, err)
	defer r.Close()
	for who, s := range map[string]*checkpoint.Store[state]{"reader": r, "writer": w} {
		_, info, err := s.Latest(ctx)
		require.NoError(t, err, who)
		require.Equal(t, int64(2), info.Step, who)
		_, _, err = s.Load(ctx, 9)
		require.ErrorIs(t, err, checkpoint.ErrCorrupt, who)
		require.Contains(t, err.Error(), "read limit", who)
	}
	require.Less(t, counted.n.Load(), int64(1<<20), "bytes of the 64 MiB object the reader read")
}

// A lease object past the size a lease can have (written by hand, or a
// store of millions of objects) is refused from its Content-Length,
// wrapping checkpoint.ErrCorrupt, without reading it: a reader reads the
// lease at every List.
func TestOversizedLeaseIsRefusedUnread(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.rawPut("run/"+leaseName, bytes.Repeat([]byte(" "), 8<<20))
	counted := &bodyBytes{rt: http0(), suffix: "/" + leaseName}
	b, err := New(f.clientThrough(counted), f.bucket, "run", maxLeaseBytes(1<<20))
	require.NoError(t, err)
	defer b.Close()
	_, err = b.List(ctx)
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.Contains(t, err.Error(), "s3://"+f.bucket+"/run/"+leaseName)
	_, err = b.Lock(ctx)
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.Less(t, counted.n.Load(), int64(1<<20), "bytes of the oversized lease read")
}
