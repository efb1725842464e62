package s3store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint/internal/killtest"
	"github.com/gocheckpoint/checkpoint/s3store/internal/s3test"
)

// The tests run against a real S3 server: the one .ci/s3-test starts and
// names in the environment, or versitygw started by the tests themselves
// if the binary is on PATH or in $(go env GOPATH)/bin (see s3test); they
// skip otherwise (fail under CI=true).
const (
	envEndpoint = s3test.EnvEndpoint
	envKey      = s3test.EnvKey
	envSecret   = s3test.EnvSecret
)

type server struct {
	endpoint, key, secret string
}

func serverOf(s *s3test.Server) server {
	return server{endpoint: s.Endpoint, key: s.AccessKey, secret: s.Secret}
}

var (
	srvOnce sync.Once
	srv     server
	srvErr  error          // why there is none
	started *s3test.Server // what the tests started, stopped by TestMain
	// suiteProxy is the proxy every test's requests go through when
	// envProxy asks for one (see condproxy_test.go).
	suiteProxy *condProxy
)

// envProxy, set to "ceph-if-match", puts the tests behind a condProxy that
// refuses a quoted If-Match on PutObject as Ceph RGW does:
// TestLeaseFencingAndReplaceThroughACephLikeServer runs the lease, fencing
// and Replace tests so.
const envProxy = "CHECKPOINT_S3_TEST_PROXY"

func TestMain(m *testing.M) {
	killtest.Dispatch()
	code := m.Run()
	if suiteProxy != nil {
		fmt.Printf("condproxy: %d quoted If-Match refused\n", suiteProxy.refusedQuoted.Load())
		suiteProxy.close()
	}
	if started != nil {
		started.Close()
	}
	os.Exit(code)
}

// s3Server returns the server the tests use, starting versitygw on the
// first call if the environment names none.
func s3Server(t testing.TB) server {
	t.Helper()
	srvOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var s *s3test.Server
		if s, srvErr = s3test.Start(ctx); srvErr == nil {
			srv = serverOf(s)
			if s.Started {
				started = s
			}
			if os.Getenv(envProxy) == "ceph-if-match" {
				suiteProxy = &condProxy{cephIfMatch: true}
				srv = suiteProxy.proxied(srv)
			}
		}
	})
	if srvErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no S3 server (CI=true, so this fails rather than skips): %v", srvErr)
		}
		t.Skipf("no S3 server: %v; install versitygw with %q or set %s, %s and %s", srvErr, s3test.InstallCmd, envEndpoint, envKey, envSecret)
	}
	return srv
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// counter counts the HTTP requests of a client by S3 operation: the
// requests the code under test made, not the SDK's retries of them
// (an attempt after the first, told by the SDK's Amz-Sdk-Request
// header), which a busy server causes at random: those are counted in
// retries alone.
type counter struct {
	mu sync.Mutex
	n  map[string]int
	rt http.RoundTripper
	// total is read without the lock by tests that only need a sum.
	total atomic.Int64
	// retries counts the attempts after a request's first.
	retries atomic.Int64
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	op := r.Method
	q := r.URL.Query()
	switch {
	case r.Method == http.MethodGet && q.Has("list-type"):
		op = "LIST"
	case r.Method == http.MethodPost && q.Has("delete"):
		op = "DELETES"
	case r.Method == http.MethodPut && r.Header.Get("X-Amz-Copy-Source") != "":
		op = "COPY"
	case strings.HasSuffix(r.URL.Path, "/"+leaseName):
		op += " lease"
	}
	if retried(r) {
		c.retries.Add(1)
		return c.rt.RoundTrip(r)
	}
	c.mu.Lock()
	if c.n == nil {
		c.n = make(map[string]int)
	}
	c.n[op]++
	c.mu.Unlock()
	c.total.Add(1)
	return c.rt.RoundTrip(r)
}

// retried reports whether r is an SDK retry: an attempt after the first
// of one operation.
func retried(r *http.Request) bool {
	attempt, _, _ := strings.Cut(r.Header.Get("Amz-Sdk-Request"), ";")
	return strings.HasPrefix(attempt, "attempt=") && attempt != "attempt=1"
}

func (c *counter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = nil
	return n
}

func (s server) client(c *counter) *s3.Client {
	return s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(s.endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.key, s.secret, ""),
		HTTPClient:   &http.Client{Transport: c},
	})
}

// fixture is one test's bucket.
type fixture struct {
	t      testing.TB
	srv    server
	bucket string
	count  *counter
	client *s3.Client
}

// newFixture creates a bucket of a random name (so tests run in
// parallel), removed with its objects when the test ends.
func newFixture(t testing.TB) *fixture {
	t.Helper()
	s := s3Server(t)
	f := &fixture{t: t, srv: s, bucket: "s3store-" + randomHex(8), count: &counter{rt: http.DefaultTransport.(*http.Transport).Clone()}}
	f.client = s.client(f.count)
	ctx := context.Background()
	if _, err := f.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &f.bucket}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	t.Cleanup(func() {
		if n := f.count.retries.Load(); n > 0 {
			// Not counted as the test's requests (see counter).
			t.Logf("the S3 SDK retried %d requests of this test", n)
		}
		f.removeBucket()
	})
	f.count.take()
	return f
}

func (f *fixture) removeBucket() {
	ctx := context.Background()
	p := s3.NewListObjectsV2Paginator(f.client, &s3.ListObjectsV2Input{Bucket: &f.bucket})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			f.t.Logf("cleanup: %v", err)
			return
		}
		var ids []types.ObjectIdentifier
		for _, o := range page.Contents {
			ids = append(ids, types.ObjectIdentifier{Key: o.Key})
		}
		if len(ids) > 0 {
			_, _ = f.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: &f.bucket, Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)}})
		}
	}
	_, _ = f.client.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: &f.bucket})
}

// backend returns a Backend on the fixture's bucket, with its own client
// (its own request counter) when c is not nil, closed when the test ends.
func (f *fixture) backend(prefix string, opts ...Option) *Backend {
	f.t.Helper()
	b, err := New(f.client, f.bucket, prefix, opts...)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { b.Close() })
	return b
}

func http0() http.RoundTripper { return http.DefaultTransport.(*http.Transport).Clone() }

// rawPut writes key in the fixture's bucket with no condition and no
// generation, as a person or another tool would.
func (f *fixture) rawPut(key string, data []byte) {
	f.t.Helper()
	_, err := f.client.PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: &f.bucket, Key: aws.String(key), Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
	})
	require.NoError(f.t, err, "raw put %s", key)
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

// TestCounterLeavesOutRetries proves what the request counts of the
// other tests rest on: an SDK retry (here of a 503) is not counted as a
// request of the code under test, so a busy server cannot change them.
func TestCounterLeavesOutRetries(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	c := &counter{rt: http0()}
	client := server{endpoint: srv.URL, key: "k", secret: "s"}.client(c)
	_, err := client.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String("b"), Key: aws.String("k")}, func(o *s3.Options) {
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
		})
	})
	require.NoError(t, err)
	require.Equal(t, int32(2), calls.Load(), "the server saw the first attempt and the retry")
	require.Equal(t, map[string]int{"DELETE": 1}, c.take())
	require.Equal(t, int64(1), c.retries.Load())
}
