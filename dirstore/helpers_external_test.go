package dirstore_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest/inject"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/internal/testkit"
	"github.com/gocheckpoint/checkpoint/storage"
)

// What the tests know of the names the store and the directory write.
const (
	lockName         = dirstore.LockName
	tempMarker       = ".ckpt-tmp-"
	sessionFile      = "session.json"
	sessionsLockName = ".sessions.lock"
	stagingPrefix    = ".staging-"
	quarantineSuffix = ".corrupt"
)

// tempPrefix is the name of final's temporary files less their random
// digits.
func tempPrefix(final string) string { return "." + final + tempMarker }

// openFaulty opens a store on the directory dir whose own fault points
// (see SetFault) fail where dirFault says, wrapped, unless opFault is nil,
// in inject.Wrap with opFault: the directory's test seam for faults inside
// one write, the wrapper for faults of whole Backend operations. The
// directory is opened durable, whatever opts say: the fault points of its
// syncs are then reached.
func openFaulty[T any](t *testing.T, dir string, dirFault func(point, name string) error, opFault func(inject.Op) error, opts ...checkpoint.Option) *checkpoint.Store[T] {
	t.Helper()
	s, _ := openFaultyBackend[T](t, dir, dirFault, opFault, opts...)
	return s
}

// openFaultyBackend is openFaulty, which also returns the directory.
func openFaultyBackend[T any](t *testing.T, dir string, dirFault func(point, name string) error, opFault func(inject.Op) error, opts ...checkpoint.Option) (*checkpoint.Store[T], storage.Backend) {
	t.Helper()
	d, err := dirstore.Open(dir)
	require.NoError(t, err)
	dirstore.SetFault(d, dirFault)
	b := d
	if opFault != nil {
		b = inject.Wrap(d, opFault)
	}
	s, err := checkpoint.OpenBackend[T](b, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s, d
}

// openSessions opens a root of sessions on the directory dir with NoSync.
func openSessions(t *testing.T, dir string) *checkpoint.Sessions {
	t.Helper()
	r, _ := openSessionsWith(t, dir, dirstore.NoSync())
	return r
}

// openFaultySessions opens a durable root of sessions on the directory
// dir whose fault points, and its child stores', fail where fault says
// (see SetFault).
func openFaultySessions(t *testing.T, dir string, fault func(point, name string) error) *checkpoint.Sessions {
	t.Helper()
	r, b := openSessionsWith(t, dir)
	dirstore.SetFault(b, fault)
	return r
}

// openSessionsWith opens a root of sessions on the directory dir opened
// with opts (the root with NoSync when opts are given), closed when the
// test ends, and returns the directory too.
func openSessionsWith(t *testing.T, dir string, opts ...dirstore.Option) (*checkpoint.Sessions, storage.Backend) {
	t.Helper()
	b, err := dirstore.Open(dir, opts...)
	require.NoError(t, err)
	var sopts []checkpoint.Option
	if len(opts) > 0 {
		sopts = append(sopts, checkpoint.NoSync())
	}
	r, err := checkpoint.OpenSessionsBackend(b, sopts...)
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	return r, b
}

func listIDs(t *testing.T, r *checkpoint.Sessions) []string {
	t.Helper()
	list, err := r.List(context.Background())
	require.NoError(t, err)
	var out []string
	for _, s := range list {
		out = append(out, s.ID)
	}
	return out
}

// checkpointNames lists the checkpoint files in dir, sorted.
func checkpointNames(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, name := range dirNames(t, dir) {
		if name != lockName {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// openStore opens a store on dir with NoSync, closed when the test ends.
func openStore[T any](t *testing.T, dir string, opts ...checkpoint.Option) *checkpoint.Store[T] {
	t.Helper()
	s, err := checkpoint.Open[T](dir, append([]checkpoint.Option{checkpoint.NoSync()}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// writeString is a write function of a Backend that writes s.
func writeString(s string) func(w io.Writer) error {
	return func(w io.Writer) error {
		_, err := io.WriteString(w, s)
		return err
	}
}

// dirNames returns the names in dir, sorted.
var dirNames = testkit.DirNames

// touch writes a small file of each name in dir.
func touch(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o644))
	}
}
