package backendtest

import (
	"strings"
	"testing"

	"github.com/gocheckpoint/checkpoint"
)

// NewMemLosing returns a Mem whose calls of op ("create", "replace",
// "remove", "rename", "sub" or "commit") change what calls see but never
// make their change durable (a "commit" syncs nothing): a backend missing
// one sync, which the crash model must catch.
func NewMemLosing(op string, opts ...MemOption) *Mem {
	m := NewMem(opts...)
	m.lose = op
	return m
}

// MemMutant makes a Mem break the one promise mutant names (see the
// mutants of TestSuiteFailsBrokenBackends), so that the suite is seen to
// fail a backend that breaks it.
func MemMutant(mutant string) MemOption {
	return memOptionFunc(func(c *memConfig) { c.mutant = mutant })
}

// MemRewrite rewrites the object name of b, a Mem's backend, in place (see
// RewriteInPlace).
func MemRewrite(t *testing.T, b checkpoint.Backend, name string, p []byte) {
	memOf(b).rewrite(name, p)
}

// MemTemps returns the names of the temporary objects in the store of b, a
// Mem's backend (see leaveTemps).
func MemTemps(b checkpoint.Backend) []string {
	mb := memOf(b)
	mb.m.mu.Lock()
	defer mb.m.mu.Unlock()
	var names []string
	for key, o := range mb.m.live {
		if name, ok := strings.CutPrefix(key, mb.prefix); ok && o.tempOf != "" && !strings.Contains(name, "/") {
			names = append(names, name)
		}
	}
	return names
}
