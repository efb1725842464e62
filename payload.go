package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/gocheckpoint/checkpoint/internal/format"
)

// Payload says what a checkpoint holds: a JSON state (Save, Load) or opaque
// bytes (SaveFrom, OpenPayload). Info.Payload reports it, from the header.
type Payload string

// The payloads a checkpoint may hold.
const (
	// PayloadJSON is a state encoded with encoding/json: every checkpoint
	// of format 1 or 2, written by Save and its kin and read by Load and
	// Latest.
	PayloadJSON Payload = "json"
	// PayloadBytes is opaque bytes, stored as they are (no base64), in an
	// envelope of format 3: written by SaveFrom and AppendFrom, read by
	// OpenPayload and LatestPayload.
	PayloadBytes Payload = "bytes"
)

// payloadOf returns the payload an envelope of format holds ("" for format
// 0: a header that could not be read).
func payloadOf(f int) Payload {
	switch {
	case f == 0:
		return ""
	case format.IsPayload(f):
		return PayloadBytes
	}
	return PayloadJSON
}

// SaveFrom writes the checkpoint of step whose payload is the bytes write
// writes to the io.Writer it is given: opaque bytes, stored as they are
// (no base64, no JSON), compressed as the store's option says, with the
// header (step, kind, save time, WithMeta's labels, WithMetric's metrics)
// and the CRC-32C every checkpoint has (see the README, "Byte payloads").
// The payload streams to the backend as write writes it, in pieces of a few
// tens of KiB: a save holds no copy of it, whatever its size, on a local
// directory (a backend may buffer an object: s3store does).
//
// Every promise of Save holds: the checkpoint is published atomically and
// durably through the backend's Create, as a state is (a crash at any
// instant leaves no checkpoint or the whole one), and never replaces one
// (ErrExists); retention rules apply after it, and count it as any
// checkpoint. write is called at most once, so the step's names are looked
// at before it runs (in every compression, one Stat each, rather than as a
// writer on object storage otherwise trusts its listing): a provably
// damaged object there is moved aside first, as Save does; an object
// another program creates there while the payload is written fails the
// save with ErrExists. If write returns an error, or panics (the error wraps the
// panic's value), or writes more bytes than the read limit
// (WithMaxReadSize; ErrInvalid), the save fails with that error and
// nothing is published. The io.Writer must not be used after write
// returns (such a write fails and never reaches the file), nor by several
// goroutines at once. write runs under the store's write lock: it must not
// write to the store nor Close it (read the state it saves before
// SaveFrom).
//
// The checkpoint records the store's schema (WithSchema), as a state's
// does: OpenPayload and LatestPayload of a payload of a newer schema fail
// with ErrNewerSchema once it verifies (LatestPayload stops there, as
// Latest does). Migrations transform JSON states only: a payload of an
// older schema is handed over as it was written, and its Info.Schema says
// which schema that was.
//
// With Async, SaveFrom is synchronous all the same (a stream cannot wait
// in a queue): it publishes the saves queued before it first, then its own.
// The Info returned says Payload PayloadBytes and the payload's size.
func (s *Store[T]) SaveFrom(ctx context.Context, step int64, write func(io.Writer) error, opts ...SaveOption) (Info, error) {
	j, err := s.preparePayload(ctx, "save", step, write, opts)
	if err != nil {
		return Info{}, s.failed(err)
	}
	r := s.saveNow(ctx, j)
	s.report(r)
	return r.info, r.err
}

// AppendFrom saves a byte payload as SaveFrom does, at the step after the
// newest checkpoint of the store, as Append chooses it, and returns its
// Info: Info.Step says which step it took. It is synchronous with Async,
// as SaveFrom is.
func (s *Store[T]) AppendFrom(ctx context.Context, write func(io.Writer) error, opts ...SaveOption) (Info, error) {
	j, err := s.preparePayload(ctx, "append", 0, write, opts)
	if err != nil {
		return Info{}, s.failed(unstepped(err, s.dir))
	}
	return s.appendNow(ctx, j)
}

// preparePayload checks the arguments of a save of a byte payload.
func (s *Store[T]) preparePayload(ctx context.Context, op string, step int64, write func(io.Writer) error, opts []SaveOption) (*saveJob, error) {
	j, err := s.prepareJob(ctx, op, step, KindStep, saveOptions(opts), nil)
	if err != nil {
		return nil, err
	}
	if write == nil {
		return nil, stepError(op, step, s.path(s.cfg.layout.format(j.fn)), fmt.Errorf("%w: a nil write function", ErrInvalid))
	}
	j.payload = write
	return j, nil
}

// OpenPayload opens the byte payload of the checkpoint of step (the one
// saved last, if the step has several, as Load chooses) and returns a
// reader of it, which the caller must close, and its Info, whose
// PayloadSize is the payload's size where the file tells it without
// reading (a plain file; -1 for a compressed one).
//
// The payload streams from the backend as it is read: the reader holds a
// buffer of a few tens of KiB, whatever the payload's size. It verifies
// the checksum as it goes: the Read that reaches the end returns io.EOF
// only if every byte of the file verified, and otherwise an error wrapping
// ErrCorrupt, which names the step and the file. Bytes read before the end
// are unverified: act on them only once a Read has returned io.EOF (a
// payload of more bytes than WithMaxReadSize fails too, with ErrCorrupt,
// unverified). Close the reader before the store. Hooks see the payload
// as it ends: OnLoad (and the log's "checkpoint restored") runs when a Read
// has reached the verified end, and OnError gets the error of one that
// ends in damage; a reader closed before its end reports neither.
//
// A step with no checkpoint is ErrNotFound. A checkpoint of a JSON state is
// read whole and verified, and is then an error wrapping
// ErrPayloadMismatch (or ErrCorrupt if it fails verification).
func (s *Store[T]) OpenPayload(ctx context.Context, step int64) (io.ReadCloser, Info, error) {
	if err := checkStep(step); err != nil {
		return nil, Info{}, s.failed(stepError("open payload", step, s.dir, err))
	}
	if err := s.begin(ctx); err != nil {
		return nil, Info{}, s.failed(stepError("open payload", step, s.dir, err))
	}
	r, info, err := func() (*payloadReader, Info, error) {
		defer s.ops.Done()
		entries, err := s.stepEntries(ctx, step)
		if err != nil {
			return nil, Info{}, stepError("open payload", step, s.dir, err)
		}
		if len(entries) == 0 {
			err := s.missing(ctx, step)
			if e, ok := err.(*Error); ok {
				e.Op = "open payload" // a new *Error of this call
			}
			return nil, Info{}, err
		}
		sortEntries(entries)
		return s.openPayloadEntry(ctx, "open payload", entries[len(entries)-1], true)
	}()
	if err != nil {
		return nil, Info{}, s.failed(err)
	}
	s.reportAtEnd(r, info, false)
	return r, info, nil
}

// reportAtEnd makes r report how its payload ends: a load (the OnLoad hook,
// the log's "checkpoint restored") once it has verified at its end, unless
// the load was reported already (verified, by LatestPayload), and a failure
// (OnError, the log) if it ends in an error, such as damage.
func (s *Store[T]) reportAtEnd(r *payloadReader, info Info, verified bool) {
	r.ended = func(err error) {
		switch {
		case err != nil:
			s.failed(err)
		case !verified:
			s.loaded(info)
		}
	}
}

// OpenPayloadExact opens exactly the byte payload that info describes, as
// returned by List, SaveFrom or LatestPayload, as LoadExact loads a state:
// use it to reach a checkpoint that OpenPayload does not return because its
// step has a newer one. If the file no longer holds that checkpoint, the
// result is ErrNotFound; info's file must be a checkpoint name of the
// store's layout (else ErrInvalid). The reader is OpenPayload's.
func (s *Store[T]) OpenPayloadExact(ctx context.Context, info Info) (io.ReadCloser, Info, error) {
	const op = "open payload"
	if err := checkStep(info.Step); err != nil {
		return nil, Info{}, s.failed(stepError(op, info.Step, s.dir, err))
	}
	name := info.Name()
	fn, ok := s.cfg.layout.parse(name)
	if !ok {
		return nil, Info{}, s.failed(stepError(op, info.Step, info.Location, fmt.Errorf("%w: %q is not a checkpoint name of this store", ErrInvalid, name)))
	}
	if err := s.begin(ctx); err != nil {
		return nil, Info{}, s.failed(stepError(op, info.Step, s.dir, err))
	}
	r, got, err := func() (*payloadReader, Info, error) {
		defer s.ops.Done()
		e := entry{name: name, fn: fn, h: header{Step: info.Step, Time: info.Time}}
		if info.Format == 0 {
			e.h.Time = time.Time{} // a modification time, not a save time
		}
		return s.openPayloadEntry(ctx, op, e, true)
	}()
	if err != nil {
		return nil, Info{}, s.failed(err)
	}
	s.reportAtEnd(r, got, false)
	return r, got, nil
}

// LatestPayload returns a reader of the byte payload of the newest
// checkpoint that verifies, and its Info, as Latest chooses it: damaged
// checkpoints are skipped (and reported, as Latest reports them), and the
// same errors end the walk. To tell damage before handing over a byte, it
// reads each file it tries to its end first, verifying it (a read of the
// payload, holding none of it), then opens it again for the reader it
// returns, which verifies again as it streams (see OpenPayload): the
// newest payload is read twice.
//
// A newest checkpoint that verifies and holds a JSON state is no damage:
// LatestPayload stops there with an error wrapping ErrPayloadMismatch
// rather than resume from an older payload, as Latest stops at a byte
// payload.
func (s *Store[T]) LatestPayload(ctx context.Context) (io.ReadCloser, Info, error) {
	if err := s.begin(ctx); err != nil {
		return nil, Info{}, s.failed(opError("latest payload", s.dir, err))
	}
	r, info, skipped, err := func() (*payloadReader, Info, []error, error) {
		defer s.ops.Done()
		return latestWalk(s, ctx, "latest payload", func(fileName) bool { return true }, s.verifiedPayload, func(r *payloadReader) { r.Close() })
	}()
	for _, e := range skipped {
		s.failed(e)
	}
	if err != nil {
		return nil, Info{}, s.failed(err)
	}
	s.loaded(info)
	s.reportAtEnd(r, info, true)
	return r, info, nil
}

// verifiedPayload opens the payload of e once it has read it whole and
// verified it (see LatestPayload).
func (s *Store[T]) verifiedPayload(ctx context.Context, op string, e entry, exact bool) (*payloadReader, Info, error) {
	// The reader handed out is opened first, and the checkpoint verified
	// through a second open of it: where a file stays readable while it
	// is open (a local file), a writer that prunes it meanwhile cannot
	// take it away between the verification and the caller's reads.
	out, info, err := s.openPayloadEntry(ctx, op, e, exact)
	if err != nil {
		return nil, Info{}, err
	}
	// The same checkpoint again, exactly: a rolling file that moved on
	// meanwhile is ErrNotFound (and the walk lists the store again).
	e.h.Step, e.h.Time, e.hErr = info.Step, info.Time, nil
	check, _, err := s.openPayloadEntry(ctx, op, e, true)
	if err == nil {
		_, err = io.Copy(io.Discard, check)
		check.Close()
	}
	if err != nil {
		out.Close()
		return nil, Info{}, err
	}
	return out, info, nil
}

// openPayloadEntry opens the byte payload of one checkpoint file. With
// exact, as for loadEntry.
func (s *Store[T]) openPayloadEntry(ctx context.Context, op string, e entry, exact bool) (*payloadReader, Info, error) {
	path := s.path(e.name)
	fail := func(err error) (*payloadReader, Info, error) {
		return nil, Info{}, stepError(op, e.h.Step, path, err)
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	f, o, err := s.openObject(ctx, e.name)
	if err != nil {
		return fail(err)
	}
	h, pr, size, err := s.codec.OpenPayload(f, o.Size, s.checkEntry(e, exact))
	if err != nil {
		f.Close()
		return fail(err)
	}
	if h.Schema > s.cfg.schema.Version {
		// As for a state, only a checkpoint that verifies is of a newer
		// schema: a damaged header is damage.
		_, err := io.Copy(io.Discard, pr)
		pr.Close()
		f.Close()
		if err == nil {
			err = fmt.Errorf("%w: the payload has schema %d, this store reads schema %d and older (see WithSchema)", ErrNewerSchema, h.Schema, s.cfg.schema.Version)
		}
		return fail(err)
	}
	info := s.info(e.name, e.fn, o.Size, h)
	info.PayloadSize = size
	r := &payloadReader{f: f, p: pr, op: op, step: h.Step, path: path}
	pr.Verified = func() {
		s.cache(o, h)
		s.observe(h.Time)
	}
	return r, info, nil
}

// payloadReader is the reader OpenPayload returns: the format's stream of
// the payload, its errors naming the operation, the step and the file.
type payloadReader struct {
	f    io.ReadCloser
	p    *format.PayloadReader
	op   string
	step int64
	path string

	mu     sync.Mutex
	err    error
	closed bool
	// ended, if set, is called once, without the lock, with the error
	// that ends the payload: nil when it verified at its end (the store
	// reports the load), else the error (the store reports the failure).
	ended func(error)
}

func (r *payloadReader) Read(b []byte) (int, error) {
	r.mu.Lock()
	if r.err != nil {
		defer r.mu.Unlock()
		return 0, r.err
	}
	if r.closed {
		defer r.mu.Unlock()
		r.err = stepError(r.op, r.step, r.path, fmt.Errorf("%w: read after Close", ErrClosed))
		return 0, r.err
	}
	n, err := r.p.Read(b)
	switch {
	case err == io.EOF:
		r.err = io.EOF
	case err != nil:
		r.err = stepError(r.op, r.step, r.path, err)
	}
	ret, ended := r.err, r.ended
	if ret != nil {
		r.ended = nil
	}
	r.mu.Unlock()
	if ret != nil && ended != nil {
		// Hooks run outside the lock: one may use the reader.
		if ret == io.EOF {
			ended(nil)
		} else {
			ended(ret)
		}
	}
	return n, ret
}

// Close closes the file the payload is read from. It may be called more
// than once.
func (r *payloadReader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	r.p.Close()
	if err := r.f.Close(); err != nil && !errors.Is(err, io.EOF) {
		return stepError(r.op, r.step, r.path, err)
	}
	return nil
}
