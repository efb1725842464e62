package checkpoint

import (
	"errors"
	"strconv"

	"github.com/gocheckpoint/checkpoint/internal/format"
	"github.com/gocheckpoint/checkpoint/storage"
)

// Sentinel errors. Every error a Store returns is an *Error that wraps one of
// these (or an error from the operating system), so test with errors.Is.
// Those a Backend wraps are package storage's, under the same names.
var (
	// ErrNotFound: no checkpoint exists for the step, the store holds no
	// checkpoint at all, or the directory does not exist (ReadOnly).
	ErrNotFound = storage.ErrNotFound
	// ErrCorrupt: a checkpoint file exists but cannot be trusted: it is empty,
	// truncated, not valid JSON, has a bad checksum or gzip or zstd stream, an
	// unsupported format version, a header that disagrees with its name, a
	// state that does not decode into the store's type, or it is larger than
	// the read limit.
	ErrCorrupt = format.ErrCorrupt
	// ErrExists: a checkpoint of that step and kind already exists. It was
	// left unchanged.
	ErrExists = storage.ErrExists
	// ErrClosed: the store has been closed.
	ErrClosed = errors.New("store is closed")
	// ErrLocked: another writer, in this process or another, holds the
	// store's directory. Open it with ReadOnly to inspect it. On Linux the
	// error's text names the process that holds the lock.
	ErrLocked = storage.ErrLocked
	// ErrReadOnly: a write was attempted on a store opened with ReadOnly.
	ErrReadOnly = storage.ErrReadOnly
	// ErrInvalid: an argument was invalid (a negative step, a bad layout or
	// name, a state that cannot be encoded as JSON, a state type with
	// nothing to encode, or a directory that holds checkpoints of another
	// layout than the one given with WithLayout).
	ErrInvalid = storage.ErrInvalid
	// ErrNewerSchema: a checkpoint's state has a newer schema version than
	// the store's (see WithSchema): a newer release of the program wrote it.
	// It is not damage: it is never moved aside, and Latest stops at it
	// rather than resume from an older step.
	ErrNewerSchema = format.ErrNewerSchema
	// ErrPayloadMismatch: a checkpoint holds another payload than the call
	// reads: a byte payload (SaveFrom) where Load or Latest decode a JSON
	// state, or a JSON state where OpenPayload or LatestPayload read a
	// byte payload. It is returned only for a checkpoint that verified: it
	// is not damage, it is never moved aside, and Latest (LatestPayload)
	// stops at it rather than resume from an older step.
	ErrPayloadMismatch = format.ErrPayloadMismatch
	// ErrMigration: a checkpoint's state could not be brought to the
	// store's schema: a migration failed or returned invalid JSON, its
	// output does not decode into the store's type, or no migration starts
	// at the file's schema. The file is left as it is, and Latest stops at
	// it rather than resume from an older step.
	ErrMigration = format.ErrMigration
	// ErrAsync: a save queued by an Async store failed in the background,
	// after the Save that queued it had returned. The error names the
	// failed steps and wraps each failure (an *Error naming the step and
	// file, wrapping its own cause). A Save or Tick that returns it has
	// queued its own state all the same: the failure is another save's.
	// Flush and Close return it too (see Async).
	ErrAsync = errors.New("background save failed")
	// ErrConflict: a conditional write found another object than the one
	// it expected under its name (see Backend.Replace): another writer
	// changed it. Nothing was written.
	ErrConflict = storage.ErrConflict
	// ErrNoKey: an encrypted file is encrypted to a key that none of the
	// identities given to Encrypt opens; the error names the key by its
	// key ID (see KeyID). It is not damage: the file is never moved
	// aside, and Latest stops at it rather than resume from an older step.
	ErrNoKey = format.ErrNoKey
	// ErrPlaintext: an encrypting store (see Encrypt) found a file that is
	// not encrypted. It is not damage: the file is never moved aside, and
	// Latest stops at it rather than resume from an older step;
	// ReadPlaintext reads such files, to re-encrypt a store.
	ErrPlaintext = format.ErrPlaintext
	// ErrUnavailable: the storage did not answer, or not in full (object
	// storage: a network error, a timeout, a server error that outlived
	// the client's retries). Nothing is known of the checkpoint: it is
	// never moved aside, and Latest stops at it rather than resume from an
	// older step; trying again may succeed.
	ErrUnavailable = storage.ErrUnavailable
)

// Error records a failed store operation, the step and the file it concerned,
// and the cause.
type Error struct {
	Op   string // the operation: "open", "save", "load", "latest", "list", "delete", ...
	Step int64  // the step concerned; meaningful only when HasStep is true
	// HasStep reports whether the operation concerned one step. Step 0 is
	// a step like any other, so Step alone cannot say "no step".
	HasStep bool
	Path    string // the file or directory concerned, if any
	Err     error  // the cause; wraps a sentinel or an operating system error
}

// Error returns "checkpoint: ", the operation, the step if HasStep, the
// path if any, and the cause.
func (e *Error) Error() string {
	b := []byte("checkpoint: ")
	b = append(b, e.Op...)
	if e.HasStep {
		b = append(b, " step "...)
		b = strconv.AppendInt(b, e.Step, 10)
	}
	if e.Path != "" {
		b = append(b, ' ')
		b = append(b, e.Path...)
	}
	b = append(b, ": "...)
	b = append(b, e.Err.Error()...)
	return string(b)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// opError builds an *Error for an operation that concerns no single step.
func opError(op, path string, err error) error {
	return &Error{Op: op, Path: path, Err: err}
}

// stepError builds an *Error for an operation on one step.
func stepError(op string, step int64, path string, err error) error {
	return &Error{Op: op, Step: step, HasStep: true, Path: path, Err: err}
}

// maxListed bounds how many failures the text of a joined error lists.
const maxListed = 5

// joinFew joins errs like errors.Join, and errors.Is and errors.As see every
// one of them, but its text lists only the first maxListed, then how many
// more there were: a directory of 2,000 damaged files gives an error of a
// few lines, not of 2,000 (each was reported to the hooks and the logger).
func joinFew(errs []error) error {
	if len(errs) <= maxListed {
		return errors.Join(errs...)
	}
	return fewErrors(errs)
}

type fewErrors []error

func (e fewErrors) Error() string {
	b := []byte(errors.Join(e[:maxListed]...).Error())
	b = append(b, "\nand "...)
	b = strconv.AppendInt(b, int64(len(e)-maxListed), 10)
	b = append(b, " more"...)
	return string(b)
}

func (e fewErrors) Unwrap() []error { return e }
