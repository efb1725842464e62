package s3store

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
)

// Objects a store never writes, put under its prefix by hand: names that
// need URL escaping, a trailing slash, a directory marker, names like the
// lease's. A writer and a reader still save, list and load; none of them
// is taken for a checkpoint or a child store's lease.
func TestForeignObjectsUnderThePrefixDoNotBreakTheStore(t *testing.T) {
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
	// A takeover (sealing every object, the foreign ones included) and
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
