package s3store

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
)

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

// The SDK retries a PUT whose answer was lost; when the first attempt had
// landed, the retry's condition fails on the writer's own object. Such a
// Create is the writer's, not ErrExists; such a renewal keeps the lease.
// Only that very write's object is: not one of the same bytes and
// generation that another write put, by this writer or by hand.
func TestARetriedPutThatHadLandedIsTheWritersOwn(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	lose := &landThenLose{rt: http0(), suffix: "/run/step-1"}
	lose.n.Store(1)
	a, err := New(f.clientThrough(lose), f.bucket, "run", LeaseTTL(testTTL))
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	unlockA, err := a.Lock(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { unlockA() })
	gen := strconv.FormatUint(generationOf(a), 10)

	// The first attempt of a Create landed, its answer lost.
	o, err := a.Create(ctx, "step-1", bytesOf([]byte("state")))
	require.Equal(t, int32(1), lose.lost.Load(), "no answer was lost")
	require.NoError(t, err, "the object in the way is this write's own")
	require.Equal(t, int64(5), o.Size)
	_, err = a.Create(ctx, "step-1", bytesOf([]byte("other")))
	require.ErrorIs(t, err, checkpoint.ErrExists)
	_, err = a.Create(ctx, "step-1", bytesOf([]byte("state")))
	require.ErrorIs(t, err, checkpoint.ErrExists, "a second Create of the same bytes by the same writer")
	// The same bytes and generation, put by another write (a person, a
	// tool, another process of this writer's host).
	_, err = f.client.PutObject(ctx, &s3.PutObjectInput{Bucket: &f.bucket, Key: aws.String("run/step-9"),
		Body: strings.NewReader("state"), Metadata: map[string]string{genKey: gen}})
	require.NoError(t, err)
	_, err = a.Create(ctx, "step-9", bytesOf([]byte("state")))
	require.ErrorIs(t, err, checkpoint.ErrExists, "another write's object taken for this one's")

	// The first attempt of a renewal, landed: the lease has another ETag
	// but is still a's.
	a.mu.Lock()
	doc := a.lease.doc
	a.mu.Unlock()
	doc.Renewed = doc.Renewed.Add(time.Millisecond) // another ETag
	body, err := json.Marshal(doc)
	require.NoError(t, err)
	out, err := f.client.PutObject(ctx, &s3.PutObjectInput{Bucket: &f.bucket, Key: aws.String("run/" + leaseName), Body: bytes.NewReader(body)})
	require.NoError(t, err)
	landed := quoteETag(aws.ToString(out.ETag))
	for deadline := time.Now().Add(20 * time.Second); ; {
		a.mu.Lock()
		etag, lost := a.lease.etag, a.lease.lost
		a.mu.Unlock()
		require.NoError(t, lost, "a renewal that found a's own lease declared it lost")
		if etag != landed && etag != "" {
			st, _, err := a.readLease(ctx, "")
			require.NoError(t, err)
			if st.etag == etag {
				break // renewed after adopting the landed one
			}
		}
		require.True(t, time.Now().Before(deadline), "no renewal after the landed one")
		time.Sleep(20 * time.Millisecond) // polling a's state
	}
	_, err = a.Create(ctx, "step-2", bytesOf([]byte("x")))
	require.NoError(t, err)
}

// The SDK sends a Rename's PUT again when the answer to its first attempt
// is lost: the object that attempt left is the writer's own (its bytes and
// generation), so the Rename succeeds rather than refuse it as taken.
func TestRenameRetriedAfterItsPutLandedSucceeds(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	lose := &landThenLose{rt: http0(), suffix: "/p/bad.corrupt"}
	lose.n.Store(1)
	b, err := New(f.clientThrough(lose), f.bucket, "p", LeaseTTL(testTTL))
	require.NoError(t, err)
	defer b.Close()
	unlock, err := b.Lock(ctx)
	require.NoError(t, err)
	defer unlock()
	_, err = b.Create(ctx, "bad", bytesOf([]byte("damaged")))
	require.NoError(t, err)

	require.NoError(t, b.Rename(ctx, "bad", "bad.corrupt"))
	require.Equal(t, int32(1), lose.lost.Load(), "one answer lost")
	data, _ := readAll(t, b, "bad.corrupt")
	require.Equal(t, "damaged", string(data))
	_, err = b.Stat(ctx, "bad")
	require.ErrorIs(t, err, fs.ErrNotExist)
}

// TestSessionCreateRetriedAfterItLandedMakesOneSession: the PUT of a new
// session's session.json lands, its answer is lost, and the SDK sends it
// again: the retry's If-None-Match fails on the caller's own object. New
// must return that session (or an error, leaving none): not call it
// another worker's, go on to the next number and leave two sessions for
// one call.
func TestSessionCreateRetriedAfterItLandedMakesOneSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	lose := &landThenLose{suffix: "/session.json", rt: http0()}
	lose.n.Store(1)
	_, r := sessionsThrough(t, f, lose)
	s, err := r.New(ctx, map[string]string{"by": "one call"})
	require.Equal(t, int32(1), lose.lost.Load(), "no answer was lost")
	list, lerr := r.List(ctx)
	require.NoError(t, lerr)
	var ids []string
	for _, x := range list {
		ids = append(ids, x.ID)
	}
	if err != nil {
		require.Empty(t, ids, "New failed (%v) and left sessions", err)
		return
	}
	require.Equal(t, []string{s.ID}, ids, "one New made sessions %v", ids)
}

// TestForkRetriedAfterItLandedKeepsItsCheckpoints: the same lost answer
// for a fork's session.json: the fork must not remove its checkpoints
// from under the session.json it published, leaving a visible fork with
// none.
func TestForkRetriedAfterItLandedKeepsItsCheckpoints(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	lose := &landThenLose{suffix: "/session.json", rt: http0()}
	_, r := sessionsThrough(t, f, lose)
	sessionWithStepOne(t, r, "a")
	lose.n.Store(1)
	_, ferr := r.Fork(ctx, "a", 1, nil)
	require.Equal(t, int32(1), lose.lost.Load(), "no answer was lost")
	list, err := r.List(ctx)
	require.NoError(t, err)
	for _, s := range list {
		if s.ID != "a" {
			require.Equalf(t, 1, s.Checkpoints, "fork %s is listed with %d checkpoints (Fork returned %v)", s.ID, s.Checkpoints, ferr)
		}
	}
}

// TestSessionClaimRetriedAfterItLandedIsTheCallersOwn: the PUT of a
// fork's claim lands, its answer is lost, and the SDK sends it again: the
// retry's If-None-Match fails on the caller's own claim, which Fork must
// recognise by its token and go on with (the first free number), not take
// for another worker's and leave behind.
func TestSessionClaimRetriedAfterItLandedIsTheCallersOwn(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	lose := &landThenLose{suffix: "/.session.claim", rt: http0()}
	b, r := sessionsThrough(t, f, lose)
	sessionWithStepOne(t, r, "a")
	lose.n.Store(1)
	s, err := r.Fork(ctx, "a", 1, nil)
	require.Equal(t, int32(1), lose.lost.Load(), "no answer was lost")
	require.NoError(t, err)
	require.Equal(t, "001", s.ID, "the fork took its own claim for another worker's")
	children, err := b.Children(ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"a", "001"}, children, "a fork left a claim behind")
}

// sessionsThrough opens a root of sessions at the prefix "root" of the
// fixture's bucket whose requests pass through lose, closed when the test
// ends.
func sessionsThrough(t *testing.T, f *fixture, lose *landThenLose) (*Backend, *checkpoint.Sessions) {
	t.Helper()
	b, err := New(f.clientThrough(lose), f.bucket, "root")
	require.NoError(t, err)
	r, err := checkpoint.OpenSessionsBackend(b)
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	return b, r
}

// sessionWithStepOne creates the session id holding one checkpoint, of
// step 1.
func sessionWithStepOne(t *testing.T, r *checkpoint.Sessions, id string) {
	t.Helper()
	ctx := context.Background()
	_, err := r.Create(ctx, id, nil)
	require.NoError(t, err)
	st, err := checkpoint.OpenSessionStore[int](r, id)
	require.NoError(t, err)
	_, err = st.Save(ctx, 1, 10)
	require.NoError(t, err)
	require.NoError(t, st.Close())
}
