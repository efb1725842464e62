// Command checkpoint-bench-s3 measures the checkpoint package on S3
// through s3store and prints one table: Save against a hand-written
// PutObject of the state's JSON, the requests a Save sends, Latest and List
// of stores of 1,000 and 10,000 checkpoints (requests by kind, and time,
// for a process that opens the store and for one that has it open), the
// lease's cost: taking it, releasing it, and its renewals per save;
// and checkpoint.Copy (checkpoint cp) of a local store of 10,000
// checkpoints to S3, in checkpoints per second, at several concurrencies.
//
//	go run ./cmd/checkpoint-bench-s3                  # starts versitygw on 127.0.0.1
//	go run ./cmd/checkpoint-bench-s3 -endpoint http://127.0.0.1:7070 -bucket bench
//
// Without -endpoint it starts versitygw (go install
// github.com/versity/versitygw/cmd/versitygw@v1.8.0) on a free loopback
// port over a temporary directory, or uses the server .ci/s3-test names
// (CHECKPOINT_S3_ENDPOINT). With -endpoint, credentials and region come
// from the standard AWS environment (AWS_ACCESS_KEY_ID, ...), and the
// bucket is created if missing; the run writes under a fresh prefix and
// removes what it wrote unless -keep.
//
// It lives in the s3store module, not in cmd/checkpoint-bench, because
// the core module does not depend on the AWS SDK. As there, each
// comparison interleaves its two sides in rounds and reports medians, and
// the load average is printed before and after: the machine's other work
// shows in the times, not in the request counts.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/internal/benchkit"
	"github.com/gocheckpoint/checkpoint/s3store"
	"github.com/gocheckpoint/checkpoint/s3store/internal/s3test"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "checkpoint-bench-s3:", err)
		os.Exit(1)
	}
}

// settings are the sizes and counts of a run.
type settings struct {
	sizes            []int // state sizes of the Save rows, in bytes of JSON
	stores           []int // checkpoints in the Latest and List stores
	rounds, perRound int   // interleaved comparisons
	samples          int   // opens, Latests and Lists, for a median
	copy             int   // checkpoints of the store checkpoint.Copy copies
	copyJobs         []int // the CopyConcurrency of each copy
	// slowCopy checkpoints are copied again with copyDelay added to every
	// request, at each of slowJobs.
	slowCopy  int
	copyDelay time.Duration
	slowJobs  []int
}

var (
	full  = settings{sizes: []int{10 << 10, 100 << 10}, stores: []int{1000, 10000}, rounds: 21, perRound: 10, samples: 5, copy: 10000, copyJobs: []int{1, 4, checkpoint.DefaultCopyConcurrency, 16}, slowCopy: 1000, copyDelay: 20 * time.Millisecond, slowJobs: []int{1, 4, checkpoint.DefaultCopyConcurrency, 16}}
	quick = settings{sizes: []int{2 << 10}, stores: []int{20, 50}, rounds: 2, perRound: 2, samples: 2, copy: 30, copyJobs: []int{1, checkpoint.DefaultCopyConcurrency}, slowCopy: 30, copyDelay: time.Millisecond, slowJobs: []int{checkpoint.DefaultCopyConcurrency}}
)

// section is one part of the measurements, which -only names.
type section struct {
	name string
	run  func() ([]row, error)
}

// sectionNames are the names of the sections, in order.
var sectionNames = []string{"saves", "lease", "stores", "cp"}

// row is one line of the table.
type row struct{ what, result, requests, against, ratio, target, met string }

type bench struct {
	cfg    settings
	ctx    context.Context
	bucket string
	prefix string // of this run: every store is under it
	// ours and theirs count the requests of the store's client and of the
	// hand-written baseline's.
	ours, theirs           *counter
	ourClient, theirClient *s3.Client
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("checkpoint-bench-s3", flag.ContinueOnError)
	fs.SetOutput(out)
	endpoint := fs.String("endpoint", "", "the S3 `URL` to measure (default: start versitygw on loopback); credentials from the AWS environment")
	bucket := fs.String("bucket", "", "the `BUCKET` to write in (default: a new one); created if missing")
	quickFlag := fs.Bool("quick", false, "tiny sizes and counts: checks that the command works, measures nothing")
	keep := fs.Bool("keep", false, "keep the objects written")
	only := fs.String("only", "", "run only the measurements of `SECTION`: saves, lease, stores or cp")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *only != "" && !slices.Contains(sectionNames, *only) {
		return fmt.Errorf("-only %q: want one of %s", *only, strings.Join(sectionNames, ", "))
	}
	cfg := full
	if *quickFlag {
		cfg = quick
	}
	ctx := context.Background()
	b := &bench{cfg: cfg, ctx: ctx, ours: newCounter(), theirs: newCounter(), prefix: fmt.Sprintf("bench-%d", time.Now().UnixNano())}
	var server string
	if *endpoint == "" {
		startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		srv, err := s3test.Start(startCtx)
		cancel()
		if err != nil {
			return fmt.Errorf("%w (install versitygw with %s, or give -endpoint)", err, s3test.InstallCmd)
		}
		defer srv.Close()
		b.ourClient, b.theirClient = srv.Client(b.ours), srv.Client(b.theirs)
		server = "versitygw at " + srv.Endpoint
		if !srv.Started {
			server = srv.Endpoint + " (from " + s3test.EnvEndpoint + ")"
		}
	} else {
		awsCfg, err := config.LoadDefaultConfig(ctx)
		if err != nil {
			return err
		}
		if awsCfg.Region == "" {
			awsCfg.Region = "us-east-1"
		}
		client := func(c *counter) *s3.Client {
			return s3.NewFromConfig(awsCfg, func(o *s3.Options) {
				o.BaseEndpoint, o.UsePathStyle = endpoint, true
				o.HTTPClient = &http.Client{Transport: c}
			})
		}
		b.ourClient, b.theirClient = client(b.ours), client(b.theirs)
		server = *endpoint
	}
	b.bucket = *bucket
	if b.bucket == "" {
		name, err := s3test.NewBucket(ctx, b.theirClient, "checkpoint-bench")
		if err != nil {
			return err
		}
		b.bucket = name
		if !*keep {
			defer s3test.RemoveBucket(ctx, b.theirClient, name)
		}
	} else if _, err := b.theirClient.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &b.bucket}); err != nil {
		if _, err := b.theirClient.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &b.bucket}); err != nil {
			return fmt.Errorf("create bucket %s: %w", b.bucket, err)
		}
	}
	if *bucket != "" && !*keep {
		defer b.removePrefix()
	}

	started := time.Now()
	fmt.Fprintf(out, "# checkpoint-bench-s3, %s\n\n", started.UTC().Format(time.RFC3339))
	fmt.Fprintf(out, "- command: `checkpoint-bench-s3 %s`\n", strings.Join(args, " "))
	fmt.Fprintf(out, "- machine: %s\n", machine())
	fmt.Fprintf(out, "- server: %s, bucket %s, prefix %s/\n", server, b.bucket, b.prefix)
	fmt.Fprintf(out, "- load average before: %s\n\n", loadAverage())

	sections := []section{{"saves", b.saves}, {"lease", b.lease}, {"stores", b.bigStores}, {"cp", b.copies}}
	var rows []row
	for _, section := range sections {
		if *only != "" && section.name != *only {
			continue
		}
		rs, err := section.run()
		if err != nil {
			return err
		}
		rows = append(rows, rs...)
	}
	fmt.Fprintln(out, "Times are medians; requests are counted by an http.RoundTripper on the store's client, per save for the Save rows, else those of the row's first run (later runs may find what it cached or sealed).")
	fmt.Fprintln(out)
	fmt.Fprintln(out, "| measurement | result | requests | compared with | ratio | target | met |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Fprintf(out, "| %s | %s | %s | %s | %s | %s | %s |\n", r.what, r.result, r.requests, r.against, r.ratio, r.target, r.met)
	}
	fmt.Fprintf(out, "\nload average after: %s; run took %s\n", loadAverage(), time.Since(started).Round(time.Second))
	return nil
}

// open opens the store at prefix name of this run, through the counted
// client.
func (b *bench) open(name string, opts ...checkpoint.Option) (*checkpoint.Store[State], error) {
	be, err := s3store.New(b.ourClient, b.bucket, b.prefix+"/"+name)
	if err != nil {
		return nil, err
	}
	return checkpoint.OpenBackend[State](be, opts...)
}

// saves compares Save with the hand-written PutObject of the same state's
// JSON, and counts the requests a Save sends.
func (b *bench) saves() ([]row, error) {
	var rows []row
	for _, size := range b.cfg.sizes {
		state := newState(size)
		st, err := b.open(fmt.Sprintf("save-%d", size))
		if err != nil {
			return nil, err
		}
		b.ours.take()
		saves := 0
		ours := func(i int) error {
			saves++
			_, err := st.Save(b.ctx, int64(i), state)
			return err
		}
		key := b.prefix + fmt.Sprintf("/baseline-%d/state_%08d.json", size, 0)
		theirs := func(i int) error {
			data, err := json.Marshal(state)
			if err != nil {
				return err
			}
			k := key[:len(key)-len("00000000.json")] + fmt.Sprintf("%08d.json", i)
			_, err = b.theirClient.PutObject(b.ctx, &s3.PutObjectInput{Bucket: &b.bucket, Key: &k, Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data)))})
			return err
		}
		ds, err := compare(b.cfg.rounds, b.cfg.perRound, ours, theirs)
		if err != nil {
			st.Close()
			return nil, err
		}
		n := b.ours.take()
		if err := st.Close(); err != nil {
			return nil, err
		}
		r := ratio(ds[0], ds[1])
		rows = append(rows, row{
			what:     fmt.Sprintf("Save, plain, %s state", sizeName(size)),
			result:   dur(ds[0]),
			requests: perSave(n.without("lease"), saves),
			against:  "hand-written json.Marshal + PutObject: " + dur(ds[1]),
			ratio:    fmt.Sprintf("%.3f", r),
			target:   "≤ 1.10",
			met:      yesNo(r <= 1.10),
		})
	}
	return rows, nil
}

// lease measures taking the lease (a writer's OpenBackend), releasing it
// (Close), and renewing it while saves go on.
func (b *bench) lease() ([]row, error) {
	var opens, closes []time.Duration
	var openReq, closeReq counts
	for i := 0; i < b.cfg.samples; i++ {
		b.ours.take()
		start := time.Now()
		st, err := b.open("lease")
		if err != nil {
			return nil, err
		}
		opens = append(opens, time.Since(start))
		openReq = b.ours.take()
		start = time.Now()
		if err := st.Close(); err != nil {
			return nil, err
		}
		closes = append(closes, time.Since(start))
		closeReq = b.ours.take()
	}
	// Renewals: a short TTL renews every second; saves go on meanwhile.
	const ttl = 3 * time.Second
	be, err := s3store.New(b.ourClient, b.bucket, b.prefix+"/renew", s3store.LeaseTTL(ttl))
	if err != nil {
		return nil, err
	}
	st, err := checkpoint.OpenBackend[State](be)
	if err != nil {
		return nil, err
	}
	state := newState(b.cfg.sizes[0])
	b.ours.take()
	saves, start := 0, time.Now()
	window := 4 * ttl
	if b.cfg.rounds < 5 {
		window = ttl / 2
	}
	for time.Since(start) < window {
		saves++
		if _, err := st.Save(b.ctx, int64(saves), state); err != nil {
			st.Close()
			return nil, err
		}
	}
	elapsed := time.Since(start)
	n := b.ours.take()
	if err := st.Close(); err != nil {
		return nil, err
	}
	renewals := n.count("PUT lease")
	per := "-"
	if renewals > 0 {
		per = dur(n.time("PUT lease") / time.Duration(renewals))
	}
	return []row{
		{what: "take the lease (a writer's OpenBackend, lease free)", result: medianOf(opens), requests: openReq.String(), against: "-", ratio: "-", target: "-", met: "-"},
		{what: "release the lease (Close)", result: medianOf(closes), requests: closeReq.String(), against: "-", ratio: "-", target: "-", met: "-"},
		{
			what:     fmt.Sprintf("lease renewals while saving, LeaseTTL(%s): one every TTL/3", ttl),
			result:   fmt.Sprintf("%d renewals of %s each in %s, beside %d saves", renewals, per, elapsed.Round(100*time.Millisecond), saves),
			requests: fmt.Sprintf("%.4f lease requests per save; at the default TTL (%s) one per %s", float64(renewals)/float64(saves), s3store.DefaultLeaseTTL, s3store.DefaultLeaseTTL/3),
			against:  "-", ratio: "-", target: "-", met: "-",
		},
	}, nil
}

// bigStores measures Latest and List on stores of many checkpoints: by a
// writer resuming (OpenBackend takes the lease, then Latest), by a process
// that opens the store ReadOnly (a reader, the checkpoint tool), and by
// one that has it open already. The writer that fills the store is closed
// while they run, so its lease renewals are not counted.
func (b *bench) bigStores() ([]row, error) {
	var rows []row
	state := newState(200)
	written := 0
	for _, n := range b.cfg.stores {
		st, err := b.open("big", checkpoint.NoSync())
		if err != nil {
			return nil, err
		}
		for ; written < n; written++ {
			if _, err := st.Save(b.ctx, int64(written+1), state); err != nil {
				st.Close()
				return nil, err
			}
		}
		if err := st.Close(); err != nil {
			return nil, err
		}
		rs, err := b.readRows(n)
		if err != nil {
			return nil, err
		}
		rows = append(rows, rs...)
	}
	return rows, nil
}

// readRows measures the store "big" of n checkpoints, whose writer has
// closed it (released its lease): by a reader that opens it, by a writer
// that resumes it, and by a reader after that takeover. (A reader HEADs an
// object to learn its generation only if the lease does not list it: one
// its writer wrote since its last renewal; see s3store's Costs.)
func (b *bench) readRows(n int) ([]row, error) {
	samples := b.cfg.samples
	if n > 1000 {
		samples = 1 // a List just opened is minutes at 10,000
	}
	latest := func(st *checkpoint.Store[State]) error {
		_, info, err := st.Latest(b.ctx)
		if err == nil && info.Step != int64(n) {
			err = fmt.Errorf("latest returned step %d of %d", info.Step, n)
		}
		return err
	}
	list := func(st *checkpoint.Store[State]) error {
		infos, err := st.List(b.ctx)
		if err == nil && len(infos) != n {
			err = fmt.Errorf("list returned %d checkpoints of %d", len(infos), n)
		}
		return err
	}
	// measure opens the store with opts and calls call on it (cold), then
	// again (warm), samples times.
	measure := func(opts []checkpoint.Option, call func(*checkpoint.Store[State]) error) (cold, warm []time.Duration, coldReq, warmReq counts, err error) {
		for i := 0; i < samples; i++ {
			b.ours.take()
			start := time.Now()
			st, err := b.open("big", opts...)
			if err != nil {
				return nil, nil, nil, nil, err
			}
			err = call(st)
			cold = append(cold, time.Since(start))
			if req := b.ours.take(); i == 0 {
				coldReq = req // the first: later ones may find what it cached or sealed
			}
			if err == nil {
				start = time.Now()
				err = call(st)
				warm = append(warm, time.Since(start))
				if req := b.ours.take(); i == 0 {
					warmReq = req
				}
			}
			if cerr := st.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return nil, nil, nil, nil, err
			}
		}
		return cold, warm, coldReq, warmReq, nil
	}
	var rows []row
	add := func(what string, ds []time.Duration, req counts) {
		rows = append(rows, row{what: what, result: medianOf(ds), requests: req.String(), against: "-", ratio: "-", target: "-", met: "-"})
	}
	readOnly := []checkpoint.Option{checkpoint.ReadOnly()}
	reads := []struct {
		name string
		call func(*checkpoint.Store[State]) error
	}{{"Latest", latest}, {"List", list}}
	for _, m := range reads {
		cold, warm, coldReq, warmReq, err := measure(readOnly, m.call)
		if err != nil {
			return nil, err
		}
		add(fmt.Sprintf("%s, %d checkpoints, reader just opened (ReadOnly)", m.name, n), cold, coldReq)
		add(fmt.Sprintf("%s again, %d checkpoints, same reader", m.name, n), warm, warmReq)
	}
	// A writer resuming: OpenBackend takes the lease over (sealing every
	// object in it), then Latest.
	resume, warm, resumeReq, warmReq, err := measure(nil, latest)
	if err != nil {
		return nil, err
	}
	add(fmt.Sprintf("resume: a writer's OpenBackend (takes the lease) + Latest, %d checkpoints", n), resume, resumeReq)
	add(fmt.Sprintf("Latest again, %d checkpoints, same writer", n), warm, warmReq)
	for _, m := range reads {
		cold, _, coldReq, _, err := measure(readOnly, m.call)
		if err != nil {
			return nil, err
		}
		add(fmt.Sprintf("%s, %d checkpoints, reader just opened (ReadOnly), after a takeover", m.name, n), cold, coldReq)
	}
	return rows, nil
}

// copies measures checkpoint.Copy (checkpoint cp) of a local store of
// b.cfg.copy checkpoints to S3, once for each concurrency: checkpoints per
// second, and the requests the copy sends (one PUT per checkpoint, the
// lease's, one LIST of the destination); then of a smaller store with a
// round trip's delay added to each request, where concurrency pays.
func (b *bench) copies() ([]row, error) {
	dir, err := os.MkdirTemp("", "checkpoint-bench-cp-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	st, err := checkpoint.Open[State](dir, checkpoint.NoSync())
	if err != nil {
		return nil, err
	}
	state := newState(200)
	for i := 1; i <= b.cfg.copy; i++ {
		if _, err := st.Save(b.ctx, int64(i), state); err != nil {
			st.Close()
			return nil, err
		}
	}
	if err := st.Close(); err != nil {
		return nil, err
	}
	var rows []row
	copyOnce := func(name string, n, jobs int) (time.Duration, counts, error) {
		src, err := dirstore.Open(dir, dirstore.ReadOnly())
		if err != nil {
			return 0, nil, err
		}
		defer src.Close()
		dst, err := s3store.New(b.ourClient, b.bucket, b.prefix+"/"+name)
		if err != nil {
			return 0, nil, err
		}
		defer dst.Close()
		b.ours.take()
		start := time.Now()
		res, err := checkpoint.Copy(b.ctx, dst, src, checkpoint.CopyConcurrency(jobs))
		took := time.Since(start)
		req := b.ours.take()
		if err == nil && res.Copied != n {
			err = fmt.Errorf("copied %d checkpoints of %d", res.Copied, n)
		}
		return took, req, err
	}
	perSecond := func(n int, took time.Duration) string {
		return fmt.Sprintf("%.0f checkpoints/s (%s)", float64(n)/took.Seconds(), took.Round(10*time.Millisecond))
	}
	for _, jobs := range b.cfg.copyJobs {
		took, req, err := copyOnce(fmt.Sprintf("cp-j%d", jobs), b.cfg.copy, jobs)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row{
			what:   fmt.Sprintf("cp (checkpoint.Copy) of %d checkpoints, directory to S3, %d at once", b.cfg.copy, jobs),
			result: perSecond(b.cfg.copy, took), requests: req.String(), against: "-", ratio: "-", target: "-", met: "-",
		})
	}
	// As on a network, which loopback is not: a store of slowCopy
	// checkpoints copied with copyDelay added before every request.
	if b.cfg.slowCopy > 0 {
		small, err := os.MkdirTemp("", "checkpoint-bench-cp-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(small)
		st, err := checkpoint.Open[State](small, checkpoint.NoSync())
		if err != nil {
			return nil, err
		}
		for i := 1; i <= b.cfg.slowCopy; i++ {
			if _, err := st.Save(b.ctx, int64(i), state); err != nil {
				st.Close()
				return nil, err
			}
		}
		if err := st.Close(); err != nil {
			return nil, err
		}
		dir = small
		b.ours.mu.Lock()
		b.ours.delay = b.cfg.copyDelay
		b.ours.mu.Unlock()
		defer func() {
			b.ours.mu.Lock()
			b.ours.delay = 0
			b.ours.mu.Unlock()
		}()
		for _, jobs := range b.cfg.slowJobs {
			took, req, err := copyOnce(fmt.Sprintf("cp-slow-j%d", jobs), b.cfg.slowCopy, jobs)
			if err != nil {
				return nil, err
			}
			rows = append(rows, row{
				what:   fmt.Sprintf("cp (checkpoint.Copy) of %d checkpoints, directory to S3, %d at once, %s added to each request (a network's round trip)", b.cfg.slowCopy, jobs, b.cfg.copyDelay),
				result: perSecond(b.cfg.slowCopy, took), requests: req.String(), against: "-", ratio: "-", target: "-", met: "-",
			})
		}
	}
	return rows, nil
}

func (b *bench) removePrefix() {
	p := s3.NewListObjectsV2Paginator(b.theirClient, &s3.ListObjectsV2Input{Bucket: &b.bucket, Prefix: aws.String(b.prefix + "/")})
	for p.HasMorePages() {
		page, err := p.NextPage(b.ctx)
		if err != nil {
			return
		}
		var ids []types.ObjectIdentifier
		for _, o := range page.Contents {
			ids = append(ids, types.ObjectIdentifier{Key: o.Key})
		}
		if len(ids) > 0 {
			_, _ = b.theirClient.DeleteObjects(b.ctx, &s3.DeleteObjectsInput{Bucket: &b.bucket, Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)}})
		}
	}
}

// State is the benchmark's state: agents with a memory drawn from a small
// vocabulary, so that it looks like real agent state.
type State struct {
	Turn   int64   `json:"turn"`
	Agents []Agent `json:"agents"`
}

// Agent is one member of a State.
type Agent struct {
	Name   string   `json:"name"`
	HP     int      `json:"hp"`
	Memory []string `json:"memory"`
}

var words = strings.Fields(`the a north south river tower crypt market gate goblin dragon
	merchant guard healer scout thief king village forest saw met traded fought fled found
	lost built heard gold rope torch sword map key potion letter quickly again before after`)

// newState returns a state whose JSON is about size bytes.
func newState(size int) State {
	r := rand.New(rand.NewPCG(1, uint64(size)))
	s := State{Turn: 1}
	for n := 0; n < size; {
		a := Agent{Name: fmt.Sprintf("agent-%04d", len(s.Agents)), HP: r.IntN(100)}
		for k := 0; k < 4; k++ {
			var sb strings.Builder
			for w := 0; w < 8; w++ {
				sb.WriteString(words[r.IntN(len(words))])
				sb.WriteByte(' ')
			}
			a.Memory = append(a.Memory, strings.TrimSpace(sb.String()))
		}
		data, _ := json.Marshal(a)
		n += len(data) + 1
		s.Agents = append(s.Agents, a)
	}
	return s
}

func sizeName(n int) string {
	if n >= 1<<10 {
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// counter is an http.RoundTripper that counts requests by kind (LIST, GET,
// HEAD, PUT, DELETE, with " lease" for the lease object) and adds up
// their times.
type counter struct {
	rt    http.RoundTripper
	mu    sync.Mutex
	c     counts
	delay time.Duration // added before each request: a network's round trip
}

type counts map[string]struct {
	n int
	d time.Duration
}

func newCounter() *counter {
	t := http.DefaultTransport.(*http.Transport).Clone()
	// Enough idle connections for a copy's concurrent PUTs to reuse
	// theirs (the default keeps 2 per host: the rest reconnect).
	t.MaxIdleConnsPerHost = 64
	return &counter{rt: t, c: counts{}}
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	kind := r.Method
	switch {
	case r.Method == http.MethodGet && r.URL.Query().Has("list-type"):
		kind = "LIST"
	case r.Method == http.MethodPost && r.URL.Query().Has("delete"):
		kind = "DELETE many"
	case strings.HasSuffix(r.URL.Path, "/.checkpoint.lease"):
		kind += " lease"
	}
	c.mu.Lock()
	delay := c.delay
	c.mu.Unlock()
	start := time.Now()
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return nil, r.Context().Err()
		}
	}
	resp, err := c.rt.RoundTrip(r)
	d := time.Since(start)
	c.mu.Lock()
	e := c.c[kind]
	e.n++
	e.d += d
	c.c[kind] = e
	c.mu.Unlock()
	return resp, err
}

// take returns the counts so far and starts again.
func (c *counter) take() counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.c
	c.c = counts{}
	return n
}

func (n counts) count(kind string) int          { return n[kind].n }
func (n counts) time(kind string) time.Duration { return n[kind].d }

// without returns the counts but those whose kind contains word.
func (n counts) without(word string) counts {
	out := counts{}
	for k, v := range n {
		if !strings.Contains(k, word) {
			out[k] = v
		}
	}
	return out
}

// String lists the counts, "1 LIST, 2 GET lease", or "none".
func (n counts) String() string {
	var parts []string
	for _, k := range slices.Sorted(mapKeys(n)) {
		parts = append(parts, fmt.Sprintf("%d %s", n[k].n, k))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func mapKeys(n counts) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range n {
			if !yield(k) {
				return
			}
		}
	}
}

func perSave(n counts, saves int) string {
	var parts []string
	for _, k := range slices.Sorted(mapKeys(n)) {
		parts = append(parts, fmt.Sprintf("%.2f %s", float64(n[k].n)/float64(saves), k))
	}
	return strings.Join(parts, ", ") + " per save"
}

// medianOf formats the median of ds, saying of how many.
func medianOf(ds []time.Duration) string {
	if len(ds) == 1 {
		return dur(ds[0]) + " (1 run)"
	}
	return fmt.Sprintf("%s (median of %d)", dur(median(ds)), len(ds))
}

var (
	compare     = benchkit.Compare
	median      = benchkit.Median
	machine     = benchkit.Machine
	loadAverage = benchkit.LoadAverage
	dur         = benchkit.Duration
)

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}
