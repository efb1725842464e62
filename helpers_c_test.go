package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"

	"github.com/klauspost/compress/gzip"

	"github.com/gocheckpoint/checkpoint/backendtest/inject"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/internal/testkit"
	"github.com/stretchr/testify/require"
)

// The helpers of the damage, faults and backend tests that the internal
// tests of other files (package checkpoint) use; the black-box tests have
// their own in blackbox_c_test.go.

// requireUntouched checks that the file at path still holds before and
// was not moved aside.
func requireUntouched(t *testing.T, path string, before []byte) {
	t.Helper()
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, before, after)
	require.NoFileExists(t, path+quarantineSuffix)
}

type corpusState = testkit.CorpusState

var corpusStateAt = testkit.CorpusStateAt

func gzipped(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write(b)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

var errInjected = errors.New("injected fault")

// faultSwitch fails the next Backend operation at one point, once armed.
type faultSwitch struct {
	mu    sync.Mutex
	point string
	hits  int
}

func (f *faultSwitch) arm(point string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.point, f.hits = point, 0
}

// op fails a Remove of the wrapped backend (see inject.Wrap) as the point
// "remove", once armed: a removal is a Backend operation.
func (f *faultSwitch) op(o inject.Op) error {
	if o.Kind != inject.Remove {
		return nil
	}
	return f.fault("remove", o.Name)
}

func (f *faultSwitch) fault(point, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.point != point || f.hits > 0 {
		return nil
	}
	f.hits++
	return fmt.Errorf("%s %s: %w", point, name, errInjected)
}

// openInjected opens a store on the directory dir wrapped in inject.Wrap
// with opFault: faults of whole Backend operations. The fault points
// inside one write of the directory are package dirstore's own tests.
func openInjected[T any](t *testing.T, dir string, opFault func(inject.Op) error, opts ...Option) *Store[T] {
	t.Helper()
	cfg, err := newConfig(opts)
	require.NoError(t, err)
	d, err := openDir(dir, cfg)
	require.NoError(t, err)
	s, err := OpenBackend[T](inject.Wrap(d, opFault), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// countingBackend is a Backend that is not the local directory (so a store
// on it takes the remote path, see Store.remote), wrapping one, and counts
// the calls of each method: the requests a store would make of object
// storage.
type countingBackend struct {
	Backend
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

func (c *countingBackend) Create(ctx context.Context, name string, w func(io.Writer) error) (Object, error) {
	c.count("Create")
	return c.Backend.Create(ctx, name, w)
}

func (c *countingBackend) Replace(ctx context.Context, name, ifVersion string, w func(io.Writer) error) (Object, error) {
	c.count("Replace")
	return c.Backend.Replace(ctx, name, ifVersion, w)
}

func (c *countingBackend) Open(ctx context.Context, name string) (io.ReadCloser, Object, error) {
	c.count("Open")
	return c.Backend.Open(ctx, name)
}

func (c *countingBackend) Stat(ctx context.Context, name string) (Object, error) {
	c.count("Stat")
	return c.Backend.Stat(ctx, name)
}

func (c *countingBackend) List(ctx context.Context) ([]Object, error) {
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
