package dirstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint/internal/testkit"
)

// gatedOps are the dirOps of a directory whose createTemp first calls gate:
// a test holds the creation of a write's temporary file there, or fails it.
type gatedOps struct {
	dirOps
	gate func() error
}

func (g gatedOps) createTemp(name string) (tempFile, string, error) {
	if err := g.gate(); err != nil {
		return nil, "", err
	}
	return g.dirOps.createTemp(name)
}

// openGated returns the directory of a new store's root and its dirOps,
// whose creations wait for gate.
func openGated(t *testing.T, gate func() error) (string, dirOps) {
	t.Helper()
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	t.Cleanup(func() { root.Close() })
	return dir, gatedOps{dirOps: rootOps{root}, gate: gate}
}

// waitFor waits for ch, or fails the creation after a long time: with a
// temporary file created before the write function begins, the gate
// would wait forever for a signal that only the write function gives.
func waitFor(ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-time.After(20 * time.Second):
		return errors.New("the write function had not begun when the temporary file was created")
	}
}

// requireOnly checks that dir holds exactly the file name, with want, and
// nothing else: no temporary file is left.
func requireOnly(t *testing.T, dir, name string, want []byte) {
	t.Helper()
	names := testkit.DirNames(t, dir)
	if name == "" {
		require.Empty(t, names)
		return
	}
	require.Equal(t, []string{name}, names)
	got, err := os.ReadFile(dir + string(os.PathSeparator) + name)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got), "the file holds %d bytes, not the %d written", len(got), len(want))
}

// The temporary file of a write is created while the write function runs
// (a large state is encoded there): the creation does not wait for the
// function, nor the function for the creation. What the function writes
// before the file exists is held, and written first, in order, once it
// does; past pendingMax bytes the function waits for the file. Here the
// creation waits until the function has made its first writes (which are
// so held, every time), and would time out if the file were created before
// the function ran. Whatever the sizes, the published file holds the bytes
// written, in order.
func TestTheTemporaryFileIsCreatedWhileTheWriteRuns(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		held  []int // written before the file may be created (at most pendingMax in all)
		after []int // written after
	}{
		{"a small file, held whole", []int{100, 3, 2000}, nil},
		{"held, then past what is held", []int{pendingMax / 2, pendingMax/2 - 1}, []int{7, 64<<10 + 3, pendingMax + 1}},
		{"held up to the limit, then one byte more", []int{pendingMax}, []int{1}},
		{"more than is held at once", nil, []int{pendingMax + 5, 11}},
		{"nothing", nil, []int{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			held := make(chan struct{})
			dir, ops := openGated(t, func() error { return waitFor(held) })
			var want bytes.Buffer
			write := func(w io.Writer, sizes []int) error {
				for _, size := range sizes {
					p := make([]byte, size)
					for i := range p {
						p[i] = byte(rand.IntN(256))
					}
					want.Write(p)
					if _, err := w.Write(p); err != nil {
						return err
					}
				}
				return nil
			}
			n, err := writeFile(ops, "step_00000001.json", func(w io.Writer) error {
				if err := write(w, tc.held); err != nil {
					return err
				}
				close(held)
				return write(w, tc.after)
			}, false, fileIO{noSync: true, ahead: true})
			require.NoError(t, err)
			require.Equal(t, int64(want.Len()), n)
			requireOnly(t, dir, "step_00000001.json", want.Bytes())
		})
	}
}

// failingFile is a temporary file whose writes fail.
type failingFile struct {
	tempFile
	err error
}

func (f failingFile) Write([]byte) (int, error) { return 0, f.err }

// A write of what was held that fails fails every later Write of the
// function too (none reaches the file past the gap), and the write: no
// file is published and none is left.
func TestAFailedWriteOfWhatWasHeldFailsTheRest(t *testing.T) {
	t.Parallel()
	full := errors.New("no space left on device")
	held := make(chan struct{})
	dir, gated := openGated(t, func() error { return waitFor(held) })
	ops := failingOps{gated, full}
	var errs []error
	_, err := writeFile(ops, "step_00000001.json", func(w io.Writer) error {
		_, err := w.Write([]byte("held"))
		require.NoError(t, err)
		close(held)
		for _, size := range []int{pendingMax + 1, 1} {
			_, err := w.Write(make([]byte, size))
			errs = append(errs, err)
		}
		return nil // as a function that does not look at its errors
	}, false, fileIO{noSync: true, ahead: true})
	require.ErrorIs(t, err, full)
	require.ErrorContains(t, err, "write temporary file")
	require.Len(t, errs, 2)
	for _, err := range errs {
		require.ErrorIs(t, err, full)
	}
	requireOnly(t, dir, "", nil)
}

// failingOps are dirOps whose temporary files fail their writes with err.
type failingOps struct {
	dirOps
	err error
}

func (o failingOps) createTemp(name string) (tempFile, string, error) {
	f, tmp, err := o.dirOps.createTemp(name)
	if err != nil {
		return nil, "", err
	}
	return failingFile{f, o.err}, tmp, nil
}

// A creation that fails while the write function runs fails the write with
// the creation's error, named so, whether the function then stops at a
// Write that needed the file or returns nil: nothing is published and no
// temporary file is left.
func TestAFailedCreationFailsTheWrite(t *testing.T) {
	t.Parallel()
	refused := errors.New("no inode left")
	for _, tc := range []struct {
		name string
		size int // written after the creation failed
	}{
		{"the function returns nil", 10},
		{"the function needs the file", pendingMax + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			began, failed := make(chan struct{}), make(chan struct{})
			dir, ops := openGated(t, func() error {
				defer close(failed)
				if err := waitFor(began); err != nil {
					return err
				}
				return refused
			})
			var writeErr error
			_, err := writeFile(ops, "step_00000001.json", func(w io.Writer) error {
				close(began)
				<-failed
				_, writeErr = w.Write(make([]byte, tc.size))
				return writeErr
			}, false, fileIO{noSync: true, ahead: true})
			require.ErrorIs(t, err, refused)
			require.ErrorContains(t, err, "create temporary file")
			if tc.size > pendingMax {
				require.ErrorIs(t, writeErr, refused)
			}
			requireOnly(t, dir, "", nil)
		})
	}
}

// A write function that fails while its temporary file is being created
// fails the write with its error, and the file, once created, is removed.
func TestAFailedWriteRemovesTheFileCreatedBesideIt(t *testing.T) {
	t.Parallel()
	broken := errors.New("encoding failed")
	began, returned := make(chan struct{}), make(chan struct{})
	dir, ops := openGated(t, func() error {
		if err := waitFor(began); err != nil {
			return err
		}
		return waitFor(returned)
	})
	_, err := writeFile(ops, "step_00000001.json", func(w io.Writer) error {
		close(began)
		defer close(returned)
		if _, err := w.Write([]byte("{}")); err != nil {
			return err
		}
		return broken
	}, false, fileIO{noSync: true, ahead: true})
	require.ErrorIs(t, err, broken)
	require.ErrorContains(t, err, "write temporary file")
	requireOnly(t, dir, "", nil)
}

// Without ahead (a directory whose last write was small) the temporary
// file is created before the write function runs, and a failed creation
// fails the write without running it.
func TestAFailedCreationBeforeTheWriteDoesNotRunIt(t *testing.T) {
	t.Parallel()
	refused := errors.New("no inode left")
	dir, ops := openGated(t, func() error { return refused })
	ran := false
	_, err := writeFile(ops, "step_00000001.json", func(io.Writer) error {
		ran = true
		return nil
	}, false, fileIO{noSync: true})
	require.ErrorIs(t, err, refused)
	require.ErrorContains(t, err, "create temporary file")
	require.False(t, ran, "the write function ran although its file could not be created")
	requireOnly(t, dir, "", nil)
}

// A directory creates a write's temporary file ahead once its last write
// was large (aheadMin bytes or more): then the creation (its fault point
// "create") waits here for the write function to begin, and the write
// succeeds. Its first write, and one after a small write, create the file
// before the function runs.
func TestADirectoryCreatesAheadAfterALargeWrite(t *testing.T) {
	t.Parallel()
	b, err := Open(t.TempDir(), NoSync())
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	ctx := context.Background()
	type writing struct {
		began chan struct{} // closed as the write function begins
		ahead bool          // whether the file is to be created ahead
	}
	var mu sync.Mutex
	var cur *writing
	b.(*dirBackend).fault = func(point, _ string) error {
		mu.Lock()
		w := cur
		mu.Unlock()
		switch {
		case point != "create":
			return nil
		case w.ahead:
			return waitFor(w.began)
		}
		select {
		case <-w.began:
			return errors.New("the write function began before its file was created")
		default:
			return nil
		}
	}
	write := func(name string, size int, ahead bool) {
		t.Helper()
		w := &writing{began: make(chan struct{}), ahead: ahead}
		mu.Lock()
		cur = w
		mu.Unlock()
		_, err := b.Create(ctx, name, func(out io.Writer) error {
			close(w.began)
			_, err := out.Write(make([]byte, size))
			return err
		})
		require.NoError(t, err, name)
	}
	write("a.json", aheadMin-1, false)
	write("b.json", aheadMin, false)
	write("c.json", 10, true)
	write("d.json", 10, false)
}
