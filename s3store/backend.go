package s3store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/gocheckpoint/checkpoint/storage"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/gocheckpoint/checkpoint"
)

// MaxObjectSize is the largest object Create and Replace write: the limit
// of one PutObject. A checkpoint is always one PUT (never a multipart
// upload), so it is visible whole or not at all, and its If-None-Match or
// If-Match condition is that of the one request that publishes it. Before
// the PUT the object is spooled (see SpoolDir): in memory up to
// DefaultSpoolMemory bytes, then in a temporary file, so that the PUT can
// be sent again (a retry, or replacing a fenced object, see the package
// doc) while the memory it takes does not depend on the object's size.
const MaxObjectSize = 5 << 30

// leaseName is the lease object's name under the prefix. It is not a name
// List returns, and Create, Replace, Remove and Rename refuse it.
const leaseName = ".checkpoint.lease"

// markerName is the empty object that Sub(create=true) puts under a child
// store's prefix, so that Children lists a child before its first write
// (a prefix with no object under it does not exist on object storage).
// List leaves it out; Create, Replace, Remove and Rename refuse it.
const markerName = ".checkpoint.store"

// genKey is the user metadata key (x-amz-meta-checkpoint-generation) that
// records the lease generation of the writer of an object.
const genKey = "checkpoint-generation"

// Backend is a checkpoint.Backend on an S3 bucket and key prefix. Create it
// with New; it is safe for concurrent use.
type Backend struct {
	client *s3.Client
	bucket string
	prefix string // "" or ends with "/"
	cfg    config
	// srv is what this Backend learned of its server (shared with Sub's).
	srv *serverState

	mu     sync.Mutex
	closed bool
	// lease is the writer's lease while Lock holds it (nil otherwise).
	lease *lease
	// released is set by unlock: the store's last write is done, so a
	// later write is a mistake that must not pass unfenced.
	released bool
	// view is the lease as a reader last read it (see fence.go).
	view leaseView
	// gens caches the generation of objects this backend wrote or read
	// the metadata of, by name and ETag: an object's metadata never
	// changes under one ETag... unless the bytes are rewritten identically,
	// which fence.go accounts for. 0 means no generation (written unfenced).
	gens map[objectKey]uint64
	// seen is what Lock remembers of a lease held by another: its ETag and
	// when this process first saw it, by the monotonic clock.
	seen struct {
		etag string
		at   time.Time
	}
	// unguarded turns off the writer's own lease checks (its deadline and
	// a renewal's 412): the tests set it to prove that readers alone keep
	// a stale writer's late writes hidden, as they must for a request
	// that was delayed in the network past the checks.
	unguarded bool
}

type objectKey struct{ name, etag string }

// New returns a Backend storing objects in bucket under prefix (a key
// prefix such as "runs/42"; a "/" is added if missing; "" is the bucket's
// root). The prefix is taken as it is, byte for byte (any UTF-8, such as
// "runs+1/a b"), except that it is a path of segments that stays below its
// parent: a prefix that starts with "/", or has an empty, "." or ".."
// segment ("a//b", "runs/..", "runs/../other") is refused with an error
// wrapping checkpoint.ErrInvalid, as a name outside an os.Root is, rather
// than cleaned to another prefix. The caller builds client (region,
// endpoint, credentials) the usual AWS way, for example with
// config.LoadDefaultConfig and s3.NewFromConfig; S3-compatible servers
// usually need UsePathStyle. New sends no request.
func New(client *s3.Client, bucket, prefix string, opts ...Option) (*Backend, error) {
	loc := "s3://" + bucket + "/" + prefix
	if client == nil {
		return nil, fail("new", loc, checkpoint.ErrInvalid, errors.New("nil client"))
	}
	if bucket == "" || strings.ContainsAny(bucket, "/") {
		return nil, fail("new", loc, checkpoint.ErrInvalid, fmt.Errorf("bucket %q is not a bucket name", bucket))
	}
	if err := checkPrefix(prefix); err != nil {
		return nil, fail("new", loc, checkpoint.ErrInvalid, err)
	}
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	cfg := config{ttl: DefaultLeaseTTL, maxSize: MaxObjectSize, maxLease: maxLeaseSize, spoolMem: DefaultSpoolMemory}
	for _, o := range opts {
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	return &Backend{client: client, bucket: bucket, prefix: prefix, cfg: cfg, srv: &serverState{}, gens: make(map[objectKey]uint64)}, nil
}

// checkPrefix refuses a key prefix that is not a path below its parent:
// a leading "/", an empty, "." or ".." segment, or bytes that are not
// UTF-8 (which no S3 key holds). One trailing "/" is allowed.
func checkPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if !utf8.ValidString(prefix) {
		return fmt.Errorf("prefix %q is not UTF-8", prefix)
	}
	if strings.HasPrefix(prefix, "/") {
		return fmt.Errorf("prefix %q starts with a slash", prefix)
	}
	for seg := range strings.SplitSeq(strings.TrimSuffix(prefix, "/"), "/") {
		switch seg {
		case "":
			return fmt.Errorf("prefix %q has an empty segment", prefix)
		case ".", "..":
			return fmt.Errorf("prefix %q has a %q segment: a prefix stays below its parent", prefix, seg)
		}
	}
	return nil
}

// Locate returns the URL of the object name, s3://bucket/prefix/name, or of
// the backend itself for "".
func (b *Backend) Locate(name string) string {
	return "s3://" + b.bucket + "/" + b.prefix + name
}

func (b *Backend) key(name string) string { return b.prefix + name }

// checkName refuses a name outside the contract's alphabet, and the lease
// object's name.
func (b *Backend) checkName(op, name string) error {
	if err := nameProblem(name); err != nil {
		return fail(op, b.Locate(name), checkpoint.ErrInvalid, err)
	}
	return b.checkOpen(op, name)
}

// nameProblem says why name is not the name of an object or a child store
// (nil if it is one).
func nameProblem(name string) error {
	if name == "" || name == "." || name == ".." || name == leaseName || name == markerName || strings.HasPrefix(name, probePrefix) {
		return fmt.Errorf("name %q is reserved or empty", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("name %q has %q: names are [A-Za-z0-9._-]", name, c)
		}
	}
	return nil
}

func (b *Backend) checkOpen(op, name string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return fail(op, b.Locate(name), checkpoint.ErrClosed, nil)
	}
	return nil
}

// Create writes a new object with one PutObject with If-None-Match: *: of
// concurrent Creates of a name exactly one succeeds, and the others get an
// error wrapping checkpoint.ErrExists. An object under name that was
// written by a fenced writer (see the package doc) does not count: it is
// replaced, with If-Match on its ETag. Nor does an attempt of this very
// PUT that landed although the SDK retried it (its answer was lost): the
// object with this write's token (x-amz-meta-checkpoint-write, random per
// write), this writer's generation and these bytes. If the HEAD that
// would tell fails, the error is neither success nor ErrExists (it wraps
// checkpoint.ErrUnavailable where the HEAD got no answer): the object may
// be this Create's.
func (b *Backend) Create(ctx context.Context, name string, write func(io.Writer) error) (checkpoint.Object, error) {
	return b.put(ctx, "create", name, storage.NoObject, checkpoint.ErrExists, write)
}

// Replace writes the object name with one PutObject: with If-Match on
// ifVersion (an ETag), with If-None-Match: * for storage.NoObject, or
// unconditionally for "". A failed condition returns an error wrapping
// checkpoint.ErrConflict and changes nothing.
func (b *Backend) Replace(ctx context.Context, name, ifVersion string, write func(io.Writer) error) (checkpoint.Object, error) {
	return b.put(ctx, "replace", name, ifVersion, checkpoint.ErrConflict, write)
}

func (b *Backend) put(ctx context.Context, op, name, ifVersion string, ifFailed error, write func(io.Writer) error) (checkpoint.Object, error) {
	loc := b.Locate(name)
	if err := b.checkName(op, name); err != nil {
		return checkpoint.Object{}, err
	}
	sp := newSpool(b.cfg)
	defer sp.Close()
	if err := write(&capWriter{w: sp, left: b.cfg.maxSize}); err != nil {
		if errors.Is(err, errTooLarge) {
			return checkpoint.Object{}, fail(op, loc, checkpoint.ErrInvalid, fmt.Errorf("object is larger than %d bytes, the limit of one PutObject: %w", b.cfg.maxSize, err))
		}
		return checkpoint.Object{}, fail(op, loc, nil, fmt.Errorf("write: %w", err))
	}
	if err := ctx.Err(); err != nil {
		return checkpoint.Object{}, fail(op, loc, nil, err)
	}
	return b.putBody(ctx, op, loc, name, ifVersion, ifFailed, sp)
}

// putBody puts body under name with one PutObject stamped with this
// writer's generation, on ifVersion's condition (see Create and Replace);
// errors name loc and wrap ifFailed when the condition fails. The body is
// spooled (in memory or a temporary file) so that the SDK can send the PUT
// again.
func (b *Backend) putBody(ctx context.Context, op, loc, name, ifVersion string, ifFailed error, body *spool) (checkpoint.Object, error) {
	cond := ifVersion
	token := writeToken()
	// A fenced object under name is absent for a store: Create and
	// Replace(NoObject) replace it with If-Match on its ETag, so that of
	// several writers racing for the name still exactly one wins. Each
	// round trip of the loop is caused by another writer's success, so
	// a few rounds suffice.
	for round := 0; ; round++ {
		gen, err := b.beginWrite(op, loc)
		if err != nil {
			return checkpoint.Object{}, err
		}
		in := &s3.PutObjectInput{
			Bucket:        &b.bucket,
			Key:           aws.String(b.key(name)),
			Body:          body.body(),
			ContentLength: aws.Int64(body.size()),
		}
		in.Metadata = map[string]string{writeKey: token}
		if gen != 0 {
			in.Metadata[genKey] = strconv.FormatUint(gen, 10)
		}
		switch cond {
		case "":
		case storage.NoObject:
			in.IfNoneMatch = aws.String("*")
		default:
			in.IfMatch = aws.String(cond)
		}
		out, err := b.putObject(ctx, in)
		if err == nil {
			etag := quoteETag(aws.ToString(out.ETag))
			if err := b.endWrite(op, loc, name, etag, gen); err != nil {
				return checkpoint.Object{}, err
			}
			return checkpoint.Object{Name: name, Size: body.size(), Version: etag, ModTime: time.Now()}, nil
		}
		if isConditionalConflict(err) && round < 8 {
			continue
		}
		if !isPrecondition(err) && !isNotFound(err) && !isConditionalConflict(err) && !ctxErr(err) {
			// The last attempt failed (a 5xx, a reset: the SDK's retries
			// are spent), but an earlier one, or this one, may have
			// landed with its answer lost.
			if o, ok, herr := b.landed(ctx, name, body, gen, token); herr == nil && ok {
				if err := b.endWrite(op, loc, name, o.Version, gen); err != nil {
					return checkpoint.Object{}, err
				}
				return o, nil
			}
		}
		if cond != "" && b.refusedUnheard(ctx, name, cond, err) {
			err = &unheardRefusal{err: err}
		}
		// If-Match on a missing key is a 404 on some servers (versitygw)
		// and a 412 on others: either way the condition failed.
		if isPrecondition(err) {
			// The SDK retries a PUT whose answer it did not get: if the
			// first attempt landed, the retry's condition fails on it.
			o, ok, herr := b.landed(ctx, name, body, gen, token)
			if herr != nil {
				// Ours or another's: neither success nor ErrExists
				// (ErrConflict) may be said.
				var kind error
				if unanswered(herr) || ctxErr(herr) && ctx.Err() == nil {
					kind = checkpoint.ErrUnavailable
				}
				return checkpoint.Object{}, fail(op, loc, kind, fmt.Errorf("the PUT's condition failed (%w), and whether an earlier attempt of it landed could not be told: %w", err, herr))
			}
			if ok {
				if err := b.endWrite(op, loc, name, o.Version, gen); err != nil {
					return checkpoint.Object{}, err
				}
				return o, nil
			}
		}
		if cond != "" && cond != storage.NoObject && (isPrecondition(err) || isNotFound(err)) {
			if ifVersion == storage.NoObject {
				// Our If-Match on a fenced object lost: look again.
				cond = storage.NoObject
				if round < 8 {
					continue
				}
			}
			return checkpoint.Object{}, fail(op, loc, ifFailed, fmt.Errorf("not the version %s: %w", cond, err))
		}
		if cond == storage.NoObject && isPrecondition(err) && round < 8 {
			o, gen, herr := b.head(ctx, name)
			switch {
			case isNotFound(herr):
				continue // deleted since: try again
			case herr != nil:
				return checkpoint.Object{}, fail(op, loc, ifFailed, fmt.Errorf("exists (and then: %w)", herr))
			}
			visible, jerr := b.visibleNow(ctx, name, o.Version, gen)
			if jerr != nil {
				return checkpoint.Object{}, fail(op, loc, nil, jerr)
			}
			if !visible {
				cond = o.Version
				continue
			}
		}
		return checkpoint.Object{}, requestError(ctx, op, loc, ifFailed, err)
	}
}

var errTooLarge = errors.New("too large")

// refusedUnheard reports whether a PUT on the condition cond that failed
// without an HTTP answer (err) would have failed its condition: whether a
// HeadObject finds an object under name for If-None-Match: *, or not the
// version cond for If-Match. Some servers (versitygw 1.8.0) answer a
// conditional PUT that they refuse before reading its body, and reset the
// connection: a client still sending a large body sees the reset and
// never the 412. What is under name tells the refusal from a network
// failure; an attempt of this very PUT that landed is found by landed, as
// for a 412.
func (b *Backend) refusedUnheard(ctx context.Context, name, cond string, err error) bool {
	if httpStatus(err) != 0 || errorCode(err) != "" || ctxErr(err) || errors.Is(err, ErrUnsupported) {
		return false
	}
	o, _, herr := b.head(ctx, name)
	switch {
	case cond == storage.NoObject:
		return herr == nil
	case isNotFound(herr):
		return true
	default:
		return herr == nil && o.Version != cond
	}
}

// unheardRefusal is the error of a PUT that refusedUnheard found refused:
// a PreconditionFailed API error wrapping the network error.
type unheardRefusal struct{ err error }

func (e *unheardRefusal) Error() string {
	return "the condition failed (the PUT's connection was reset; the object under the name says so): " + e.err.Error()
}
func (e *unheardRefusal) Unwrap() error                 { return e.err }
func (e *unheardRefusal) ErrorCode() string             { return "PreconditionFailed" }
func (e *unheardRefusal) ErrorMessage() string          { return e.Error() }
func (e *unheardRefusal) ErrorFault() smithy.ErrorFault { return smithy.FaultClient }

// landed reports whether the object under name is one this very write
// put: whether it carries the write's token (x-amz-meta-checkpoint-write,
// random per write, so no other write, of this writer or another, ever
// has it), this writer's generation, and the write's bytes (the ETag of a
// single PUT is their MD5). It is, when a retry of the PUT found the
// first attempt's object in place. A missing object is not; a HEAD that
// fails otherwise is err: the caller cannot tell.
func (b *Backend) landed(ctx context.Context, name string, body *spool, gen uint64, token string) (checkpoint.Object, bool, error) {
	o, g, tok, err := b.headToken(ctx, name)
	// The write's outcome is worth a few HEADs (each the SDK's attempts):
	// without it the caller knows neither success nor ErrExists.
	for try := 1; try < landedTries && err != nil && (unanswered(err) || attemptTimedOut(ctx, err)); try++ {
		o, g, tok, err = b.headToken(ctx, name)
	}
	switch {
	case isNotFound(err):
		return o, false, nil
	case err != nil:
		return o, false, err
	}
	return o, tok == token && g == gen && o.Version == `"`+hex.EncodeToString(body.md5())+`"` && o.Size == body.size(), nil
}

// landedTries is how many HEADs landed sends while they go unanswered.
const landedTries = 3

// writeKey is the user metadata key (x-amz-meta-checkpoint-write) of the
// token that tells a write's own object from any other (see landed).
const writeKey = "checkpoint-write"

// writeToken returns a new random write token.
func writeToken() string {
	var r [12]byte
	_, _ = rand.Read(r[:])
	return hex.EncodeToString(r[:])
}

// headToken is head, also returning the object's write token ("" if it
// has none).
func (b *Backend) headToken(ctx context.Context, name string) (checkpoint.Object, uint64, string, error) {
	out, err := b.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b.bucket, Key: aws.String(b.key(name))})
	if err != nil {
		return checkpoint.Object{}, 0, "", err
	}
	o, gen := b.described(name, out.ContentLength, out.ETag, out.LastModified, out.Metadata)
	tok := ""
	for k, v := range out.Metadata {
		if strings.EqualFold(k, writeKey) {
			tok = v
		}
	}
	return o, gen, tok, nil
}

// capWriter fails a write that would take the object past left bytes.
type capWriter struct {
	w    io.Writer
	left int64
}

func (c *capWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > c.left {
		return 0, errTooLarge
	}
	c.left -= int64(len(p))
	return c.w.Write(p)
}

// quoteETag returns an ETag in its quoted form, as S3 sends it in headers
// (some servers send it bare in listings): Versions compare equal across
// HeadObject, GetObject and ListObjectsV2.
func quoteETag(etag string) string {
	if etag == "" || strings.HasPrefix(etag, `"`) || strings.HasPrefix(etag, "W/") {
		return etag
	}
	return `"` + etag + `"`
}

func parseGen(meta map[string]string) uint64 {
	for k, v := range meta {
		if strings.EqualFold(k, genKey) {
			g, err := strconv.ParseUint(v, 10, 64)
			if err == nil {
				return g
			}
		}
	}
	return 0
}

// head returns the Object and generation of name (HeadObject), or the SDK's
// error.
func (b *Backend) head(ctx context.Context, name string) (checkpoint.Object, uint64, error) {
	out, err := b.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b.bucket, Key: aws.String(b.key(name))})
	if err != nil {
		return checkpoint.Object{}, 0, err
	}
	o, gen := b.described(name, out.ContentLength, out.ETag, out.LastModified, out.Metadata)
	return o, gen, nil
}

// described returns the Object and generation that a HEAD or GET response
// describes, and remembers the generation.
func (b *Backend) described(name string, size *int64, etag *string, modTime *time.Time, meta map[string]string) (checkpoint.Object, uint64) {
	o := checkpoint.Object{
		Name:    name,
		Size:    aws.ToInt64(size),
		Version: quoteETag(aws.ToString(etag)),
		ModTime: aws.ToTime(modTime),
	}
	gen := parseGen(meta)
	b.remember(name, o.Version, gen)
	return o, gen
}

// Stat returns the Object of name from a HeadObject. An object hidden by
// the fencing rule is an error wrapping fs.ErrNotExist.
func (b *Backend) Stat(ctx context.Context, name string) (checkpoint.Object, error) {
	if err := b.checkName("stat", name); err != nil {
		return checkpoint.Object{}, err
	}
	o, gen, err := b.head(ctx, name)
	if err != nil {
		return checkpoint.Object{}, requestError(ctx, "stat", b.Locate(name), nil, err)
	}
	visible, err := b.visible(ctx, name, o.Version, gen)
	if err != nil {
		return checkpoint.Object{}, fail("stat", b.Locate(name), nil, err)
	}
	if !visible {
		return checkpoint.Object{}, fail("stat", b.Locate(name), fs.ErrNotExist, errHidden)
	}
	return o, nil
}

// List returns the objects under the prefix (not those of child stores),
// with Size, Version (ETag) and ModTime from ListObjectsV2, which it pages
// through. Objects hidden by the fencing rule are left out. A writer that
// has just taken the lease (Lock), and has written nothing since, is
// answered from the listing that Lock made, without a request, until its
// first renewal.
func (b *Backend) List(ctx context.Context) ([]checkpoint.Object, error) {
	if err := b.checkOpen("list", ""); err != nil {
		return nil, err
	}
	if objs, ok := b.resumeListing(); ok {
		return objs, nil
	}
	objs, err := b.listVisible(ctx)
	if err != nil {
		return nil, listError(ctx, "list", b.Locate(""), err)
	}
	return objs, nil
}

// listAll pages through ListObjectsV2 with delimiter "/": the objects
// directly under the prefix (the lease object left out) and the child
// prefixes' names.
func (b *Backend) listAll(ctx context.Context) (objs []checkpoint.Object, children []string, err error) {
	in := &s3.ListObjectsV2Input{Bucket: &b.bucket, Prefix: aws.String(b.prefix), Delimiter: aws.String("/")}
	if b.cfg.pageSize > 0 {
		in.MaxKeys = aws.Int32(b.cfg.pageSize)
	}
	for {
		out, err := b.client.ListObjectsV2(ctx, in)
		if err != nil {
			return nil, nil, err
		}
		for _, o := range out.Contents {
			name := strings.TrimPrefix(aws.ToString(o.Key), b.prefix)
			if name == "" || name == leaseName || name == markerName || strings.HasPrefix(name, probePrefix) || strings.Contains(name, "/") {
				continue
			}
			objs = append(objs, checkpoint.Object{
				Name:    name,
				Size:    aws.ToInt64(o.Size),
				Version: quoteETag(aws.ToString(o.ETag)),
				ModTime: aws.ToTime(o.LastModified),
			})
		}
		for _, p := range out.CommonPrefixes {
			name := strings.TrimSuffix(strings.TrimPrefix(aws.ToString(p.Prefix), b.prefix), "/")
			if name != "" {
				children = append(children, name)
			}
		}
		if !aws.ToBool(out.IsTruncated) || aws.ToString(out.NextContinuationToken) == "" {
			return objs, children, nil
		}
		in.ContinuationToken = out.NextContinuationToken
	}
}

// Children returns the names of the child stores: the common prefixes
// under the prefix (ListObjectsV2 with delimiter "/") whose names Sub
// takes. A key put by something else may make a common prefix that is no
// child store's ("..", "a b", ""): it is left out, so that no caller
// builds a prefix outside the store from it.
func (b *Backend) Children(ctx context.Context) ([]string, error) {
	if err := b.checkOpen("children", ""); err != nil {
		return nil, err
	}
	_, all, err := b.listAll(ctx)
	if err != nil {
		return nil, requestError(ctx, "children", b.Locate(""), nil, err)
	}
	children := all[:0]
	for _, name := range all {
		if nameProblem(name) == nil {
			children = append(children, name)
		}
	}
	return children, nil
}

// Sub returns the Backend of the child store name: the prefix
// prefix/name/, on the same client and with the same options. It has a
// lease of its own (a child store has its own writer). With create, it
// puts an empty marker object, prefix/name/.checkpoint.store (If-None-Match:
// *, so an existing one is left alone), so that Children lists the child
// before anything is saved in it; without, it sends nothing.
func (b *Backend) Sub(ctx context.Context, name string, create bool) (checkpoint.Backend, error) {
	if err := b.checkName("sub", name); err != nil {
		return nil, err
	}
	child := &Backend{client: b.client, bucket: b.bucket, prefix: b.key(name) + "/", cfg: b.cfg, srv: b.srv, gens: make(map[objectKey]uint64)}
	if create {
		_, err := b.client.PutObject(ctx, &s3.PutObjectInput{
			Bucket: &b.bucket, Key: aws.String(child.key(markerName)),
			Body: bytes.NewReader(nil), ContentLength: aws.Int64(0), IfNoneMatch: aws.String("*"),
		})
		if err != nil && !isPrecondition(err) && !isConditionalConflict(err) {
			return nil, requestError(ctx, "sub", child.Locate(""), nil, err)
		}
	}
	return child, nil
}

// Remove deletes names (DeleteObject for one, DeleteObjects in batches of
// 1,000 for more). A missing name is gone, not an error.
func (b *Backend) Remove(ctx context.Context, names ...string) ([]bool, error) {
	gone := make([]bool, len(names))
	var errs []error
	var keys []int // indexes into names of the valid ones
	for i, name := range names {
		if err := b.checkName("remove", name); err != nil {
			errs = append(errs, err)
			continue
		}
		keys = append(keys, i)
	}
	if len(keys) == 0 {
		return gone, errors.Join(errs...)
	}
	if _, err := b.beginWrite("remove", b.Locate("")); err != nil {
		return gone, errors.Join(append(errs, err)...)
	}
	if len(keys) == 1 {
		name := names[keys[0]]
		_, err := b.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &b.bucket, Key: aws.String(b.key(name))})
		if err != nil && !isNotFound(err) {
			errs = append(errs, requestError(ctx, "remove", b.Locate(name), nil, err))
		} else {
			gone[keys[0]] = true
			b.forget(name)
		}
		return gone, errors.Join(errs...)
	}
	for first := true; len(keys) > 0; first = false {
		// Each batch is sent only while the lease holds: a writer that
		// lost it mid-removal must not go on deleting what the new
		// holder keeps.
		if !first {
			if _, err := b.beginWrite("remove", b.Locate("")); err != nil {
				return gone, errors.Join(append(errs, err)...)
			}
		}
		batch := keys[:min(len(keys), 1000)]
		keys = keys[len(batch):]
		ids := make([]types.ObjectIdentifier, len(batch))
		index := make(map[string]int, len(batch))
		for j, i := range batch {
			ids[j] = types.ObjectIdentifier{Key: aws.String(b.key(names[i]))}
			index[b.key(names[i])] = i
		}
		out, err := b.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
			Bucket: &b.bucket,
			Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)},
		})
		if err != nil {
			errs = append(errs, requestError(ctx, "remove", b.Locate(""), nil, err))
			continue
		}
		failed := make(map[int]bool)
		for _, e := range out.Errors {
			i, ok := index[aws.ToString(e.Key)]
			if !ok {
				continue
			}
			if aws.ToString(e.Code) == "NoSuchKey" {
				continue
			}
			failed[i] = true
			errs = append(errs, fail("remove", b.Locate(names[i]), nil, fmt.Errorf("%s: %s", aws.ToString(e.Code), aws.ToString(e.Message))))
		}
		for _, i := range batch {
			if !failed[i] {
				gone[i] = true
				b.forget(names[i])
			}
		}
	}
	return gone, errors.Join(errs...)
}

// Rename moves from to to: it reads from (GetObject with If-Match on the
// ETag of the HeadObject that found it visible), puts its bytes under to
// with one PutObject with If-None-Match: *, as Create does, and then
// deletes from. It never replaces an object: if one is at to, or another
// writer creates one while Rename runs, it returns an error wrapping
// checkpoint.ErrExists and leaves both objects as they are. The
// conditional PUT is what makes that hold on any server Create works on: a
// HeadObject of the destination leaves a window before the write, and
// CopyObject's If-None-Match is ignored by some servers (versitygw 1.8.0),
// which then overwrite.
//
// As for Create, an object at to hidden by the fencing rule is absent and
// is replaced. The new object carries this writer's generation, not the
// source's (the fencing rule would hide it), and no other metadata of the
// source. A source that changed after its HeadObject is ErrConflict; one
// larger than MaxObjectSize is ErrInvalid and nothing is written. The
// source's bytes are read whole before the PUT, into a spool as a
// Create's are (see SpoolDir), so that the SDK can send the PUT again and
// recognise an attempt that landed (a streamed body could be sent once
// only, and over plain HTTP not at all without giving up its signed
// payload hash), with memory that does not depend on their size.
// Repeating a Rename that was interrupted between the PUT and the delete
// finishes it: an object at to with the source's ETag and size is taken
// for its copy.
func (b *Backend) Rename(ctx context.Context, from, to string) error {
	if err := b.checkName("rename", from); err != nil {
		return err
	}
	if err := b.checkName("rename", to); err != nil {
		return err
	}
	loc := b.Locate(from) + " to " + b.Locate(to)
	src, srcGen, err := b.head(ctx, from)
	if err != nil {
		return requestError(ctx, "rename", loc, nil, err)
	}
	if ok, err := b.visible(ctx, from, src.Version, srcGen); err != nil {
		return fail("rename", loc, nil, err)
	} else if !ok {
		return fail("rename", loc, fs.ErrNotExist, errHidden)
	}
	if src.Size > b.cfg.maxSize {
		return fail("rename", loc, checkpoint.ErrInvalid, fmt.Errorf("the source is %d bytes, more than %d, the limit of one PutObject", src.Size, b.cfg.maxSize))
	}
	// A destination that is taken is refused before the source is read;
	// the PUT's condition alone makes the refusal race-free.
	dst, dstGen, err := b.head(ctx, to)
	switch {
	case isNotFound(err):
	case err != nil:
		return requestError(ctx, "rename", loc, nil, err)
	default:
		visible, err := b.visibleNow(ctx, to, dst.Version, dstGen)
		if err != nil {
			return fail("rename", loc, nil, err)
		}
		if visible && dst.Version == src.Version && dst.Size == src.Size {
			// A copy made by an earlier Rename that did not get to
			// delete the source: finish it.
			return b.removeRenamed(ctx, loc, from)
		}
		if visible {
			return fail("rename", loc, checkpoint.ErrExists, nil)
		}
	}
	body, err := b.readVersion(ctx, loc, from, src)
	if err != nil {
		return err
	}
	defer body.Close()
	if _, err := b.putBody(ctx, "rename", loc, to, storage.NoObject, checkpoint.ErrExists, body); err != nil {
		return err
	}
	return b.removeRenamed(ctx, loc, from)
}

// readVersion reads the whole object name into a spool (which the caller
// closes), which must still be the version o (GetObject with If-Match on
// its ETag): it is ErrConflict if the object changed since o was read,
// fs.ErrNotExist if it is gone.
func (b *Backend) readVersion(ctx context.Context, loc, name string, o checkpoint.Object) (*spool, error) {
	out, err := b.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &b.bucket, Key: aws.String(b.key(name)), IfMatch: aws.String(o.Version)})
	if err != nil {
		if isPrecondition(err) {
			return nil, fail("rename", loc, checkpoint.ErrConflict, fmt.Errorf("the source changed since its HEAD: %w", err))
		}
		return nil, requestError(ctx, "rename", loc, nil, err)
	}
	defer out.Body.Close()
	// A server that ignored If-Match is caught here.
	if etag, size := quoteETag(aws.ToString(out.ETag)), aws.ToInt64(out.ContentLength); etag != o.Version || size != o.Size {
		return nil, fail("rename", loc, checkpoint.ErrConflict, fmt.Errorf("the source changed since its HEAD (which said ETag %s, %d bytes; the GET says %s, %d bytes)", o.Version, o.Size, etag, size))
	}
	sp := newSpool(b.cfg)
	if n, err := io.Copy(sp, io.LimitReader(out.Body, o.Size)); err != nil || n != o.Size {
		sp.Close()
		if err == nil {
			err = fmt.Errorf("the GET ended after %d of %d bytes: %w", n, o.Size, io.ErrUnexpectedEOF)
		}
		return nil, fail("rename", loc, nil, fmt.Errorf("read the source: %w", err))
	}
	return sp, nil
}

func (b *Backend) removeRenamed(ctx context.Context, loc, from string) error {
	if _, err := b.beginWrite("rename", loc); err != nil {
		return err
	}
	_, err := b.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &b.bucket, Key: aws.String(b.key(from))})
	if err != nil && !isNotFound(err) {
		return requestError(ctx, "rename", loc, nil, fmt.Errorf("written to the destination, but deleting the source: %w", err))
	}
	b.forget(from)
	return nil
}

// Close stops renewing the lease if Lock holds it (it then expires after
// its TTL; the store's unlock releases it at once) and makes every later
// call fail with checkpoint.ErrClosed. The client is the caller's: Close
// leaves it open.
func (b *Backend) Close() error {
	b.mu.Lock()
	b.closed = true
	l := b.lease
	b.mu.Unlock()
	if l != nil {
		l.stopRenewing()
	}
	return nil
}
