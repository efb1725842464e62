package s3store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/gocheckpoint/checkpoint"
)

// drainLimit is how much of an unread body Close reads to its end, so that
// its connection is reused, rather than drop the connection.
const drainLimit = 64 << 10

// Open returns a stream of the object name as it is at the opening: one
// GET, whose body is the stream. A replacement or removal of the object
// while it is read does not affect the read (a server answers a GET that
// has started with the object it started with), as with an open file.
// The Object is from the GET's headers. A missing name, or an object
// hidden by the fencing rule, is an error wrapping fs.ErrNotExist. Reads
// use ctx.
//
// Why not ranges: several GETs of one object can be pinned to one ETag
// (If-Match), but an object replaced between them could then be read only
// in part, and S3 without versioning keeps no old bytes to finish it; one
// GET is the only read that is whole whatever the writer does. The price:
// closing the stream with more than 64 KiB unread (a header read of a large
// checkpoint) drops the GET's connection, and whatever the server had sent
// ahead of the reader (up to the socket buffers) is discarded.
func (b *Backend) Open(ctx context.Context, name string) (io.ReadCloser, checkpoint.Object, error) {
	loc := b.Locate(name)
	if err := b.checkName("open", name); err != nil {
		return nil, checkpoint.Object{}, err
	}
	out, err := b.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &b.bucket, Key: aws.String(b.key(name))})
	if err != nil {
		return nil, checkpoint.Object{}, requestError(ctx, "open", loc, nil, err)
	}
	o, gen := b.described(name, out.ContentLength, out.ETag, out.LastModified, out.Metadata)
	visible, err := b.visible(ctx, name, o.Version, gen)
	if err != nil || !visible {
		out.Body.Close()
		if attemptTimedOut(ctx, err) {
			return nil, checkpoint.Object{}, fail("open", loc, checkpoint.ErrUnavailable, err)
		}
		if err != nil {
			return nil, checkpoint.Object{}, fail("open", loc, nil, err)
		}
		return nil, checkpoint.Object{}, fail("open", loc, fs.ErrNotExist, errHidden)
	}
	return &objectReader{loc: loc, body: out.Body, left: o.Size}, o, nil
}

// attemptTimedOut reports whether err, of a request made with ctx, is a
// timeout of the HTTP client's (an attempt's, past the SDK's retries)
// rather than ctx's own end: the server did not answer in time.
func attemptTimedOut(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() == nil && ctxErr(err) && !errors.Is(err, checkpoint.ErrUnavailable)
}

// objectReader reads a GET's body, checking that it has the length the
// response announced.
type objectReader struct {
	loc  string
	body io.ReadCloser
	left int64 // bytes still expected
	err  error // sticky
}

func (r *objectReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if r.left == 0 {
		r.err = io.EOF
		return 0, io.EOF
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.body.Read(p)
	r.left -= int64(n)
	switch {
	case err == io.EOF && r.left > 0:
		r.err = fail("read", r.loc, checkpoint.ErrUnavailable, fmt.Errorf("the GET ended %d bytes early: %w", r.left, io.ErrUnexpectedEOF))
	case err != nil && err != io.EOF:
		r.err = fail("read", r.loc, checkpoint.ErrUnavailable, err)
	}
	if n > 0 {
		return n, nil
	}
	if r.err != nil {
		return 0, r.err
	}
	return 0, nil
}

// Close closes the GET's body, reading it to its end first if at most
// 64 KiB are left, so that its connection is reused.
func (r *objectReader) Close() error {
	if r.body == nil {
		return nil
	}
	if r.err == nil && r.left > 0 && r.left <= drainLimit {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.body, r.left))
	}
	err := r.body.Close()
	r.body = nil
	if r.err == nil || r.err == io.EOF {
		r.err = fs.ErrClosed
	}
	return err
}
