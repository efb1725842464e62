package checkpoint_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/internal/format"
	"github.com/gocheckpoint/checkpoint/internal/platformtest"
	"github.com/gocheckpoint/checkpoint/internal/testkit"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"
)

// What the black-box tests of this package share. The tests that need the
// store's internals are in package checkpoint and have their own
// (checkpoint_test.go, platform_test.go); what both need that does not
// depend on the store is in package testkit.

type gameState = testkit.GameState

var (
	sampleState      = testkit.SampleState
	skipOnWindows    = platformtest.SkipOnWindows
	skipUnderWine    = platformtest.SkipUnderWine
	skipUnlessLinux  = platformtest.SkipUnlessLinux
	canSymlink       = platformtest.CanSymlink
	requireSymlinks  = platformtest.RequireSymlinks
	mkfifo           = platformtest.Mkfifo
	passChangeTimeOf = platformtest.PassChangeTimeOf
)

const haveFIFOs = platformtest.HaveFIFOs

// wineKeepsRemovedNames is why a test that removes a file another handle
// holds open skips under Wine: Wine 8 has only the classic delete, which
// keeps the name until the last handle closes (real Windows frees it at
// once), so a save of that name meanwhile finds it taken.
const wineKeepsRemovedNames = "Wine 8 keeps a removed file's name until its last handle closes"

// openStore opens a store with NoSync: most tests are about what a store
// does, not about what reaches the disk, and fsyncs would make the suite
// several times slower. The tests of durability (fault points, disk full,
// kills) use openDurableStore or Open.
func openStore[T any](t *testing.T, dir string, opts ...checkpoint.Option) *checkpoint.Store[T] {
	t.Helper()
	return openDurableStore[T](t, dir, append([]checkpoint.Option{checkpoint.NoSync()}, opts...)...)
}

// openDurableStore opens a store that fsyncs, as a program's would, and
// closes it when t ends.
func openDurableStore[T any](t *testing.T, dir string, opts ...checkpoint.Option) *checkpoint.Store[T] {
	t.Helper()
	s, err := checkpoint.Open[T](dir, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// dirNames returns the names in dir, sorted.
func dirNames(t *testing.T, dir string) []string { return testkit.DirNames(t, dir) }

// What the black-box tests of damage, limits, faults, concurrency and
// backends share: states, and checkpoint bytes made and read as a store
// makes and reads them (package format).

// paddedState is a state of a step and some padding to give it a size.
type paddedState struct {
	Step int64  `json:"step"`
	Pad  string `json:"pad"`
}

var randomText = testkit.RandomText

type corpusState = testkit.CorpusState

var corpusStateAt = testkit.CorpusStateAt

// steps returns the steps of infos, in order.
func steps(infos []checkpoint.Info) []int64 {
	var out []int64
	for _, info := range infos {
		out = append(out, info.Step)
	}
	return out
}

// checkpointNames lists the names in dir but the writer's lock, sorted.
func checkpointNames(t *testing.T, dir string) []string {
	t.Helper()
	return slices.DeleteFunc(dirNames(t, dir), func(n string) bool { return n == dirstore.LockName })
}

// envelopeBytes returns the uncompressed checkpoint of h and state.
func envelopeBytes(h format.Header, state []byte) []byte {
	return encodeBytes(h, state, format.CompressNone)
}

// encodeBytes returns the checkpoint of h and state as a store of
// compression comp writes it.
func encodeBytes(h format.Header, state []byte, comp format.Compression) []byte {
	var buf bytes.Buffer
	if err := format.NewCodec(comp, checkpoint.DefaultMaxReadSize).WriteEnvelope(&buf, h, state); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// encodeState returns a state's bytes as a store writes them.
func encodeState(v any) ([]byte, error) {
	buf, err := format.NewCodec(format.CompressNone, checkpoint.DefaultMaxReadSize).EncodeState(v)
	if err != nil {
		return nil, err
	}
	return bytes.Clone(buf.Bytes()), nil
}

// readEnvelope reads and verifies a whole checkpoint, as a load does, and
// returns its header.
func readEnvelope(r io.Reader, max int64) (format.Header, error) {
	var got format.Header
	err := format.NewCodec(format.CompressNone, max).Read(r, -1, func(h format.Header, _ []byte) error {
		got = h
		return nil
	})
	return got, err
}

// decompress returns a file's decompressed bytes.
func decompress(t *testing.T, data []byte) []byte {
	t.Helper()
	r, _, release, err := format.NewCodec(format.CompressNone, checkpoint.DefaultMaxReadSize).Open(bytes.NewReader(data))
	require.NoError(t, err)
	defer release()
	out, err := io.ReadAll(r)
	require.NoError(t, err)
	return out
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

func gzipped(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write(b)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// compressLike compresses raw as a store of compression comp writes.
func compressLike(t *testing.T, comp string, raw []byte) []byte {
	t.Helper()
	switch comp {
	case "gzip":
		return gzipped(t, raw)
	case "zstd":
		enc, err := zstd.NewWriter(nil)
		require.NoError(t, err)
		defer enc.Close()
		return enc.EncodeAll(raw, nil)
	}
	return raw
}

// withTrailerV2 completes an envelope body (everything before the
// checksum) with format 2's correct checksum.
func withTrailerV2(body string) []byte {
	sum := format.TrailerV2.Sum()
	sum.Write([]byte(body))
	return format.AppendTrailer([]byte(body), format.TrailerV2, sum)
}

// requireUntouched checks that the file at path still holds before and
// was not moved aside.
func requireUntouched(t *testing.T, path string, before []byte) {
	t.Helper()
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, before, after)
	require.NoFileExists(t, path+checkpoint.QuarantineSuffix)
}

var errInjected = errors.New("injected fault")

// touch makes a file of each name in dir, holding "x".
func touch(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o644))
	}
}

// openSessions opens the root of sessions dir with NoSync and closes it
// when t ends.
func openSessions(t *testing.T, dir string, opts ...checkpoint.Option) *checkpoint.Sessions {
	t.Helper()
	r, err := checkpoint.OpenSessions(dir, append([]checkpoint.Option{checkpoint.NoSync()}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	return r
}

// countingBackend is a Backend that is not the local directory (so a store
// on it takes the remote path, see Store.Remote), wrapping one, and counts
// the calls of each method: the requests a store would make of object
// storage.
type countingBackend struct {
	checkpoint.Backend
	mu    sync.Mutex
	calls map[string]int
}

func newCountingBackend(t *testing.T, dir string) *countingBackend {
	b, err := dirstore.Open(dir, dirstore.NoSync())
	require.NoError(t, err)
	return &countingBackend{Backend: b, calls: make(map[string]int)}
}

func (c *countingBackend) count(m string) {
	c.mu.Lock()
	c.calls[m]++
	c.mu.Unlock()
}

func (c *countingBackend) reset() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls := c.calls
	c.calls = make(map[string]int)
	return calls
}

func (c *countingBackend) Create(ctx context.Context, name string, w func(io.Writer) error) (checkpoint.Object, error) {
	c.count("Create")
	return c.Backend.Create(ctx, name, w)
}

func (c *countingBackend) Replace(ctx context.Context, name, ifVersion string, w func(io.Writer) error) (checkpoint.Object, error) {
	c.count("Replace")
	return c.Backend.Replace(ctx, name, ifVersion, w)
}

func (c *countingBackend) Open(ctx context.Context, name string) (io.ReadCloser, checkpoint.Object, error) {
	c.count("Open")
	return c.Backend.Open(ctx, name)
}

func (c *countingBackend) Stat(ctx context.Context, name string) (checkpoint.Object, error) {
	c.count("Stat")
	return c.Backend.Stat(ctx, name)
}

func (c *countingBackend) List(ctx context.Context) ([]checkpoint.Object, error) {
	c.count("List")
	objs, err := c.Backend.List(ctx)
	// Object storage lists sizes and versions; so does this wrapper, as
	// the local directory's List does not.
	for i := range objs {
		if o, err := c.Backend.Stat(ctx, objs[i].Name); err == nil && o.Mode.IsRegular() {
			objs[i] = o
		}
	}
	return objs, err
}

func (c *countingBackend) Remove(ctx context.Context, names ...string) ([]bool, error) {
	c.count("Remove")
	return c.Backend.Remove(ctx, names...)
}

func (c *countingBackend) Rename(ctx context.Context, from, to string) error {
	c.count("Rename")
	return c.Backend.Rename(ctx, from, to)
}

// manualClock is a clock the test sets.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// compressions are the store options of each compression, by name: none,
// gzip and zstd.
func compressions() map[string][]checkpoint.Option {
	return map[string][]checkpoint.Option{"plain": nil, "gzip": {checkpoint.Gzip()}, "zstd": {checkpoint.Zstd()}}
}

// requireNoTemps fails if dir holds anything but the lock, the header
// index and the names in want: no temporary file, no other checkpoint.
func requireNoTemps(t *testing.T, dir string, want ...string) {
	t.Helper()
	names := dirNames(t, dir)
	for _, n := range names {
		if n == ".checkpoint.lock" || strings.HasPrefix(n, ".checkpoint.index") || slices.Contains(want, n) {
			continue
		}
		t.Errorf("unexpected %q in %v", n, names)
	}
}

// eachCompression runs test as a parallel subtest for each compression,
// with the store options that select it.
func eachCompression(t *testing.T, test func(t *testing.T, comp []checkpoint.Option)) {
	t.Helper()
	for name, comp := range compressions() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			test(t, comp)
		})
	}
}
