package checkpoint_test

import (
	"context"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/stretchr/testify/require"
)

// TestAttackForkOfAPayloadStep: README, "Byte payloads": "Every promise of
// a checkpoint holds for a byte payload"; Fork: "creates the next numbered
// session holding the checkpoints of session from up to and including
// step". A session of byte payloads must fork at a payload's step.
func TestAttackForkOfAPayloadStep(t *testing.T) {
	ctx := context.Background()
	r := openSessions(t, t.TempDir())
	src, err := r.New(ctx, nil)
	require.NoError(t, err)
	st, err := checkpoint.OpenSessionStore[[]byte](r, src.ID)
	require.NoError(t, err)
	for step := int64(1); step <= 3; step++ {
		_, err := st.SaveFrom(ctx, step, writeAll(payloadBytes(uint64(step), 1000)))
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())
	fork, err := r.Fork(ctx, src.ID, 2, nil)
	require.NoError(t, err, "a session of byte payloads cannot be forked")
	fs, err := checkpoint.OpenSessionStore[[]byte](r, fork.ID)
	require.NoError(t, err)
	defer fs.Close()
	rd, info, err := fs.LatestPayload(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), info.Step)
	b, err := readPayload(t, rd)
	require.NoError(t, err)
	require.Equal(t, payloadBytes(2, 1000), b)
}

// TestAttackKeepBestKeepsTheNewestPayloadThatVerifies: the same guarantee
// when the newest payload is damaged: the newest that loads is the one
// before it, and Prune must not remove it.
func TestAttackKeepBestKeepsTheNewestPayloadThatVerifies(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	w := openStore[[]byte](t, dir)
	for step, loss := range map[int64]float64{1: 1, 2: 5, 3: 7} {
		_, err := w.SaveFrom(ctx, step, writeAll(payloadBytes(uint64(step), 5000)), checkpoint.WithMetric("loss", loss))
		require.NoError(t, err)
	}
	list, err := w.List(ctx)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	data := mustRead(t, list[2].Location)
	data[len(data)/2] ^= 1
	require.NoError(t, os.WriteFile(list[2].Location, data, 0o644))

	s := openStore[[]byte](t, dir, checkpoint.KeepBest(1, "loss", checkpoint.Minimize))
	_, err = s.Prune(ctx)
	require.NoError(t, err)
	_, err = os.Stat(list[1].Location)
	require.NoError(t, err, "the newest payload that verifies (what LatestPayload resumes from) was pruned")
	r, info, err := s.LatestPayload(ctx)
	require.NoError(t, err)
	r.Close()
	require.Equal(t, int64(2), info.Step)
}

// TestAttackConcurrentSaveFromOfOneStep: "never replaces one (ErrExists)"
// and "write is called at most once": two goroutines saving one step, one
// wins, the other is ErrExists, and the file is the winner's.
func TestAttackConcurrentSaveFromOfOneStep(t *testing.T) {
	ctx := context.Background()
	for name, comp := range attackComps() {
		t.Run(name, func(t *testing.T) {
			s := openStore[[]byte](t, t.TempDir(), append(comp, checkpoint.Async(4))...)
			var wg sync.WaitGroup
			var won atomic.Int32
			var winner atomic.Value
			for g := 0; g < 2; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					p := payloadBytes(uint64(g+10), 100<<10)
					_, err := s.SaveFrom(ctx, 5, writeAll(p))
					if err == nil {
						won.Add(1)
						winner.Store(p)
						return
					}
					require.ErrorIs(t, err, checkpoint.ErrExists)
				}()
			}
			wg.Wait()
			require.Equal(t, int32(1), won.Load())
			r, _, err := s.OpenPayload(ctx, 5)
			require.NoError(t, err)
			b, err := io.ReadAll(r)
			r.Close()
			require.NoError(t, err)
			require.Equal(t, winner.Load().([]byte), b)
		})
	}
}
