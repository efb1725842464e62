package s3store

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/storage"
)

// suiteThroughCeph is the lease, fencing and Replace tests, which
// TestLeaseFencingAndReplaceThroughACephLikeServer runs behind the
// Ceph-like proxy.
const suiteThroughCeph = `^(TestSecondWriter|TestLeaseOf|TestLeaseIs|TestReleasedLease|TestRenewals|TestWriterWhose|TestStale|TestLockWaiting|TestRequestsSlower|TestSlowTakeover|TestContenders|TestRemoveStops|TestReplaceIsConditional|TestSixteenConcurrentReplaces|TestPutsRetried|TestARetriedPut|TestStoreOnS3|TestFirstWritesAfterOpen|TestRenameOntoANameCreatedMeanwhile|TestRenameOfASourceReplacedMeanwhile)`

// Ceph RGW 16.2.15 refuses If-Match with a quoted ETag on PutObject (412
// PreconditionFailed, whatever the object) and takes it bare. Behind a
// proxy that answers so, in front of the real server, the lease, fencing
// and Replace tests pass: the store learns the bare form. They run in a
// child process of this test binary, all its requests through the proxy.
func TestLeaseFencingAndReplaceThroughACephLikeServer(t *testing.T) {
	if os.Getenv(envProxy) != "" {
		t.Skip("already behind the proxy")
	}
	s := s3Server(t)
	skipUnlessQuotedIfMatch(t, newFixture(t))
	args := []string{"-test.run", suiteThroughCeph, "-test.count=1", "-test.v"}
	if testing.Short() {
		args = append(args, "-test.short")
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), envProxy+"=ceph-if-match", envEndpoint+"="+s.endpoint, envKey+"="+s.key, envSecret+"="+s.secret)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the tests behind the Ceph-like proxy:\n%s", out)
	m := regexp.MustCompile(`condproxy: (\d+) quoted If-Match refused`).FindSubmatch(out)
	require.NotNil(t, m, "%s", out)
	require.NotEqual(t, "0", string(m[1]), "the proxy refused no quoted If-Match: the tests did not go through it")
	passed := strings.Count(string(out), "--- PASS")
	require.GreaterOrEqual(t, passed, 20, "%s", out)
	require.NotContains(t, string(out), "--- SKIP", "no test may skip behind the proxy")
	t.Logf("behind the Ceph-like proxy: %d tests passed, %s quoted If-Match refused", passed, m[1])
}

// On a Ceph-like server the store learns the bare form once (one refused
// quoted If-Match), and a real conflict, an If-Match on a version that is
// no longer there, is still ErrConflict in either form: the retry in the
// other form never turns it into a success.
func TestIfMatchFormIsLearnedAndARealConflictStaysOne(t *testing.T) {
	t.Parallel()
	for _, ceph := range []bool{false, true} {
		name := "server"
		if ceph {
			name = "ceph-like"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := &condProxy{cephIfMatch: ceph}
			f, direct := proxiedFixture(t, p)
			if ceph {
				skipUnlessQuotedIfMatch(t, direct)
			}
			b := f.backend("run")
			ctx := context.Background()
			v1, err := b.Create(ctx, "roll", bytesOf([]byte("one")))
			require.NoError(t, err)
			v2, err := b.Replace(ctx, "roll", v1.Version, bytesOf([]byte("two")))
			require.NoError(t, err)
			for i := range 5 {
				v2, err = b.Replace(ctx, "roll", v2.Version, bytesOf([]byte{'a' + byte(i)}))
				require.NoError(t, err)
			}
			if ceph {
				require.True(t, b.srv.bareIfMatch.Load())
				require.Equal(t, int64(1), p.refusedQuoted.Load(), "the form is learned once")
			}

			// Another writer replaced it: v2 is stale.
			direct.rawPut("run/roll", []byte("theirs"))
			_, err = b.Replace(ctx, "roll", v2.Version, bytesOf([]byte("mine")))
			require.ErrorIs(t, err, checkpoint.ErrConflict)
			_, err = b.Replace(ctx, "roll", v1.Version, bytesOf([]byte("mine")))
			require.ErrorIs(t, err, checkpoint.ErrConflict)
			got, err := direct.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &direct.bucket, Key: aws.String("run/roll")})
			require.NoError(t, err)
			defer got.Body.Close()
			buf := make([]byte, 16)
			n, _ := got.Body.Read(buf)
			require.Equal(t, "theirs", string(buf[:n]), "a refused Replace changed nothing")

			// A Replace(NoObject) of a taken name, and a fresh Backend, which
			// learns the form again at its Lock's probe.
			_, err = b.Replace(ctx, "roll", storage.NoObject, bytesOf([]byte("x")))
			require.ErrorIs(t, err, checkpoint.ErrConflict)
			c := f.backend("other")
			unlock, err := c.Lock(ctx)
			require.NoError(t, err)
			require.Equal(t, b.srv.bareIfMatch.Load(), c.srv.bareIfMatch.Load())
			require.NoError(t, unlock())
		})
	}
}

// A server that ignores the conditions of PutObject is refused at Lock,
// with an error wrapping ErrUnsupported that names what it ignored, the
// server and the bucket; nothing is left in the bucket (the scratch object
// is removed, no lease is written), and checkpoint.OpenBackend fails the
// same way. Played by a proxy that strips the headers in front of the real
// server; TestServerIgnoringConditionsIsRefused does it with s3rver.
func TestProxyIgnoringConditionsIsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name               string
		ifMatch, ifNoneMat bool
		says               string
	}{
		{"both", true, true, "ignores If-None-Match: *"},
		{"If-None-Match", false, true, "ignores If-None-Match: *"},
		{"If-Match", true, false, "ignores If-Match"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := &condProxy{stripIfMatch: tc.ifMatch, stripIfNoneMatch: tc.ifNoneMat}
			f, direct := proxiedFixture(t, p)
			refusedAtLock(t, f.client, f.srv.endpoint, f.bucket, tc.says)
			require.NotZero(t, p.stripped.Load())
			out, err := direct.client.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: &direct.bucket})
			require.NoError(t, err)
			require.Empty(t, out.Contents, "the refusal leaves nothing in the bucket")
		})
	}
}

// refusedAtLock asserts that a store on client and bucket is refused at
// Lock for the reason says, and that OpenBackend is refused too, without a
// second probe.
func refusedAtLock(t *testing.T, client *s3.Client, endpoint, bucket, says string) {
	t.Helper()
	b, err := New(client, bucket, "run")
	require.NoError(t, err)
	defer b.Close()
	_, err = b.Lock(context.Background())
	t.Logf("Lock: %v", err)
	require.ErrorIs(t, err, ErrUnsupported)
	require.NotErrorIs(t, err, checkpoint.ErrLocked)
	for _, want := range []string{says, endpoint, "bucket " + bucket} {
		require.Contains(t, err.Error(), want)
	}
	_, err = checkpoint.OpenBackend[state](b)
	require.ErrorIs(t, err, ErrUnsupported, "OpenBackend takes the lease, and is refused the same way")
}

// s3rver 3.7.1 (npm) ignores If-None-Match and If-Match on PutObject: a
// store on it is refused. .ci/s3-nonconforming starts it and names it in
// CHECKPOINT_S3_NONCONFORMING_ENDPOINT (with _ACCESS_KEY and _SECRET_KEY,
// S3RVER by default); without it the test skips.
func TestServerIgnoringConditionsIsRefused(t *testing.T) {
	ep := os.Getenv("CHECKPOINT_S3_NONCONFORMING_ENDPOINT")
	if ep == "" {
		t.Skip("CHECKPOINT_S3_NONCONFORMING_ENDPOINT names no server that ignores conditions (.ci/s3-nonconforming starts s3rver)")
	}
	key, secret := os.Getenv("CHECKPOINT_S3_NONCONFORMING_ACCESS_KEY"), os.Getenv("CHECKPOINT_S3_NONCONFORMING_SECRET_KEY")
	if key == "" {
		key, secret = "S3RVER", "S3RVER"
	}
	s := server{endpoint: ep, key: key, secret: secret}
	client := s.client(&counter{rt: http0()})
	ctx := context.Background()
	bucket := "nonconforming-" + randomHex(6)
	_, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &bucket})
	require.NoError(t, err)
	refusedAtLock(t, client, ep, bucket, "ignores If-")
}

// Lock checks the server once per Backend and the children Sub derives
// from it: four PUTs and a DELETE of a scratch object before the first
// lease, nothing before the next (the cost the package doc states).
func TestServerIsCheckedOnceAtTheFirstLock(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	b := f.backend("run")
	unlock, err := b.Lock(ctx)
	require.NoError(t, err)
	want := map[string]int{"PUT": 4, "DELETE": 1, "GET lease": 1, "LIST": 1, "PUT lease": 1}
	if b.srv.bareIfMatch.Load() {
		// Ceph RGW: the quoted If-Match refused, a HEAD, the bare one.
		want["PUT"], want["HEAD"] = 5, 1
	}
	require.Equal(t, want, f.count.take())
	require.NoError(t, unlock())
	f.count.take()
	child, err := b.Sub(ctx, "child", false)
	require.NoError(t, err)
	unlock, err = child.(*Backend).Lock(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"GET lease": 1, "LIST": 1, "PUT lease": 1}, f.count.take())
	require.NoError(t, unlock())
	objs, err := b.List(ctx)
	require.NoError(t, err)
	require.Empty(t, objs, "the scratch object is gone")
}

// A lease renewal that the server refuses for another reason than a newer
// holder gets an error saying what the server did (status, code, key),
// never "taken over by another writer": a 400, and a 412 while the lease
// object still has the ETag the renewal named (in both If-Match forms).
func TestRenewalRefusedOtherwiseSaysWhatTheServerDid(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status int
		code   string
		says   []string
	}{
		{400, "InvalidArgument", []string{"HTTP 400 InvalidArgument", "run/" + leaseName, "not renewed in time"}},
		{412, "PreconditionFailed", []string{"412 PreconditionFailed", "run/" + leaseName, "current ETag"}},
	} {
		t.Run(tc.code, func(t *testing.T) {
			t.Parallel()
			var on atomic.Bool
			p := &condProxy{answer: func(r *http.Request) (int, string) {
				if on.Load() && r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/"+leaseName) {
					return tc.status, tc.code
				}
				return 0, ""
			}}
			f, _ := proxiedFixture(t, p)
			b := f.backend("run", LeaseTTL(time.Second))
			ctx := context.Background()
			unlock, err := b.Lock(ctx)
			require.NoError(t, err)
			on.Store(true)
			var werr error
			for deadline := time.Now().Add(10 * time.Second); ; {
				if _, werr = b.Create(ctx, "step-"+randomHex(4), bytesOf([]byte("x"))); werr != nil {
					break
				}
				require.True(t, time.Now().Before(deadline), "writes went on with every renewal refused")
				time.Sleep(20 * time.Millisecond) // polling for the lease's end
			}
			require.ErrorIs(t, werr, checkpoint.ErrLocked)
			require.NotContains(t, werr.Error(), "taken over")
			for _, want := range tc.says {
				require.Contains(t, werr.Error(), want)
			}
			if tc.status == 412 {
				require.ErrorIs(t, werr, ErrUnsupported)
			}
			uerr := unlock()
			require.Error(t, uerr)
			require.NotContains(t, uerr.Error(), "taken over")
		})
	}
}

// skipUnlessQuotedIfMatch skips a test that plays Ceph RGW with a proxy in
// front of the tests' server when that server itself refuses a quoted
// If-Match (it is Ceph RGW): the proxy, which forwards the bare form
// quoted, would then refuse everything.
func skipUnlessQuotedIfMatch(t *testing.T, f *fixture) {
	t.Helper()
	ctx := context.Background()
	key := "quoted-if-match-" + randomHex(4)
	out, err := f.client.PutObject(ctx, &s3.PutObjectInput{Bucket: &f.bucket, Key: &key, Body: strings.NewReader("1")})
	require.NoError(t, err)
	_, err = f.client.PutObject(ctx, &s3.PutObjectInput{Bucket: &f.bucket, Key: &key, Body: strings.NewReader("2"), IfMatch: aws.String(quoteETag(aws.ToString(out.ETag)))})
	if isPrecondition(err) {
		t.Skip("the server itself refuses a quoted If-Match (as Ceph RGW does): a proxy playing Ceph in front of it is moot")
	}
	require.NoError(t, err)
	_, err = f.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &f.bucket, Key: &key})
	require.NoError(t, err)
}
