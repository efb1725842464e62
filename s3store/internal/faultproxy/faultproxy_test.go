package faultproxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// upstream is a server that records the bodies of the PUTs it received
// whole, as a server that applies them.
type upstream struct {
	mu      sync.Mutex
	applied []string
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil || int64(len(body)) != r.ContentLength {
		return // cut short: not applied
	}
	u.mu.Lock()
	u.applied = append(u.applied, r.Host+" "+string(body))
	u.mu.Unlock()
	_, _ = io.WriteString(w, "answer:"+string(body))
}

func (u *upstream) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.applied)
}

func start(t *testing.T, rule Rule) (*Proxy, *upstream) {
	t.Helper()
	u := &upstream{}
	srv := httptest.NewServer(u)
	t.Cleanup(srv.Close)
	p, err := Start(srv.URL, rule)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return p, u
}

func put(p *Proxy, body string, timeout time.Duration) (*http.Response, string, error) {
	c := &http.Client{Timeout: timeout, Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodPut, p.URL()+"/bucket/key", strings.NewReader(body))
	resp, err := c.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp, string(data), err
}

// Each fault does what its doc says: whether the server applies the
// request, and what the client sees.
func TestEachFaultAppliesOrNotAndTheClientSeesIt(t *testing.T) {
	t.Parallel()
	body := strings.Repeat("x", 1000)
	for _, tc := range []struct {
		fault   Fault
		applied bool
		status  int // 0: the client gets an error
	}{
		{Pass, true, 200},
		{Reset, false, 0},
		{Error500, false, 500},
		{SlowDown, false, 503},
		{Stall, true, 0},
		{Drop, true, 0},
		{Truncate, true, 0},
	} {
		t.Run(tc.fault.String(), func(t *testing.T) {
			t.Parallel()
			p, u := start(t, func(Request) Fault { return tc.fault })
			timeout := 10 * time.Second // an answer comes, or the connection breaks
			if tc.fault == Stall {
				timeout = 300 * time.Millisecond // until the client gives up
			}
			resp, data, err := put(p, body, timeout)
			if tc.status == 0 {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
				require.Equal(t, tc.status, resp.StatusCode)
				if tc.status == 200 {
					require.Equal(t, "answer:"+body, data)
				} else {
					require.Contains(t, data, "<Code>")
				}
			}
			if tc.applied {
				require.Equal(t, 1, u.count())
				require.Equal(t, strings.TrimPrefix(p.URL(), "http://")+" "+body, u.applied[0], "forwarded as sent, Host included")
			} else {
				require.Zero(t, u.count())
			}
			ev := p.Events()
			require.Len(t, ev, 1)
			require.Equal(t, tc.fault, ev[0].Fault)
			require.Equal(t, map[Fault]int{tc.fault: 1}, p.Counts())
		})
	}
}

// A partition holds every request; Heal(true) delivers them late, after
// their clients gave up, and Heal(false) drops them.
func TestPartitionHoldsRequestsAndHealDeliversThemLate(t *testing.T) {
	t.Parallel()
	for _, deliver := range []bool{true, false} {
		p, u := start(t, nil)
		p.Partition(true)
		_, _, err := put(p, "held", 200*time.Millisecond)
		require.Error(t, err, "a request through a partition gets no answer")
		require.Zero(t, u.count())
		p.Heal(deliver)
		ev := p.Events()
		require.Len(t, ev, 1)
		require.Equal(t, Partitioned, ev[0].Fault)
		if deliver {
			require.Equal(t, 1, u.count(), "delivered late")
			require.True(t, ev[0].Late)
			require.Equal(t, 200, ev[0].Status)
		} else {
			require.Zero(t, u.count())
		}
		resp, _, err := put(p, "after", 10*time.Second)
		require.NoError(t, err, "healed")
		require.Equal(t, 200, resp.StatusCode)
	}
	p, u := start(t, nil)
	p.Partition(false)
	_, _, err := put(p, "refused", 10*time.Second)
	require.Error(t, err, "a refusing partition resets at once")
	require.Zero(t, u.count())
}

// The same seed gives the same schedule; the rate is about the share of
// requests faulted.
func TestRandomIsSeededAndKeepsItsRate(t *testing.T) {
	t.Parallel()
	a, b := Random(7, 0.2, Reset, Drop), Random(7, 0.2, Reset, Drop)
	faulted := 0
	for i := 0; i < 10000; i++ {
		fa, fb := a(Request{}), b(Request{})
		require.Equal(t, fa, fb)
		if fa != Pass {
			faulted++
		}
	}
	require.InDelta(t, 2000, faulted, 200)
	require.Equal(t, Pass, Random(1, 1)(Request{}), "no faults to choose from")
}

// Close ends a stall and a partition at once.
func TestCloseEndsStallsAndPartitions(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{})
	var once sync.Once
	p, _ := start(t, func(Request) Fault {
		once.Do(func() { close(arrived) })
		return Stall
	})
	p.MaxStall = time.Hour
	done := make(chan error, 1)
	go func() { _, _, err := put(p, "stalled", time.Hour); done <- err }()
	<-arrived
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, p.Close())
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("Close left a stalled request hanging")
	}
}
