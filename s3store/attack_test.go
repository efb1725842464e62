package s3store

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
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
