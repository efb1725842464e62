package backendtest

import (
	"testing"

	"github.com/gocheckpoint/checkpoint"
)

// NewMemLosing returns a Mem whose calls of op ("create", "replace",
// "remove", "rename" or "sub") change what calls see but never make their
// change durable: a backend missing one sync, which the crash model must
// catch.
func NewMemLosing(op string) *Mem {
	m := NewMem()
	m.lose = op
	return m
}

// MemRewrite rewrites the object name of b, a Mem's backend, in place (see
// RewriteInPlace).
func MemRewrite(t *testing.T, b checkpoint.Backend, name string, p []byte) {
	b.(*memBackend).rewrite(name, p)
}
