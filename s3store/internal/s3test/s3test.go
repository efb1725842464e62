// Package s3test starts a real S3 server for the tests, examples and
// benchmarks of the s3store module's commands: the one the environment
// names (.ci/s3-test sets CHECKPOINT_S3_ENDPOINT, CHECKPOINT_S3_ACCESS_KEY
// and CHECKPOINT_S3_SECRET_KEY), or else versitygw, started on a free
// 127.0.0.1 port over a temporary directory. It follows the s3store
// package's own test harness (server_test.go), which a test file cannot
// export.
package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// The environment that names a running server, and the command that
// installs versitygw.
const (
	EnvEndpoint = "CHECKPOINT_S3_ENDPOINT"
	EnvKey      = "CHECKPOINT_S3_ACCESS_KEY"
	EnvSecret   = "CHECKPOINT_S3_SECRET_KEY"
	InstallCmd  = "go install github.com/versity/versitygw/cmd/versitygw@v1.8.0"
)

// Server is an S3 server on loopback.
type Server struct {
	Endpoint          string // http://127.0.0.1:PORT
	AccessKey, Secret string
	Started           bool // versitygw was started for this Server

	cmd    *exec.Cmd
	exited chan error
	dir    string
}

// Start returns the server the environment names, or starts versitygw
// (found on PATH or in $(go env GOPATH)/bin) and waits until it answers,
// at most until ctx ends. Close stops what it started.
func Start(ctx context.Context) (*Server, error) {
	if ep := os.Getenv(EnvEndpoint); ep != "" {
		return &Server{Endpoint: ep, AccessKey: os.Getenv(EnvKey), Secret: os.Getenv(EnvSecret)}, nil
	}
	dir, err := os.MkdirTemp("", "s3test-versitygw-")
	if err != nil {
		return nil, err
	}
	addr, err := FreeAddr()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s, err := Launch(ctx, addr, dir, "s3test", randomHex(16))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s.dir = dir // Close removes it
	return s, nil
}

// FreeAddr returns a 127.0.0.1 address with a port nothing listens on.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Launch starts versitygw on addr over the directory dir, with the
// credentials key and secret, and waits until it answers, at most until
// ctx ends. Close stops it and leaves dir: a test may launch it again on
// the same addr and dir, as a server that restarts.
func Launch(ctx context.Context, addr, dir, key, secret string) (*Server, error) {
	bin, err := Versitygw()
	if err != nil {
		return nil, err
	}
	s := &Server{Endpoint: "http://" + addr, AccessKey: key, Secret: secret, Started: true}
	s.cmd = exec.Command(bin, "--port", addr, "posix", dir)
	s.cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+s.AccessKey, "ROOT_SECRET_ACCESS_KEY="+s.Secret)
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start versitygw: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	for {
		resp, err := http.Get(s.Endpoint)
		if err == nil {
			resp.Body.Close()
			s.exited = exited
			return s, nil
		}
		select {
		case err := <-exited:
			return nil, fmt.Errorf("versitygw on %s exited: %v", addr, err)
		case <-ctx.Done():
			s.exited = exited
			s.Close()
			return nil, fmt.Errorf("versitygw on %s did not answer: %w", addr, ctx.Err())
		case <-time.After(20 * time.Millisecond): // polling for the server to come up
		}
	}
}

// Versitygw returns the path of the versitygw binary that Launch runs:
// the one on PATH, or else the one in $(go env GOPATH)/bin; an error
// saying so where there is none.
func Versitygw() (string, error) {
	if bin, err := exec.LookPath("versitygw"); err == nil {
		return bin, nil
	}
	gopath, err := exec.Command("go", "env", "GOPATH").Output()
	if err == nil {
		bin := filepath.Join(strings.TrimSpace(string(gopath)), "bin", "versitygw")
		if _, err := os.Stat(bin); err == nil {
			return bin, nil
		}
	}
	return "", errors.New("versitygw not found on PATH or in $(go env GOPATH)/bin")
}

// Close stops versitygw if Start started it, and removes its directory.
func (s *Server) Close() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
	s.cmd = nil
}

// ForTest is Start for a test, closed when it ends. Without a server it
// skips the test with the command that installs versitygw, or, under
// CI=true, fails it.
func ForTest(t testing.TB) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Start(ctx)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no S3 server (CI=true, so this fails rather than skips): %v", err)
		}
		t.Skipf("no S3 server: %v; install versitygw with %q, or set %s, %s and %s", err, InstallCmd, EnvEndpoint, EnvKey, EnvSecret)
	}
	t.Cleanup(s.Close)
	return s
}

// Env returns the standard AWS environment that points a client built by
// config.LoadDefaultConfig at s.
func (s *Server) Env() []string {
	return []string{
		"AWS_ENDPOINT_URL_S3=" + s.Endpoint,
		"AWS_ACCESS_KEY_ID=" + s.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + s.Secret,
		"AWS_REGION=us-east-1",
	}
}

// Client returns a client of s (path addressing, static credentials)
// whose requests go through rt (http.DefaultTransport if nil).
func (s *Server) Client(rt http.RoundTripper) *s3.Client {
	if rt == nil {
		rt = http.DefaultTransport
	}
	return s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.Secret, ""),
		HTTPClient:   &http.Client{Transport: rt},
	})
}

// NewBucket creates a bucket of a random name that starts with prefix.
func NewBucket(ctx context.Context, c *s3.Client, prefix string) (string, error) {
	name := prefix + "-" + randomHex(6)
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &name}); err != nil {
		return "", fmt.Errorf("create bucket %s: %w", name, err)
	}
	return name, nil
}

// RemoveBucket removes the bucket and every object in it.
func RemoveBucket(ctx context.Context, c *s3.Client, bucket string) error {
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: &bucket})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		var ids []types.ObjectIdentifier
		for _, o := range page.Contents {
			ids = append(ids, types.ObjectIdentifier{Key: o.Key})
		}
		if len(ids) > 0 {
			if _, err := c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: &bucket, Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)}}); err != nil {
				return err
			}
		}
	}
	_, err := c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: &bucket})
	return err
}

// Bucket is NewBucket for a test, removed with its objects when it ends.
func (s *Server) Bucket(t testing.TB, c *s3.Client) string {
	t.Helper()
	name, err := NewBucket(context.Background(), c, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := RemoveBucket(context.Background(), c, name); err != nil {
			t.Logf("remove bucket %s: %v", name, err)
		}
	})
	return name
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
