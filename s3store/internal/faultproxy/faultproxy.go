// Package faultproxy is a loopback HTTP proxy for s3store's tests: it sits
// between an S3 client and a real server and, per request, passes the
// request on or injects one of the faults a network between the two
// causes. A Rule chooses the fault: a seeded random schedule (Random), or
// a function of the request. Partition cuts the client off from the
// server altogether until Heal.
//
// The proxy forwards each request byte for byte, its Host header included,
// so that a request signed for the proxy's address (the client's
// endpoint) verifies at the server. It speaks HTTP/1.1 to both sides,
// which is what an SDK client uses over plain http://.
package faultproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Fault is what the proxy does to one request.
type Fault int

// The faults. Reset, Error500 and SlowDown never apply the request (the
// server does not act on it); Stall, Drop and Truncate forward it whole,
// so the server applies it, and then keep its answer from the client: a
// PUT that landed although the client saw it fail (the ambiguous write).
const (
	// Pass forwards the request and its answer unchanged.
	Pass Fault = iota
	// Reset reads half of the request's body, sends that half on to the
	// server and breaks the upstream request there (the server sees a
	// body cut short, so it must not apply it), then resets the client's
	// connection (TCP RST). A request without a body is reset before it
	// is forwarded.
	Reset
	// Error500 answers 500 InternalError (an S3 XML error body) without
	// forwarding the request.
	Error500
	// SlowDown answers 503 SlowDown (an S3 XML error body) without
	// forwarding the request.
	SlowDown
	// Stall forwards the request, reads the server's whole answer and then
	// holds it until the client hangs up (its timeout), or MaxStall has
	// passed, and only then answers if the client is still there.
	Stall
	// Drop forwards the request, reads the server's whole answer, and
	// resets the client's connection instead of answering.
	Drop
	// Truncate forwards the request and sends the client the answer's
	// status and headers and half of its body, then resets the
	// connection. An answer without a body is dropped as by Drop.
	Truncate
	// Partitioned is a request that arrived while the proxy was
	// partitioned (see Partition). Rules do not return it.
	Partitioned
	numFaults
)

var faultNames = [...]string{"pass", "reset", "500", "503 SlowDown", "stall", "drop answer", "truncate answer", "partitioned"}

func (f Fault) String() string {
	if f >= 0 && int(f) < len(faultNames) {
		return faultNames[f]
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

// Applied reports whether the server receives the request whole under f
// (so that a write lands although the client saw it fail).
func (f Fault) Applied() bool { return f == Pass || f == Stall || f == Drop || f == Truncate }

// Request describes a request to a Rule.
type Request struct {
	Seq    int64  // 1 for the proxy's first request, then 2, 3, ...
	Method string // GET, PUT, HEAD, POST, DELETE
	// Path is the request's path, unescaped: /bucket/key with path-style
	// addressing.
	Path   string
	Query  url.Values
	Header http.Header
	// Size is the request body's length (0 for none, -1 if unknown).
	Size int64
}

// Rule chooses the fault for a request. It is called from the proxy's
// handlers, concurrently: it must be safe for concurrent use.
type Rule func(Request) Fault

// Random returns a Rule that injects a fault into a request with
// probability rate, the fault chosen uniformly from faults, by a
// generator seeded with seed: the same seed gives the same decision for
// the n-th request. (Which request is the n-th depends on timing where a
// client sends several at once.) A fault that does not fit the request
// (Reset of a request without a body, Truncate of an answer that has
// none) is still injected, as described under each Fault.
func Random(seed uint64, rate float64, faults ...Fault) Rule {
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return func(Request) Fault {
		mu.Lock()
		defer mu.Unlock()
		x, i := r.Float64(), r.IntN(max(len(faults), 1))
		if x >= rate || len(faults) == 0 {
			return Pass
		}
		return faults[i]
	}
}

// Event records one request the proxy handled.
type Event struct {
	Request
	Fault Fault
	// Status is the server's answer (0 if the request was not forwarded,
	// or the server gave none).
	Status int
	// Late is set for a request held by a partition and delivered to the
	// server when it healed.
	Late bool
}

// DefaultMaxStall bounds how long Stall holds an answer.
const DefaultMaxStall = 10 * time.Second

// Proxy is a running fault-injecting proxy. Create it with Start; it is
// safe for concurrent use.
type Proxy struct {
	upstream *url.URL
	srv      *http.Server
	ln       net.Listener
	tr       *http.Transport
	seq      atomic.Int64
	closed   chan struct{}
	// MaxStall bounds how long Stall holds an answer (DefaultMaxStall if
	// zero). Set it before the first request.
	MaxStall time.Duration

	mu     sync.Mutex
	rule   Rule
	events []Event
	counts [numFaults]int
	// part is the current partition (nil if none): requests wait on its
	// healed channel.
	part *partition
	held sync.WaitGroup // requests held by a partition, until delivered
}

type partition struct {
	hang    bool
	healed  chan struct{}
	deliver bool // set by Heal before healed is closed
}

// Start starts a proxy to the server at upstream (http://host:port) on
// 127.0.0.1 and a free port, injecting the faults rule chooses (none if
// rule is nil). Close stops it.
func Start(upstream string, rule Rule) (*Proxy, error) {
	u, err := url.Parse(upstream)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("faultproxy: upstream %q is not an http://host:port URL", upstream)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{
		upstream: u,
		ln:       ln,
		closed:   make(chan struct{}),
		rule:     rule,
		// A transport of its own: no environment proxy, no transparent
		// gzip (the client asked for none), HTTP/1.1.
		tr: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second},
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// URL is the proxy's endpoint, http://127.0.0.1:PORT: the client's
// BaseEndpoint.
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

// SetRule replaces the rule (nil: pass everything).
func (p *Proxy) SetRule(rule Rule) {
	p.mu.Lock()
	p.rule = rule
	p.mu.Unlock()
}

// Partition cuts the client off from the server until Heal: with hang,
// every request is read whole and held without an answer (the client sees
// its timeout); without, every request's connection is reset at once.
// Requests the proxy is already forwarding finish as they would.
func (p *Proxy) Partition(hang bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.part == nil {
		p.part = &partition{hang: hang, healed: make(chan struct{})}
	}
}

// Heal ends the partition. With deliver, every request it held is then
// sent to the server, late, whether or not its client is still waiting
// (a network that delivers a stalled packet after the sender gave up);
// without, the held requests are dropped unsent. Heal returns once every
// held request has been delivered or dropped.
func (p *Proxy) Heal(deliver bool) {
	p.mu.Lock()
	part := p.part
	p.part = nil
	if part != nil {
		part.deliver = deliver
		close(part.healed)
	}
	p.mu.Unlock()
	p.held.Wait()
}

// Counts returns how many requests got each fault so far (Pass included).
func (p *Proxy) Counts() map[Fault]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := make(map[Fault]int)
	for f, n := range p.counts {
		if n > 0 {
			m[Fault(f)] = n
		}
	}
	return m
}

// Events returns the requests handled so far, in the order they were
// decided.
func (p *Proxy) Events() []Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Event(nil), p.events...)
}

// Close stops the proxy: it closes the listener and every connection, ends
// stalls and partitions (held requests are dropped), and waits for the
// held requests.
func (p *Proxy) Close() error {
	select {
	case <-p.closed:
		return nil
	default:
	}
	close(p.closed)
	p.Heal(false)
	err := p.srv.Close()
	p.tr.CloseIdleConnections()
	return err
}

// record appends the event of a request and returns its index.
func (p *Proxy) record(e Event) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts[e.Fault]++
	p.events = append(p.events, e)
	return len(p.events) - 1
}

func (p *Proxy) setStatus(i, status int, late bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events[i].Status = status
	p.events[i].Late = late
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req := Request{
		Seq: p.seq.Add(1), Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(),
		Header: r.Header.Clone(), Size: r.ContentLength,
	}
	p.mu.Lock()
	part, rule := p.part, p.rule
	if part != nil && part.hang {
		// Under mu, so that Heal's Wait comes after it.
		p.held.Add(1)
	}
	p.mu.Unlock()
	if part != nil {
		p.partitioned(w, r, req, part)
		return
	}
	f := Pass
	if rule != nil {
		f = rule(req)
	}
	if f < Pass || f >= Partitioned {
		f = Pass
	}
	i := p.record(Event{Request: req, Fault: f})
	switch f {
	case Error500, SlowDown:
		// Read the body first, as a server that answers after the
		// request does, so the client sees the answer, not a broken pipe.
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 64<<20))
	}
	switch f {
	case Error500:
		writeError(w, http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again.")
	case SlowDown:
		writeError(w, http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate.")
	case Reset:
		p.resetMidBody(w, r)
	default:
		resp, err := p.forward(r.Context(), r, r.Body)
		if err != nil {
			reset(w)
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			reset(w)
			return
		}
		p.setStatus(i, resp.StatusCode, false)
		switch f {
		case Pass:
			answer(w, resp, body)
		case Stall:
			p.stall(r.Context())
			answer(w, resp, body)
		case Drop:
			reset(w)
		case Truncate:
			if len(body) < 2 || r.Method == http.MethodHead {
				reset(w)
				return
			}
			copyHeader(w.Header(), resp.Header)
			w.Header().Set("Content-Length", fmt.Sprint(len(body)))
			w.WriteHeader(resp.StatusCode)
			_, _ = w.Write(body[:len(body)/2])
			reset(w)
		}
	}
}

// partitioned handles a request that arrived during the partition part.
func (p *Proxy) partitioned(w http.ResponseWriter, r *http.Request, req Request, part *partition) {
	i := p.record(Event{Request: req, Fault: Partitioned})
	if !part.hang {
		reset(w)
		return
	}
	defer p.held.Done()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		reset(w)
		return
	}
	select {
	case <-part.healed:
	case <-p.closed:
		reset(w)
		return
	}
	if !part.deliver {
		reset(w)
		return
	}
	// Late: sent whatever the client does now, bounded by the proxy's life.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-p.closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	resp, err := p.forward(ctx, r, bytes.NewReader(body))
	if err != nil {
		reset(w)
		return
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	p.setStatus(i, resp.StatusCode, true)
	if err != nil || r.Context().Err() != nil {
		reset(w)
		return
	}
	answer(w, resp, data)
}

// resetMidBody sends half of r's body to the server and breaks the
// upstream request there, then resets the client's connection.
func (p *Proxy) resetMidBody(w http.ResponseWriter, r *http.Request) {
	n := r.ContentLength / 2
	if n <= 0 {
		reset(w)
		return
	}
	part := make([]byte, n)
	if _, err := io.ReadFull(r.Body, part); err != nil {
		reset(w)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	resp, err := p.forward(ctx, r, io.MultiReader(bytes.NewReader(part), errReader{}))
	if err == nil {
		// The server answered before it read the whole body (a refusal
		// of its condition): the request was not applied either way.
		resp.Body.Close()
	}
	reset(w)
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("faultproxy: body cut short") }

// stall waits until the client hangs up, the proxy closes, or MaxStall.
func (p *Proxy) stall(ctx context.Context) {
	d := p.MaxStall
	if d <= 0 {
		d = DefaultMaxStall
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-p.closed:
	case <-t.C:
	}
}

// forward sends r to the server with body, as the client sent it.
func (p *Proxy) forward(ctx context.Context, r *http.Request, body io.Reader) (*http.Response, error) {
	u := *p.upstream
	u.Path, u.RawPath, u.RawQuery = r.URL.Path, r.URL.RawPath, r.URL.RawQuery
	if r.ContentLength == 0 {
		body = http.NoBody
	}
	out, err := http.NewRequestWithContext(ctx, r.Method, u.String(), body)
	if err != nil {
		return nil, err
	}
	out.Header = r.Header.Clone()
	for _, h := range []string{"Connection", "Proxy-Connection", "Keep-Alive", "Te", "Trailer", "Upgrade"} {
		out.Header.Del(h)
	}
	out.Host = r.Host
	out.ContentLength = r.ContentLength
	out.TransferEncoding = r.TransferEncoding
	return p.tr.RoundTrip(out)
}

func copyHeader(dst, src http.Header) {
	for k, v := range src {
		switch strings.ToLower(k) {
		case "connection", "keep-alive", "transfer-encoding", "trailer", "upgrade":
			continue
		}
		dst[k] = append([]string(nil), v...)
	}
}

// answer writes the server's answer resp, whose body was read as body.
func answer(w http.ResponseWriter, resp *http.Response, body []byte) {
	copyHeader(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	body := `<?xml version="1.0" encoding="UTF-8"?>` + "\n" +
		"<Error><Code>" + code + "</Code><Message>" + msg + "</Message><RequestId>faultproxy</RequestId></Error>"
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.Header().Set("Connection", "close")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// reset resets the client's connection (TCP RST), flushing whatever was
// written to w first.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}
