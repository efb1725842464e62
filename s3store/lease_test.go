package s3store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/storage"
)

// testTTL is the lease TTL of tests in which a holder must keep its lease
// while it works: long enough for renewals to get through on a loaded
// machine (the race detector, parallel tests), short enough to wait out.
const testTTL = 2 * time.Second

// lockedBackend is f.backend(prefix, opts...) holding the lease, which
// it releases when the test ends.
func (f *fixture) lockedBackend(prefix string, opts ...Option) *Backend {
	f.t.Helper()
	b := f.backend(prefix, opts...)
	unlock, err := b.Lock(context.Background())
	require.NoError(f.t, err)
	f.t.Cleanup(func() { unlock() })
	return b
}

// lockWithin calls Lock until it succeeds or d has passed, as a second
// process waiting for a dead writer's lease would.
func lockWithin(t *testing.T, b *Backend, d time.Duration) func() error {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		unlock, err := b.Lock(ctx)
		cancel()
		if err == nil {
			return unlock
		}
		require.ErrorIs(t, err, checkpoint.ErrLocked)
		if time.Now().After(deadline) {
			t.Fatalf("no lease after %v: %v", d, err)
		}
	}
}

// die makes b's writer stop renewing its lease without releasing it, as a
// killed or paused process does.
func die(b *Backend) {
	b.mu.Lock()
	l := b.lease
	b.mu.Unlock()
	l.stopRenewing()
}

func generationOf(b *Backend) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lease.doc.Generation
}

func TestSecondWriterGetsErrLockedNamingTheHolder(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a, b := f.backend("run"), f.backend("run")
	ctx := context.Background()
	unlock, err := a.Lock(ctx)
	require.NoError(t, err)
	defer unlock()

	start := time.Now()
	_, err = b.Lock(ctx)
	require.ErrorIs(t, err, checkpoint.ErrLocked)
	require.Less(t, time.Since(start), 10*time.Second, "a live lease (by the server's clock) is refused at once")
	require.Contains(t, err.Error(), "s3://"+f.bucket+"/run/.checkpoint.lease")
	require.Contains(t, err.Error(), "(generation 1)")
	host := strings.SplitN(a.lease.doc.Holder, "/", 2)[0]
	require.Contains(t, err.Error(), host)

	_, err = a.Lock(ctx)
	require.ErrorIs(t, err, checkpoint.ErrLocked, "a backend cannot lock twice")
	// Another prefix is another store, with a lease of its own.
	other := f.backend("run/session")
	u2, err := other.Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, u2())
}

func TestLeaseOfADeadWriterIsTakenOverAfterItsTTL(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a, b := f.backend("run", LeaseTTL(testTTL)), f.backend("run", LeaseTTL(testTTL))
	ctx := context.Background()
	unlockA, err := a.Lock(ctx)
	require.NoError(t, err)
	_, err = a.Create(ctx, "step-1", bytesOf([]byte("by a")))
	require.NoError(t, err)
	die(a)

	started := time.Now()
	unlockB := lockWithin(t, b, 15*time.Second)
	require.GreaterOrEqual(t, time.Since(started), testTTL-100*time.Millisecond, "taken over before a TTL was seen")
	require.Equal(t, uint64(2), generationOf(b))
	data, _ := readAll(t, b, "step-1")
	require.Equal(t, "by a", string(data), "what a wrote before the takeover stays visible")

	_, err = a.Create(ctx, "step-2", bytesOf([]byte("late")))
	require.ErrorIs(t, err, checkpoint.ErrLocked, "a's deadline has passed")
	require.ErrorIs(t, unlockA(), checkpoint.ErrLocked, "a cannot release what b holds")
	_, err = b.Create(ctx, "step-2", bytesOf([]byte("by b")))
	require.NoError(t, err)
	require.NoError(t, unlockB())
}

// A lease is judged by the TTL its holder wrote in it, not by the
// contender's own: a contender with the default 30 s TTL reports a 1 s
// writer's lease as expiring after 1 s, and takes it over once it has seen
// it unchanged for 1 s. A lease without a TTL is judged by the default.
func TestLeaseIsJudgedByTheTTLItsHolderWrote(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a, b := f.backend("run", LeaseTTL(time.Second)), f.backend("run") // DefaultLeaseTTL
	ctx := context.Background()
	unlockA, err := a.Lock(ctx)
	require.NoError(t, err)
	defer unlockA()
	_, err = b.Lock(ctx) // a renews every third of a second
	require.ErrorIs(t, err, checkpoint.ErrLocked)
	require.Contains(t, err.Error(), "it expires when it has gone 1s without renewal")

	die(a)
	st, _, err := b.readLease(ctx, "")
	require.NoError(t, err)
	// b has watched the dead writer's last lease for longer than its TTL
	// (the wait itself is TestLeaseOfADeadWriterIsTakenOverAfterItsTTL's).
	b.mu.Lock()
	b.seen.etag, b.seen.at = st.etag, time.Now().Add(-1100*time.Millisecond)
	b.mu.Unlock()
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	unlockB, err := b.Lock(lctx)
	require.NoError(t, err, "a 1 s lease unchanged for 1.1 s has expired, whatever b's own TTL")
	require.Equal(t, uint64(2), generationOf(b))
	require.NoError(t, unlockB())

	require.Equal(t, DefaultLeaseTTL, leaseDoc{Generation: 1}.ttl(), "a lease without a TTL")
	require.Equal(t, time.Second, leaseDoc{Generation: 1, TTLMillis: 5}.ttl(), "a TTL below LeaseTTL's least")
	require.Equal(t, 5*time.Second, leaseDoc{Generation: 1, TTLMillis: 5000}.ttl())
}

func TestReleasedLeaseIsTakenAtOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a, b := f.backend("run"), f.backend("run") // 30 s TTL
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	unlock, err := a.Lock(ctx)
	require.NoError(t, err)
	_, err = a.Create(ctx, "step-1", bytesOf([]byte("x")))
	require.NoError(t, err)
	require.NoError(t, unlock())
	require.NoError(t, unlock(), "unlock is idempotent")
	_, err = a.Create(ctx, "step-2", bytesOf([]byte("x")))
	require.ErrorIs(t, err, checkpoint.ErrLocked, "no write after the release")

	unlockB, err := b.Lock(ctx)
	require.NoError(t, err, "a released lease is free at once")
	require.Equal(t, uint64(2), generationOf(b))
	objs, err := b.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"step-1"}, names(objs))
	require.NoError(t, unlockB())
}

func TestRenewalsKeepTheLeaseAliveAndOthersOut(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a, b := f.backend("run", LeaseTTL(testTTL)), f.backend("run", LeaseTTL(testTTL))
	ctx := context.Background()
	unlock, err := a.Lock(ctx)
	require.NoError(t, err)
	defer unlock()
	first := a.lease.etag
	renewals := 0
	deadline := time.Now().Add(20 * time.Second)
	for last := first; renewals < 3; {
		a.mu.Lock()
		cur := a.lease.etag
		a.mu.Unlock()
		if cur != last {
			renewals++
			last = cur
		}
		require.True(t, time.Now().Before(deadline), "%d renewals in 20s", renewals)
		time.Sleep(20 * time.Millisecond) // polling a's state
	}
	// b watches the lease; a renews it, so b gives up with ErrLocked.
	_, err = b.Lock(ctx)
	require.ErrorIs(t, err, checkpoint.ErrLocked)
	_, err = a.Create(ctx, "step-1", bytesOf([]byte("x")))
	require.NoError(t, err, "more than a TTL after Lock, the renewed lease is valid")
}

func TestWriterWhoseLeaseWasTakenOverFailsItsWrites(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.backend("run", LeaseTTL(time.Second))
	ctx := context.Background()
	unlock, err := a.Lock(ctx)
	require.NoError(t, err)
	// Someone else's lease over a's (as a takeover would write it).
	_, err = f.client.PutObject(ctx, &s3.PutObjectInput{Bucket: &f.bucket, Key: aws.String("run/" + leaseName),
		Body: strings.NewReader(`{"generation":2,"holder":"elsewhere","ttl_ms":1000}`)})
	require.NoError(t, err)
	for deadline := time.Now().Add(10 * time.Second); ; {
		a.mu.Lock()
		lost := a.lease.lost
		a.mu.Unlock()
		if lost != nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "a's renewal never noticed")
		time.Sleep(20 * time.Millisecond) // polling a's state
	}
	_, err = a.Create(ctx, "step-1", bytesOf([]byte("x")))
	require.ErrorIs(t, err, checkpoint.ErrLocked)
	require.Contains(t, err.Error(), "taken over")
	require.ErrorIs(t, unlock(), checkpoint.ErrLocked)
}

// TestStaleWritesAfterATakeoverAreHidden is the fencing rule: a writes,
// pauses past its lease, b takes over, then a's requests land anyway (a
// request delayed in the network, or a's clock running slow: here a's
// deadline is pushed out by hand). Nothing a wrote after the takeover may
// be listed or opened, by b or by a reader, and it must not block b.
func TestStaleWritesAfterATakeoverAreHidden(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a, b := f.backend("run", LeaseTTL(testTTL)), f.backend("run", LeaseTTL(testTTL))
	ctx := context.Background()
	_, err := a.Create(ctx, "before-any-lease", bytesOf([]byte("old")))
	require.NoError(t, err)
	_, err = a.Lock(ctx)
	require.NoError(t, err)
	_, err = a.Create(ctx, "step-1", bytesOf([]byte("acknowledged")))
	require.NoError(t, err)
	roll1, err := a.Replace(ctx, "roll", storage.NoObject, bytesOf([]byte("roll by a")))
	require.NoError(t, err)
	die(a)
	unlockB := lockWithin(t, b, 15*time.Second)
	defer unlockB()

	// a wakes up believing its lease is still valid.
	a.mu.Lock()
	a.lease.deadline = time.Now().Add(time.Hour)
	a.lease.wallDeadline = a.lease.deadline.Round(0)
	a.mu.Unlock()
	_, err = a.Create(ctx, "step-2", bytesOf([]byte("stale")))
	require.NoError(t, err, "the server took a's late PUT")
	_, err = a.Replace(ctx, "side", storage.NoObject, bytesOf([]byte("stale side")))
	require.NoError(t, err)
	_, err = b.Replace(ctx, "roll", roll1.Version, bytesOf([]byte("roll by b")))
	require.NoError(t, err)
	_, err = a.Replace(ctx, "roll", roll1.Version, bytesOf([]byte("stale roll")))
	require.ErrorIs(t, err, checkpoint.ErrConflict, "If-Match stops a stale replace of what b replaced")

	reader := f.backend("run")
	for who, be := range map[string]*Backend{"b": b, "reader": reader} {
		objs, err := be.List(ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"before-any-lease", "roll", "step-1"}, names(objs), who)
		for _, name := range []string{"step-2", "side"} {
			_, _, err = be.Open(ctx, name)
			require.ErrorIs(t, err, fs.ErrNotExist, "%s opens %s", who, name)
			require.False(t, errors.Is(err, checkpoint.ErrCorrupt), "a fenced object is not damage")
			_, err = be.Stat(ctx, name)
			require.ErrorIs(t, err, fs.ErrNotExist, "%s stats %s", who, name)
		}
		data, _ := readAll(t, be, "roll")
		require.Equal(t, "roll by b", string(data), who)
		data, _ = readAll(t, be, "step-1")
		require.Equal(t, "acknowledged", string(data), who)
	}

	// The fenced objects do not block b: its Create takes the name.
	_, err = b.Create(ctx, "step-2", bytesOf([]byte("by b")))
	require.NoError(t, err)
	_, err = b.Create(ctx, "step-2", bytesOf([]byte("again")))
	require.ErrorIs(t, err, checkpoint.ErrExists)
	_, err = b.Replace(ctx, "side", storage.NoObject, bytesOf([]byte("side by b")))
	require.NoError(t, err)
	objs, err := reader.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"before-any-lease", "roll", "side", "step-1", "step-2"}, names(objs))
	data, _ := readAll(t, reader, "step-2")
	require.Equal(t, "by b", string(data))

	// A later takeover keeps them hidden: c seals only what b's rule shows.
	_, err = a.Create(ctx, "step-3", bytesOf([]byte("stale again")))
	require.NoError(t, err)
	require.NoError(t, unlockB())
	c := f.backend("run", LeaseTTL(testTTL))
	unlockC, err := c.Lock(ctx)
	require.NoError(t, err)
	defer unlockC()
	objs, err = reader.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"before-any-lease", "roll", "side", "step-1", "step-2"}, names(objs))
}

// The sealed set lists what the takeover found; what the holder removes
// or rewrites leaves it at the next renewal, so the lease object does not
// grow with every object a store ever had. What the holder writes joins
// the written set at the next renewal, so that readers need no HEAD to
// learn its generation.
func TestRenewalsKeepTheSealedAndWrittenSetsCurrent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	old := f.backend("run")
	for _, name := range []string{"a", "b", "c"} {
		_, err := old.Create(ctx, name, bytesOf([]byte(name)))
		require.NoError(t, err)
	}
	b := f.backend("run", LeaseTTL(time.Second))
	unlock, err := b.Lock(ctx)
	require.NoError(t, err)
	defer unlock()
	lease := func() leaseDoc {
		st, _, err := b.readLease(ctx, "")
		require.NoError(t, err)
		return st.doc
	}
	require.Len(t, lease().Sealed, 3)
	_, err = b.Remove(ctx, "a")
	require.NoError(t, err)
	b2, err := b.Replace(ctx, "b", "", bytesOf([]byte("b2")))
	require.NoError(t, err)
	d, err := b.Create(ctx, "d", bytesOf([]byte("d")))
	require.NoError(t, err)
	for deadline := time.Now().Add(10 * time.Second); ; {
		doc := lease()
		if len(doc.Sealed) == 1 {
			require.Equal(t, map[string]string{"c": `"4a8a08f09d37b73795649038408b5f33"`}, doc.Sealed)
			require.Equal(t, map[string]string{"b": b2.Version, "d": d.Version}, doc.Written)
			break
		}
		require.True(t, time.Now().Before(deadline), "sealed set still %v", doc.Sealed)
		time.Sleep(50 * time.Millisecond) // polling for the next renewal
	}
	f.count.take()
	objs, err := f.backend("run").List(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"b", "c", "d"}, names(objs))
	require.Zero(t, f.count.take()["HEAD"], "a reader learns the generations from the lease")
}

// Lock watching a lease that looks expired by the server's clock is
// bounded by its ctx, and says who holds the lease.
func TestLockWaitingForALeaseEndsWithItsContext(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.backend("run", LeaseTTL(time.Second))
	unlock, err := a.Lock(context.Background())
	require.NoError(t, err)
	defer unlock()
	die(a)
	// With a TTL of 1 s the server's whole-second clock cannot show the
	// lease live, so b watches it, for less than the TTL (but long enough
	// that its first read of the lease ends before the context, even on a
	// loaded machine: a context that ends during that read leaves b not
	// knowing that the lease is held).
	b := f.backend("run", LeaseTTL(time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 800*time.Millisecond)
	defer cancel()
	_, err = b.Lock(ctx)
	require.ErrorIs(t, err, checkpoint.ErrLocked)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), "(generation 1)")
}

// A holder whose machine slept (suspend, a paused VM) past its lease: Go's
// monotonic clock does not count the sleep on Linux, so by it the
// deadline has not passed, but the wall clock, which the kernel moves on
// at resume, says it has. The writer must not acknowledge a write then:
// another may have taken over, and the write would be acknowledged and
// hidden.
func TestWriterWhoseMachineSleptPastItsLeaseFailsItsWrites(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	a := f.lockedBackend("run", LeaseTTL(testTTL))
	die(a) // no renewal while it sleeps
	a.mu.Lock()
	// What the clocks say after the sleep: the monotonic reading moved on
	// by the little time that passed awake, the wall reading by the sleep.
	a.lease.deadline = time.Now().Add(time.Hour)
	a.lease.wallDeadline = time.Now().Add(-time.Minute).Round(0)
	a.mu.Unlock()
	_, err := a.Create(ctx, "step-1", bytesOf([]byte("after the sleep")))
	require.ErrorIs(t, err, checkpoint.ErrLocked)
	require.Contains(t, err.Error(), "not renewed in time")
	_, ok := a.holderView()
	require.False(t, ok, "a holder past its wall-clock deadline still trusts its own view")
}

// A stale writer that still trusts its lease (its clock ran slow, or its
// checks were passed before its requests were delayed) must never take
// the new holder's objects for fenced ones: a Create of a name the new
// holder saved is ErrExists, and the new holder's object stays, whatever
// the stale writer's own view of the lease says.
func TestStaleWriterCannotReplaceTheNewHoldersCheckpoint(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	a, b := f.backend("run", LeaseTTL(testTTL)), f.backend("run", LeaseTTL(testTTL))
	_, err := a.Lock(ctx)
	require.NoError(t, err)
	die(a)
	unlockB := lockWithin(t, b, 15*time.Second)
	defer unlockB()
	_, err = b.Create(ctx, "step-5", bytesOf([]byte("by b, acknowledged")))
	require.NoError(t, err)
	_, err = b.Replace(ctx, "side", storage.NoObject, bytesOf([]byte("side by b")))
	require.NoError(t, err)

	// a's clock says its lease is still good.
	a.mu.Lock()
	a.lease.deadline = time.Now().Add(time.Hour)
	a.lease.wallDeadline = a.lease.deadline.Round(0)
	a.mu.Unlock()
	_, err = a.Create(ctx, "step-5", bytesOf([]byte("by a, stale")))
	require.ErrorIs(t, err, checkpoint.ErrExists)
	_, err = a.Replace(ctx, "side", storage.NoObject, bytesOf([]byte("side by a, stale")))
	require.ErrorIs(t, err, checkpoint.ErrConflict)
	_, err = a.Create(ctx, "step-6", bytesOf([]byte("by a, stale")))
	require.NoError(t, err, "the server takes a's PUT of a free name")
	require.NoError(t, a.Rename(ctx, "step-6", "step-7"))
	_, err = b.Create(ctx, "step-8", bytesOf([]byte("by b, acknowledged")))
	require.NoError(t, err)
	err = a.Rename(ctx, "step-7", "step-8")
	require.Error(t, err, "a moved its stale object over b's")

	reader := f.backend("run")
	for who, be := range map[string]*Backend{"b": b, "reader": reader} {
		data, _ := readAll(t, be, "step-5")
		require.Equal(t, "by b, acknowledged", string(data), who)
		data, _ = readAll(t, be, "side")
		require.Equal(t, "side by b", string(data), who)
		data, _ = readAll(t, be, "step-8")
		require.Equal(t, "by b, acknowledged", string(data), who)
	}
}

// slowAnswers holds back the answer of the first n PUTs of keys ending in
// suffix by delay after the server took them (a slow network back), or
// until the request's ctx ends.
type slowAnswers struct {
	rt     http.RoundTripper
	suffix string
	delay  time.Duration
	n      atomic.Int32
}

func (s *slowAnswers) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := s.rt.RoundTrip(r)
	if err != nil || r.Method != http.MethodPut || !strings.HasSuffix(r.URL.Path, s.suffix) || s.n.Add(-1) < 0 {
		return resp, err
	}
	t := time.NewTimer(s.delay)
	defer t.Stop()
	select {
	case <-t.C:
		return resp, nil
	case <-r.Context().Done():
		resp.Body.Close()
		return nil, r.Context().Err()
	}
}

// A renewal whose answer takes longer than the TTL (it landed, but the
// writer gave up waiting) costs the writer its lease's deadline, not the
// lease: its writes fail with ErrLocked meanwhile, and once the next
// renewal finds the lease still its own it saves again. A save slower than
// the TTL succeeds while the renewals keep the lease.
func TestRequestsSlowerThanTheTTLDoNotLoseTheLease(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	const ttl = testTTL
	slowSave := &slowAnswers{rt: http0(), suffix: "/step-1", delay: ttl}
	slowSave.n.Store(1)
	slowRenewal := &slowAnswers{rt: slowSave, suffix: "/" + leaseName, delay: ttl + ttl/4}
	b, err := New(f.clientThrough(slowRenewal), f.bucket, "run", LeaseTTL(ttl))
	require.NoError(t, err)
	defer b.Close()
	unlock, err := b.Lock(ctx)
	require.NoError(t, err)
	defer unlock()
	_, err = b.Create(ctx, "step-1", bytesOf([]byte("slow")))
	require.NoError(t, err, "a save slower than the TTL while the renewals keep the lease")

	slowRenewal.n.Store(1) // the next renewal's answer is late
	for deadline := time.Now().Add(20 * ttl); slowRenewal.n.Load() > 0; {
		require.True(t, time.Now().Before(deadline), "no renewal")
		time.Sleep(ttl / 20) // polling for the renewal, which runs on a timer
	}
	var locked bool
	for deadline, i := time.Now().Add(20*ttl), 2; ; i++ {
		_, err := b.Create(ctx, "step-"+strconv.Itoa(i), bytesOf([]byte("x")))
		if err == nil && locked {
			break // saving again
		}
		if err != nil {
			require.ErrorIs(t, err, checkpoint.ErrLocked)
			require.NotContains(t, err.Error(), "taken over")
			locked = true
		}
		require.True(t, time.Now().Before(deadline), "no refusal then save after the slow renewal (locked %v): %v", locked, err)
		time.Sleep(ttl / 20) // polling the writer, whose renewals run on a timer
	}
	b.mu.Lock()
	lost := b.lease.lost
	b.mu.Unlock()
	require.NoError(t, lost)
}

// A takeover whose PUT took most of the TTL (a slow answer, or the SDK's
// retry backoff, which can be seconds) is renewed in time: the first
// renewal is due a third of the TTL after the takeover started, not after
// it returned, so the writer's saves never find its deadline passed.
func TestSlowTakeoverIsRenewedBeforeItsDeadline(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	slow := &slowAnswers{rt: http0(), suffix: "/" + leaseName, delay: testTTL * 7 / 10}
	slow.n.Store(1)
	b, err := New(f.clientThrough(slow), f.bucket, "run", LeaseTTL(testTTL))
	require.NoError(t, err)
	defer b.Close()
	start := time.Now()
	unlock, err := b.Lock(ctx)
	require.NoError(t, err)
	defer unlock()
	// Past the deadline the takeover set, and past the first renewal as a
	// timer started when Lock returned would send it.
	for i := 0; time.Since(start) < testTTL*23/20; i++ {
		_, err := b.Create(ctx, "step-"+strconv.Itoa(i), bytesOf([]byte("x")))
		require.NoError(t, err, "%v after the takeover started", time.Since(start).Round(time.Millisecond))
	}
}

// Sixteen contenders for a dead writer's lease, at once: exactly one
// takes it over (the next generation), the others get ErrLocked, and what
// the winner saves after the takeover is what a reader sees.
func TestContendersRacingForAnExpiredLeaseExactlyOneWins(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	a := f.backend("run", LeaseTTL(testTTL))
	_, err := a.Lock(ctx)
	require.NoError(t, err)
	gen := generationOf(a)
	die(a)
	var bs [16]*Backend
	for i := range bs {
		bs[i] = f.backend("run", LeaseTTL(testTTL))
	}
	taken := fmt.Sprintf("(generation %d)", gen+1)
	winner := oneWinner(t, checkpoint.ErrLocked, func(i int) error {
		// Each tries as a process waiting for the dead writer's lease
		// would, until it holds it or sees another contender hold it.
		for deadline := time.Now().Add(10 * testTTL); ; {
			// Each try may take until the deadline: a busy server has
			// held one of 16 contenders' requests for 8 s (SeaweedFS,
			// on 2 cores beside the other tests).
			lctx, cancel := context.WithDeadline(ctx, deadline)
			_, err := bs[i].Lock(lctx)
			cancel()
			if err == nil || !errors.Is(err, checkpoint.ErrLocked) || strings.Contains(err.Error(), taken) || time.Now().After(deadline) {
				return err
			}
		}
	})
	require.Equal(t, gen+1, generationOf(bs[winner]))
	_, err = bs[winner].Create(ctx, "step-1", bytesOf([]byte("by the winner")))
	require.NoError(t, err)
	data, _ := readAll(t, f.backend("run"), "step-1")
	require.Equal(t, "by the winner", string(data))
}

// expireAfterDelete is a transport that, once the first DeleteObjects
// request has been answered, makes the writer's lease expire, as a pause
// between two batches of a large removal would.
type expireAfterDelete struct {
	rt     http.RoundTripper
	once   sync.Once
	expire func()
}

func (e *expireAfterDelete) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := e.rt.RoundTrip(r)
	if r.Method == http.MethodPost && r.URL.Query().Has("delete") {
		e.once.Do(e.expire)
	}
	return resp, err
}

// TestRemoveStopsBetweenBatchesOnceTheLeaseIsLost: a removal of more than
// 1,000 names is sent in batches, and the lease is checked before each: a
// writer whose lease runs out during the removal deletes no further batch
// (objects that a new holder may keep), and says ErrLocked.
func TestRemoveStopsBetweenBatchesOnceTheLeaseIsLost(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	var b *Backend
	rt := &expireAfterDelete{rt: http.DefaultTransport, expire: func() {
		b.mu.Lock()
		b.lease.deadline = time.Now().Add(-time.Second)
		b.lease.wallDeadline = b.lease.deadline.Round(0)
		b.mu.Unlock()
	}}
	b, err := New(f.clientThrough(rt), f.bucket, "run", LeaseTTL(time.Hour))
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	unlock, err := b.Lock(ctx)
	require.NoError(t, err)
	defer unlock()

	names := make([]string, 1500)
	errs := make(chan error, len(names))
	sem := make(chan struct{}, 16)
	for i := range names {
		names[i] = fmt.Sprintf("step_%08d.json", i)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			_, err := b.Create(ctx, names[i], func(w io.Writer) error { _, err := w.Write([]byte("{}")); return err })
			errs <- err
		}()
	}
	for range names {
		require.NoError(t, <-errs)
	}

	gone, err := b.Remove(ctx, names...)
	require.ErrorIs(t, err, checkpoint.ErrLocked)
	removed := 0
	for _, g := range gone {
		if g {
			removed++
		}
	}
	require.Equal(t, 1000, removed, "only the first batch went before the lease ran out")
	objs, err := f.backend("run").List(ctx)
	require.NoError(t, err)
	require.Len(t, objs, 500, "the second batch was sent after the lease was lost")
}
