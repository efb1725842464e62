package s3store

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
)

// leaseOn reads the lease object of the store prefix as it is on the server.
func (f *fixture) leaseOn(prefix string) leaseDoc {
	f.t.Helper()
	out, err := f.client.GetObject(context.Background(), &s3.GetObjectInput{Bucket: &f.bucket, Key: aws.String(prefix + "/" + leaseName)})
	require.NoError(f.t, err)
	defer out.Body.Close()
	var d leaseDoc
	require.NoError(f.t, json.NewDecoder(out.Body).Decode(&d))
	return d
}

// OpenBackend's wait for a lease that looks expired (Lock watches it for up
// to its TTL before taking it over) ends when the caller's bound does,
// WaitLock's or OpenBackendContext's: ErrLocked naming the holder, and the
// lease left as it was. Unbounded, the same open takes the lease over.
func TestOpenBackendsWaitForALeaseEndsWithTheCallersBound(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// A dead writer's lease with a TTL of 1 s, which the server's
	// whole-second clock cannot show live: a contender watches it.
	dead := f.backend("run", LeaseTTL(time.Second))
	_, err := dead.Lock(context.Background())
	require.NoError(t, err)
	die(dead)
	holder := f.leaseOn("run").Holder

	// The bounds are well below the TTL, but long enough that the first
	// read of the lease ends before them on a loaded machine (a bound
	// that ends that read leaves the open not knowing who holds it).
	const bound = 600 * time.Millisecond
	check := func(err error) {
		t.Helper()
		require.ErrorIs(t, err, checkpoint.ErrLocked)
		require.ErrorContains(t, err, "s3://"+f.bucket+"/run/.checkpoint.lease")
		require.ErrorContains(t, err, "held by "+holder+" (generation 1)")
		d := f.leaseOn("run")
		require.Equal(t, uint64(1), d.Generation, "the lease was not taken over")
		require.Equal(t, holder, d.Holder)
	}
	b, err := New(f.client, f.bucket, "run")
	require.NoError(t, err)
	_, err = checkpoint.OpenBackend[state](b, checkpoint.WaitLock(bound))
	check(err)
	require.ErrorContains(t, err, "still locked after waiting 600ms")

	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	b, err = New(f.client, f.bucket, "run")
	require.NoError(t, err)
	_, err = checkpoint.OpenBackendContext[state](ctx, b)
	check(err)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	// Both bounds together: the context ends first.
	ctx, cancel = context.WithTimeout(context.Background(), bound)
	defer cancel()
	b, err = New(f.client, f.bucket, "run")
	require.NoError(t, err)
	_, err = checkpoint.OpenBackendContext[state](ctx, b, checkpoint.WaitLock(time.Minute))
	check(err)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	b, err = New(f.client, f.bucket, "run")
	require.NoError(t, err)
	s, err := checkpoint.OpenBackend[state](b)
	require.NoError(t, err, "unbounded, the open outwaits the dead writer's TTL")
	require.Equal(t, uint64(2), f.leaseOn("run").Generation)
	require.NoError(t, s.Close())
}

// A writer that holds its lease and renews it keeps a bounded open out for
// the whole bound, and the open's error names it.
func TestWaitLockOnALiveLeaseGivesUpAfterItsBoundNamingTheHolder(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	w, err := openStore(t, f, "run")
	require.NoError(t, err)
	defer w.Close()
	holder := f.leaseOn("run").Holder

	const bound = 300 * time.Millisecond
	b, err := New(f.client, f.bucket, "run", LeaseTTL(testTTL))
	require.NoError(t, err)
	start := time.Now()
	_, err = checkpoint.OpenBackend[state](b, checkpoint.WaitLock(bound))
	require.ErrorIs(t, err, checkpoint.ErrLocked)
	require.GreaterOrEqual(t, time.Since(start), bound, "the open waited its whole bound")
	require.ErrorContains(t, err, "held by "+holder)
	_, err = w.Save(context.Background(), 1, state{Step: 1})
	require.NoError(t, err, "the holder was not disturbed")
}

// The listing that List answers from after a takeover (see resumeListing)
// is the one the server gives: for a new store, a store its writer
// released, and a store whose writer died after writing objects that its
// lease does not list yet (which the takeover learns the generation of by
// HEAD), with objects that no lease holder wrote beside them.
func TestTheTakeoversListingIsTheServersListing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	check := func(prefix string) {
		t.Helper()
		// The default TTL: no renewal (which ends the reuse) within the
		// check, even where a bucket's first write takes a second or two
		// (SeaweedFS grows a volume for it).
		b := f.backend(prefix)
		unlock := lockWithin(t, b, 15*time.Second)
		defer unlock()
		cached, ok := b.resumeListing()
		require.True(t, ok, "just taken, the lease answers List")
		fresh, err := b.listVisible(ctx)
		require.NoError(t, err)
		listed, err := b.List(ctx)
		require.NoError(t, err)
		require.ElementsMatch(t, fresh, cached, "%s: the takeover's listing is the server's", prefix)
		require.ElementsMatch(t, fresh, listed)
		_, err = b.Create(ctx, "after", bytesOf([]byte("x")))
		require.NoError(t, err)
		_, ok = b.resumeListing()
		require.False(t, ok, "after a write, List asks the server")
	}

	check("new")

	released := f.backend("released")
	unlock, err := released.Lock(ctx)
	require.NoError(t, err)
	for _, name := range []string{"step_00000001.json", "step_00000002.json"} {
		_, err := released.Create(ctx, name, bytesOf([]byte(name)))
		require.NoError(t, err)
	}
	require.NoError(t, unlock())
	f.rawPut("released/by-hand.json", []byte("no generation"))
	f.rawPut("released/step_00000003.json", []byte("{damaged"))
	check("released")

	dead := f.backend("dead", LeaseTTL(time.Second))
	_, err = dead.Lock(ctx)
	require.NoError(t, err)
	_, err = dead.Create(ctx, "step_00000001.json", bytesOf([]byte("before")))
	require.NoError(t, err)
	die(dead) // what it writes from now on, its lease never lists
	_, err = dead.Create(ctx, "step_00000002.json", bytesOf([]byte("after its last renewal")))
	require.NoError(t, err)
	f.rawPut("dead/by-hand.json", []byte("no generation"))
	check("dead")
}
