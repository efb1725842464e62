package s3store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/gocheckpoint/checkpoint"
)

// leaseDoc is the lease object's JSON. Generation, Released, Sealed and
// TTLMillis decide things; Holder and Renewed (the holder's wall clock)
// tell people who holds it.
type leaseDoc struct {
	Generation uint64 `json:"generation"`
	Holder     string `json:"holder"`
	// TTLMillis is the holder's LeaseTTL: every contender judges the lease
	// by it (see ttl), whatever its own.
	TTLMillis int64 `json:"ttl_ms"`
	// Renewed is the holder's wall clock at its last renewal: for people
	// reading the object. Nobody judges expiry by it.
	Renewed  time.Time `json:"renewed"`
	Released bool      `json:"released,omitempty"`
	// Sealed maps the names of the objects that older generations wrote
	// and that were visible at the takeover that started Generation, to
	// their ETags (see fence.go).
	Sealed map[string]string `json:"sealed,omitempty"`
	// Written maps the names of the objects that Generation wrote, as of
	// its last renewal, to their ETags: a reader knows their generation
	// without a HeadObject (and the next takeover too).
	Written map[string]string `json:"written,omitempty"`
}

// ttl returns the TTL the lease is judged by: the one its holder wrote,
// which its renewals keep to, so that a contender takes over a dead
// writer's lease when that writer's deadline has passed, not its own
// default's (a writer with LeaseTTL(5s) is replaced after 5 to 10 s by a
// tool that uses 30 s). A lease without one (written by hand, or by
// another program) is judged by DefaultLeaseTTL; one below the least
// LeaseTTL takes, by that least (one second).
func (d leaseDoc) ttl() time.Duration {
	if d.TTLMillis <= 0 {
		return DefaultLeaseTTL
	}
	return max(time.Duration(d.TTLMillis)*time.Millisecond, minLeaseTTL)
}

// maxLeaseSize bounds the lease object a backend reads: its sealed and
// written sets list the objects of the store (about 80 bytes each).
const maxLeaseSize = 256 << 20

// lease is the writer's lease while Lock holds it. Its fields are guarded
// by the Backend's mu.
type lease struct {
	doc  leaseDoc
	etag string
	// deadline is when this writer stops trusting the lease unless a
	// renewal succeeds: the start of its last successful renewal (or of
	// the takeover) plus the TTL minus a tenth, by the monotonic clock.
	deadline time.Time
	// wallDeadline is deadline by the wall clock (no monotonic reading):
	// the lease is trusted only while both clocks say so, because the
	// monotonic clock stops while the machine sleeps (see expired).
	wallDeadline time.Time
	// lost is set when a renewal found the lease changed: taken over.
	lost error
	// renewErr is the last renewal's failure, for the error of a write
	// refused after the deadline.
	renewErr error
	// changed records what this writer wrote (name to ETag) or removed
	// (name to "") since its last renewal, which folds it into Sealed and
	// Written (see noteWrite).
	changed map[string]string
	// listing is the takeover's listing: the objects visible once this
	// lease was taken, which are the sealed set (the new generation has
	// written nothing yet). List answers from it, without a request,
	// until this writer's first write and at most until the first renewal
	// (see resumeListing), so that a writer that resumes (Lock, the
	// store's listing at open, Latest) lists the store once, not three
	// times. listed says whether listing may answer (it may be empty).
	listing []checkpoint.Object
	listed  bool

	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
}

// expired reports whether the lease's deadline has passed at now, by the
// monotonic clock or by the wall clock. The monotonic clock alone is not
// enough: on Linux it does not count a system suspend (nor, on some
// hypervisors, a paused VM), so a writer that slept past its lease would
// wake up trusting it while another writer took over. The kernel moves the
// wall clock on at resume. A wall clock stepped back cannot extend the
// lease (the monotonic deadline still holds); one stepped forward only
// ends it early, until the next renewal.
func (l *lease) expired(now time.Time) bool {
	return !now.Before(l.deadline) || !now.Round(0).Before(l.wallDeadline)
}

func (l *lease) stopRenewing() {
	l.stopOnce.Do(func() { close(l.stop) })
	<-l.done
}

// leaseState is the lease object as read by a GET.
type leaseState struct {
	exists bool
	etag   string
	doc    leaseDoc
	// age is how long ago it was last written, by the server's clock
	// (Date minus Last-Modified, to the second); ageKnown says whether the
	// server sent both.
	age      time.Duration
	ageKnown bool
}

func (b *Backend) readLease(ctx context.Context, ifNoneMatch string) (st leaseState, notModified bool, err error) {
	in := &s3.GetObjectInput{Bucket: &b.bucket, Key: aws.String(b.key(leaseName))}
	if ifNoneMatch != "" {
		in.IfNoneMatch = aws.String(ifNoneMatch)
	}
	out, err := b.client.GetObject(ctx, in)
	switch {
	case err == nil:
	case isNotModified(err):
		return st, true, nil
	case isNotFound(err):
		return st, false, nil
	default:
		return st, false, requestError(ctx, "read lease", b.Locate(leaseName), nil, err)
	}
	defer out.Body.Close()
	limit := b.cfg.maxLease
	if n := aws.ToInt64(out.ContentLength); n > limit {
		// Refused before reading: a reader reads the lease at every List.
		return st, false, fail("read lease", b.Locate(leaseName), checkpoint.ErrCorrupt, fmt.Errorf("not a lease: %d bytes, larger than %d", n, limit))
	}
	data, err := io.ReadAll(io.LimitReader(out.Body, limit+1))
	if err != nil {
		// The answer cut short (a reset mid-body): no answer in full, as
		// the reader of a checkpoint says too; the caller's ctx ending is
		// not one.
		var kind error
		if ctx.Err() == nil {
			kind = checkpoint.ErrUnavailable
		}
		return st, false, fail("read lease", b.Locate(leaseName), kind, err)
	}
	if int64(len(data)) > limit {
		return st, false, fail("read lease", b.Locate(leaseName), checkpoint.ErrCorrupt, fmt.Errorf("not a lease: larger than %d bytes", limit))
	}
	if err := json.Unmarshal(data, &st.doc); err != nil {
		return st, false, fail("read lease", b.Locate(leaseName), checkpoint.ErrCorrupt, fmt.Errorf("not a lease (%w): remove it only if no writer is running", err))
	}
	if st.doc.Generation == 0 {
		// Every lease a Backend writes has a generation of 1 or more. A
		// generation 0 (an edited or foreign object, "{}" or "null") would
		// hide every object a store wrote, and seal none at the next
		// takeover: the store's checkpoints would be lost to it.
		return st, false, fail("read lease", b.Locate(leaseName), checkpoint.ErrCorrupt, errors.New("not a lease (no generation): remove it only if no writer is running"))
	}
	st.exists = true
	st.etag = quoteETag(aws.ToString(out.ETag))
	if raw, ok := awsmiddleware.GetRawResponse(out.ResultMetadata).(*smithyhttp.Response); ok && out.LastModified != nil {
		if date, err := http.ParseTime(raw.Header.Get("Date")); err == nil {
			// Whole seconds, and a server may round one of them up: an
			// age below zero is a lease renewed just now.
			st.age = max(0, date.Sub(*out.LastModified))
			st.ageKnown = true
		}
	}
	return st, false, nil
}

// holderID names this writer in the lease: host, process and a random
// number that tells apart two backends of one process.
func holderID() string {
	host, _ := os.Hostname()
	var r [6]byte
	_, _ = rand.Read(r[:])
	return host + "/" + strconv.Itoa(os.Getpid()) + "/" + hex.EncodeToString(r[:])
}

// Lock takes the store's lease, the object .checkpoint.lease under the
// prefix (see the package doc). If no lease exists it is created with
// If-None-Match: *; a lease that was released is taken over at once. A
// lease held by another writer is taken over only once this process has
// seen it unchanged (the same ETag) for a full TTL by its own monotonic
// clock, so no clock of another host is trusted: if the server's clock
// (Date minus Last-Modified) says the lease was renewed less than a TTL
// ago, Lock returns an error wrapping checkpoint.ErrLocked at once, naming
// the holder; otherwise it watches the lease until the TTL has passed
// (taking it over) or the holder renews it (ErrLocked), bounded by ctx.
// A Backend remembers what it has seen, so calling Lock again once the TTL
// has passed takes over a dead writer's lease without waiting. A Lock that
// got no answer it could judge by (the lease's read, the listing of the
// objects to seal, or the read that tells whether a takeover refused on
// retry had landed, failing past the SDK's retries) returns an error
// wrapping checkpoint.ErrUnavailable, not ErrLocked, which WaitLock does
// not wait on: a lease such a takeover may have written is renewed by
// nobody and expires after its TTL.
//
// While it holds the lease, the Backend renews it every third of the TTL
// (If-Match on its ETag) and stamps every object it writes with its
// generation. A write that finishes after the lease's local deadline, or
// after a renewal found the lease taken over, returns an error wrapping
// checkpoint.ErrLocked; what it wrote may then exist, but is hidden by
// the fencing rule unless it landed before the takeover. unlock stops the
// renewals and marks the lease released (a conditional PUT, not a delete),
// so the next writer takes it at once.
func (b *Backend) Lock(ctx context.Context) (unlock func() error, err error) {
	loc := b.Locate(leaseName)
	b.mu.Lock()
	switch {
	case b.closed:
		b.mu.Unlock()
		return nil, fail("lock", loc, checkpoint.ErrClosed, nil)
	case b.lease != nil:
		b.mu.Unlock()
		return nil, fail("lock", loc, checkpoint.ErrLocked, errors.New("this backend holds the lease already"))
	}
	b.mu.Unlock()
	if err := b.checkServer(ctx); err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		st, _, err := b.readLease(ctx, "")
		if err != nil {
			return nil, fail("lock", loc, nil, err)
		}
		if !st.exists || st.doc.Released {
			unlock, err := b.takeOver(ctx, st)
			if err != nil && errors.Is(err, checkpoint.ErrLocked) && attempt < 2 {
				continue // another writer got there first: judge its lease
			}
			return unlock, err
		}
		ttl := st.doc.ttl()
		b.mu.Lock()
		if b.seen.etag != st.etag {
			b.seen.etag, b.seen.at = st.etag, time.Now()
		}
		seenAt := b.seen.at
		b.mu.Unlock()
		// One second of slack: Date and Last-Modified are whole seconds.
		if time.Since(seenAt) < ttl && st.ageKnown && st.age+time.Second < ttl {
			return nil, b.lockedError(st, ttl, nil)
		}
		free, err := b.watchLease(ctx, st, seenAt.Add(ttl), ttl)
		if err != nil {
			return nil, err
		}
		if free && attempt < 2 {
			continue // released or removed while watched: take it as it is now
		}
		return b.takeOver(ctx, st)
	}
}

// watchLease waits until the time until, checking now and then that the
// lease is still st: a renewal returns ErrLocked at once, a release returns
// free.
func (b *Backend) watchLease(ctx context.Context, st leaseState, until time.Time, ttl time.Duration) (free bool, err error) {
	poll := max(ttl/8, 50*time.Millisecond)
	for {
		wait := time.Until(until)
		if wait <= 0 {
			return false, nil
		}
		t := time.NewTimer(min(wait, poll))
		select {
		case <-ctx.Done():
			t.Stop()
			return false, b.lockedError(st, ttl, ctx.Err())
		case <-t.C:
		}
		cur, same, err := b.readLease(ctx, st.etag)
		if err != nil {
			if ctx.Err() != nil {
				// The caller's bound ended the read: the lease is held,
				// as far as this Lock knows.
				return false, b.lockedError(st, ttl, ctx.Err())
			}
			return false, fail("lock", b.Locate(leaseName), nil, err)
		}
		if !same {
			if !cur.exists || cur.doc.Released {
				return true, nil
			}
			return false, b.lockedError(cur, ttl, nil)
		}
	}
}

func (b *Backend) lockedError(st leaseState, ttl time.Duration, cause error) error {
	msg := fmt.Sprintf("held by %s (generation %d)", st.doc.Holder, st.doc.Generation)
	if st.ageKnown {
		msg += fmt.Sprintf(", renewed %v ago by the server's clock", st.age.Round(time.Second))
	}
	msg += fmt.Sprintf("; it expires when it has gone %v without renewal", ttl)
	if cause != nil {
		return fail("lock", b.Locate(leaseName), checkpoint.ErrLocked, fmt.Errorf("%s: %w", msg, cause))
	}
	return fail("lock", b.Locate(leaseName), checkpoint.ErrLocked, errors.New(msg))
}

// takeOver writes a new lease over st (If-Match on its ETag, or
// If-None-Match: * if there is none) with the next generation and the
// sealed set: every object that is visible now, by st's rule. The listing
// is made before the PUT, so nothing written after the takeover is in it.
// putLease writes doc as the lease object, with If-Match on ifMatch, or
// If-None-Match: * where ifMatch is "" (no lease yet), and returns the new
// ETag.
func (b *Backend) putLease(ctx context.Context, doc leaseDoc, ifMatch string) (string, error) {
	body, err := json.Marshal(doc)
	if err != nil {
		return "", err
	}
	in := &s3.PutObjectInput{
		Bucket: &b.bucket, Key: aws.String(b.key(leaseName)), Body: bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))), ContentType: aws.String("application/json"),
	}
	if ifMatch != "" {
		in.IfMatch = aws.String(ifMatch)
	} else {
		in.IfNoneMatch = aws.String("*")
	}
	out, err := b.putObject(ctx, in)
	if err != nil {
		return "", err
	}
	return quoteETag(aws.ToString(out.ETag)), nil
}

func (b *Backend) takeOver(ctx context.Context, st leaseState) (func() error, error) {
	loc := b.Locate(leaseName)
	sealed, listing, err := b.sealedSet(ctx, st)
	if err != nil {
		return nil, listError(ctx, "lock", loc, fmt.Errorf("listing the objects to seal: %w", err))
	}
	doc := leaseDoc{
		Generation: st.doc.Generation + 1,
		Holder:     holderID(),
		TTLMillis:  b.cfg.ttl.Milliseconds(),
		Renewed:    time.Now().UTC(),
		Sealed:     sealed,
	}
	ifMatch := ""
	if st.exists {
		ifMatch = st.etag
	}
	start := time.Now()
	etag, err := b.putLease(ctx, doc, ifMatch)
	switch {
	case err == nil:
	case isPrecondition(err) || isNotFound(err) || isConditionalConflict(err):
		// Unless an earlier attempt of this PUT (an SDK retry) landed:
		// the lease then names this takeover's holder, which is unique.
		cur, _, rerr := b.readLease(ctx, "")
		if rerr != nil {
			// Maybe this writer's, maybe another's: no proof either way.
			// A lease of this takeover's is renewed by nobody and expires.
			return nil, fail("lock", loc, nil, fmt.Errorf("the takeover's PUT was refused (%w), and reading the lease to tell whether an earlier attempt of it landed failed: %w", err, rerr))
		}
		if !cur.exists || cur.doc.Holder != doc.Holder || cur.doc.Generation != doc.Generation {
			return nil, fail("lock", loc, checkpoint.ErrLocked, fmt.Errorf("another writer took the lease first: %w", err))
		}
		etag = cur.etag
	default:
		return nil, requestError(ctx, "lock", loc, nil, err)
	}
	l := &lease{
		doc:          doc,
		etag:         etag,
		listing:      listing,
		listed:       true,
		deadline:     start.Add(b.cfg.ttl - b.cfg.ttl/10),
		wallDeadline: start.Add(b.cfg.ttl - b.cfg.ttl/10).Round(0),
		stop:         make(chan struct{}),
		done:         make(chan struct{}),
	}
	b.mu.Lock()
	if b.closed || b.lease != nil {
		b.mu.Unlock()
		// Closed meanwhile, or a concurrent Lock won: give this one back.
		b.release(l)
		return nil, fail("lock", loc, checkpoint.ErrLocked, errors.New("backend closed or locked meanwhile"))
	}
	b.lease = l
	b.released = false
	b.mu.Unlock()
	go b.renew(l)
	var once sync.Once
	var uerr error
	return func() error {
		once.Do(func() { uerr = b.unlock(l) })
		return uerr
	}, nil
}

// renew rewrites the lease with If-Match on its ETag every third of the
// TTL until stopped or lost. A failed renewal that is not a lost condition
// (a network error, a 5xx past the SDK's retries) is retried sooner; the
// writes fail once the deadline passes, and succeed again if a later
// renewal succeeds (the ETag chain proves nobody took over meanwhile).
func (b *Backend) renew(l *lease) {
	defer close(l.done)
	ttl := b.cfg.ttl
	every := ttl / 3
	// A renewal in flight when the lease is released or closed is not
	// cancelled: it may land anyway, and then only its answer tells the
	// ETag that the release must name.
	ctx := context.Background()
	// The first renewal a third of the TTL after the takeover started (its
	// deadline less nine tenths of the TTL), not after it returned: a
	// takeover slowed by the SDK's retry backoff may have used most of
	// its deadline already.
	b.mu.Lock()
	first := time.Until(l.deadline.Add(every - (ttl - ttl/10)))
	b.mu.Unlock()
	t := time.NewTimer(max(0, first))
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		b.mu.Lock()
		l.listing, l.listed = nil, false
		l.foldChanges()
		doc := l.doc
		doc.Renewed = time.Now().UTC()
		etag := l.etag
		b.mu.Unlock()
		start := time.Now()
		rctx, rcancel := context.WithTimeout(ctx, ttl)
		newETag, err := b.putLease(rctx, doc, etag)
		rcancel()
		b.mu.Lock()
		switch {
		case err == nil:
			l.etag = newETag
			l.deadline = start.Add(ttl - ttl/10)
			l.wallDeadline = l.deadline.Round(0)
			l.renewErr = nil
			// The next renewal a third of the TTL after this one started,
			// not after it ended: a slow server does not stretch the
			// period.
			t.Reset(max(0, time.Until(start.Add(every))))
		case isPrecondition(err) || isNotFound(err):
			b.mu.Unlock()
			cur, landed, lost, _ := b.afterRefusal(l, etag, "renewal", err)
			b.mu.Lock()
			switch {
			case landed:
				// An earlier attempt of this renewal (an SDK retry) landed.
				l.etag = cur.etag
				l.renewErr = err
				t.Reset(0)
			case lost != nil:
				l.lost = lost
				b.mu.Unlock()
				return
			default:
				// The lease could not be read: a failed renewal, tried
				// again soon.
				l.renewErr = b.renewalError(err)
				t.Reset(every / 4)
			}
		case errors.Is(err, ErrUnsupported):
			l.lost = fmt.Errorf("renewing the lease %s: %w", b.Locate(leaseName), err)
			b.mu.Unlock()
			return
		default:
			l.renewErr = b.renewalError(err)
			t.Reset(every / 4)
		}
		b.mu.Unlock()
	}
}

// afterRefusal reads the lease after the server refused a conditional PUT
// of it (what, "renewal" or "release") with If-Match on sent (err, a 412
// or 404), and tells why. landed: the lease is still l's (the same
// generation and holder: a takeover writes another generation) under
// another ETag, so an attempt whose answer was lost did land. Otherwise
// lost says what the server did and what the lease object shows: taken
// over by a newer holder (the one case that is), deleted, rewritten with
// an older generation, or still l's own with the very ETag the condition
// named (the server refused a condition that held: ErrUnsupported). Both
// are zero when the lease could not be read, and rerr is why: that is no
// proof of a takeover (an earlier attempt may have landed).
func (b *Backend) afterRefusal(l *lease, sent, what string, err error) (cur leaseState, landed bool, lost, rerr error) {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.ttl)
	defer cancel()
	cur, _, rerr = b.readLease(ctx, "")
	b.mu.Lock()
	gen, holder := l.doc.Generation, l.doc.Holder
	b.mu.Unlock()
	answer := fmt.Sprintf("the server refused the %s of %s (If-Match %s) with HTTP %d %s", what, b.Locate(leaseName), sent, httpStatus(err), errorCode(err))
	switch {
	case errors.Is(rerr, checkpoint.ErrCorrupt):
		return cur, false, fmt.Errorf("%s, and the lease object is no longer a lease (%v): %w", answer, rerr, err), nil
	case rerr != nil:
		return cur, false, nil, rerr
	case !cur.exists:
		return cur, false, fmt.Errorf("%s: the lease object is gone (deleted by hand or by another program): %w", answer, err), nil
	case cur.doc.Generation == gen && cur.doc.Holder == holder && cur.etag != sent:
		return cur, true, nil, nil
	case cur.doc.Generation == gen && cur.doc.Holder == holder:
		return cur, false, fmt.Errorf("%w: %s, although the lease object still has that ETag and this writer's generation %d (%v)", ErrUnsupported, answer, gen, err), nil
	case cur.doc.Generation > gen:
		return cur, false, fmt.Errorf("the lease was taken over by another writer (generation %d, held by %s; %s: %w)", cur.doc.Generation, cur.doc.Holder, answer, err), nil
	}
	return cur, false, fmt.Errorf("%s: the lease object now has generation %d, held by %s, where this writer holds generation %d (rewritten by hand or by another program?): %w", answer, cur.doc.Generation, cur.doc.Holder, gen, err), nil
}

// renewalError is the error of a renewal that failed otherwise than by a
// refused condition: what the server answered (status and code), for the
// error of the writes refused once the lease's deadline has passed.
func (b *Backend) renewalError(err error) error {
	if st := httpStatus(err); st != 0 {
		return fmt.Errorf("the server answered the renewal of %s with HTTP %d %s: %w", b.Locate(leaseName), st, errorCode(err), err)
	}
	return fmt.Errorf("renewing %s: %w", b.Locate(leaseName), err)
}

// unlock stops renewing and marks the lease released, with If-Match on its
// ETag: if another writer took it over, the release fails with ErrLocked
// and changes nothing.
func (b *Backend) unlock(l *lease) error {
	l.stopRenewing()
	b.mu.Lock()
	if b.lease == l {
		b.lease = nil
		b.released = true
	}
	lost := l.lost
	b.mu.Unlock()
	if lost != nil {
		return fail("unlock", b.Locate(leaseName), checkpoint.ErrLocked, lost)
	}
	return b.release(l)
}

func (b *Backend) release(l *lease) error {
	l.stopOnce.Do(func() { close(l.stop) })
	b.mu.Lock()
	l.foldChanges()
	doc := l.doc
	etag := l.etag
	b.mu.Unlock()
	doc.Released = true
	doc.Renewed = time.Now().UTC()
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.ttl)
	defer cancel()
	if _, err := b.putLease(ctx, doc, etag); err != nil {
		if isPrecondition(err) || isNotFound(err) {
			cur, landed, lost, rerr := b.afterRefusal(l, etag, "release", err)
			switch {
			case rerr != nil:
				return fail("unlock", b.Locate(leaseName), nil, fmt.Errorf("the release's condition failed (%w), and reading the lease to tell whether an earlier attempt of it landed: %w", err, rerr))
			case landed && cur.doc.Released:
				return nil // an earlier attempt of this release landed
			case lost != nil && errors.Is(lost, ErrUnsupported):
				return fail("unlock", b.Locate(leaseName), nil, lost)
			case lost != nil:
				return fail("unlock", b.Locate(leaseName), checkpoint.ErrLocked, lost)
			}
			return fail("unlock", b.Locate(leaseName), checkpoint.ErrLocked, fmt.Errorf("the lease changed since this writer's last renewal: %w", err))
		}
		return requestError(ctx, "unlock", b.Locate(leaseName), nil, err)
	}
	return nil
}
