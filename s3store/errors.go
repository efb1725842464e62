package s3store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/gocheckpoint/checkpoint"
)

// fail builds the error of operation op on the object or prefix at loc (an
// s3:// URL, Locate's form). It wraps kind, a sentinel of the core package
// or fs.ErrNotExist, so errors.Is works, and cause, the SDK's error or a
// description, so errors.As still finds the SDK's types.
func fail(op, loc string, kind, cause error) error {
	switch {
	case kind == nil:
		return fmt.Errorf("s3store: %s %s: %w", op, loc, cause)
	case cause == nil:
		return fmt.Errorf("s3store: %s %s: %w", op, loc, kind)
	default:
		return fmt.Errorf("s3store: %s %s: %w: %w", op, loc, kind, cause)
	}
}

// requestError is fail for the error of an S3 request: it picks the
// sentinel from the HTTP status (404 is fs.ErrNotExist, 412 is ifFailed:
// ErrExists or ErrConflict depending on the condition the request had) and
// wraps checkpoint.ErrUnavailable for a 5xx that outlived the SDK's
// retries, a network error or an attempt that timed out (no answer; see
// attemptTimedOut): ctx is the request's. The end of ctx itself is left
// unwrapped by any sentinel.
func requestError(ctx context.Context, op, loc string, ifFailed, err error) error {
	switch {
	case attemptTimedOut(ctx, err):
		return fail(op, loc, checkpoint.ErrUnavailable, err)
	case ctxErr(err):
		return fail(op, loc, nil, err)
	case isNotFound(err):
		return fail(op, loc, fs.ErrNotExist, err)
	case isPrecondition(err) && ifFailed != nil:
		return fail(op, loc, ifFailed, err)
	case unanswered(err):
		return fail(op, loc, checkpoint.ErrUnavailable, err)
	}
	return fail(op, loc, nil, err)
}

// listError is the error of op on loc (a listing, or a step that failed
// at one) from err: wrapping ErrUnavailable where err is an SDK error of
// a request made with ctx that got no answer (see unavailable).
func listError(ctx context.Context, op, loc string, err error) error {
	var kind error
	if unavailable(ctx, err) {
		kind = checkpoint.ErrUnavailable
	}
	return fail(op, loc, kind, err)
}

// unavailable reports whether err, an SDK operation's error (wrapped or
// not) of a request made with ctx, got no answer (see unanswered and
// attemptTimedOut) and does not say so yet with ErrUnavailable.
func unavailable(ctx context.Context, err error) bool {
	var op *smithy.OperationError
	if err == nil || errors.Is(err, checkpoint.ErrUnavailable) || !errors.As(err, &op) {
		return false
	}
	return attemptTimedOut(ctx, err) || !ctxErr(err) && unanswered(err)
}

// unanswered reports whether err is a request's that the server did not
// answer in full, or answered with a 5xx: a network error, a timeout of
// one attempt, an answer cut short (which does not deserialize), or a
// server error, past the SDK's retries.
// The caller's own ctx ending is not one (see ctxErr).
func unanswered(err error) bool {
	var de *smithy.DeserializationError
	if errors.As(err, &de) {
		return true // an answer cut short (or garbled): none in full
	}
	if s := httpStatus(err); s != 0 {
		return s >= 500
	}
	return errorCode(err) == ""
}

func ctxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

func httpStatus(err error) int {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// isPrecondition reports a failed If-Match or If-None-Match (412). A 409
// ConditionalRequestConflict (AWS: another conditional write of the key was
// in flight) is not one: the caller retries it.
func isPrecondition(err error) bool {
	return httpStatus(err) == 412 || errorCode(err) == "PreconditionFailed"
}

func isConditionalConflict(err error) bool {
	return httpStatus(err) == 409 && errorCode(err) == "ConditionalRequestConflict"
}

func isNotFound(err error) bool {
	if httpStatus(err) == 404 {
		return true
	}
	switch errorCode(err) {
	case "NoSuchKey", "NotFound":
		return true
	}
	return false
}

func isNotModified(err error) bool { return httpStatus(err) == 304 }

// errHidden is the cause of an fs.ErrNotExist for an object that exists but
// was written by a writer that had lost the lease (see the package doc):
// the store must see it as absent, never as damage.
var errHidden = errors.New("written by a writer that had lost the lease (fenced)")

var _ checkpoint.Backend = (*Backend)(nil)
