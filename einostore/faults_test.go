package einostore_test

// Faults at every point of a call: a context cancelled at every point of
// a Set or a Delete, a backend fault at every operation of a Get or a Set,
// a real kill -9 inside a Set or a Delete, read back by a ReadOnly root too.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/einostore"
	"github.com/stretchr/testify/require"
)

// The child of TestKill9DuringSetOrDeleteLeavesTheIDWholeOrGone: EINOSTORE_TEST_ROLE=setdelloop Sets and Deletes the ID
// "d" of the root EINOSTORE_TEST_DIR in turn, printing each acknowledged call.
func init() {
	if os.Getenv("EINOSTORE_TEST_ROLE") != "setdelloop" {
		return
	}
	ctx := context.Background()
	store, err := einostore.New(os.Getenv("EINOSTORE_TEST_DIR"))
	for i := 0; err == nil; i++ {
		if err = store.Set(ctx, "d", []byte(fmt.Sprint("v", i))); err == nil {
			fmt.Println("set", i)
			if err = store.Delete(ctx, "d"); err == nil {
				fmt.Println("del", i)
			}
		}
	}
	fmt.Fprintln(os.Stderr, "child:", err)
	os.Exit(1)
}

// A kill -9 at any point of a Set or a Delete leaves "d" whole or not
// found, the same to a ReadOnly root as to a writer, and the next Set and
// Delete of it succeed (README: "a Delete that a crash interrupts leaves
// the ID out of sight, not found, and the next Set or Delete of it
// finishes the removal").
func TestKill9DuringSetOrDeleteLeavesTheIDWholeOrGone(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	for round := range 20 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "EINOSTORE_TEST_ROLE=setdelloop", "EINOSTORE_TEST_DIR="+dir)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		r := bufio.NewReader(out)
		for range 1 + round%9 {
			_, err = r.ReadString('\n')
			require.NoError(t, err)
		}
		require.NoError(t, cmd.Process.Kill())
		_ = cmd.Wait()
		ro, err := einostore.New(dir, checkpoint.ReadOnly())
		require.NoError(t, err)
		b, ok, rerr := ro.Get(ctx, "d")
		require.NoError(t, ro.Close())
		store, err := einostore.New(dir)
		require.NoError(t, err)
		b2, ok2, err2 := store.Get(ctx, "d")
		require.NoError(t, rerr)
		require.NoError(t, err2)
		require.Equal(t, ok, ok2)
		require.Equal(t, string(b), string(b2))
		require.NoError(t, store.Set(ctx, "d", []byte("x")))
		require.NoError(t, store.Delete(ctx, "d"))
		require.NoError(t, store.Close())
	}
}

// countCtx is a context cancelled at its limit-th look (Done or Err).
type countCtx struct {
	context.Context
	n     atomic.Int64
	limit int64
	once  sync.Once
	done  chan struct{}
}

func newCountCtx(limit int64) *countCtx {
	return &countCtx{Context: context.Background(), limit: limit, done: make(chan struct{})}
}

func (c *countCtx) look() {
	if c.n.Add(1) > c.limit {
		c.once.Do(func() { close(c.done) })
	}
}
func (c *countCtx) Done() <-chan struct{} { c.look(); return c.done }
func (c *countCtx) Err() error {
	c.look()
	select {
	case <-c.done:
		return context.Canceled
	default:
		return nil
	}
}
func (c *countCtx) Deadline() (time.Time, bool) { return time.Now().Add(time.Hour), true }

// A Set or a Delete whose context is cancelled at its n-th look, for
// every n: an acknowledged Set is what Get returns, a failed one leaves
// the previous value or the whole new one; an acknowledged Delete leaves
// nothing to Get; nothing leaves an error for the next Get or Set.
func TestSetOrDeleteCancelledAtEveryPointIsAllOrNothing(t *testing.T) {
	ctx := context.Background()
	store, _ := newStore(t)
	require.NoError(t, store.Set(ctx, "old", []byte("base")))
	prev := map[string]string{"old": "base"}
	for limit := int64(0); limit < 150; limit++ {
		for _, id := range []string{"old", fmt.Sprint("new", limit)} {
			v := fmt.Sprint(id, "#", limit)
			err := store.Set(newCountCtx(limit), id, []byte(v))
			b, ok, gerr := store.Get(ctx, id)
			require.NoError(t, gerr, "limit %d: get %s after set (%v)", limit, id, err)
			switch {
			case err == nil:
				require.Equal(t, v, string(b), "limit %d: set %s acked", limit, id)
			case ok:
				require.Contains(t, []string{v, prev[id]}, string(b), "limit %d: set %s failed", limit, id)
			default:
				require.Empty(t, prev[id], "limit %d: set %s failed, get not found", limit, id)
			}
			if ok {
				prev[id] = string(b)
			}
			if id == "old" {
				continue
			}
			derr := store.Delete(newCountCtx(limit), id)
			b, ok, gerr = store.Get(ctx, id)
			require.NoError(t, gerr, "limit %d: get %s after delete (%v)", limit, id, derr)
			if derr == nil {
				require.False(t, ok, "limit %d: delete %s acked, get %q", limit, id, b)
			} else if ok {
				require.Equal(t, prev[id], string(b))
			}
			require.NoError(t, store.Set(ctx, id, []byte("again")), "limit %d: set %s after delete (%v)", limit, id, derr)
		}
	}
}

// A backend fault (EIO, EACCES, even a spurious ENOENT) at any one
// operation of a Get or a Set: Get returns the last value or an error,
// never "not found" (which would restart the Eino run); a failed Set
// leaves the previous value or the whole new one, and an acknowledged
// Set is what Get returns.
func TestBackendFaultAtEveryOpOfGetOrSetNeverLosesAValue(t *testing.T) {
	ctx := context.Background()
	for _, ferr := range []error{errors.New("EIO"), fs.ErrPermission, fs.ErrNotExist} {
		b, err := dirstore.Open(t.TempDir())
		require.NoError(t, err)
		var count, at atomic.Int64
		at.Store(-1)
		store, err := einostore.NewOnBackend(backendtest.Inject(b, func(backendtest.Op) error {
			if count.Add(1)-1 == at.Load() {
				return ferr
			}
			return nil
		}))
		require.NoError(t, err)
		require.NoError(t, store.Set(ctx, "run", []byte("v0")))
		last := "v0"
		for i := int64(0); i < 40; i++ {
			count.Store(0)
			at.Store(i)
			g, ok, gerr := store.Get(ctx, "run")
			at.Store(-1)
			if gerr == nil {
				require.True(t, ok, "%v at op %d of Get: not found", ferr, i)
				require.Equal(t, last, string(g), "%v at op %d of Get", ferr, i)
			}
			v := fmt.Sprint("v", i+1)
			count.Store(0)
			at.Store(i)
			serr := store.Set(ctx, "run", []byte(v))
			at.Store(-1)
			g, ok, gerr = store.Get(ctx, "run")
			require.NoError(t, gerr, "%v at op %d of Set (%v)", ferr, i, serr)
			require.True(t, ok)
			if serr == nil {
				require.Equal(t, v, string(g))
			} else {
				require.Contains(t, []string{v, last}, string(g))
			}
			last = string(g)
		}
		require.NoError(t, store.Close())
	}
}
