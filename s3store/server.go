package s3store

import (
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// ErrUnsupported is wrapped by the error of a Backend whose S3 server does
// not provide what the store's guarantees rest on (see "What the server
// must provide" in the package doc): a PutObject with If-None-Match: *
// that does not refuse an existing object, or one with If-Match that does
// not refuse another ETag (or refuses the object's own, in every form).
// Lock checks the server before it takes the lease, and refuses to write on
// such a server, since two writers would then both believe they hold the
// store; a lease renewal that the server refuses for no reason the lease
// object shows (its own ETag still there) wraps it too. It is never wrapped
// together with checkpoint.ErrLocked by Lock: the remedy is another server,
// not waiting.
var ErrUnsupported = errors.New("the S3 server does not provide a conditional write the store relies on")

// probePrefix starts the names of the scratch objects with which Lock checks
// the server's conditional writes. List leaves them out, and Create,
// Replace, Remove and Rename refuse them.
const probePrefix = ".checkpoint.probe-"

// serverState is what a Backend learns of its server, shared by the
// Backends Sub derives from it (one server, one bucket).
type serverState struct {
	// bareIfMatch is set once the server has refused an If-Match on a
	// PutObject that named the object's current ETag quoted (the form of
	// RFC 9110, which S3 documents) and accepted it bare: Ceph RGW (16.2)
	// compares the header with the bare hexadecimal ETag it stores.
	// versitygw does the opposite. Every later PutObject sends the form
	// that worked.
	bareIfMatch atomic.Bool

	mu      sync.Mutex
	checked bool  // the conditions were checked (probe), with the result err
	err     error // wraps ErrUnsupported, or nil
}

// ifMatch returns the If-Match value of a PutObject for etag, in the form
// the server takes.
func (s *serverState) ifMatch(etag string) string {
	if s.bareIfMatch.Load() {
		return bareETag(etag)
	}
	return quoteETag(etag)
}

// bareETag returns an ETag without its quotes ("abc" is abc).
func bareETag(etag string) string {
	if len(etag) >= 2 && strings.HasPrefix(etag, `"`) && strings.HasSuffix(etag, `"`) {
		return etag[1 : len(etag)-1]
	}
	return etag
}

// putObject sends in, a PutObject whose If-Match (if any) holds an ETag in
// either form, with the If-Match in the form the server takes, and returns
// the SDK's answer. A server that refuses the condition (412) although the
// object has that very ETag (a HeadObject right after says so) did not
// understand the form: the PUT is sent again in the other form (the body
// is seeked back to its start), and the form that succeeds is remembered.
// A real refusal (the object has another ETag, or none) is returned as it
// came, so it is never turned into a success. A server that refuses the
// object's own ETag in both forms returns an error wrapping ErrUnsupported
// (and not the 412's API error: no caller may take it for a conflict).
func (b *Backend) putObject(ctx context.Context, in *s3.PutObjectInput) (*s3.PutObjectOutput, error) {
	if in.IfMatch == nil {
		return b.client.PutObject(ctx, in)
	}
	want := quoteETag(*in.IfMatch)
	in.IfMatch = aws.String(b.srv.ifMatch(want))
	out, err := b.client.PutObject(ctx, in)
	if err == nil || !isPrecondition(err) || !b.holds(ctx, aws.ToString(in.Key), want) {
		return out, err
	}
	sent := *in.IfMatch
	other := want
	if sent == want {
		other = bareETag(want)
	}
	if sent == other {
		return out, err // a weak or odd ETag: no other form to try
	}
	// The body goes again from its start; one that cannot be rewound
	// cannot go again.
	if s, ok := in.Body.(io.Seeker); !ok {
		return out, err
	} else if _, serr := s.Seek(0, io.SeekStart); serr != nil {
		return out, err
	}
	in.IfMatch = aws.String(other)
	out2, err2 := b.client.PutObject(ctx, in)
	switch {
	case err2 == nil:
		b.srv.bareIfMatch.Store(other != want)
		return out2, nil
	case isPrecondition(err2) && b.holds(ctx, aws.ToString(in.Key), want):
		return nil, fmt.Errorf("%w: it refused PutObject with If-Match on the object's current ETag, %s and %s alike (HTTP %d %s; %v)",
			ErrUnsupported, sent, other, httpStatus(err2), errorCode(err2), err2)
	}
	return out2, err2
}

// holds reports whether a HeadObject of key finds the ETag etag.
func (b *Backend) holds(ctx context.Context, key, etag string) bool {
	out, err := b.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b.bucket, Key: &key})
	return err == nil && quoteETag(aws.ToString(out.ETag)) == etag
}

// checkServer makes sure, once per server (the Backend and those Sub
// derives from it), that its PutObject honours If-None-Match: * and
// If-Match, by probing; Lock calls it before it writes anything. A server
// found not to honour them is remembered, and every later call returns the
// same error; a probe that failed otherwise (a network error, ctx) is tried
// again at the next call.
func (b *Backend) checkServer(ctx context.Context) error {
	b.srv.mu.Lock()
	defer b.srv.mu.Unlock()
	if b.srv.checked {
		return b.srv.err
	}
	err := b.probe(ctx)
	if err != nil && !errors.Is(err, ErrUnsupported) {
		return err
	}
	b.srv.checked, b.srv.err = true, err
	return err
}

// probe checks the server's conditional PutObject on a scratch object
// under the prefix, which it removes: a create with If-None-Match: *, a
// second one (which must be refused), a replacement with If-Match on the
// ETag of the first (which must succeed, and tells the form of If-Match the
// server takes), and one on another ETag (which must be refused). Four PUTs
// and a DELETE; on a server that takes If-Match bare (Ceph RGW), a HEAD
// and a PUT more.
func (b *Backend) probe(ctx context.Context) (err error) {
	var r [8]byte
	name := probePrefix + hex.EncodeToString(randomBytes(r[:]))
	key := b.key(name)
	loc := b.Locate(name)
	where := "the server at " + b.endpoint() + ", bucket " + b.bucket + ", scratch object " + loc
	unsupported := func(format string, args ...any) error {
		return fail("lock", b.Locate(""), ErrUnsupported, fmt.Errorf("%s: %s", where, fmt.Sprintf(format, args...)))
	}
	transient := func(err error) error {
		return requestError(ctx, "lock", b.Locate(""), nil, fmt.Errorf("checking the conditional writes of %s: %w", where, err))
	}
	put := func(body string, ifMatch, ifNoneMatch *string) (*s3.PutObjectOutput, error) {
		return b.putObject(ctx, &s3.PutObjectInput{
			Bucket: &b.bucket, Key: &key, Body: strings.NewReader(body), ContentLength: aws.Int64(int64(len(body))),
			IfMatch: ifMatch, IfNoneMatch: ifNoneMatch,
		})
	}
	created := false
	defer func() {
		if !created {
			return
		}
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, derr := b.client.DeleteObject(dctx, &s3.DeleteObjectInput{Bucket: &b.bucket, Key: &key}); derr != nil && !isNotFound(derr) && err == nil {
			err = transient(fmt.Errorf("removing the scratch object: %w", derr))
		}
	}()
	out, err := put("1", nil, aws.String("*"))
	if err != nil {
		if isPrecondition(err) {
			return unsupported("PutObject with If-None-Match: * of a new key was refused (HTTP %d %s)", httpStatus(err), errorCode(err))
		}
		return transient(err)
	}
	created = true
	first := quoteETag(aws.ToString(out.ETag))
	switch _, err := put("2", nil, aws.String("*")); {
	case err == nil:
		return unsupported("the server ignores If-None-Match: * on PutObject: a second create of the key succeeded (two writers could both create a checkpoint, or both take the lease)")
	case isPrecondition(err) || isConditionalConflict(err):
	default:
		return transient(err)
	}
	_, err = put("3", aws.String(first), nil)
	if err != nil {
		if errors.Is(err, ErrUnsupported) {
			return fail("lock", b.Locate(""), nil, fmt.Errorf("%s: %w", where, err))
		}
		if isPrecondition(err) || isNotFound(err) {
			return unsupported("PutObject with If-Match on the key's current ETag %s was refused (HTTP %d %s)", first, httpStatus(err), errorCode(err))
		}
		return transient(err)
	}
	sum := md5.Sum([]byte("not the object"))
	wrong := `"` + hex.EncodeToString(sum[:]) + `"`
	_, err = b.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &b.bucket, Key: &key, Body: strings.NewReader("4"), ContentLength: aws.Int64(1),
		IfMatch: aws.String(b.srv.ifMatch(wrong)),
	})
	switch {
	case err == nil:
		return unsupported("the server ignores If-Match on PutObject: a PUT with If-Match on another ETag succeeded (a writer that lost its lease would not notice)")
	case isPrecondition(err) || isNotFound(err):
	default:
		return transient(err)
	}
	return nil
}

func randomBytes(p []byte) []byte {
	_, _ = rand.Read(p)
	return p
}

// endpoint names the server, for errors: the client's endpoint, or AWS S3
// and its region.
func (b *Backend) endpoint() string {
	o := b.client.Options()
	if ep := aws.ToString(o.BaseEndpoint); ep != "" {
		return ep
	}
	return "AWS S3 (" + o.Region + ")"
}
