package s3store

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/storage"
)

// setup starts a parallel test on a bucket of its own, with a Backend on
// prefix.
func setup(t *testing.T, prefix string) (*fixture, *Backend, context.Context) {
	t.Helper()
	t.Parallel()
	f := newFixture(t)
	return f, f.backend(prefix), context.Background()
}

func bytesOf(p []byte) func(io.Writer) error {
	return func(w io.Writer) error { _, err := w.Write(p); return err }
}

func readAll(t *testing.T, b checkpoint.Backend, name string) ([]byte, checkpoint.Object) {
	t.Helper()
	r, o, err := b.Open(context.Background(), name)
	require.NoError(t, err)
	defer r.Close()
	data, err := io.ReadAll(r)
	require.NoError(t, err)
	return data, o
}

func names(objs []checkpoint.Object) []string {
	var n []string
	for _, o := range objs {
		n = append(n, o.Name)
	}
	sort.Strings(n)
	return n
}

// oneWinner runs write(0) to write(15) at once and returns the one that
// succeeded: exactly one must, and the others fail with lost.
func oneWinner(t *testing.T, lost error, write func(i int) error) int {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = write(i)
		}()
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		if err == nil {
			require.Equal(t, -1, winner, "writes %d and %d both succeeded", winner, i)
			winner = i
			continue
		}
		require.ErrorIs(t, err, lost)
	}
	require.NotEqual(t, -1, winner, "no write succeeded")
	return winner
}

func TestSixteenConcurrentCreatesExactlyOneWins(t *testing.T) {
	f, b, ctx := setup(t, "run")
	winner := oneWinner(t, checkpoint.ErrExists, func(i int) error {
		_, err := b.Create(ctx, "step-1", bytesOf([]byte(fmt.Sprintf("writer %d", i))))
		if err != nil {
			require.Contains(t, err.Error(), "s3://"+f.bucket+"/run/step-1")
		}
		return err
	})
	data, _ := readAll(t, b, "step-1")
	require.Equal(t, fmt.Sprintf("writer %d", winner), string(data))
}

func TestCreateOfATakenNameLeavesItUnchanged(t *testing.T) {
	f, b, ctx := setup(t, "")
	o, err := b.Create(ctx, "a", bytesOf([]byte("first")))
	require.NoError(t, err)
	require.Equal(t, int64(5), o.Size)
	require.True(t, strings.HasPrefix(o.Version, `"`), "Version is the quoted ETag: %s", o.Version)
	f.count.take()
	_, err = b.Create(ctx, "a", bytesOf([]byte("second")))
	require.ErrorIs(t, err, checkpoint.ErrExists)
	data, o2 := readAll(t, b, "a")
	require.Equal(t, "first", string(data))
	require.Equal(t, o.Version, o2.Version)
}

func TestCreateSendsOnePutAndAWriteErrorNone(t *testing.T) {
	f, b, ctx := setup(t, "p")
	_, err := b.Create(ctx, "a", bytesOf([]byte("x")))
	require.NoError(t, err)
	require.Equal(t, map[string]int{"PUT": 1}, f.count.take())
	boom := errors.New("boom")
	_, err = b.Create(ctx, "b", func(w io.Writer) error { w.Write([]byte("half")); return boom })
	require.ErrorIs(t, err, boom)
	require.Nil(t, f.count.take(), "a failed write sends nothing")
	_, err = b.Stat(ctx, "b")
	require.ErrorIs(t, err, fs.ErrNotExist)
}

func TestReplaceIsConditional(t *testing.T) {
	_, b, ctx := setup(t, "p")
	v1, err := b.Replace(ctx, "roll", storage.NoObject, bytesOf([]byte("one")))
	require.NoError(t, err)
	_, err = b.Replace(ctx, "roll", storage.NoObject, bytesOf([]byte("nope")))
	require.ErrorIs(t, err, checkpoint.ErrConflict)
	v2, err := b.Replace(ctx, "roll", v1.Version, bytesOf([]byte("two")))
	require.NoError(t, err)
	require.NotEqual(t, v1.Version, v2.Version)
	_, err = b.Replace(ctx, "roll", v1.Version, bytesOf([]byte("stale")))
	require.ErrorIs(t, err, checkpoint.ErrConflict)
	_, err = b.Replace(ctx, "missing", v1.Version, bytesOf([]byte("x")))
	require.ErrorIs(t, err, checkpoint.ErrConflict)
	data, o := readAll(t, b, "roll")
	require.Equal(t, "two", string(data))
	require.Equal(t, v2.Version, o.Version)
	_, err = b.Replace(ctx, "roll", "", bytesOf([]byte("three")))
	require.NoError(t, err)
	data, _ = readAll(t, b, "roll")
	require.Equal(t, "three", string(data))
}

func TestOpenOfASmallObjectIsOneGet(t *testing.T) {
	f, b, ctx := setup(t, "p")
	small := bytes.Repeat([]byte("s"), 10<<10)
	_, err := b.Create(ctx, "small", bytesOf(small))
	require.NoError(t, err)
	f.count.take()
	r, o, err := b.Open(ctx, "small")
	require.NoError(t, err)
	require.Equal(t, int64(len(small)), o.Size)
	_, err = io.ReadFull(r, make([]byte, 1024))
	require.NoError(t, err)
	require.NoError(t, r.Close())
	data, _ := readAll(t, b, "small")
	require.Equal(t, small, data)
	require.Equal(t, map[string]int{"GET": 2, "GET lease": 2}, f.count.take(), "one GET per Open, and a reader's look at the lease")
}

func TestOpenOfALargeObjectStreamsItWhole(t *testing.T) {
	f, b, ctx := setup(t, "p")
	big := make([]byte, 3<<20+17)
	rand.Read(big)
	_, err := b.Create(ctx, "big", bytesOf(big))
	require.NoError(t, err)
	f.count.take()

	r, o, err := b.Open(ctx, "big")
	require.NoError(t, err)
	require.Equal(t, int64(len(big)), o.Size, "Size is the whole object's, from Content-Range")
	head := make([]byte, 1024)
	_, err = io.ReadFull(r, head)
	require.NoError(t, err)
	require.NoError(t, r.Close(), "closed early")
	require.Equal(t, big[:1024], head)
	require.Equal(t, 1, f.count.take()["GET"], "one GET")

	data, o2 := readAll(t, b, "big")
	require.Equal(t, big, data)
	require.Equal(t, o.Version, o2.Version)
}

func TestOpenObjectReplacedWhileReadStillReadsTheOldBytes(t *testing.T) {
	_, b, ctx := setup(t, "p")
	old := bytes.Repeat([]byte("a"), 3<<20)
	_, err := b.Create(ctx, "x", bytesOf(old))
	require.NoError(t, err)
	r, _, err := b.Open(ctx, "x")
	require.NoError(t, err)
	defer r.Close()
	first := make([]byte, 100)
	_, err = io.ReadFull(r, first)
	require.NoError(t, err)
	_, err = b.Replace(ctx, "x", "", bytesOf(bytes.Repeat([]byte("b"), 3<<20)))
	require.NoError(t, err)
	rest, err := io.ReadAll(r)
	require.NoError(t, err)
	require.Equal(t, old, append(first, rest...), "a reader sees the object as it was when opened, never a mix")
}

func TestOpenOfAnEmptyObject(t *testing.T) {
	_, b, ctx := setup(t, "p")
	_, err := b.Create(ctx, "empty", bytesOf(nil))
	require.NoError(t, err)
	data, o := readAll(t, b, "empty")
	require.Empty(t, data)
	require.Equal(t, int64(0), o.Size)
}

func TestMissingNamesAreNotExist(t *testing.T) {
	f, b, ctx := setup(t, "p")
	_, _, err := b.Open(ctx, "nope")
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.Contains(t, err.Error(), "s3://"+f.bucket+"/p/nope")
	_, err = b.Stat(ctx, "nope")
	require.ErrorIs(t, err, fs.ErrNotExist)
	gone, err := b.Remove(ctx, "nope")
	require.NoError(t, err)
	require.Equal(t, []bool{true}, gone)
	err = b.Rename(ctx, "nope", "other")
	require.ErrorIs(t, err, fs.ErrNotExist)
}

func TestBadNamesAreInvalid(t *testing.T) {
	f, b, ctx := setup(t, "p")
	for _, name := range []string{"", ".", "..", "a/b", leaseName, markerName, "sp ace"} {
		_, err := b.Create(ctx, name, bytesOf(nil))
		require.ErrorIs(t, err, checkpoint.ErrInvalid, "%q", name)
		_, _, err = b.Open(ctx, name)
		require.ErrorIs(t, err, checkpoint.ErrInvalid, "%q", name)
	}
	require.Nil(t, f.count.take(), "a bad name sends nothing")
}

func TestStatAndListTellSizeVersionAndTime(t *testing.T) {
	_, b, ctx := setup(t, "p")
	o, err := b.Create(ctx, "a", bytesOf([]byte("hello")))
	require.NoError(t, err)
	st, err := b.Stat(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, o.Version, st.Version)
	require.Equal(t, int64(5), st.Size)
	require.False(t, st.ModTime.IsZero())
	objs, err := b.List(ctx)
	require.NoError(t, err)
	require.Len(t, objs, 1)
	require.Equal(t, st.Version, objs[0].Version)
	require.Equal(t, st.Size, objs[0].Size)
}

func TestListPagesPastOneThousandNamesAndRemoveBatches(t *testing.T) {
	f, b, ctx := setup(t, "many")
	const n = 1001
	want := make([]string, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	errs := make(chan error, n)
	for i := range want {
		want[i] = fmt.Sprintf("obj-%04d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if _, err := b.Create(ctx, want[i], bytesOf([]byte{byte(i)})); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	// A child store's objects and the lease are not the parent's.
	sub, err := b.Sub(ctx, "session-1", false)
	require.NoError(t, err)
	_, err = sub.Create(ctx, "inner", bytesOf([]byte("x")))
	require.NoError(t, err)
	f.count.take()

	objs, err := b.List(ctx)
	require.NoError(t, err)
	require.Equal(t, want, names(objs))
	require.Equal(t, map[string]int{"LIST": 2, "GET lease": 1}, f.count.take(), "1,001 names are two pages of 1,000, and a reader reads the lease")

	small := f.backend("many", listPageSize(100))
	objs, err = small.List(ctx)
	require.NoError(t, err)
	require.Equal(t, want, names(objs))
	require.Equal(t, 11, f.count.take()["LIST"])

	children, err := b.Children(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"session-1"}, children)
	f.count.take()

	gone, err := b.Remove(ctx, append(want, "never-there")...)
	require.NoError(t, err)
	require.Len(t, gone, n+1)
	for i, g := range gone {
		require.True(t, g, "%d", i)
	}
	require.Equal(t, map[string]int{"DELETES": 2}, f.count.take(), "1,002 names are two batches")
	objs, err = b.List(ctx)
	require.NoError(t, err)
	require.Empty(t, objs)
	inner, err := sub.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"inner"}, names(inner))
}

func TestRenameMovesAndRefusesATakenName(t *testing.T) {
	_, b, ctx := setup(t, "p")
	_, err := b.Create(ctx, "bad", bytesOf([]byte("damaged")))
	require.NoError(t, err)
	_, err = b.Create(ctx, "taken", bytesOf([]byte("keep me")))
	require.NoError(t, err)
	err = b.Rename(ctx, "bad", "taken")
	require.ErrorIs(t, err, checkpoint.ErrExists)
	data, _ := readAll(t, b, "taken")
	require.Equal(t, "keep me", string(data), "the destination is never replaced")

	require.NoError(t, b.Rename(ctx, "bad", "bad.corrupt"))
	data, _ = readAll(t, b, "bad.corrupt")
	require.Equal(t, "damaged", string(data))
	_, err = b.Stat(ctx, "bad")
	require.ErrorIs(t, err, fs.ErrNotExist)
}

// beforeFirst runs do once, just before the first request with method
// whose path ends in suffix goes on: another writer acting at the worst
// instant, after a check the request relies on.
type beforeFirst struct {
	rt             http.RoundTripper
	method, suffix string
	do             func(ctx context.Context) error
	once           sync.Once
	err            error
}

func (w *beforeFirst) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == w.method && strings.HasSuffix(r.URL.Path, w.suffix) {
		w.once.Do(func() { w.err = w.do(r.Context()) })
	}
	return w.rt.RoundTrip(r)
}

func (f *fixture) put(ctx context.Context, key string, data []byte) error {
	_, err := f.client.PutObject(ctx, &s3.PutObjectInput{Bucket: &f.bucket, Key: aws.String(key), Body: bytes.NewReader(data)})
	return err
}

// A Rename whose destination is created after its check found it free
// fails with ErrExists naming both objects, and leaves the created object
// and the source as they were, on a server that honours If-None-Match: *
// on PutObject only (versitygw ignores it on CopyObject).
func TestRenameOntoANameCreatedMeanwhileIsErrExistsAndReplacesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	// Any write of the destination: a PutObject or a CopyObject.
	take := &beforeFirst{rt: http0(), method: http.MethodPut, suffix: "/p/bad.corrupt", do: func(ctx context.Context) error {
		return f.put(ctx, "p/bad.corrupt", []byte("created meanwhile"))
	}}
	b, err := New(f.clientThrough(take), f.bucket, "p")
	require.NoError(t, err)
	defer b.Close()
	_, err = b.Create(ctx, "bad", bytesOf([]byte("damaged")))
	require.NoError(t, err)

	err = b.Rename(ctx, "bad", "bad.corrupt")
	require.NoError(t, take.err, "the racing create")
	require.ErrorIs(t, err, checkpoint.ErrExists)
	require.Contains(t, err.Error(), b.Locate("bad")+" to "+b.Locate("bad.corrupt"))
	data, _ := readAll(t, b, "bad.corrupt")
	require.Equal(t, "created meanwhile", string(data))
	data, _ = readAll(t, b, "bad")
	require.Equal(t, "damaged", string(data))
}

// A Rename moves the source as its HeadObject saw it, or nothing: a source
// replaced before it is read is ErrConflict, and nothing is written.
func TestRenameOfASourceReplacedMeanwhileIsErrConflictAndWritesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	replace := &beforeFirst{rt: http0(), method: http.MethodGet, suffix: "/p/bad", do: func(ctx context.Context) error {
		return f.put(ctx, "p/bad", []byte("replaced meanwhile"))
	}}
	b, err := New(f.clientThrough(replace), f.bucket, "p")
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, f.put(ctx, "p/bad", []byte("damaged")))

	err = b.Rename(ctx, "bad", "bad.corrupt")
	require.NoError(t, replace.err)
	require.ErrorIs(t, err, checkpoint.ErrConflict)
	require.Contains(t, err.Error(), b.Locate("bad")+" to "+b.Locate("bad.corrupt"))
	_, err = b.Stat(ctx, "bad.corrupt")
	require.ErrorIs(t, err, fs.ErrNotExist)
	data, _ := readAll(t, b, "bad")
	require.Equal(t, "replaced meanwhile", string(data))
}

// A Rename holds the source in memory, as Create holds its bytes: a source
// larger than one PUT takes is ErrInvalid before it is read.
func TestRenameOfASourceLargerThanOnePutIsInvalidAndReadsNothing(t *testing.T) {
	f, _, ctx := setup(t, "p")
	require.NoError(t, f.put(ctx, "p/big", make([]byte, 11)))
	b := f.backend("p", maxObjectSize(10))
	f.count.take()
	err := b.Rename(ctx, "big", "big.corrupt")
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	require.Contains(t, err.Error(), "more than 10")
	n := f.count.take()
	require.Zero(t, n["GET"]+n["PUT"], "requests: %v", n)
}

func TestRenameRepeatedAfterACrashBetweenCopyAndDeleteFinishes(t *testing.T) {
	f, b, ctx := setup(t, "p")
	_, err := b.Create(ctx, "bad", bytesOf([]byte("damaged")))
	require.NoError(t, err)
	// The PUT of an interrupted Rename: the source is still there.
	require.NoError(t, f.put(ctx, "p/bad.corrupt", []byte("damaged")))
	require.NoError(t, b.Rename(ctx, "bad", "bad.corrupt"))
	objs, err := b.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"bad.corrupt"}, names(objs))
}

func TestSubIsAPrefixAndLocateNamesIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := f.backend("root/run")
	require.Equal(t, "s3://"+f.bucket+"/root/run/", b.Locate(""))
	require.Equal(t, "s3://"+f.bucket+"/root/run/x", b.Locate("x"))
	sub, err := b.Sub(context.Background(), "s1", false)
	require.NoError(t, err)
	defer sub.Close()
	require.Equal(t, "s3://"+f.bucket+"/root/run/s1/x", sub.Locate("x"))
	_, err = b.Sub(context.Background(), "a/b", false)
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
}

// A prefix is a path that stays below its parent: one that starts with a
// slash, or has an empty, "." or ".." segment, is ErrInvalid naming it,
// never cleaned into another prefix (runs/.. into the bucket's root,
// runs/../other into other/). Any other UTF-8 is a prefix as it is.
func TestPrefixThatLeavesItsParentIsInvalid(t *testing.T) {
	t.Parallel()
	client := s3.New(s3.Options{Region: "us-east-1"}) // New sends nothing
	for _, prefix := range []string{"/", "/runs", "runs//x", "runs/..", "runs/../", "runs/../other", "..", ".", "./runs", "runs/./x", "a/b/../../..", "runs/\xff"} {
		_, err := New(client, "b", prefix)
		require.ErrorIs(t, err, checkpoint.ErrInvalid, "%q", prefix)
		require.Contains(t, err.Error(), "s3://b/"+prefix, "the error names the location")
	}
	for _, prefix := range []string{"", "runs", "runs/", "runs/42", "...", "..a/b..", ".hidden/x", "runs+1/a b/100%/ünï~&=c"} {
		b, err := New(client, "b", prefix)
		require.NoError(t, err, "%q", prefix)
		want := prefix
		if want != "" && !strings.HasSuffix(want, "/") {
			want += "/"
		}
		require.Equal(t, "s3://b/"+want, b.Locate(""), "%q is taken as it is", prefix)
	}
}

// Children names only child stores that Sub opens: a common prefix made by
// a key that something else put ("../x", "a b/x", "./y") is no child
// store's name, so nothing builds a prefix outside the store from it.
func TestChildrenAreNamesSubTakes(t *testing.T) {
	f, b, ctx := setup(t, "root")
	for _, key := range []string{"root/../x", "root/a b/x", "root/./y", "root/ok/z"} {
		_, err := f.client.PutObject(ctx, &s3.PutObjectInput{Bucket: &f.bucket, Key: aws.String(key), Body: bytes.NewReader(nil)})
		if err != nil {
			t.Logf("the server refuses the key %q: %v", key, err)
		}
	}
	children, err := b.Children(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"ok"}, children)
}

func TestSubWithCreateIsListedBeforeItsFirstWrite(t *testing.T) {
	_, b, ctx := setup(t, "root")
	_, err := b.Sub(ctx, "lazy", false)
	require.NoError(t, err)
	children, err := b.Children(ctx)
	require.NoError(t, err)
	require.Empty(t, children, "Sub without create writes nothing")
	made, err := b.Sub(ctx, "made", true)
	require.NoError(t, err)
	_, err = b.Sub(ctx, "made", true)
	require.NoError(t, err, "making an existing child again is fine")
	children, err = b.Children(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"made"}, children)
	objs, err := made.List(ctx)
	require.NoError(t, err)
	require.Empty(t, objs, "the marker is not an object of the child")
}

func TestClosedBackendRefusesCalls(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := f.backend("p")
	require.NoError(t, b.Close())
	_, err := b.Create(context.Background(), "a", bytesOf(nil))
	require.ErrorIs(t, err, checkpoint.ErrClosed)
	_, err = b.List(context.Background())
	require.ErrorIs(t, err, checkpoint.ErrClosed)
}

func TestSixteenConcurrentReplacesOfOneVersionExactlyOneWins(t *testing.T) {
	_, b, ctx := setup(t, "run")
	v, err := b.Replace(ctx, "roll", storage.NoObject, bytesOf([]byte("base")))
	require.NoError(t, err)
	winner := oneWinner(t, checkpoint.ErrConflict, func(i int) error {
		_, err := b.Replace(ctx, "roll", v.Version, bytesOf([]byte(fmt.Sprintf("writer %d", i))))
		return err
	})
	data, _ := readAll(t, b, "roll")
	require.Equal(t, fmt.Sprintf("writer %d", winner), string(data))
}

func TestObjectLargerThanOnePutIsInvalidAndSendsNothing(t *testing.T) {
	f, _, ctx := setup(t, "p")
	b := f.backend("p", maxObjectSize(10))
	_, err := b.Create(ctx, "big", bytesOf(make([]byte, 11)))
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	require.Contains(t, err.Error(), "larger than 10 bytes")
	_, err = b.Replace(ctx, "big", "", func(w io.Writer) error {
		for range 3 {
			if _, err := w.Write(make([]byte, 4)); err != nil {
				return err
			}
		}
		return nil
	})
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	require.Nil(t, f.count.take(), "nothing sent")
	_, err = b.Create(ctx, "fits", bytesOf(make([]byte, 10)))
	require.NoError(t, err)
}
