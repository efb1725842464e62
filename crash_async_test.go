package checkpoint

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/gocheckpoint/checkpoint/backendtest/inject"
	"github.com/gocheckpoint/checkpoint/internal/killtest"
	"github.com/stretchr/testify/require"
)

// batchQueue is the queue of the batch child: one burst of saves.
const batchQueue = 8

// batchRole runs batchChild on the directory Args[0], zstd if Args[1] is
// "zstd".
var batchRole = killtest.Register("async-batch", batchChild)

func batchOptions(compression string) []Option {
	opts := []Option{WithLayout("b", 6), Async(batchQueue)}
	if compression == "zstd" {
		opts = append(opts, Zstd())
	}
	return opts
}

// batchChild saves with Async, durably, in bursts of batchQueue saves
// queued without waiting, then Flush: the store's goroutine finds several
// saves waiting and publishes them as one batch (a group commit). It
// prints "create NAME" before each file of a batch is written, "batch N"
// before each batch's Commit (of N names), and after each Flush that
// returned nil it acknowledges the burst, as "first-last".
func batchChild(c *killtest.Child) int {
	dir, compression, fail := c.Args[0], c.Args[1], c.Fail
	ctx := context.Background()
	b, err := openDirWith(dir, batchOptions(compression)...)
	if err != nil {
		fail(2, err)
	}
	b = inject.Wrap(b, func(op inject.Op) error {
		switch {
		case op.Kind == inject.Create && op.Unsynced:
			c.Printf("create %s", op.Name)
		case op.Kind == inject.Commit:
			c.Printf("batch %d", len(op.Names))
		}
		return nil
	})
	s, err := OpenBackend[crashState](b, batchOptions(compression)...)
	if err != nil {
		fail(3, err)
	}
	for next := resumeStep(ctx, s, fail); ; next += batchQueue {
		for step := next; step < next+batchQueue; step++ {
			if _, err := s.Save(ctx, step, newCrashState(step)); err != nil {
				fail(4, err)
			}
		}
		if err := s.Flush(ctx); err != nil {
			fail(5, err)
		}
		c.Ack(fmt.Sprintf("%d-%d", next, next+batchQueue-1))
	}
}

// TestKill9DuringAsyncBatchesKeepsEveryFlushedSave kills a process whose
// Async store publishes its saves in batches (group commits), at random
// instants while a batch is being written, and proves after every
// kill that every save a returned Flush acknowledged is there, whole, and
// loads as it was saved; that every checkpoint published is whole; that
// nothing is there that was not saved (at most one burst past the last
// acknowledged one); and that no temporary file outlives a reopen.
func TestKill9DuringAsyncBatchesKeepsEveryFlushedSave(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns processes")
	}
	kills := killtest.Kills(t, 50)
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 28))
	ctx := context.Background()
	acked := map[int64]bool{} // every step a returned Flush acknowledged
	var lastAck int64
	var verified int64 // every checkpoint up to this step was read whole
	batches, batched, midWrite := 0, 0, 0
	for kill := 0; kill < kills; kill++ {
		compression := []string{"plain", "zstd"}[kill%2]
		p := batchRole.Start(t, dir, compression)
		p.AwaitAcks(t, 1+rng.IntN(4))
		// Kill it in the middle of the next batch: after a few of its
		// files were begun, or, now and then, once all were (in the
		// Commit, or after it).
		p.Await(t, "create ", p.Count("create ")+1+rng.IntN(batchQueue))
		p.Kill(t)
		require.Empty(t, p.Stderr(), "the child failed before it was killed")
		var fresh []int64 // acknowledged by this child
		for _, ack := range p.Acks() {
			first, last, ok := strings.Cut(ack, "-")
			require.True(t, ok, ack)
			from, err := strconv.ParseInt(first, 10, 64)
			require.NoError(t, err, ack)
			to, err := strconv.ParseInt(last, 10, 64)
			require.NoError(t, err, ack)
			for step := from; step <= to; step++ {
				acked[step] = true
				fresh = append(fresh, step)
			}
			lastAck = max(lastAck, to)
		}
		for _, line := range p.Output() {
			if n, ok := strings.CutPrefix(line, "batch "); ok {
				size, err := strconv.Atoi(n)
				require.NoError(t, err, line)
				batches++
				if size > 1 {
					batched++
				}
			}
		}
		for _, name := range dirNames(t, dir) {
			if isBatchLeftover(name) {
				midWrite++
				break
			}
		}

		s, err := Open[crashState](dir, batchOptions(compression)...)
		require.NoError(t, err, "kill %d", kill)
		for _, name := range dirNames(t, dir) {
			require.False(t, isBatchLeftover(name), "kill %d: temporary file %s survived a reopen", kill, name)
		}
		list, err := s.List(ctx)
		require.NoError(t, err)
		listed := map[int64]bool{}
		newest := verified
		for _, info := range list {
			listed[info.Step] = true
			newest = max(newest, info.Step)
			if info.Step <= verified {
				continue // whole after an earlier kill, and never written since
			}
			f, err := os.Open(info.Path)
			require.NoError(t, err)
			env, err := readEnvelope(f, DefaultMaxReadSize)
			f.Close()
			require.NoError(t, err, "kill %d: %s is torn", kill, info.Path)
			require.Equal(t, info.Step, env.Step)
			require.LessOrEqual(t, info.Step, lastAck+batchQueue, "kill %d: step %d was never saved", kill, info.Step)
		}
		verified = newest
		for step := range acked {
			require.True(t, listed[step], "kill %d: step %d, acknowledged by a Flush, is gone", kill, step)
		}
		for _, step := range fresh {
			got, _, err := s.Load(ctx, step)
			require.NoError(t, err, "kill %d: step %d", kill, step)
			require.Equal(t, newCrashState(step), got, "kill %d: step %d", kill, step)
		}
		require.NoError(t, s.Close())
	}
	require.Positive(t, batched, "no batch of more than one save formed in %d batches: the test proved nothing about group commit", batches)
	t.Logf("%d kills, %d of them mid-write (a temporary file was left); %d batches committed, %d of several saves; last acknowledged step %d", kills, midWrite, batches, batched, lastAck)
}

// isBatchLeftover reports whether name is anything but a checkpoint, the
// header index or the lock.
func isBatchLeftover(name string) bool {
	return isLeftover(name) && name != indexName
}
