package s3store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// The tests run against a real S3 server. .ci/s3-test starts versitygw and
// sets these; without them the tests start versitygw themselves if the
// binary is on PATH or in $(go env GOPATH)/bin, skip (fail under CI=true)
// otherwise.
const (
	envEndpoint = "CHECKPOINT_S3_ENDPOINT"
	envKey      = "CHECKPOINT_S3_ACCESS_KEY"
	envSecret   = "CHECKPOINT_S3_SECRET_KEY"
	installCmd  = "go install github.com/versity/versitygw/cmd/versitygw@v1.8.0"
)

type server struct {
	endpoint, key, secret string
	err                   error // why there is none
}

var (
	srvOnce sync.Once
	srv     server
	srvCmd  *exec.Cmd
	srvDir  string
)

func TestMain(m *testing.M) {
	if os.Getenv(envChild) != "" {
		os.Exit(runChild())
	}
	code := m.Run()
	if srvCmd != nil {
		_ = srvCmd.Process.Kill()
		_ = srvCmd.Wait()
		os.RemoveAll(srvDir)
	}
	os.Exit(code)
}

// s3Server returns the server the tests use, starting versitygw on the
// first call if the environment names none.
func s3Server(t testing.TB) server {
	t.Helper()
	srvOnce.Do(func() {
		if ep := os.Getenv(envEndpoint); ep != "" {
			srv = server{endpoint: ep, key: os.Getenv(envKey), secret: os.Getenv(envSecret)}
			return
		}
		srv = startVersitygw()
	})
	if srv.err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no S3 server (CI=true, so this fails rather than skips): %v", srv.err)
		}
		t.Skipf("no S3 server: %v; install versitygw with %q or set %s, %s and %s", srv.err, installCmd, envEndpoint, envKey, envSecret)
	}
	return srv
}

func startVersitygw() server {
	dir, err := os.MkdirTemp("", "s3store-versitygw-")
	if err != nil {
		return server{err: err}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return server{err: err}
	}
	addr := l.Addr().String()
	l.Close()
	s := server{endpoint: "http://" + addr, key: "s3storetest", secret: randomHex(16)}
	cmd, err := runVersitygw(s, addr, dir)
	if err != nil {
		os.RemoveAll(dir)
		return server{err: err}
	}
	srvCmd, srvDir = cmd, dir
	return s
}

// runVersitygw starts versitygw on addr over dir, with s's credentials,
// and waits until it answers.
func runVersitygw(s server, addr, dir string) (*exec.Cmd, error) {
	bin, err := exec.LookPath("versitygw")
	if err != nil {
		gopath, gerr := exec.Command("go", "env", "GOPATH").Output()
		if gerr != nil {
			return nil, err
		}
		bin = filepath.Join(strings.TrimSpace(string(gopath)), "bin", "versitygw")
		if _, err := os.Stat(bin); err != nil {
			return nil, fmt.Errorf("versitygw not found on PATH or in GOPATH/bin")
		}
	}
	cmd := exec.Command(bin, "--port", addr, "posix", dir)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+s.key, "ROOT_SECRET_ACCESS_KEY="+s.secret)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(15 * time.Second); ; {
		resp, err := http.Get(s.endpoint)
		if err == nil {
			resp.Body.Close()
			return cmd, nil
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return nil, fmt.Errorf("versitygw at %s did not answer: %w", addr, err)
		}
		time.Sleep(50 * time.Millisecond) // polling for the server to come up
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// counter counts the HTTP requests of a client by S3 operation.
type counter struct {
	mu sync.Mutex
	n  map[string]int
	rt http.RoundTripper
	// total is read without the lock by tests that only need a sum.
	total atomic.Int64
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
	c.mu.Lock()
	if c.n == nil {
		c.n = make(map[string]int)
	}
	c.n[op]++
	c.mu.Unlock()
	c.total.Add(1)
	return c.rt.RoundTrip(r)
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
	t.Cleanup(func() { f.removeBucket() })
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
