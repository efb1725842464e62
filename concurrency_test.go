package checkpoint_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/internal/format"
	"github.com/gocheckpoint/checkpoint/internal/killtest"
	"github.com/stretchr/testify/require"
)

// TestConcurrentSaveLoadListPrune runs savers, loaders, listers and a pruner
// against one store at once (run it with -race). Every operation must
// succeed or fail only as the race allows (a pruned step is ErrNotFound),
// and at the end the store holds exactly what the retention rules keep.
func TestConcurrentSaveLoadListPrune(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	const (
		savers   = 4
		perSaver = 40
		keepLast = 5
		every    = 10
	)
	s := openStore[paddedState](t, dir, checkpoint.WithLayout("c", 4), checkpoint.KeepLast(keepLast), checkpoint.KeepMultiplesOf(every), checkpoint.Gzip())
	var saving sync.WaitGroup
	var done atomic.Bool
	var maxSaved atomic.Int64
	for i := range savers {
		saving.Go(func() {
			for n := range perSaver {
				step := int64(1 + i + n*savers)
				_, err := s.Save(ctx, step, paddedState{Step: step, Pad: "x"})
				if err != nil {
					t.Errorf("save %d: %v", step, err)
					return
				}
				for {
					m := maxSaved.Load()
					if step <= m || maxSaved.CompareAndSwap(m, step) {
						break
					}
				}
			}
		})
	}
	var others sync.WaitGroup
	for i := range 3 {
		others.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			for !done.Load() {
				step := int64(rng.IntN(savers*perSaver) + 1)
				got, info, err := s.Load(ctx, step)
				if err != nil && !errors.Is(err, checkpoint.ErrNotFound) {
					t.Errorf("load %d: %v", step, err)
					return
				}
				if err == nil && (got.Step != step || info.Step != step) {
					t.Errorf("load %d returned step %d (%d)", step, got.Step, info.Step)
					return
				}
				got, info, err = s.Latest(ctx)
				if err != nil && !errors.Is(err, checkpoint.ErrNotFound) {
					t.Errorf("latest: %v", err)
					return
				}
				if err == nil && got.Step != info.Step {
					t.Errorf("latest: state of step %d in checkpoint %d", got.Step, info.Step)
					return
				}
			}
		})
	}
	others.Go(func() {
		for !done.Load() {
			list, err := s.List(ctx)
			if err != nil {
				t.Errorf("list: %v", err)
				return
			}
			if !slices.IsSortedFunc(list, func(a, b checkpoint.Info) int { return int(a.Step - b.Step) }) {
				t.Errorf("list is not sorted: %v", steps(list))
				return
			}
			if _, err := s.Prune(ctx); err != nil {
				t.Errorf("prune: %v", err)
				return
			}
			if _, err := s.PruneDryRun(ctx); err != nil {
				t.Errorf("prune dry run: %v", err)
				return
			}
		}
	})
	saving.Wait()
	done.Store(true)
	others.Wait()

	_, err := s.Prune(ctx)
	require.NoError(t, err)
	total := int64(savers * perSaver)
	var want []int64
	for step := int64(1); step <= total; step++ {
		if step%every == 0 || step > total-keepLast {
			want = append(want, step)
		}
	}
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, want, steps(list), "exactly what the rules keep")
	for _, info := range list {
		got, _, err := s.LoadExact(ctx, info)
		require.NoError(t, err)
		require.Equal(t, info.Step, got.Step)
	}
	_, info, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, total, info.Step)
	require.Equal(t, total, maxSaved.Load())
}

// TestParallelHeaderReadsWithAConcurrentWriter lists a directory large
// enough for fill to read headers on every processor while a writer saves
// and prunes, under -race.
func TestParallelHeaderReadsWithAConcurrentWriter(t *testing.T) {
	t.Parallel()
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("fill reads headers in parallel only with more than one processor")
	}
	ctx := context.Background()
	dir := t.TempDir()
	const initial = checkpoint.ParallelFill + 88
	at := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	for step := int64(1); step <= initial; step++ {
		b := envelopeBytes(format.Header{Format: 1, Step: step, Kind: checkpoint.KindStep, Time: at.Add(time.Duration(step) * time.Second)}, []byte(fmt.Sprint(step)))
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("step_%08d.json", step)), b, 0o644))
	}
	w := openStore[int64](t, dir, checkpoint.NoSync(), checkpoint.KeepMultiplesOf(2), checkpoint.KeepLast(8))
	r := openStore[int64](t, dir, checkpoint.ReadOnly())

	var wg sync.WaitGroup
	wg.Go(func() {
		for step := int64(initial + 1); step <= initial+60; step++ {
			if _, err := w.Save(ctx, step, step); err != nil {
				panic(err)
			}
		}
	})
	for _, st := range []*checkpoint.Store[int64]{w, r} {
		wg.Go(func() {
			for range 10 {
				list, err := st.List(ctx)
				if err != nil {
					panic(err)
				}
				if len(list) < initial/2 || !slices.IsSortedFunc(list, func(a, b checkpoint.Info) int { return cmp.Compare(a.Step, b.Step) }) {
					panic(fmt.Sprintf("a list of %d checkpoints, not sorted or missing some", len(list)))
				}
				for _, info := range list {
					if info.Format == 0 || info.Time.IsZero() {
						panic(fmt.Sprintf("%s listed without its header", info.Path))
					}
				}
			}
		})
	}
	wg.Wait()
	list, err := r.List(ctx)
	require.NoError(t, err)
	for _, info := range list {
		require.True(t, info.Step%2 == 0 || info.Step > initial+60-8, "step %d survived retention", info.Step)
	}
	_, info, err := r.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(initial+60), info.Step)
}

// Many goroutines saving, listing, loading, pruning, writing a side file
// and (every other round) closing one store at once, under -race: each call
// succeeds or fails only as the race allows (ErrClosed, ErrExists,
// ErrNotFound), and the store reopened holds no temporary file and only
// checkpoints that load.
func TestEveryCallAtOnceThenCloseLeavesAWholeStore(t *testing.T) {
	skipUnlessLinux(t)
	t.Parallel()
	for round := 0; round < 3; round++ {
		ctx := context.Background()
		dir := t.TempDir()
		s, err := checkpoint.Open[paddedState](dir, checkpoint.WithLayout("c", 4), checkpoint.KeepLast(5), checkpoint.WithRolling(), checkpoint.SaveEvery(2), checkpoint.NoSync())
		require.NoError(t, err)
		var wg sync.WaitGroup
		start := make(chan struct{})
		okErr := func(err error) bool {
			return err == nil || errors.Is(err, checkpoint.ErrClosed) || errors.Is(err, checkpoint.ErrExists) || errors.Is(err, checkpoint.ErrNotFound)
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
					_, _, err := s.Tick(ctx, step, paddedState{Step: step, Pad: strings.Repeat("x", size)})
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
						_, _, err := s.LoadExact(ctx, info)
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

		r, err := checkpoint.Open[paddedState](dir, checkpoint.WithLayout("c", 4), checkpoint.KeepLast(5), checkpoint.WithRolling(), checkpoint.SaveEvery(2))
		require.NoError(t, err)
		for _, n := range dirNames(t, dir) {
			require.False(t, strings.Contains(n, checkpoint.TempMarker), n)
		}
		list, err := r.List(ctx)
		require.NoError(t, err)
		for _, info := range list {
			got, _, err := r.LoadExact(ctx, info)
			require.NoError(t, err)
			require.Equal(t, info.Step, got.Step)
		}
		require.NoError(t, r.Close())
	}
}

// The directory's Backend used directly, its Close racing every call:
// whatever Create says it wrote is whole, and the next writer's Open leaves
// no temporary file.
func TestDirectoryBackendClosedDuringItsCallsLeavesNoTemp(t *testing.T) {
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
		s, err := checkpoint.Open[int](dir, checkpoint.NoSync())
		require.NoError(t, err)
		require.NoError(t, s.Close())
		for _, n := range dirNames(t, dir) {
			require.False(t, strings.Contains(n, checkpoint.TempMarker), "round %d: temporary %s left after the next writer's Open", round, n)
		}
	}
}

// lockContenderRole opens the store in Args[0] as a writer 25 times,
// trying again while another process holds the lock, and each time saves a
// step of the contender numbered Args[1] and acknowledges it; it fails if
// it finds the marker another writer holds while it writes.
var lockContenderRole = killtest.Register("lock-contender", func(c *killtest.Child) int {
	dir := c.Args[0]
	id, _ := strconv.Atoi(c.Args[1])
	ctx := context.Background()
	marker := filepath.Join(dir, "holder.json")
	for i := 0; i < 25; {
		s, err := checkpoint.Open[int](dir, checkpoint.WithLayout("c", 6))
		if errors.Is(err, checkpoint.ErrLocked) {
			continue
		}
		if err != nil {
			c.Fail(2, err)
		}
		f, err := os.OpenFile(marker, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			c.Fail(3, fmt.Errorf("two writers at once: %w", err))
		}
		f.Close()
		step := int64(id*1000 + i + 1)
		if _, err := s.Save(ctx, step, int(step)); err != nil {
			c.Fail(4, err)
		}
		if err := os.Remove(marker); err != nil {
			c.Fail(5, err)
		}
		if err := s.Close(); err != nil {
			c.Fail(6, err)
		}
		c.Ack(step)
		i++
	}
	return 0
})

// Four processes contending for the writer lock: never two writers at
// once, and every save that returned is there.
func TestWriterLockAdmitsOneProcessAtATime(t *testing.T) {
	skipUnlessLinux(t)
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	var procs []*killtest.Proc
	for p := 0; p < 4; p++ {
		procs = append(procs, lockContenderRole.Start(t, dir, strconv.Itoa(p)))
	}
	for _, p := range procs {
		require.NoError(t, p.Wait(), p.Stderr())
		require.Empty(t, p.Stderr())
		require.Len(t, p.Acks(), 25, "the contender's saves that returned")
	}
	s := openStore[int](t, dir, checkpoint.WithLayout("c", 6))
	list, err := s.List(context.Background())
	require.NoError(t, err)
	require.Len(t, list, 4*25)
}

// A fresh store's first Lists (reading the header index ahead, on another
// goroutine) racing Close: each lists every checkpoint, in order and with
// its size, or fails with ErrClosed.
func TestFirstListsRacingCloseListAllOrErrClosed(t *testing.T) {
	skipUnlessLinux(t)
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := checkpoint.Open[int](dir, checkpoint.WithLayout("c", 4), checkpoint.NoSync())
	require.NoError(t, err)
	for step := int64(1); step <= 300; step++ {
		_, err := s.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	for round := 0; round < 30; round++ {
		r, err := checkpoint.Open[int](dir, checkpoint.WithLayout("c", 4), checkpoint.ReadOnly())
		require.NoError(t, err)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := 0; g < 4; g++ {
			wg.Go(func() {
				<-start
				list, err := r.List(ctx)
				if err != nil {
					require.ErrorIs(t, err, checkpoint.ErrClosed)
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

func TestConcurrentSavesListsAndLoadsKeepEveryStep(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string][]checkpoint.Option{
		"gzip":       {checkpoint.Gzip()},
		"zstd":       {checkpoint.Zstd()},
		"zstd async": {checkpoint.Zstd(), checkpoint.Async(4)},
	} {
		t.Run(name, func(t *testing.T) { testConcurrentUse(t, opts...) })
	}
}

func TestCloseWaitsForOperationsInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := checkpoint.Open[int](dir)
	require.NoError(t, err)
	var wg sync.WaitGroup
	results := make(chan error, 50)
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Save(ctx, int64(i), i)
			results <- err
		}()
	}
	require.NoError(t, s.Close())
	wg.Wait()
	close(results)
	saved := 0
	for err := range results {
		if err == nil {
			saved++
		} else {
			require.ErrorIs(t, err, checkpoint.ErrClosed)
		}
	}
	// Every save that succeeded is whole on disk.
	r := openStore[int](t, dir, checkpoint.ReadOnly())
	list, err := r.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, saved)
	for _, info := range list {
		_, _, err := r.Load(ctx, info.Step)
		require.NoError(t, err)
	}
}

func TestLoadNeverReturnsAnotherStepOfTheRollingFile(t *testing.T) {
	t.Parallel()
	// The loads hold the rolling file open while the ticks replace it: a
	// volume without NTFS's POSIX rename makes a replacement wait for them
	// (up to 1 s, see retryInUse), and a stream of loads can outlast that.
	skipUnderWine(t, "Wine 8 has no POSIX rename (FileRenameInformationEx): as on a FAT volume, a file that is open cannot be renamed over")
	ctx := context.Background()
	s := openStore[int](t, t.TempDir(), checkpoint.SaveEvery(0), checkpoint.WithRolling())
	_, _, err := s.Tick(ctx, 1, 1)
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for step := int64(2); step <= 400; step++ {
			if _, _, err := s.Tick(ctx, step, int(step)); err != nil {
				panic(err)
			}
		}
	}()
	wrong, loaded := 0, 0
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		list, err := s.List(ctx)
		require.NoError(t, err)
		if len(list) != 1 {
			continue
		}
		v, info, err := s.Load(ctx, list[0].Step)
		if errors.Is(err, checkpoint.ErrNotFound) {
			continue // the rolling file moved on: the honest answer
		}
		require.NoError(t, err)
		loaded++
		if int64(v) != list[0].Step || info.Step != list[0].Step {
			wrong++
		}
	}
	require.Zero(t, wrong, "Load(k) returned another step (%d loads)", loaded)
}

func TestInfoIsACopy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openStore[int](t, t.TempDir())
	info, err := s.Save(ctx, 1, 1, checkpoint.WithMeta("k", "v"))
	require.NoError(t, err)
	info.Meta["k"] = "mutated by caller"
	_, err = s.SaveError(ctx, 2, 2, fmt.Errorf("x: %w", os.ErrClosed))
	require.NoError(t, err)

	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() { // under -race: each caller owns its Info
			defer wg.Done()
			list, err := s.List(ctx)
			if err != nil {
				panic(err)
			}
			list[0].Meta["k"] = fmt.Sprint(i)
			list[1].Error.Types[0] = fmt.Sprint(i)
		}()
	}
	wg.Wait()
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, "v", list[0].Meta["k"])
	require.Equal(t, "*fmt.wrapError", list[1].Error.Types[0])
}

func TestSecondCloseWaitsForTheFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	// The clock is read inside a save, with the save counted in flight:
	// blocking it holds a save in the middle.
	s, err := checkpoint.Open[int](dir, checkpoint.WithClock(func() time.Time {
		once.Do(func() { close(entered); <-release })
		return time.Now()
	}))
	require.NoError(t, err)
	saved := make(chan error, 1)
	go func() { _, err := s.Save(ctx, 1, 1); saved <- err }()
	<-entered
	first := make(chan error, 1)
	go func() { first <- s.Close() }()
	for !checkpoint.IsClosing(s) { // until the first Close has begun
		runtime.Gosched()
	}
	go func() {
		for i := 0; i < 100; i++ {
			runtime.Gosched()
		}
		close(release)
	}()
	require.NoError(t, s.Close())
	// Whichever Close returned, the lock is free once it has.
	again, err := checkpoint.Open[int](dir)
	require.NoError(t, err, "a Close returned before the store was closed")
	require.NoError(t, again.Close())
	require.NoError(t, <-first)
	require.NoError(t, <-saved)
}

func TestConcurrentSavesOfOneStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[int](t, dir)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Save(ctx, 7, i)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	ok := 0
	for err := range errs {
		if err == nil {
			ok++
		} else {
			require.ErrorIs(t, err, checkpoint.ErrExists)
		}
	}
	require.Equal(t, 1, ok)
	require.Equal(t, []string{".checkpoint.lock", "step_00000007.json"}, dirNames(t, dir))
}

// testConcurrentUse saves, lists and loads from many goroutines at once
// and checks that every save is whole and every step loads.
func testConcurrentUse(t *testing.T, opts ...checkpoint.Option) {
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
				if _, _, err := s.Latest(ctx); err != nil && !errors.Is(err, checkpoint.ErrNotFound) {
					errs <- err
				}
				if _, err := s.List(ctx); err != nil {
					errs <- err
				}
				if _, _, err := s.Load(ctx, int64(i)); err != nil && !errors.Is(err, checkpoint.ErrNotFound) {
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

// TestLatestBesideAPruningWriterNeverAnswersAFreshStart: a reader's Latest
// and LatestPayload, while a writer of another process saves step after
// step with KeepLast(1), always return a checkpoint at least as new as
// the one saved before the call, never ErrNotFound (which a host takes
// for a fresh start) nor an older step: a checkpoint that vanishes
// between the reader's listing and its read was pruned after a newer one
// was published, so the reader lists again.
func TestLatestBesideAPruningWriterNeverAnswersAFreshStart(t *testing.T) {
	t.Parallel()
	for _, payload := range []bool{false, true} {
		t.Run(map[bool]string{false: "state", true: "payload"}[payload], func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dir := t.TempDir()
			w := openStore[[]byte](t, dir, checkpoint.NoSync(), checkpoint.KeepLast(1))
			save := func(step int64) {
				var err error
				if payload {
					_, err = w.SaveFrom(ctx, step, func(wr io.Writer) error { _, err := wr.Write([]byte(strconv.FormatInt(step, 10))); return err })
				} else {
					_, err = w.Save(ctx, step, []byte(strconv.FormatInt(step, 10)))
				}
				if err != nil {
					t.Error(err)
				}
			}
			save(1)
			var published atomic.Int64
			published.Store(1)
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				for step := int64(2); ; step++ {
					select {
					case <-stop:
						return
					default:
					}
					save(step)
					published.Store(step)
				}
			}()
			r := openStore[[]byte](t, dir, checkpoint.ReadOnly())
			for range 1500 {
				before := published.Load()
				var info checkpoint.Info
				var err error
				if payload {
					var rc io.ReadCloser
					if rc, info, err = r.LatestPayload(ctx); err == nil {
						rc.Close()
					}
				} else {
					_, info, err = r.Latest(ctx)
				}
				if err != nil {
					t.Errorf("Latest beside a pruning writer: %v", err)
					break
				}
				if info.Step < before {
					t.Errorf("Latest returned step %d, older than step %d published before the call", info.Step, before)
					break
				}
			}
			close(stop)
			<-done
		})
	}
}

// TestConcurrentSaveFromsOfOneStepPublishOne proves that of two SaveFrom
// calls of one step at once (on an Async store, in every compression) one
// succeeds and the other is ErrExists, and the file holds the winner's
// payload.
func TestConcurrentSaveFromsOfOneStepPublishOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	eachCompression(t, func(t *testing.T, comp []checkpoint.Option) {
		s := openStore[[]byte](t, t.TempDir(), append(comp, checkpoint.Async(4))...)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		payloads := make([][]byte, 2)
		for g := range errs {
			payloads[g] = payloadBytes(uint64(g+10), 100<<10)
			wg.Go(func() {
				_, errs[g] = s.SaveFrom(ctx, 5, writeAll(payloads[g]))
			})
		}
		wg.Wait()
		var winner []byte
		for g, err := range errs {
			if err == nil {
				require.Nil(t, winner, "both saves of step 5 succeeded")
				winner = payloads[g]
				continue
			}
			require.ErrorIs(t, err, checkpoint.ErrExists)
		}
		require.NotNil(t, winner, "neither save of step 5 succeeded")
		requirePayload(t, s, 5, winner)
	})
}

// TestCloseDuringSaveFromIsAllOrNothing proves that a Close while a
// SaveFrom's write streams lets the save either publish the whole payload
// or fail leaving no checkpoint, and that no temporary file is left once
// both returned.
func TestCloseDuringSaveFromIsAllOrNothing(t *testing.T) {
	t.Parallel()
	eachCompression(t, func(t *testing.T, comp []checkpoint.Option) {
		dir := t.TempDir()
		s, err := checkpoint.Open[[]byte](dir, append(comp, checkpoint.NoSync())...)
		require.NoError(t, err)
		started, release := make(chan struct{}), make(chan struct{})
		res := make(chan error, 1)
		go func() {
			_, err := s.SaveFrom(context.Background(), 1, func(w io.Writer) error {
				w.Write(payloadBytes(1, 50<<10))
				close(started)
				<-release
				_, err := w.Write(payloadBytes(2, 50<<10))
				return err
			})
			res <- err
		}()
		<-started
		closed := make(chan error, 1)
		go func() { closed <- s.Close() }()
		close(release)
		saveErr := <-res
		require.NoError(t, <-closed)
		requireNoTemps(t, dir, "step_00000001.json", "step_00000001.json.gz", "step_00000001.json.zst")
		r := openStore[[]byte](t, dir, append(comp, checkpoint.ReadOnly())...)
		rd, _, err := r.OpenPayload(context.Background(), 1)
		if saveErr != nil {
			require.ErrorIs(t, err, checkpoint.ErrNotFound)
			return
		}
		require.NoError(t, err)
		b, err := readPayload(t, rd)
		require.NoError(t, err)
		require.Len(t, b, 100<<10)
	})
}
