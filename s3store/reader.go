package s3store

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/gocheckpoint/checkpoint"
)

// The ranges Open reads: a store often reads only a checkpoint's header
// (its first kilobyte) to list or pick one, so the first GET asks for
// 64 KiB; the ranges then grow, so a large object costs few requests.
// Ranges rather than one GET whose body is closed early: closing an
// unfinished body throws away its connection (and, on a large object,
// whatever the server had already sent).
const (
	firstRange = 64 << 10
	nextRange  = 1 << 20
	maxRange   = 16 << 20
)

// Open returns a stream of the object name: a GET of its first 64 KiB,
// then GETs of further ranges (growing to 16 MiB) with If-Match on the
// ETag of the first, so every byte comes from one object. If the object is
// replaced while it is read, the next range fails with an error wrapping
// checkpoint.ErrConflict. The Object is from the first GET (Size from its
// Content-Range). A missing name, or an object hidden by the fencing rule,
// is an error wrapping fs.ErrNotExist. Reads use ctx.
func (b *Backend) Open(ctx context.Context, name string) (io.ReadCloser, checkpoint.Object, error) {
	loc := b.Locate(name)
	if err := b.checkName("open", name); err != nil {
		return nil, checkpoint.Object{}, err
	}
	key := b.key(name)
	out, err := b.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &b.bucket, Key: &key, Range: aws.String(byteRange(0, firstRange))})
	if isInvalidRange(err) {
		// An empty object has no byte 0 to start a range at.
		out, err = b.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &b.bucket, Key: &key})
	}
	if err != nil {
		return nil, checkpoint.Object{}, requestError("open", loc, nil, err)
	}
	o := checkpoint.Object{
		Name:    name,
		Size:    aws.ToInt64(out.ContentLength),
		Version: quoteETag(aws.ToString(out.ETag)),
		ModTime: aws.ToTime(out.LastModified),
	}
	if total, ok := rangeTotal(aws.ToString(out.ContentRange)); ok {
		o.Size = total
	}
	gen := parseGen(out.Metadata)
	b.remember(name, o.Version, gen)
	visible, err := b.visible(ctx, name, o.Version, gen)
	if err != nil || !visible {
		out.Body.Close()
		if err != nil {
			return nil, checkpoint.Object{}, fail("open", loc, nil, err)
		}
		return nil, checkpoint.Object{}, fail("open", loc, fs.ErrNotExist, errHidden)
	}
	r := &rangeReader{ctx: ctx, b: b, key: key, loc: loc, etag: o.Version, size: o.Size, body: out.Body, end: o.Size}
	if cr := aws.ToString(out.ContentRange); cr != "" {
		r.end = min(o.Size, firstRange)
	}
	return r, o, nil
}

func byteRange(from, n int64) string {
	return "bytes=" + strconv.FormatInt(from, 10) + "-" + strconv.FormatInt(from+n-1, 10)
}

// rangeTotal returns the complete length from a Content-Range such as
// "bytes 0-65535/1048576".
func rangeTotal(cr string) (int64, bool) {
	i := strings.LastIndexByte(cr, '/')
	if i < 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(cr[i+1:], 10, 64)
	return n, err == nil && n >= 0
}

// rangeReader reads an object range by range, every range pinned to one
// ETag.
type rangeReader struct {
	ctx  context.Context
	b    *Backend
	key  string
	loc  string
	etag string
	size int64
	off  int64         // bytes returned so far
	end  int64         // where the current body ends
	body io.ReadCloser // nil between ranges
	next int64         // length of the next range
	err  error         // sticky
}

func (r *rangeReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	for {
		if r.body == nil {
			if r.off >= r.size {
				return 0, io.EOF
			}
			if err := r.fetch(); err != nil {
				r.err = err
				return 0, err
			}
		}
		n, err := r.body.Read(p)
		r.off += int64(n)
		if err == io.EOF || (err == nil && r.off >= r.end) {
			r.body.Close()
			r.body = nil
			if r.off < r.end {
				r.err = fail("read", r.loc, nil, fmt.Errorf("range ended at byte %d, expected %d: %w", r.off, r.end, io.ErrUnexpectedEOF))
				return n, r.err
			}
			err = nil
		}
		if err != nil {
			r.err = fail("read", r.loc, nil, err)
			return n, r.err
		}
		if n > 0 || len(p) == 0 {
			return n, nil
		}
	}
}

func (r *rangeReader) fetch() error {
	if r.next == 0 {
		r.next = nextRange
	}
	n := min(r.next, r.size-r.off)
	r.next = min(r.next*2, maxRange)
	out, err := r.b.client.GetObject(r.ctx, &s3.GetObjectInput{
		Bucket:  &r.b.bucket,
		Key:     &r.key,
		Range:   aws.String(byteRange(r.off, n)),
		IfMatch: aws.String(r.etag),
	})
	if err != nil {
		if isPrecondition(err) || isNotFound(err) {
			return fail("read", r.loc, checkpoint.ErrConflict, fmt.Errorf("object replaced or removed while read (at byte %d): %w", r.off, err))
		}
		return requestError("read", r.loc, nil, err)
	}
	r.body = out.Body
	r.end = r.off + n
	return nil
}

// Close closes the current range's body (a range is at most 16 MiB, and
// the first only 64 KiB, so little is thrown away).
func (r *rangeReader) Close() error {
	if r.err == nil {
		r.err = fs.ErrClosed
	}
	if r.body != nil {
		err := r.body.Close()
		r.body = nil
		return err
	}
	return nil
}
