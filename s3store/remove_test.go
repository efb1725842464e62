package s3store

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/stretchr/testify/require"
)

// expireAfterDelete is a transport that, once the first DeleteObjects
// request has been answered, makes the writer's lease expire, as a pause
// between two batches of a large removal would.
type expireAfterDelete struct {
	rt     http.RoundTripper
	once   sync.Once
	expire func()
}

func (e *expireAfterDelete) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := e.rt.RoundTrip(r)
	if r.Method == http.MethodPost && r.URL.Query().Has("delete") {
		e.once.Do(e.expire)
	}
	return resp, err
}

// TestRemoveStopsBetweenBatchesOnceTheLeaseIsLost: a removal of more than
// 1,000 names is sent in batches. The lease was checked once, before the
// first: a writer whose lease ran out during the removal went on deleting,
// batch after batch, objects that a new holder may keep.
func TestRemoveStopsBetweenBatchesOnceTheLeaseIsLost(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	var b *Backend
	rt := &expireAfterDelete{rt: http.DefaultTransport, expire: func() {
		b.mu.Lock()
		b.lease.deadline = time.Now().Add(-time.Second)
		b.lease.wallDeadline = b.lease.deadline.Round(0)
		b.mu.Unlock()
	}}
	b, err := New(f.clientThrough(rt), f.bucket, "run", LeaseTTL(time.Hour))
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	unlock, err := b.Lock(ctx)
	require.NoError(t, err)
	defer unlock()

	names := make([]string, 1500)
	errs := make(chan error, len(names))
	sem := make(chan struct{}, 16)
	for i := range names {
		names[i] = fmt.Sprintf("step_%08d.json", i)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			_, err := b.Create(ctx, names[i], func(w io.Writer) error { _, err := w.Write([]byte("{}")); return err })
			errs <- err
		}()
	}
	for range names {
		require.NoError(t, <-errs)
	}

	gone, err := b.Remove(ctx, names...)
	require.ErrorIs(t, err, checkpoint.ErrLocked)
	removed := 0
	for _, g := range gone {
		if g {
			removed++
		}
	}
	require.Equal(t, 1000, removed, "only the first batch went before the lease ran out")
	objs, err := f.backend("run").List(ctx)
	require.NoError(t, err)
	require.Len(t, objs, 500, "the second batch was sent after the lease was lost")
}
