package checkpoint

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// What the black-box tests of sessions know of the engine's internals: how
// long a temporary file of session.json may be taken for a live SetMeta's,
// the longest session ID, and the directory's name for a temporary file
// (and WithClock, in export_b_test.go).
const (
	StaleSessionTemp = staleSessionTemp
	MaxSessionIDLen  = maxSessionIDLen
)

// TempName is a temporary name for final, as the directory names one.
func TempName(final string) string { return tempName(final) }

// openSessions opens the root of sessions dir with NoSync and closes it
// when t ends, for the internal tests that open sessions (clocks, golden
// files, inspection, schemas).
func openSessions(t *testing.T, dir string, opts ...Option) *Sessions {
	t.Helper()
	r, err := OpenSessions(dir, append([]Option{NoSync()}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	return r
}

// listIDs returns the IDs r lists, in its order.
func listIDs(t *testing.T, r *Sessions) []string {
	t.Helper()
	list, err := r.List(context.Background())
	require.NoError(t, err)
	var out []string
	for _, s := range list {
		out = append(out, s.ID)
	}
	return out
}
