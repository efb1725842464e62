package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint/dirstore"
)

// Attack: many goroutines saving, listing, loading, pruning and closing one
// store (and one raw OpenDir backend) at once; run with -race.

func TestAttackStoreFreeForAllThenClose(t *testing.T) {
	skipUnlessLinux(t)
	t.Parallel()
	for round := 0; round < 3; round++ {
		ctx := context.Background()
		dir := t.TempDir()
		s, err := Open[crashState](dir, WithLayout("c", 4), KeepLast(5), WithRolling(), Every(2), NoSync())
		require.NoError(t, err)
		var wg sync.WaitGroup
		start := make(chan struct{})
		okErr := func(err error) bool {
			return err == nil || errors.Is(err, ErrClosed) || errors.Is(err, ErrExists) || errors.Is(err, ErrNotFound)
		}
		var mu sync.Mutex
		var bad []error
		note := func(what string, err error) {
			if !okErr(err) {
				mu.Lock()
				bad = append(bad, fmt.Errorf("%s: %w", what, err))
				mu.Unlock()
			}
		}
		for g := 0; g < 6; g++ {
			wg.Go(func() {
				<-start
				for i := 0; i < 30; i++ {
					step := int64(g*100 + i + 1)
					size := 10
					if i%5 == 0 {
						size = 80 << 10
					}
					_, _, err := s.Tick(ctx, step, crashState{Step: step, Pad: strings.Repeat("x", size)})
					note("tick", err)
				}
			})
		}
		for g := 0; g < 3; g++ {
			wg.Go(func() {
				<-start
				for i := 0; i < 30; i++ {
					list, err := s.List(ctx)
					note("list", err)
					for _, info := range list {
						_, _, err := s.LoadInfo(ctx, info)
						if errors.Is(err, fs.ErrNotExist) {
							continue // pruned meanwhile
						}
						note("loadinfo "+info.Path, err)
					}
					_, _, err = s.Latest(ctx)
					note("latest", err)
					_, err = s.Prune(ctx)
					note("prune", err)
					note("side", s.WriteJSON(ctx, "side.json", map[string]int{"i": i}))
				}
			})
		}
		wg.Go(func() {
			<-start
			if round%2 == 0 {
				note("close", s.Close())
			}
		})
		close(start)
		wg.Wait()
		require.NoError(t, s.Close())
		require.Empty(t, bad, "round %d", round)

		r, err := Open[crashState](dir, WithLayout("c", 4), KeepLast(5), WithRolling(), Every(2))
		require.NoError(t, err)
		for _, n := range dirNames(t, dir) {
			require.False(t, strings.Contains(n, tempMarker), n)
		}
		list, err := r.List(ctx)
		require.NoError(t, err)
		for _, info := range list {
			got, _, err := r.LoadInfo(ctx, info)
			require.NoError(t, err)
			require.Equal(t, info.Step, got.Step)
		}
		require.NoError(t, r.Close())
	}
}

// The exported Backend of OpenDir, used directly: Close races every call.
func TestAttackDirBackendCloseRacesEverything(t *testing.T) {
	skipUnlessLinux(t)
	t.Parallel()
	for round := 0; round < 20; round++ {
		ctx := context.Background()
		dir := t.TempDir()
		b, err := dirstore.Open(dir, dirstore.NoSync())
		require.NoError(t, err)
		for i := 0; i < 20; i++ {
			_, err := b.Create(ctx, "f"+strconv.Itoa(i)+".json", func(w io.Writer) error {
				_, err := w.Write([]byte("hello"))
				return err
			})
			require.NoError(t, err)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := 0; g < 8; g++ {
			wg.Go(func() {
				<-start
				for i := 0; i < 20; i++ {
					name := fmt.Sprintf("g%d_%d.json", g, i)
					_, err := b.Create(ctx, name, func(w io.Writer) error {
						_, err := w.Write(bytes.Repeat([]byte{'a'}, 70<<10))
						return err
					})
					if err == nil {
						// Whatever Create says it wrote is whole.
						data, rerr := os.ReadFile(filepath.Join(dir, name))
						require.NoError(t, rerr)
						require.Len(t, data, 70<<10)
					}
					objs, _ := b.List(ctx)
					for _, o := range objs {
						if r, _, err := b.Open(ctx, o.Name); err == nil {
							io.Copy(io.Discard, r)
							r.Close()
						}
						b.Stat(ctx, o.Name)
					}
				}
			})
		}
		wg.Go(func() {
			<-start
			b.Close()
		})
		close(start)
		wg.Wait()
		b.Close()
		// A write that Close cut short may leave its temporary file
		// (its removal fails on the closed directory, as through a
		// closed os.Root): the next writer's Open removes it.
		s, err := Open[int](dir, NoSync())
		require.NoError(t, err)
		require.NoError(t, s.Close())
		for _, n := range dirNames(t, dir) {
			require.False(t, strings.Contains(n, tempMarker), "round %d: temporary %s left after the next writer's Open", round, n)
		}
	}
}

// Two (and more) processes contending for the writer lock: never two
// writers at once, and every save that returned is there.
func TestAttackWriterLockContention(t *testing.T) {
	skipUnlessLinux(t)
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns processes")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	var cmds []*exec.Cmd
	var outs []*strings.Builder
	for p := 0; p < 4; p++ {
		cmd := exec.Command(exe, "-test.run=^TestAttackLockChild$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), "ATTACK_LOCK_DIR="+dir, "ATTACK_LOCK_ID="+strconv.Itoa(p))
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		require.NoError(t, cmd.Start())
		cmds = append(cmds, cmd)
		outs = append(outs, out)
	}
	for i, cmd := range cmds {
		err := cmd.Wait()
		require.NoError(t, err, outs[i].String())
		require.Contains(t, outs[i].String(), "--- PASS: TestAttackLockChild", outs[i].String())
	}
	s := openStore[int](t, dir, WithLayout("c", 6))
	list, err := s.List(context.Background())
	require.NoError(t, err)
	require.Len(t, list, 4*25)
}

func TestAttackLockChild(t *testing.T) {
	skipUnlessLinux(t)
	dir := os.Getenv("ATTACK_LOCK_DIR")
	if dir == "" {
		t.Skip("a child of TestAttackWriterLockContention")
	}
	id, _ := strconv.Atoi(os.Getenv("ATTACK_LOCK_ID"))
	ctx := context.Background()
	marker := filepath.Join(dir, "holder.json")
	for i := 0; i < 25; {
		s, err := Open[int](dir, WithLayout("c", 6))
		if errors.Is(err, ErrLocked) {
			continue
		}
		require.NoError(t, err)
		f, err := os.OpenFile(marker, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		require.NoError(t, err, "two writers at once")
		f.Close()
		step := int64(id*1000 + i + 1)
		_, err = s.Save(ctx, step, int(step))
		require.NoError(t, err)
		require.NoError(t, os.Remove(marker))
		require.NoError(t, s.Close())
		i++
	}
}

// A fresh store's first Lists (reading the header index ahead, on another
// goroutine) racing Close.
func TestAttackFirstListRacesClose(t *testing.T) {
	skipUnlessLinux(t)
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open[int](dir, WithLayout("c", 4), NoSync())
	require.NoError(t, err)
	for step := int64(1); step <= 300; step++ {
		_, err := s.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	for round := 0; round < 30; round++ {
		r, err := Open[int](dir, WithLayout("c", 4), ReadOnly())
		require.NoError(t, err)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := 0; g < 4; g++ {
			wg.Go(func() {
				<-start
				list, err := r.List(ctx)
				if err != nil {
					require.ErrorIs(t, err, ErrClosed)
					return
				}
				require.Len(t, list, 300)
				for i, info := range list {
					require.Equal(t, int64(i+1), info.Step)
					require.Positive(t, info.Size)
				}
			})
		}
		wg.Go(func() { <-start; r.Close() })
		close(start)
		wg.Wait()
	}
}
