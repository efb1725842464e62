package checkpoint

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint/internal/testkit"
)

// openStore opens a store with NoSync: most tests are about what a store
// does, not about what reaches the disk, and fsyncs would make the suite
// several times slower. The tests of durability (fault points, disk full,
// kills) use openDurableStore or Open.
func openStore[T any](t *testing.T, dir string, opts ...Option) *Store[T] {
	t.Helper()
	return openDurableStore[T](t, dir, append([]Option{NoSync()}, opts...)...)
}

// openDurableStore opens a store that fsyncs, as a program's would.
func openDurableStore[T any](t *testing.T, dir string, opts ...Option) *Store[T] {
	t.Helper()
	s, err := Open[T](dir, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func dirNames(t *testing.T, dir string) []string { return testkit.DirNames(t, dir) }

// envelope is a whole checkpoint, its state still encoded.
type envelope struct {
	header
	State json.RawMessage
}

// readEnvelope reads and verifies a whole checkpoint, as a load does.
func readEnvelope(r io.Reader, max int64) (envelope, error) {
	var env envelope
	err := newCodec(compressNone, max).Read(r, -1, func(h header, state []byte) error {
		env = envelope{header: h, State: bytes.Clone(state)}
		return nil
	})
	return env, err
}
