package s3store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	fp "github.com/gocheckpoint/checkpoint/s3store/internal/faultproxy"
)

// The promises of a store on a network that fails, proven through
// faultproxy, a proxy between the store's client and the server that
// resets connections mid-PUT, answers 500 and 503 SlowDown, stalls answers
// past the client's timeout, loses the answer to a request the server
// applied (the ambiguous write) and cuts a writer off from the server. The
// checks go to the server straight, through a second client.
//
// CHECKPOINT_S3_FAULTS sets how many faults a run injects (default 30, a
// few seconds); CHECKPOINT_S3_FAULT_SEED fixes the random schedule (the
// seed of a run is logged).

// Timeouts of one HTTP attempt of a client through the proxy (a Stall
// holds its answer until the client gives up; the SDK then retries): short
// where the test takes a loaded machine's slow answer as one more fault,
// longer where the test needs requests without a fault to succeed.
const (
	attemptTimeout     = 300 * time.Millisecond
	slowAttemptTimeout = time.Second
)

// faultsWanted is how many faults a test injects.
func faultsWanted(t *testing.T) int {
	t.Helper()
	if v := os.Getenv("CHECKPOINT_S3_FAULTS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "CHECKPOINT_S3_FAULTS")
		return n
	}
	return 30
}

func faultSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("CHECKPOINT_S3_FAULT_SEED"); v != "" {
		var err error
		seed, err = strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "CHECKPOINT_S3_FAULT_SEED")
	}
	t.Logf("fault schedule: CHECKPOINT_S3_FAULT_SEED=%d", seed)
	return seed
}

// faultyClient starts a proxy in front of the fixture's server, injecting
// what rule chooses, and returns it with a client through it whose
// attempts time out after timeout and whose retries back off 50 ms at
// most.
func (f *fixture) faultyClient(t *testing.T, rule fp.Rule, timeout time.Duration) (*fp.Proxy, *s3.Client) {
	t.Helper()
	p, err := fp.Start(f.srv.endpoint, rule)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	c := s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(p.URL()), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(f.srv.key, f.srv.secret, ""),
		HTTPClient:  &http.Client{Transport: http0(), Timeout: timeout},
		Retryer:     retry.NewStandard(func(o *retry.StandardOptions) { o.MaxBackoff = 50 * time.Millisecond }),
	})
	return p, c
}

// injected counts the faults a proxy injected (requests not passed).
func injected(p *fp.Proxy) int {
	n := 0
	for f, c := range p.Counts() {
		if f != fp.Pass {
			n += c
		}
	}
	return n
}

// stepOf returns the step of a checkpoint's object path (.../step_00000042.json).
func stepOf(p string) (int64, bool) {
	var step int64
	if _, err := fmt.Sscanf(path.Base(p), "step_%d.json", &step); err != nil || !strings.HasSuffix(p, ".json") {
		return 0, false
	}
	return step, true
}

// openThroughFaults opens a writer on a Backend of client, again (on a new
// Backend: a failed OpenBackend closes its own) while the faults make it
// fail: a takeover whose answer was lost unrecognised leaves a lease that
// must expire first (ErrLocked meanwhile).
func openThroughFaults(t *testing.T, client *s3.Client, bucket string, opts ...Option) *checkpoint.Store[state] {
	t.Helper()
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		b, nerr := New(client, bucket, "run", opts...)
		require.NoError(t, nerr)
		var s *checkpoint.Store[state]
		if s, err = checkpoint.OpenBackend[state](b); err == nil {
			return s
		}
		t.Logf("open through faults: %v", err)
	}
	t.Fatalf("no writer after 30 s of faults: %v", err)
	return nil
}

// Over a seeded random schedule of every fault on every request of a
// writer (its saves, lease renewals, listings and reads): every Save that
// returned nil is listed and loads as saved, through a client that goes to
// the server straight; a step is never skipped (a Save that fails, with
// ErrUnavailable, is retried, and ErrExists comes only after an attempt of
// that step that failed having in fact landed, with the state that attempt
// saved); and
// Latest never goes backwards, neither the writer's own (through the
// faults) nor a reader's.
func TestNoAcknowledgedSaveIsLostToFaultsOnTheWire(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	want := faultsWanted(t)
	seed := faultSeed(t)
	p, client := f.faultyClient(t, fp.Random(seed, 0.25, fp.Reset, fp.Error500, fp.SlowDown, fp.Stall, fp.Drop, fp.Truncate), attemptTimeout)
	w := openThroughFaults(t, client, f.bucket, LeaseTTL(testTTL))
	r, err := openStore(t, f, "run", checkpoint.ReadOnly())
	require.NoError(t, err)
	defer r.Close()
	// A reader through faults of its own: its Latest fails or is the
	// newest step, never an older one.
	rp, rclient := f.faultyClient(t, fp.Random(seed+1, 0.25, fp.Reset, fp.Error500, fp.SlowDown, fp.Stall, fp.Drop, fp.Truncate), attemptTimeout)
	rb, err := New(rclient, f.bucket, "run")
	require.NoError(t, err)
	fr, err := checkpoint.OpenBackend[state](rb, checkpoint.ReadOnly())
	require.NoError(t, err)
	defer fr.Close()
	var faultyReaderFailed int

	acked := map[int64]state{}
	var (
		failedAttempts, lockedAttempts int
		landedUnacked                  int // a failed Save whose retry found it saved
		readerLatest, writerLatest     int64
		writerLatestFailed             int
		failedSteps                    = map[int64]bool{} // a Save of the step failed at least once
	)
	pad := strings.Repeat("p", 64<<10)
	step := int64(0)
	for injected(p) < want {
		step++
		st := state{Writer: "a", Step: step}
		if step%4 == 0 {
			st.Pad = pad // a body long enough to be cut mid-upload
		}
		var err error
		for attempt := 0; ; attempt++ {
			require.Less(t, attempt, 50, "step %d never saved: %v", step, err)
			sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			_, err = w.Save(sctx, step, st)
			cancel()
			if err == nil {
				acked[step] = st
				break
			}
			if errors.Is(err, checkpoint.ErrExists) {
				// Only an earlier attempt of this step that landed may
				// be in the way, and it holds this very state.
				require.True(t, failedSteps[step], "step %d: ErrExists on its first save: %v", step, err)
				infos, lerr := r.List(ctx)
				require.NoError(t, lerr)
				var got *state
				for _, in := range infos {
					if in.Step == step {
						s, _, lerr := r.LoadExact(ctx, in)
						require.NoError(t, lerr, "step %d", step)
						got = &s
					}
				}
				require.NotNil(t, got, "step %d: ErrExists, but a reader does not list it", step)
				require.Equal(t, st, *got, "step %d: ErrExists, and what is there is not what was saved", step)
				acked[step] = st
				landedUnacked++
				break
			}
			failedSteps[step] = true
			if errors.Is(err, checkpoint.ErrLocked) {
				// The lease's deadline passed while renewals failed: a
				// renewal that gets through (nobody else wants the lease)
				// lets the writer save again.
				lockedAttempts++
				time.Sleep(testTTL / 20) // pacing retries while the renewal timer runs
				continue
			}
			failedAttempts++
			t.Logf("step %d, attempt %d: %v", step, attempt, err)
			require.ErrorIs(t, err, checkpoint.ErrUnavailable, "a save that failed on the network says so")
		}
		if step%2 == 0 {
			_, info, err := r.Latest(ctx)
			require.NoError(t, err, "a reader's Latest after step %d", step)
			require.GreaterOrEqual(t, info.Step, readerLatest, "a reader's Latest went backwards")
			require.Equal(t, step, info.Step, "a reader's Latest is not the step just acknowledged")
			readerLatest = info.Step
		}
		if step%2 == 1 {
			got, info, err := fr.Latest(ctx)
			switch {
			case err != nil:
				faultyReaderFailed++
				require.ErrorIs(t, err, checkpoint.ErrUnavailable, "a reader's Latest through faults after step %d", step)
			default:
				require.Equal(t, step, info.Step, "a reader's Latest through faults is not the step just acknowledged")
				require.Equal(t, acked[step], got)
			}
		}
		if step%3 == 0 {
			got, info, err := w.Latest(ctx)
			switch {
			case err != nil:
				writerLatestFailed++
				require.False(t, errors.Is(err, checkpoint.ErrNotFound), "the writer's Latest after step %d: %v", step, err)
			default:
				require.GreaterOrEqual(t, info.Step, writerLatest, "the writer's Latest went backwards")
				require.Equal(t, step, info.Step, "the writer's Latest is not the step just acknowledged")
				require.Equal(t, acked[step], got)
				writerLatest = info.Step
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Logf("close through faults: %v", err)
	}

	infos, err := r.List(ctx)
	require.NoError(t, err)
	listed := map[int64]checkpoint.Info{}
	for _, in := range infos {
		listed[in.Step] = in
	}
	for s, st := range acked {
		in, ok := listed[s]
		require.True(t, ok, "acknowledged step %d is not listed", s)
		got, _, err := r.LoadExact(ctx, in)
		require.NoError(t, err, "acknowledged step %d", s)
		require.Equal(t, st, got, "step %d", s)
	}
	require.Len(t, listed, len(acked), "a step listed that was never acknowledged")

	// The ambiguous writes: a checkpoint's PUT that the server applied
	// (200) while the client saw a reset or a timeout.
	ambiguous, recognised := 0, 0
	for _, e := range p.Events() {
		if s, ok := stepOf(e.Path); ok && e.Method == http.MethodPut && e.Fault != fp.Pass && e.Fault.Applied() && e.Status == http.StatusOK {
			ambiguous++
			if !failedSteps[s] {
				recognised++ // the Save that sent it returned nil
			}
		}
	}
	t.Logf("faults injected: %v; on the faulty reader's requests: %v", p.Counts(), rp.Counts())
	t.Logf("the faulty reader's Latest failed %d times (ErrUnavailable), never went back", faultyReaderFailed)
	t.Logf("saves acknowledged %d (of which %d by a retried Save's ErrExists), lost 0; failed attempts %d, ErrLocked attempts %d; writer's Latest failed %d times",
		len(acked), landedUnacked, failedAttempts, lockedAttempts, writerLatestFailed)
	t.Logf("ambiguous checkpoint PUTs (applied, answer lost) %d: %d recognised by the Save that sent them", ambiguous, recognised)
}

// holder is a writer through a proxy of its own, in the partition test.
type holder struct {
	name  string
	proxy *fp.Proxy
	b     *Backend
	s     *checkpoint.Store[state]
}

// partitionTTL is the lease TTL of the partition test: the least there
// is, so that a takeover comes quickly.
const partitionTTL = time.Second

func (f *fixture) newHolder(t *testing.T, name string) *holder {
	t.Helper()
	p, client := f.faultyClient(t, nil, slowAttemptTimeout)
	h := &holder{name: name, proxy: p}
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; {
		// A new Backend each time: a failed OpenBackend closes its own.
		h.b, err = New(client, f.bucket, "run", LeaseTTL(partitionTTL))
		require.NoError(t, err)
		h.s, err = checkpoint.OpenBackend[state](h.b)
		if err == nil || !errors.Is(err, checkpoint.ErrLocked) || time.Now().After(deadline) {
			break
		}
	}
	require.NoError(t, err, "%s takes the lease", name)
	return h
}

// saveAcked saves st at its step, again while the writer's lease deadline
// has passed for want of a renewal (a loaded machine), and fails the test
// otherwise.
func (h *holder) saveAcked(t *testing.T, st state) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		_, err := h.s.Save(context.Background(), st.Step, st)
		if err == nil {
			return
		}
		require.ErrorIs(t, err, checkpoint.ErrLocked, "%s saves step %d", h.name, st.Step)
		require.Less(t, attempt, 40, "%s saves step %d", h.name, st.Step)
		time.Sleep(partitionTTL / 20) // pacing retries while the renewal timer runs
	}
}

// staleAttempt is one Save of a writer cut off from the server.
type staleAttempt struct {
	step      int64
	afterHeal bool // started once the partition had healed
	err       error
}

// A writer cut off from the server (every request held, unanswered) for
// longer than its lease, while a contender takes the store over and saves:
// the held requests are then delivered late, the stale writer's PUTs among
// them, stamped with its generation. Never two writers visible: every
// checkpoint a reader lists is one a Save acknowledged (nothing the stale
// writer wrote lands visibly), Latest is the new holder's, the stale
// writer's every Save fails and, once the network is back, with ErrLocked;
// and the new holder saves over the names the late writes took. Rounds
// alternate the roles.
func TestAWriterCutOffPastItsLeaseIsFencedAndLearnsErrLocked(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	rounds := max(1, faultsWanted(t)/25)
	r, err := openStore(t, f, "run", checkpoint.ReadOnly())
	require.NoError(t, err)
	defer r.Close()

	acked := map[int64]state{}
	cur := f.newHolder(t, "w0")
	var step, latest int64
	var cutOff, lateLanded, lateHidden, learned int
	for round := 1; round <= rounds; round++ {
		for range 2 {
			step++
			acked[step] = state{Writer: cur.name, Step: step}
			cur.saveAcked(t, acked[step])
		}
		// Cut off. The stale writer goes on computing and saving steps
		// ahead of what it had acknowledged; every one fails.
		cur.proxy.Partition(true)
		var (
			mu       sync.Mutex
			attempts []staleAttempt
			healed   = make(chan struct{})
			stopped  = make(chan struct{})
		)
		go func(h *holder, next int64) {
			defer close(stopped)
			after := 0
			for ; after < 2; next++ {
				a := staleAttempt{step: next}
				select {
				case <-healed:
					a.afterHeal = true
					after++
				default:
				}
				sctx, cancel := context.WithTimeout(ctx, 3*slowAttemptTimeout)
				_, a.err = h.s.Save(sctx, next, state{Writer: h.name, Step: next})
				cancel()
				mu.Lock()
				attempts = append(attempts, a)
				mu.Unlock()
				if errors.Is(a.err, checkpoint.ErrLocked) && !a.afterHeal {
					select { // pacing: past its deadline a save fails at once
					case <-healed:
					case <-time.After(partitionTTL / 10):
					}
				}
			}
		}(cur, step+10)

		next := f.newHolder(t, fmt.Sprintf("w%d", round))
		got, info, err := next.s.Latest(ctx)
		require.NoError(t, err)
		require.Equal(t, step, info.Step, "the new holder resumes from the last acknowledged save")
		require.Equal(t, acked[step], got)
		for range 2 {
			step++
			acked[step] = state{Writer: next.name, Step: step}
			next.saveAcked(t, acked[step])
		}

		cur.proxy.Heal(true) // the held requests reach the server now
		close(healed)
		<-stopped
		for _, e := range cur.proxy.Events() {
			if e.Fault != fp.Partitioned {
				continue
			}
			cutOff++
			if s, ok := stepOf(e.Path); ok && e.Late && e.Method == http.MethodPut && e.Status == http.StatusOK {
				lateLanded++
				_, taken := acked[s]
				require.False(t, taken, "a late write landed at step %d, which a Save acknowledged", s)
			}
		}
		for _, a := range attempts {
			require.Error(t, a.err, "%s's save of step %d, cut off, returned nil", cur.name, a.step)
			if a.afterHeal {
				require.ErrorIs(t, a.err, checkpoint.ErrLocked, "%s's save of step %d after the takeover", cur.name, a.step)
				learned++
			}
		}

		// Every visible checkpoint is an acknowledged one, as saved.
		infos, err := r.List(ctx)
		require.NoError(t, err)
		require.Len(t, infos, len(acked), "a reader lists a checkpoint nobody acknowledged")
		for _, in := range infos {
			got, _, err := r.LoadExact(ctx, in)
			require.NoError(t, err)
			require.Equal(t, acked[in.Step], got, "step %d", in.Step)
		}
		got, info, err = r.Latest(ctx)
		require.NoError(t, err)
		require.Equal(t, acked[step], got, "Latest is the new holder's")
		require.GreaterOrEqual(t, info.Step, latest, "Latest went backwards")
		latest = info.Step

		// The stale writer's late objects are on the server, hidden; the
		// new holder saves over their names.
		out, err := f.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &f.bucket, Prefix: aws.String("run/step_")})
		require.NoError(t, err)
		var late []int64
		for _, o := range out.Contents {
			if s, ok := stepOf(aws.ToString(o.Key)); ok {
				if _, visible := acked[s]; !visible {
					late = append(late, s)
				}
			}
		}
		sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
		lateHidden += len(late)
		for _, s := range late {
			for step < s {
				step++
				acked[step] = state{Writer: next.name, Step: step}
				next.saveAcked(t, acked[step])
			}
		}
		if len(late) > 0 {
			_, info, err := r.Latest(ctx)
			require.NoError(t, err)
			require.Equal(t, step, info.Step)
			latest = info.Step
		}
		if err := cur.s.Close(); err != nil {
			require.ErrorIs(t, err, checkpoint.ErrLocked, "%s's close", cur.name)
		}
		cur.proxy.Close()
		cur = next
	}
	require.NoError(t, cur.s.Close())
	infos, err := r.List(ctx)
	require.NoError(t, err)
	require.Len(t, infos, len(acked))
	for _, in := range infos {
		got, _, err := r.LoadExact(ctx, in)
		require.NoError(t, err)
		require.Equal(t, acked[in.Step], got, "step %d", in.Step)
	}
	require.Positive(t, lateLanded, "no late write landed: the test proved nothing about fencing")
	t.Logf("%d takeovers of a writer cut off past its lease: %d requests cut off, %d late checkpoint PUTs landed (%d objects hidden, then saved over by the new holder), %d stale saves got ErrLocked after the network came back; %d saves acknowledged, lost 0",
		rounds, cutOff, lateLanded, lateHidden, learned, len(acked))
}

// script is a Rule that gives the requests of method to each key suffix
// the faults listed for it, one per attempt, in order (then Pass).
func script(method string, plan map[string][]fp.Fault) fp.Rule {
	var mu sync.Mutex
	return func(r fp.Request) fp.Fault {
		mu.Lock()
		defer mu.Unlock()
		for suffix, faults := range plan {
			if r.Method == method && strings.HasSuffix(r.Path, suffix) && len(faults) > 0 {
				plan[suffix] = faults[1:]
				return faults[0]
			}
		}
		return fp.Pass
	}
}

// A save whose PUT the server applied while the client saw it fail (its
// answer dropped, stalled past the client's timeout or cut short), after
// which the SDK's retry is refused (412: the name is taken, by that very
// write) or fails (500, 503 SlowDown) until the SDK gives up, returns nil:
// the write is recognised as the writer's own, not ErrExists, not an
// error after which a save of the step again is ErrExists. A save whose
// attempts were all cut mid-body fails and leaves nothing, so the step
// saves again. No step is skipped: the reader lists exactly the steps
// saved, each as saved.
func TestAnAmbiguousSaveThatLandedIsTheWritersOwn(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	cases := [][]fp.Fault{
		{fp.Drop},
		{fp.Stall},
		{fp.Truncate},
		{fp.Drop, fp.Error500, fp.Error500},
		{fp.Stall, fp.SlowDown, fp.SlowDown},
		{fp.Error500, fp.Drop, fp.Reset},
		{fp.Reset, fp.Drop, fp.Drop},
		{fp.Reset, fp.SlowDown},
	}
	plan := map[string][]fp.Fault{}
	for i, c := range cases {
		plan[fmt.Sprintf("/run/step_%08d.json", i+2)] = c
	}
	// Cut mid-body at every attempt: not applied, the Save fails.
	cutStep := int64(len(cases) + 2)
	plan[fmt.Sprintf("/run/step_%08d.json", cutStep)] = []fp.Fault{fp.Reset, fp.Reset, fp.Reset}
	p, client := f.faultyClient(t, script(http.MethodPut, plan), slowAttemptTimeout)
	b, err := New(client, f.bucket, "run", LeaseTTL(testTTL))
	require.NoError(t, err)
	w, err := checkpoint.OpenBackend[state](b)
	require.NoError(t, err)
	defer w.Close()
	pad := strings.Repeat("p", 16<<10)
	for step := int64(1); step < cutStep; step++ {
		_, err := w.Save(ctx, step, state{Writer: "a", Step: step, Pad: pad})
		require.NoError(t, err, "step %d, faults %v", step, plan)
	}
	_, err = w.Save(ctx, cutStep, state{Writer: "a", Step: cutStep, Pad: pad})
	require.Error(t, err, "every attempt was cut mid-body")
	require.NotErrorIs(t, err, checkpoint.ErrExists)
	_, err = w.Save(ctx, cutStep, state{Writer: "a", Step: cutStep, Pad: pad})
	require.NoError(t, err, "nothing landed: the step saves again")

	r, err := openStore(t, f, "run", checkpoint.ReadOnly())
	require.NoError(t, err)
	defer r.Close()
	infos, err := r.List(ctx)
	require.NoError(t, err)
	require.Len(t, infos, int(cutStep))
	for i, in := range infos {
		require.Equal(t, int64(i+1), in.Step)
		got, _, err := r.LoadExact(ctx, in)
		require.NoError(t, err)
		require.Equal(t, state{Writer: "a", Step: in.Step, Pad: pad}, got)
	}
	for suffix, left := range plan {
		require.Empty(t, left, "%s: faults not used", suffix)
	}
	t.Logf("faults injected: %v", p.Counts())
}

// Latest through a network that fails to give it the newest checkpoint
// (its GET's answer cut short, 500s, stalls past the client's timeout or
// resets until the SDK gives up) returns an error wrapping ErrUnavailable:
// never the step before, as if the newest were not there, and never
// ErrCorrupt. Once the network is back it returns the newest, which was
// left where it was.
func TestLatestNeverGoesBackPastACheckpointItCouldNotRead(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	p, client := f.faultyClient(t, nil, slowAttemptTimeout)
	b, err := New(client, f.bucket, "run", LeaseTTL(testTTL))
	require.NoError(t, err)
	w, err := checkpoint.OpenBackend[state](b)
	require.NoError(t, err)
	defer w.Close()
	for step := int64(1); step <= 3; step++ {
		_, err := w.Save(ctx, step, state{Writer: "a", Step: step})
		require.NoError(t, err)
	}
	for _, faults := range [][]fp.Fault{
		{fp.Truncate},
		{fp.Error500, fp.Error500, fp.Error500},
		{fp.Stall, fp.SlowDown, fp.Stall},
		// More than the SDK's three attempts: Go's transport sends a GET
		// again itself when a reused connection fails before any answer.
		{fp.Drop, fp.Reset, fp.Drop, fp.Reset, fp.Drop, fp.Reset},
	} {
		p.SetRule(script(http.MethodGet, map[string][]fp.Fault{"/run/step_00000003.json": faults}))
		_, info, err := w.Latest(ctx)
		require.ErrorIs(t, err, checkpoint.ErrUnavailable, "faults %v: Latest gave step %d", faults, info.Step)
		require.NotErrorIs(t, err, checkpoint.ErrCorrupt)
		require.Contains(t, err.Error(), "s3://"+f.bucket+"/run/step_00000003.json")
		p.SetRule(nil)
		got, info, err := w.Latest(ctx)
		require.NoError(t, err)
		require.Equal(t, state{Writer: "a", Step: 3}, got)
		require.Equal(t, int64(3), info.Step)
	}

	// The rolling file holds the newest step, 4: its header read cut
	// short leaves its step unknown, and Latest stops rather than return
	// step 3.
	rb, err := New(client, f.bucket, "roll", LeaseTTL(testTTL))
	require.NoError(t, err)
	rw, err := checkpoint.OpenBackend[state](rb, checkpoint.WithRolling(), checkpoint.SaveEvery(3))
	require.NoError(t, err)
	defer rw.Close()
	for step := int64(3); step <= 4; step++ {
		_, saved, err := rw.Tick(ctx, step, state{Writer: "a", Step: step})
		require.NoError(t, err)
		require.True(t, saved)
	}
	r, err := openStore(t, f, "roll", checkpoint.ReadOnly())
	require.NoError(t, err)
	defer r.Close()
	objs, err := rb.List(ctx)
	require.NoError(t, err)
	rolling := ""
	for _, o := range objs {
		if _, ok := stepOf(o.Name); !ok {
			rolling = "/roll/" + o.Name
		}
	}
	require.NotEmpty(t, rolling, "no rolling file among %v", names(objs))
	p.SetRule(func(r fp.Request) fp.Fault {
		if r.Method == http.MethodGet && strings.HasSuffix(r.Path, rolling) {
			return fp.Truncate
		}
		return fp.Pass
	})
	_, info, err := rw.Latest(ctx)
	require.ErrorIs(t, err, checkpoint.ErrUnavailable, "the writer: the rolling file unread, Latest gave step %d", info.Step)
	// A reader through the faults, which must read the rolling file's
	// header to know its step.
	fb, err := New(client, f.bucket, "roll")
	require.NoError(t, err)
	fr, err := checkpoint.OpenBackend[state](fb, checkpoint.ReadOnly())
	require.NoError(t, err)
	defer fr.Close()
	_, info, err = fr.Latest(ctx)
	require.ErrorIs(t, err, checkpoint.ErrUnavailable, "a reader: the rolling file unread, Latest gave step %d", info.Step)
	p.SetRule(nil)
	for _, s := range []*checkpoint.Store[state]{rw, fr, r} {
		_, info, err = s.Latest(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(4), info.Step)
	}
}

// leaseWriteLost is a fault rule for the lease of the store "run": its
// drop-th PUT lands and its answer is lost (the SDK's retry then gets
// 412), and the next three GETs of the lease (the SDK's three attempts of
// the read that tells whose the lease is) answer 500.
type leaseWriteLost struct {
	drop         int
	mu           sync.Mutex
	puts, failed int
}

func (l *leaseWriteLost) rule(r fp.Request) fp.Fault {
	l.mu.Lock()
	defer l.mu.Unlock()
	lease := "/run/" + leaseName
	switch {
	case r.Method == http.MethodPut && strings.HasSuffix(r.Path, lease):
		l.puts++
		if l.puts == l.drop {
			return fp.Drop
		}
	case r.Method == http.MethodGet && strings.HasSuffix(r.Path, lease) && l.puts > l.drop && l.failed < 3:
		l.failed++
		return fp.Error500
	}
	return fp.Pass
}

// counts returns the lease's PUTs so far and the GETs failed.
func (l *leaseWriteLost) counts() (puts, failed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.puts, l.failed
}

// A renewal whose first attempt landed and whose answer was lost gets 412
// on the SDK's retry; if reading the lease to tell whose it is then fails
// too (500s until the SDK gives up), that is no proof of a takeover: the
// writer keeps its lease, renews it, and saves on. (It used to declare the
// lease taken over, and every later save failed with ErrLocked.)
func TestARenewalThatCannotTellWhoseTheLeaseIsKeepsIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	lost := &leaseWriteLost{drop: 2} // the first renewal (the first PUT is the takeover)
	rule := lost.rule
	_, client := f.faultyClient(t, rule, slowAttemptTimeout)
	b, err := New(client, f.bucket, "run", LeaseTTL(testTTL))
	require.NoError(t, err)
	w, err := checkpoint.OpenBackend[state](b)
	require.NoError(t, err)
	defer w.Close()
	for step := int64(1); ; step++ {
		puts, failed := lost.counts()
		done := failed == 3 && puts >= 5 // and two renewals since
		b.mu.Lock()
		lost := b.lease.lost
		b.mu.Unlock()
		require.NoError(t, lost, "the writer declared its lease taken over")
		if done {
			break
		}
		require.Less(t, step, int64(200), "no renewal after the failed read")
		_, err := w.Save(ctx, step, state{Writer: "a", Step: step})
		require.NoError(t, err, "step %d", step)
		time.Sleep(testTTL / 20) // pacing saves while the renewal timer runs
	}
}

// A request whose every attempt times out (the server never answers in
// time) fails with an error wrapping ErrUnavailable, whatever the call:
// not a bare deadline that reads as the caller's own, and never
// fs.ErrNotExist. Once the server answers again, so does the backend.
func TestEveryCallWhoseAttemptsTimeOutIsUnavailable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	p, client := f.faultyClient(t, nil, attemptTimeout)
	b, err := New(client, f.bucket, "run")
	require.NoError(t, err)
	defer b.Close()
	_, err = b.Create(ctx, "a.json", func(w io.Writer) error { _, err := w.Write([]byte("{}")); return err })
	require.NoError(t, err)
	calls := []struct {
		name string
		call func() error
	}{
		{"Stat", func() error { _, err := b.Stat(ctx, "a.json"); return err }},
		{"List", func() error { _, err := b.List(ctx); return err }},
		{"Children", func() error { _, err := b.Children(ctx); return err }},
		{"Open", func() error {
			rc, _, err := b.Open(ctx, "a.json")
			if err == nil {
				rc.Close()
			}
			return err
		}},
		{"Remove", func() error { _, err := b.Remove(ctx, "missing.json"); return err }},
	}
	for _, c := range calls {
		p.SetRule(func(fp.Request) fp.Fault { return fp.Stall })
		err := c.call()
		require.ErrorIs(t, err, checkpoint.ErrUnavailable, c.name)
		require.NotErrorIs(t, err, fs.ErrNotExist, c.name)
		require.Contains(t, err.Error(), "s3://"+f.bucket+"/run", c.name)
		p.SetRule(nil)
		require.NoError(t, c.call(), "%s, the server answering again", c.name)
	}
}

// A takeover whose first PUT landed and whose answer was lost gets 412 on
// the SDK's retry; if reading the lease to tell whose it is then fails too
// (500s until the SDK gives up), Lock cannot tell whether it holds the
// lease: it fails with ErrUnavailable, not ErrLocked (no other writer was
// ever there). The lease it may have written is renewed by nobody and
// expires: a later Lock takes it.
func TestATakeoverThatCannotTellWhoseTheLeaseIsIsUnavailable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	lost := &leaseWriteLost{drop: 1} // the takeover
	rule := lost.rule
	_, client := f.faultyClient(t, rule, slowAttemptTimeout)
	b, err := New(client, f.bucket, "run", LeaseTTL(testTTL))
	require.NoError(t, err)
	defer b.Close()
	_, err = b.Lock(ctx)
	require.ErrorIs(t, err, checkpoint.ErrUnavailable)
	require.NotErrorIs(t, err, checkpoint.ErrLocked)
	require.Contains(t, err.Error(), "s3://"+f.bucket+"/run/"+leaseName)
	_, failed := lost.counts()
	require.Equal(t, 3, failed)

	w, err := checkpoint.OpenBackend[state](f.backend("run", LeaseTTL(testTTL)), checkpoint.WaitLock(10*testTTL))
	require.NoError(t, err, "the lease nobody renews expires")
	_, err = w.Save(ctx, 1, state{Writer: "b", Step: 1})
	require.NoError(t, err)
	require.NoError(t, w.Close())
}
