package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
)

type state struct {
	Writer string `json:"writer"`
	Step   int64  `json:"step"`
	Pad    string `json:"pad,omitempty"`
}

func openStore(t *testing.T, f *fixture, prefix string, opts ...checkpoint.Option) (*checkpoint.Store[state], error) {
	t.Helper()
	b, err := New(f.client, f.bucket, prefix, LeaseTTL(testTTL))
	require.NoError(t, err)
	return checkpoint.OpenBackend[state](b, opts...)
}

func TestStoreOnS3SavesLoadsAndIsSingleWriter(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	s, err := openStore(t, f, "run", checkpoint.KeepLast(3))
	require.NoError(t, err)
	require.Equal(t, "s3://"+f.bucket+"/run/", s.Location())
	f.count.take()
	for step := int64(1); step <= 5; step++ {
		_, err := s.Save(ctx, step, state{Writer: "a", Step: step})
		require.NoError(t, err)
		t.Logf("save %d: requests %v", step, f.count.take())
	}
	_, err = s.Save(ctx, 5, state{Writer: "a", Step: 5})
	require.ErrorIs(t, err, checkpoint.ErrExists)
	f.count.take()
	got, info, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(5), info.Step)
	require.Equal(t, state{Writer: "a", Step: 5}, got)
	t.Logf("latest: requests %v", f.count.take())

	_, err = openStore(t, f, "run")
	require.ErrorIs(t, err, checkpoint.ErrLocked)
	reader, err := openStore(t, f, "run", checkpoint.ReadOnly())
	require.NoError(t, err)
	defer reader.Close()
	f.count.take()
	infos, err := reader.List(ctx)
	require.NoError(t, err)
	t.Logf("reader list of %d: requests %v", len(infos), f.count.take())
	var steps []int64
	for _, in := range infos {
		steps = append(steps, in.Step)
	}
	require.Equal(t, []int64{3, 4, 5}, steps, "KeepLast(3) pruned on S3")

	require.NoError(t, s.Close())
	s2, err := openStore(t, f, "run")
	require.NoError(t, err, "a closed store released its lease")
	defer s2.Close()
	_, info, err = s2.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(5), info.Step)
	_, err = s2.Save(ctx, 6, state{Writer: "b", Step: 6})
	require.NoError(t, err)
	_, info, err = reader.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(6), info.Step, "a reader sees the new writer's saves")
}

func TestStoreOnS3RefusesSavesAfterLosingTheLease(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	b, err := New(f.client, f.bucket, "run", LeaseTTL(testTTL))
	require.NoError(t, err)
	s, err := checkpoint.OpenBackend[state](b)
	require.NoError(t, err)
	_, err = s.Save(ctx, 1, state{Step: 1})
	require.NoError(t, err)
	die(b)
	other, err := New(f.client, f.bucket, "run", LeaseTTL(testTTL))
	require.NoError(t, err)
	unlock := lockWithin(t, other, 15*time.Second)
	defer unlock()
	_, err = s.Save(ctx, 2, state{Step: 2})
	require.ErrorIs(t, err, checkpoint.ErrLocked)
	err = s.Close()
	require.True(t, err == nil || errors.Is(err, checkpoint.ErrLocked), "%v", err)
}

// A prefix is any UTF-8 text: every request that names a key reaches the
// object under it. So under a prefix of '+', spaces, '%', '~', '&', '='
// and non-ASCII letters a store saves, prunes, moves a damaged object
// aside, writes side files and holds sessions, which fork.
func TestStoreKeepsItsPromisesUnderAPrefixOfAnyCharacters(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for i, prefix := range []string{"runs+1", "a b/c+d", "100%/%2B", "ünïcödé/日本", "x~y", "a&b=c?d#e", "+ %~&=ü/+"} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s, err := openStore(t, f, prefix, checkpoint.KeepLast(2))
			require.NoError(t, err)
			require.Equal(t, "s3://"+f.bucket+"/"+prefix+"/", s.Location())
			for step := int64(1); step <= 3; step++ {
				_, err := s.Save(ctx, step, state{Step: step})
				require.NoError(t, err)
			}
			garbage := []byte(`{"format":2,"step":4,`)
			_, err = f.client.PutObject(ctx, &s3.PutObjectInput{Bucket: &f.bucket, Key: aws.String(prefix + "/step_00000004.json"), Body: bytes.NewReader(garbage)})
			require.NoError(t, err)
			_, err = s.Save(ctx, 4, state{Step: 4})
			require.NoError(t, err, "the damaged object at step 4 is moved aside")
			out, err := f.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &f.bucket, Key: aws.String(prefix + "/step_00000004.json.corrupt")})
			require.NoError(t, err)
			moved, err := io.ReadAll(out.Body)
			out.Body.Close()
			require.NoError(t, err)
			require.Equal(t, garbage, moved)
			require.NoError(t, s.WriteJSON(ctx, "result.json", map[string]int{"steps": 4}))
			require.NoError(t, s.Close())

			r, err := openStore(t, f, prefix, checkpoint.ReadOnly())
			require.NoError(t, err)
			defer r.Close()
			infos, err := r.List(ctx)
			require.NoError(t, err)
			var steps []int64
			for _, in := range infos {
				steps = append(steps, in.Step)
			}
			require.Equal(t, []int64{3, 4}, steps, "KeepLast(2) pruned")
			var result map[string]int
			require.NoError(t, r.ReadJSON(ctx, "result.json", &result))
			require.Equal(t, 4, result["steps"])

			b, err := New(f.client, f.bucket, prefix+"/sessions", LeaseTTL(testTTL))
			require.NoError(t, err)
			root, err := checkpoint.OpenSessionsBackend(b)
			require.NoError(t, err)
			defer root.Close()
			sess, err := root.New(ctx, nil)
			require.NoError(t, err)
			st, err := checkpoint.OpenSessionStore[state](root, sess.ID)
			require.NoError(t, err)
			for step := int64(1); step <= 2; step++ {
				_, err := st.Save(ctx, step, state{Step: step})
				require.NoError(t, err)
			}
			require.NoError(t, st.Close())
			fork, err := root.Fork(ctx, sess.ID, 1, nil)
			require.NoError(t, err)
			require.Equal(t, int64(1), fork.LastStep)
			list, err := root.List(ctx)
			require.NoError(t, err)
			require.Len(t, list, 2)
		})
	}
}

// A writer's first write of the rolling file or a side file is a
// create-if-absent where it listed no object at Open, and If-Match on the
// listed ETag where it listed one: another program's PUT there after
// Open is ErrConflict, and its object stays as it is.
func TestFirstWritesAfterOpenDoNotOverwriteAnotherProgramsObjects(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	put := func(key, body string) {
		t.Helper()
		_, err := f.client.PutObject(ctx, &s3.PutObjectInput{Bucket: &f.bucket, Key: aws.String(key), Body: strings.NewReader(body)})
		require.NoError(t, err)
	}
	get := func(key string) string {
		t.Helper()
		out, err := f.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &f.bucket, Key: aws.String(key)})
		require.NoError(t, err)
		defer out.Body.Close()
		p, err := io.ReadAll(out.Body)
		require.NoError(t, err)
		return string(p)
	}
	put("run/kept.json", `"before Open"`)
	put("run/result.json", `"before Open"`)
	s, err := openStore(t, f, "run", checkpoint.SaveEvery(10), checkpoint.WithRolling())
	require.NoError(t, err)
	defer s.Close()
	put("run/step_last.json", `"another program's"`)
	put("run/result.json", `"another program's"`)

	_, _, err = s.Tick(ctx, 1, state{Step: 1})
	require.ErrorIs(t, err, checkpoint.ErrConflict, "the rolling file put after Open")
	require.ErrorIs(t, s.WriteJSON(ctx, "result.json", 1), checkpoint.ErrConflict, "a side file rewritten after Open")
	require.Equal(t, `"another program's"`, get("run/step_last.json"))
	require.Equal(t, `"another program's"`, get("run/result.json"))
	require.NoError(t, s.WriteJSON(ctx, "kept.json", 2), "unchanged since Open")
	require.NoError(t, s.WriteJSON(ctx, "fresh.json", 3), "absent at Open and since")
	require.Equal(t, "2\n", get("run/kept.json"))
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

// A writer that resumes a store (OpenBackend, then Latest) lists it once:
// the listing that taking the lease makes (for its sealed set) answers the
// store's own listing at open and Latest's. After a write, Latest lists
// the store again.
func TestAWriterThatResumesListsTheStoreOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	open := func() *checkpoint.Store[state] {
		t.Helper()
		// The default TTL: no renewal (which ends the reuse) within the test.
		b, err := New(f.client, f.bucket, "run")
		require.NoError(t, err)
		s, err := checkpoint.OpenBackend[state](b)
		require.NoError(t, err)
		return s
	}

	f.count.take()
	s := open()
	_, _, err := s.Latest(ctx)
	require.ErrorIs(t, err, checkpoint.ErrNotFound)
	// Each open makes a new Backend, whose first Lock checks the server's
	// conditions on a scratch key first: 4 PUTs and a DELETE, no LIST;
	// on a server that takes If-Match only bare (Ceph RGW), a HEAD and
	// one PUT more, which learn the form.
	with := func(m map[string]int) map[string]int {
		m["PUT"] += 4
		m["DELETE"]++
		return m
	}
	take := func() map[string]int {
		m := f.count.take()
		if m["HEAD"] == 1 && m["PUT"] == 5 {
			m["HEAD"]--
			m["PUT"]--
		}
		for op, n := range m {
			if n == 0 {
				delete(m, op)
			}
		}
		return m
	}
	require.Equal(t, with(map[string]int{"GET lease": 1, "LIST": 1, "PUT lease": 1}), take(), "a new store: the lease's GET, one LIST, the lease's PUT")
	for step := int64(1); step <= 3; step++ {
		_, err := s.Save(ctx, step, state{Writer: "a", Step: step})
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())

	f.count.take()
	s = open()
	_, info, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(3), info.Step)
	require.Equal(t, with(map[string]int{"GET lease": 1, "LIST": 1, "PUT lease": 1, "GET": 1}), take(), "resumed: one LIST, the newest checkpoint's GET")
	_, err = s.Save(ctx, 4, state{Writer: "a", Step: 4})
	require.NoError(t, err)
	f.count.take()
	_, info, err = s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(4), info.Step)
	require.Equal(t, 1, f.count.take()["LIST"], "after a write, Latest lists the store")
	require.NoError(t, s.Close())

	// The newest checkpoint damaged: Latest skips it, as it would with a
	// listing of its own, and leaves it where it is.
	f.rawPut("run/step_00000005.json", []byte("{damaged"))
	f.count.take()
	s = open()
	defer s.Close()
	_, info, err = s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(4), info.Step)
	n := f.count.take()
	require.Equal(t, 1, n["LIST"], "requests %v", n)
	_, err = f.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &f.bucket, Key: aws.String("run/step_00000005.json")})
	require.NoError(t, err, "the damaged checkpoint is left in place")
	_, _, err = s.Load(ctx, 5)
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	_, err = s.Save(ctx, 6, state{Writer: "a", Step: 6})
	require.NoError(t, err)
	_, info, err = s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(6), info.Step)
}
