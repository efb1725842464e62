package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/gocheckpoint/checkpoint/storage"
	"io"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/s3store/internal/s3test"
)

// rawPut writes key in the fixture's bucket with no condition and no
// generation, as a person or another tool would.
func (f *fixture) rawPut(key string, data []byte) {
	f.t.Helper()
	_, err := f.client.PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: &f.bucket, Key: aws.String(key), Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
	})
	require.NoError(f.t, err, "raw put %s", key)
}

// Objects a store never writes, put under its prefix by hand: names that
// need URL escaping, a trailing slash, a directory marker, names like the
// lease's. A writer and a reader still save, list and load; none of them
// is taken for a checkpoint or a child store's lease.
func TestHostileObjectsUnderThePrefixDoNotBreakTheStore(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	for _, k := range []string{
		"run/", "run/step 00000007.json", "run/step_00000008.json ", "run/ümlaut.json", "run/a+b%41.json",
		"run/step_00000009.json/", "run/.checkpoint.lease.json", "run/.checkpoint.leasex",
		"run/?x=1", "run/#frag",
	} {
		data := []byte("not a checkpoint")
		if strings.HasSuffix(k, "/") {
			data = nil // a directory object has no data
		}
		f.rawPut(k, data)
	}
	w, err := openStore(t, f, "run")
	require.NoError(t, err)
	for step := int64(1); step <= 2; step++ {
		_, err := w.Save(ctx, step, state{Writer: "w", Step: step})
		require.NoError(t, err)
	}
	r, err := openStore(t, f, "run", checkpoint.ReadOnly())
	require.NoError(t, err)
	defer r.Close()
	for who, s := range map[string]*checkpoint.Store[state]{"writer": w, "reader": r} {
		got, info, err := s.Latest(ctx)
		require.NoError(t, err, who)
		require.Equal(t, int64(2), info.Step, who)
		require.Equal(t, int64(2), got.Step, who)
		infos, err := s.List(ctx)
		require.NoError(t, err, who)
		require.Len(t, infos, 2, who)
	}
	// A takeover (sealing every object, the hostile ones included) and
	// the reader after it.
	require.NoError(t, w.Close())
	w2, err := openStore(t, f, "run")
	require.NoError(t, err)
	defer w2.Close()
	_, err = w2.Save(ctx, 3, state{Writer: "w2", Step: 3})
	require.NoError(t, err)
	for who, s := range map[string]*checkpoint.Store[state]{"writer": w2, "reader": r} {
		_, info, err := s.Latest(ctx)
		require.NoError(t, err, who)
		require.Equal(t, int64(3), info.Step, who)
	}
}

// A lease object that is not a lease (edited or written by hand) is
// refused with an error naming it and wrapping checkpoint.ErrCorrupt,
// by a writer and a reader alike, and never makes the store's
// checkpoints disappear.
func TestMalformedLeaseIsRefusedNamingIt(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{"", "garbage", "[]", "null", "{}", `{"generation":0}`, `{"generation":"1"}`, `{"generation":-1}`, `{"generation":2,"sealed":{"a":1}}`} {
		t.Run(doc, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			ctx := context.Background()
			w, err := openStore(t, f, "run")
			require.NoError(t, err)
			_, err = w.Save(ctx, 1, state{Step: 1})
			require.NoError(t, err)
			require.NoError(t, w.Close())
			f.rawPut("run/"+leaseName, []byte(doc))
			r, err := openStore(t, f, "run", checkpoint.ReadOnly())
			require.NoError(t, err)
			defer r.Close()
			_, _, err = r.Latest(ctx)
			require.Error(t, err, "a reader of a store whose lease is %q", doc)
			require.ErrorIs(t, err, checkpoint.ErrCorrupt)
			require.Contains(t, err.Error(), "s3://"+f.bucket+"/run/"+leaseName)
			_, err = openStore(t, f, "run")
			require.Error(t, err, "a writer of a store whose lease is %q", doc)
			require.ErrorIs(t, err, checkpoint.ErrCorrupt)
			require.Contains(t, err.Error(), "s3://"+f.bucket+"/run/"+leaseName)
		})
	}
}

// A ReadOnly store sends no write request: no PUT, no DELETE, no COPY,
// and the lease object is left as the writer wrote it.
func TestReadOnlyStoreWritesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	w, err := openStore(t, f, "run", checkpoint.KeepLast(2))
	require.NoError(t, err)
	for step := int64(1); step <= 3; step++ {
		_, err := w.Save(ctx, step, state{Step: step})
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	// A damaged checkpoint (which a writer would move aside) too.
	f.rawPut("run/step_00000004.json", []byte("{damaged"))
	head := func() string {
		out, err := f.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &f.bucket, Key: aws.String("run/" + leaseName)})
		require.NoError(t, err)
		return aws.ToString(out.ETag)
	}
	before := head()
	f.count.take()
	r, err := openStore(t, f, "run", checkpoint.ReadOnly())
	require.NoError(t, err)
	_, info, err := r.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(3), info.Step)
	_, _, _ = r.Load(ctx, 4)
	_, _ = r.List(ctx)
	_, _ = r.Save(ctx, 5, state{Step: 5})
	require.NoError(t, r.Close())
	for op, n := range f.count.take() {
		if strings.HasPrefix(op, "PUT") || strings.HasPrefix(op, "DELETE") || op == "COPY" || op == "POST" {
			t.Errorf("a ReadOnly store sent %d %s", n, op)
		}
	}
	require.Equal(t, before, head())
}

var _ = errors.New

// The server dies (kill -9) under a writer: its saves fail with an error
// naming the object, nothing torn is left, and once the server is back
// the same writer saves again (a renewal that gets through proves nobody
// took over) and a reader sees every acknowledged save.
func TestServerKilledMidSaveFailsClearlyAndARestartRecovers(t *testing.T) {
	t.Parallel()
	s3Server(t) // skips (or fails under CI) when versitygw is missing
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

// landThenLose sends the first n PUTs whose path ends in suffix (and that
// match the test, if any) to the server, and then answers the client
// with a 500 instead of the server's answer: a request that landed but
// whose answer was lost. The SDK's retryer sends it again.
type landThenLose struct {
	rt     http.RoundTripper
	suffix string
	match  func(*http.Request) bool
	n      atomic.Int32
	lost   atomic.Int32
}

func (l *landThenLose) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.rt.RoundTrip(r)
	if err != nil || r.Method != http.MethodPut || !strings.HasSuffix(r.URL.Path, l.suffix) || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	if l.match != nil && !l.match(r) {
		return resp, err
	}
	if l.n.Add(-1) < 0 {
		return resp, err
	}
	l.lost.Add(1)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	body := "<Error><Code>InternalError</Code><Message>answer lost</Message></Error>"
	return &http.Response{
		Status: "500 Internal Server Error", StatusCode: 500, Proto: r.Proto, ProtoMajor: r.ProtoMajor, ProtoMinor: r.ProtoMinor,
		Header: http.Header{"Content-Type": {"application/xml"}}, Body: io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)), Request: r,
	}, nil
}

// clientThrough is a client of the fixture's server whose requests go
// through rt, and whose retryer backs off 50 ms at most (the SDK's default
// is up to 20 s, seconds for a first retry), so that tests of retries
// are quick.
func (f *fixture) clientThrough(rt http.RoundTripper) *s3.Client {
	return s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(f.srv.endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(f.srv.key, f.srv.secret, ""),
		HTTPClient:  &http.Client{Transport: rt},
		Retryer:     retry.NewStandard(func(o *retry.StandardOptions) { o.MaxBackoff = 50 * time.Millisecond }),
	})
}

// Every conditional PUT the store sends, retried by the SDK after its first
// attempt landed and its answer was lost (a 500 from a proxy, a reset
// connection): the takeover, a save, the rolling file's replacement, the
// release. Each is the writer's own, not ErrExists, ErrConflict or a lost
// lease; the store saves on and a reader sees every save.
func TestPutsRetriedAfterTheirFirstAttemptLandedSucceed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	lose := map[string]*landThenLose{}
	for _, suffix := range []string{"/" + leaseName, "/step_00000001.json", "/step_last.json"} {
		lose[suffix] = &landThenLose{suffix: suffix}
		lose[suffix].n.Store(1)
	}
	// The rolling file's first replacement is unconditional; its second
	// has If-Match on the first's ETag.
	lose["/step_last.json"].match = func(r *http.Request) bool { return r.Header.Get("If-Match") != "" }
	rt := http0()
	for _, l := range lose {
		l.rt = rt
		rt = l
	}
	b, err := New(f.clientThrough(rt), f.bucket, "run", LeaseTTL(testTTL))
	require.NoError(t, err)
	w, err := checkpoint.OpenBackend[state](b, checkpoint.WithRolling(), checkpoint.SaveEvery(10))
	require.NoError(t, err, "the takeover")
	_, err = w.Save(ctx, 1, state{Step: 1})
	require.NoError(t, err, "a save")
	for step := int64(2); step <= 3; step++ {
		_, saved, err := w.Tick(ctx, step, state{Step: step})
		require.NoError(t, err, "a rolling save")
		require.True(t, saved)
	}
	lose["/"+leaseName].n.Store(1) // the release's, or a renewal's
	require.NoError(t, w.Close(), "the release")
	for suffix, l := range lose {
		t.Logf("%s: %d answers lost", suffix, l.lost.Load())
	}
	r, err := openStore(t, f, "run", checkpoint.ReadOnly())
	require.NoError(t, err)
	defer r.Close()
	_, info, err := r.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(3), info.Step)
	// Released: the next writer takes the lease at once.
	w2, err := openStore(t, f, "run")
	require.NoError(t, err)
	require.NoError(t, w2.Close())
}

// A holder whose machine slept (suspend, a paused VM) past its lease: Go's
// monotonic clock does not count the sleep on Linux, so by it the
// deadline has not passed, but the wall clock, which the kernel moves on
// at resume, says it has. The writer must not acknowledge a write then:
// another may have taken over, and the write would be acknowledged and
// hidden.
func TestWriterWhoseMachineSleptPastItsLeaseFailsItsWrites(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	a := f.backend("run", LeaseTTL(testTTL))
	unlock, err := a.Lock(ctx)
	require.NoError(t, err)
	defer unlock()
	die(a) // no renewal while it sleeps
	a.mu.Lock()
	// What the clocks say after the sleep: the monotonic reading moved on
	// by the little time that passed awake, the wall reading by the sleep.
	a.lease.deadline = time.Now().Add(time.Hour)
	a.lease.wallDeadline = time.Now().Add(-time.Minute).Round(0)
	a.mu.Unlock()
	_, err = a.Create(ctx, "step-1", bytesOf([]byte("after the sleep")))
	require.ErrorIs(t, err, checkpoint.ErrLocked)
	require.Contains(t, err.Error(), "not renewed in time")
	_, ok := a.holderView()
	require.False(t, ok, "a holder past its wall-clock deadline still trusts its own view")
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

// A stale writer that still trusts its lease (its clock ran slow, or its
// checks were passed before its requests were delayed) must never take
// the new holder's objects for fenced ones: a Create of a name the new
// holder saved is ErrExists, and the new holder's object stays, whatever
// the stale writer's own view of the lease says.
func TestStaleWriterCannotReplaceTheNewHoldersCheckpoint(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	a, b := f.backend("run", LeaseTTL(testTTL)), f.backend("run", LeaseTTL(testTTL))
	_, err := a.Lock(ctx)
	require.NoError(t, err)
	die(a)
	unlockB := lockWithin(t, b, 15*time.Second)
	defer unlockB()
	_, err = b.Create(ctx, "step-5", bytesOf([]byte("by b, acknowledged")))
	require.NoError(t, err)
	_, err = b.Replace(ctx, "side", storage.NoObject, bytesOf([]byte("side by b")))
	require.NoError(t, err)

	// a's clock says its lease is still good.
	a.mu.Lock()
	a.lease.deadline = time.Now().Add(time.Hour)
	a.lease.wallDeadline = a.lease.deadline.Round(0)
	a.mu.Unlock()
	_, err = a.Create(ctx, "step-5", bytesOf([]byte("by a, stale")))
	require.ErrorIs(t, err, checkpoint.ErrExists)
	_, err = a.Replace(ctx, "side", storage.NoObject, bytesOf([]byte("side by a, stale")))
	require.ErrorIs(t, err, checkpoint.ErrConflict)
	_, err = a.Create(ctx, "step-6", bytesOf([]byte("by a, stale")))
	require.NoError(t, err, "the server takes a's PUT of a free name")
	require.NoError(t, a.Rename(ctx, "step-6", "step-7"))
	_, err = b.Create(ctx, "step-8", bytesOf([]byte("by b, acknowledged")))
	require.NoError(t, err)
	err = a.Rename(ctx, "step-7", "step-8")
	require.Error(t, err, "a moved its stale object over b's")

	reader := f.backend("run")
	for who, be := range map[string]*Backend{"b": b, "reader": reader} {
		data, _ := readAll(t, be, "step-5")
		require.Equal(t, "by b, acknowledged", string(data), who)
		data, _ = readAll(t, be, "side")
		require.Equal(t, "side by b", string(data), who)
		data, _ = readAll(t, be, "step-8")
		require.Equal(t, "by b, acknowledged", string(data), who)
	}
}

// slowAnswers holds back the answer of the first n PUTs of keys ending in
// suffix by delay after the server took them (a slow network back), or
// until the request's ctx ends.
type slowAnswers struct {
	rt     http.RoundTripper
	suffix string
	delay  time.Duration
	n      atomic.Int32
}

func (s *slowAnswers) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := s.rt.RoundTrip(r)
	if err != nil || r.Method != http.MethodPut || !strings.HasSuffix(r.URL.Path, s.suffix) || s.n.Add(-1) < 0 {
		return resp, err
	}
	t := time.NewTimer(s.delay)
	defer t.Stop()
	select {
	case <-t.C:
		return resp, nil
	case <-r.Context().Done():
		resp.Body.Close()
		return nil, r.Context().Err()
	}
}

// A renewal whose answer takes longer than the TTL (it landed, but the
// writer gave up waiting) costs the writer its lease's deadline, not the
// lease: its writes fail with ErrLocked meanwhile, and once the next
// renewal finds the lease still its own it saves again. A save slower than
// the TTL succeeds while the renewals keep the lease.
func TestRequestsSlowerThanTheTTLDoNotLoseTheLease(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	const ttl = testTTL
	slowSave := &slowAnswers{rt: http0(), suffix: "/step-1", delay: ttl}
	slowSave.n.Store(1)
	slowRenewal := &slowAnswers{rt: slowSave, suffix: "/" + leaseName, delay: ttl + ttl/4}
	b, err := New(f.clientThrough(slowRenewal), f.bucket, "run", LeaseTTL(ttl))
	require.NoError(t, err)
	defer b.Close()
	unlock, err := b.Lock(ctx)
	require.NoError(t, err)
	defer unlock()
	_, err = b.Create(ctx, "step-1", bytesOf([]byte("slow")))
	require.NoError(t, err, "a save slower than the TTL while the renewals keep the lease")

	slowRenewal.n.Store(1) // the next renewal's answer is late
	for deadline := time.Now().Add(20 * ttl); slowRenewal.n.Load() > 0; {
		require.True(t, time.Now().Before(deadline), "no renewal")
		time.Sleep(ttl / 20) // polling for the renewal, which runs on a timer
	}
	var locked bool
	for deadline, i := time.Now().Add(20*ttl), 2; ; i++ {
		_, err := b.Create(ctx, "step-"+strconv.Itoa(i), bytesOf([]byte("x")))
		if err == nil && locked {
			break // saving again
		}
		if err != nil {
			require.ErrorIs(t, err, checkpoint.ErrLocked)
			require.NotContains(t, err.Error(), "taken over")
			locked = true
		}
		require.True(t, time.Now().Before(deadline), "no refusal then save after the slow renewal (locked %v): %v", locked, err)
		time.Sleep(ttl / 20) // polling the writer, whose renewals run on a timer
	}
	b.mu.Lock()
	lost := b.lease.lost
	b.mu.Unlock()
	require.NoError(t, lost)
}

// A takeover whose PUT took most of the TTL (a slow answer, or the SDK's
// retry backoff, which can be seconds) is renewed in time: the first
// renewal is due a third of the TTL after the takeover started, not after
// it returned, so the writer's saves never find its deadline passed.
func TestSlowTakeoverIsRenewedBeforeItsDeadline(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	slow := &slowAnswers{rt: http0(), suffix: "/" + leaseName, delay: testTTL * 7 / 10}
	slow.n.Store(1)
	b, err := New(f.clientThrough(slow), f.bucket, "run", LeaseTTL(testTTL))
	require.NoError(t, err)
	defer b.Close()
	start := time.Now()
	unlock, err := b.Lock(ctx)
	require.NoError(t, err)
	defer unlock()
	// Past the deadline the takeover set, and past the first renewal as a
	// timer started when Lock returned would send it.
	for i := 0; time.Since(start) < testTTL*23/20; i++ {
		_, err := b.Create(ctx, "step-"+strconv.Itoa(i), bytesOf([]byte("x")))
		require.NoError(t, err, "%v after the takeover started", time.Since(start).Round(time.Millisecond))
	}
}

// Sixteen contenders for a dead writer's lease, at once: exactly one
// takes it over (the next generation), the others get ErrLocked, and what
// the winner saves after the takeover is what a reader sees.
func TestContendersRacingForAnExpiredLeaseExactlyOneWins(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	a := f.backend("run", LeaseTTL(testTTL))
	_, err := a.Lock(ctx)
	require.NoError(t, err)
	gen := generationOf(a)
	die(a)
	var bs [16]*Backend
	for i := range bs {
		bs[i] = f.backend("run", LeaseTTL(testTTL))
	}
	taken := fmt.Sprintf("(generation %d)", gen+1)
	winner := oneWinner(t, checkpoint.ErrLocked, func(i int) error {
		// Each tries as a process waiting for the dead writer's lease
		// would, until it holds it or sees another contender hold it.
		for deadline := time.Now().Add(10 * testTTL); ; {
			lctx, cancel := context.WithTimeout(ctx, 4*testTTL)
			_, err := bs[i].Lock(lctx)
			cancel()
			if err == nil || !errors.Is(err, checkpoint.ErrLocked) || strings.Contains(err.Error(), taken) || time.Now().After(deadline) {
				return err
			}
		}
	})
	require.Equal(t, gen+1, generationOf(bs[winner]))
	_, err = bs[winner].Create(ctx, "step-1", bytesOf([]byte("by the winner")))
	require.NoError(t, err)
	data, _ := readAll(t, f.backend("run"), "step-1")
	require.Equal(t, "by the winner", string(data))
}
