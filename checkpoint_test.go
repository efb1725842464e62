package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint/internal/testkit"
)

// The sample state and the directory listing are package testkit's.
type gameState = testkit.GameState

var sampleState = testkit.SampleState

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

func envelopeBytes(h header, state []byte) []byte { return encodeBytes(h, state, compressNone) }

func encodeBytes(h header, state []byte, comp compression) []byte {
	var buf bytes.Buffer
	if err := newCodec(comp, DefaultMaxReadSize).WriteEnvelope(&buf, h, state); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// encodeState returns a state's bytes as a store writes them.
func encodeState(v any) ([]byte, error) {
	buf, err := newCodec(compressNone, DefaultMaxReadSize).EncodeState(v)
	if err != nil {
		return nil, err
	}
	return bytes.Clone(buf.Bytes()), nil
}

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

// decompress returns a file's decompressed bytes.
func decompress(t *testing.T, data []byte) []byte {
	t.Helper()
	r, _, release, err := newCodec(compressNone, DefaultMaxReadSize).Open(bytes.NewReader(data))
	require.NoError(t, err)
	defer release()
	out, err := io.ReadAll(r)
	require.NoError(t, err)
	return out
}

func testConcurrentUse(t *testing.T, opts ...Option) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[gameState](t, dir, opts...)
	const writers, perWriter = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers*perWriter*4)
	for w := 0; w < writers; w++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				step := int64(w*perWriter + i)
				if _, err := s.Save(ctx, step, sampleState(step)); err != nil {
					errs <- err
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				if _, _, err := s.Latest(ctx); err != nil && !errors.Is(err, ErrNotFound) {
					errs <- err
				}
				if _, err := s.List(ctx); err != nil {
					errs <- err
				}
				if _, _, err := s.Load(ctx, int64(i)); err != nil && !errors.Is(err, ErrNotFound) {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, s.Flush(ctx))
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, writers*perWriter)
	for i, info := range list {
		require.Equal(t, int64(i), info.Step)
		got, _, err := s.Load(ctx, info.Step)
		require.NoError(t, err)
		require.Equal(t, sampleState(info.Step), got)
	}
}
