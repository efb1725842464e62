package sealed_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"

	"filippo.io/age"
	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/internal/format"
	"github.com/gocheckpoint/checkpoint/internal/sealed"
)

const chunk = 64 << 10

// sealBytes seals payload with k.
func sealBytes(t testing.TB, k *sealed.Keys, payload []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	err := k.Seal(func(w io.Writer) error { _, err := w.Write(payload); return err })(&out)
	require.NoError(t, err)
	return out.Bytes()
}

// readAll opens obj with k and reads it to its end.
func readAll(k *sealed.Keys, r io.Reader) ([]byte, error) {
	s, _, err := k.Open(r, "obj")
	if err != nil {
		return nil, err
	}
	return io.ReadAll(s)
}

// readStored stores obj as it is in a backend and reads it to its end
// through a sealing backend with k (whose Close gives the buffers back).
func readStored(t testing.TB, k *sealed.Keys, obj []byte) ([]byte, error) {
	t.Helper()
	ctx := context.Background()
	b, err := backendtest.NewMem(backendtest.MemLocal()).Open()
	require.NoError(t, err)
	defer b.Close()
	_, err = b.Create(ctx, "obj", func(w io.Writer) error { _, err := w.Write(obj); return err })
	require.NoError(t, err)
	rc, _, err := sealed.Wrap(b, k).Open(ctx, "obj")
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// What Open reads is what Seal wrote, at every size around a chunk's
// boundary, whatever the sizes of the reads that feed it and of the reads
// made of it; and what Seal writes, in one write or in pieces, is an age
// file that age itself reads.
func TestOpenReadsWhatSealWroteAtEverySize(t *testing.T) {
	t.Parallel()
	id, err := age.GenerateX25519Identity()
	require.NoError(t, err)
	k, err := sealed.NewKeys(id, nil, false)
	require.NoError(t, err)
	for _, size := range []int{0, 1, chunk - 1, chunk, chunk + 1, 2 * chunk, 2*chunk + 7} {
		payload := benchPayload(size)
		obj := sealBytes(t, k, payload)
		require.Equal(t, int64(size), k.PayloadSize(int64(len(obj))), "size %d", size)

		got, err := readAll(k, bytes.NewReader(obj))
		require.NoError(t, err, "size %d", size)
		require.True(t, bytes.Equal(payload, got), "size %d", size)

		got, err = readStored(t, k, obj)
		require.NoError(t, err, "size %d, stored", size)
		require.True(t, bytes.Equal(payload, got), "size %d, stored", size)

		got, err = readAll(k, iotest.OneByteReader(bytes.NewReader(obj)))
		require.NoError(t, err, "size %d, one byte at a time", size)
		require.True(t, bytes.Equal(payload, got), "size %d", size)

		got, err = readAll(k, iotest.DataErrReader(bytes.NewReader(obj)))
		require.NoError(t, err, "size %d, EOF with the data", size)
		require.True(t, bytes.Equal(payload, got), "size %d", size)

		s, _, err := k.Open(bytes.NewReader(obj), "obj")
		require.NoError(t, err)
		got, err = io.ReadAll(iotest.OneByteReader(s))
		require.NoError(t, err, "size %d, read one byte at a time", size)
		require.True(t, bytes.Equal(payload, got), "size %d", size)

		// Written in pieces that straddle the chunks' boundaries.
		var pieces bytes.Buffer
		require.NoError(t, k.Seal(func(w io.Writer) error {
			for p := payload; len(p) > 0; p = p[min(777, len(p)):] {
				if _, err := w.Write(p[:min(777, len(p))]); err != nil {
					return err
				}
			}
			return nil
		})(&pieces))
		require.Equal(t, len(obj), pieces.Len(), "size %d, in pieces", size)

		for _, o := range [][]byte{obj, pieces.Bytes()} {
			ar, err := age.Decrypt(bytes.NewReader(o[sealed.KeyLineLen:]), id)
			require.NoError(t, err, "size %d: age reads it", size)
			got, err = io.ReadAll(ar)
			require.NoError(t, err)
			require.True(t, bytes.Equal(payload, got), "size %d: age reads it", size)
		}
	}
}

// damage asserts that reading obj with k to its end fails with proof of
// damage.
func damage(t *testing.T, k *sealed.Keys, obj []byte, what string, args ...any) {
	t.Helper()
	_, err := readAll(k, bytes.NewReader(obj))
	require.Error(t, err, append([]any{what}, args...)...)
	require.True(t, format.IsDamage(err), "%s: %v", what, err)
	require.ErrorIs(t, err, format.ErrCorrupt)
	_, err = readStored(t, k, obj)
	require.Error(t, err, append([]any{what, "stored"}, args...)...)
	require.True(t, format.IsDamage(err), "%s, stored: %v", what, err)
}

// Any flipped byte after the key line, any truncation (at a chunk's
// boundary too) and any data after the last chunk is damage, found before
// a byte of the chunk it spoils is returned.
func TestOpenFindsEveryFlippedByteTruncationAndTrailer(t *testing.T) {
	t.Parallel()
	k := testKeys(t)
	for _, size := range []int{100, chunk + 100} {
		obj := sealBytes(t, k, benchPayload(size))
		// The age header and nonce entire, then the first and last bytes
		// of every chunk and the bytes around each boundary.
		hdrEnd := len(obj) - (size + (size/chunk+1)*16)
		if size%chunk == 0 {
			hdrEnd = len(obj) - (size + size/chunk*16)
		}
		var positions []int
		for i := sealed.KeyLineLen; i < hdrEnd; i++ {
			positions = append(positions, i)
		}
		for c := hdrEnd; c < len(obj); c += chunk + 16 {
			for _, d := range []int{0, 1, 2, 100, chunk - 1, chunk, chunk + 15} {
				if c+d < len(obj) {
					positions = append(positions, c+d)
				}
			}
		}
		positions = append(positions, len(obj)-1, len(obj)-16, len(obj)-17)
		for _, i := range positions {
			bad := bytes.Clone(obj)
			bad[i] ^= 0x01
			damage(t, k, bad, "size %d, byte %d flipped", size, i)
		}
		for _, n := range append(positions, 0, 1, sealed.KeyLineLen-1, sealed.KeyLineLen) {
			damage(t, k, obj[:n], "size %d, truncated to %d bytes", size, n)
		}
		damage(t, k, append(bytes.Clone(obj), 0), "size %d, one byte more", size)
		damage(t, k, append(bytes.Clone(obj), obj[hdrEnd:]...), "size %d, its chunks again", size)
	}
	// Two full chunks cut after the first: a truncation at a boundary.
	obj := sealBytes(t, k, benchPayload(2*chunk))
	damage(t, k, obj[:len(obj)-(chunk+16)], "cut at the chunk boundary")
	s, _, err := k.Open(bytes.NewReader(obj[:len(obj)-(chunk+16)]), "obj")
	require.NoError(t, err)
	// Its first chunk, full and last in the file, is not marked last:
	// the first read fails, and returns none of its bytes.
	n, err := s.Read(make([]byte, chunk))
	require.Zero(t, n)
	require.True(t, format.IsDamage(err), "%v", err)
}

var errDisk = errors.New("disk gone")

// An error of the reader an object is read from proves nothing: Open and
// the stream return it as it is, never as damage.
func TestOpenReturnsAReadErrorAsItIs(t *testing.T) {
	t.Parallel()
	k := testKeys(t)
	obj := sealBytes(t, k, benchPayload(chunk+100))
	for _, n := range []int{0, 5, sealed.KeyLineLen, sealed.KeyLineLen + 30, 200, len(obj) - chunk - 50, len(obj) - 50, len(obj)} {
		r := io.MultiReader(bytes.NewReader(obj[:n]), iotest.ErrReader(errDisk))
		_, err := readAll(k, r)
		require.ErrorIs(t, err, errDisk, "fails after %d bytes", n)
		require.False(t, format.IsDamage(err), "fails after %d bytes: %v", n, err)
	}
}

// An object of another key is ErrNoKey, a plaintext one ErrPlaintext:
// neither is damage. A key line naming a key the Keys have, on an object
// that key does not open, is damage.
func TestOpenTellsAMissingKeyAndPlaintextFromDamage(t *testing.T) {
	t.Parallel()
	k, other := testKeys(t), testKeys(t)
	obj := sealBytes(t, other, []byte("state"))
	_, err := readAll(k, bytes.NewReader(obj))
	require.ErrorIs(t, err, sealed.ErrNoKey)
	require.False(t, format.IsDamage(err))

	_, err = readAll(k, bytes.NewReader([]byte(`{"format":2}`)))
	require.ErrorIs(t, err, sealed.ErrPlaintext)
	require.False(t, format.IsDamage(err))

	mine := sealBytes(t, k, []byte("state"))
	forged := append(bytes.Clone(mine[:sealed.KeyLineLen]), obj[sealed.KeyLineLen:]...)
	damage(t, k, forged, "my key line on another key's object")
}

// A sealed object's stream read after Close returns an error, never bytes:
// its buffers went back to be reused by other reads.
func TestReadAfterCloseIsAnError(t *testing.T) {
	t.Parallel()
	k := testKeys(t)
	b, err := dirstore.Open(t.TempDir(), dirstore.NoSync())
	require.NoError(t, err)
	defer b.Close()
	ctx := context.Background()
	_, err = sealed.Wrap(b, k).Create(ctx, "a", func(w io.Writer) error { _, err := w.Write(benchPayload(3 * chunk)); return err })
	require.NoError(t, err)
	rc, o, err := sealed.Wrap(b, k).Open(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, int64(3*chunk), o.Size)
	head := make([]byte, 10)
	_, err = io.ReadFull(rc, head)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	n, err := rc.Read(head)
	require.Zero(t, n)
	require.Error(t, err)
}

// Every object Seal writes has a file key of its own, made ahead or not:
// no two objects sealed one after the other or at once share an age
// header, and each opens to what was written to it.
func TestEverySealHasItsOwnFileKey(t *testing.T) {
	t.Parallel()
	k := testKeys(t)
	const n = 16
	objs := make([][]byte, n)
	seal := func(i int) {
		var out bytes.Buffer
		if err := k.Seal(func(w io.Writer) error { _, err := fmt.Fprintf(w, "object %d", i); return err })(&out); err == nil {
			objs[i] = out.Bytes()
		}
	}
	for i := range n / 2 { // one after the other
		seal(i)
	}
	var wg sync.WaitGroup
	for i := n / 2; i < n; i++ { // at once
		wg.Go(func() { seal(i) })
	}
	wg.Wait()
	headers := map[string]bool{}
	for i, obj := range objs {
		require.NotNil(t, obj, "object %d", i)
		got, err := readAll(k, bytes.NewReader(obj))
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("object %d", i), string(got))
		hdr := string(obj[:bytes.Index(obj, []byte("\n--- "))])
		require.False(t, headers[hdr], "object %d shares its header", i)
		headers[hdr] = true
	}
}

// A stream closed before its end leaves nothing running.
// (Not parallel: it counts the process's goroutines.)
func TestCloseBeforeTheEndLeavesNoGoroutine(t *testing.T) {
	k := testKeys(t)
	b, err := dirstore.Open(t.TempDir(), dirstore.NoSync())
	require.NoError(t, err)
	defer b.Close()
	ctx := context.Background()
	s := sealed.Wrap(b, k)
	_, err = s.Create(ctx, "a", func(w io.Writer) error { _, err := w.Write(benchPayload(4 * chunk)); return err })
	require.NoError(t, err)
	before := runtime.NumGoroutine()
	for i := range 50 {
		rc, _, err := s.Open(ctx, "a")
		require.NoError(t, err)
		_, err = io.ReadFull(rc, make([]byte, 1+i%3*chunk))
		require.NoError(t, err)
		require.NoError(t, rc.Close())
	}
	require.Less(t, runtime.NumGoroutine(), before+10)
}

// countingBackend counts the bytes read from the objects it opens.
type countingBackend struct {
	checkpoint.Backend
	read *atomic.Int64
}

func (c countingBackend) Open(ctx context.Context, name string) (io.ReadCloser, checkpoint.Object, error) {
	rc, o, err := c.Backend.Open(ctx, name)
	if err != nil {
		return nil, o, err
	}
	return countingReader{rc, c.read}, o, nil
}

type countingReader struct {
	io.ReadCloser
	read *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// Reading the start of an object (a checkpoint's header) reads and opens
// its first chunk only, however large the object; reading on reads it
// all.
func TestReadingTheStartReadsTheFirstChunkOnly(t *testing.T) {
	t.Parallel()
	k := testKeys(t)
	ctx := context.Background()
	mem, err := backendtest.NewMem(backendtest.MemLocal()).Open()
	require.NoError(t, err)
	defer mem.Close()
	var read atomic.Int64
	s := sealed.Wrap(countingBackend{mem, &read}, k)
	payload := benchPayload(8 * chunk)
	_, err = s.Create(ctx, "a", func(w io.Writer) error { _, err := w.Write(payload); return err })
	require.NoError(t, err)

	rc, _, err := s.Open(ctx, "a")
	require.NoError(t, err)
	head := make([]byte, 4<<10)
	_, err = io.ReadFull(rc, head)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	require.Equal(t, payload[:len(head)], head)
	require.LessOrEqual(t, read.Load(), int64(sealed.KeyLineLen+300+chunk+16+4<<10), "read for the first 4 KiB")

	read.Store(0)
	rc, _, err = s.Open(ctx, "a")
	require.NoError(t, err)
	all, err := io.ReadAll(rc)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	require.True(t, bytes.Equal(payload, all))
	require.Greater(t, read.Load(), int64(len(payload)))
}
