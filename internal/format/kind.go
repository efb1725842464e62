package format

import "time"

// Kind says why a checkpoint was written. It is part of the file name and of
// the envelope, so it is known without decoding the state. The store's
// checkpoint.Kind is this type.
type Kind string

// The kinds a checkpoint may have; the store documents them.
const (
	KindStep    Kind = "step"
	KindFinal   Kind = "final"
	KindError   Kind = "error"
	KindRolling Kind = "rolling"
)

// Valid reports whether k is one of the kinds a checkpoint may have.
func (k Kind) Valid() bool {
	switch k {
	case KindStep, KindFinal, KindError, KindRolling:
		return true
	}
	return false
}

// File name extensions of a checkpoint, by compression.
const (
	ExtPlain = ".json"
	ExtGzip  = ".json.gz"
	ExtZstd  = ".json.zst"
)

// ErrorRecord is stored in the envelope of an error checkpoint so that a
// resumed run can show what went wrong. The store's checkpoint.ErrorRecord
// is this type.
type ErrorRecord struct {
	// Message is the error's text, or the panic value formatted with %v.
	// A text over 32 KiB keeps its first 32 KiB and ends with a marker
	// ("... [truncated: N bytes in all]").
	Message string `json:"message"`
	// Types lists the dynamic types of the errors in the chain, outermost
	// first, as formatted by %T (for example "*fs.PathError").
	Types []string `json:"types,omitempty"`
	// Step is the step that failed.
	Step int64 `json:"step"`
	// Time is when the failure was recorded.
	Time time.Time `json:"time"`
	// Panic reports whether the failure was a panic.
	Panic bool `json:"panic,omitempty"`
	// Stack is the goroutine's stack at the panic, for panics only; past
	// 64 KiB it is cut like Message.
	Stack string `json:"stack,omitempty"`
}
