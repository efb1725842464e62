package checkpoint_test

import (
	"context"
	"io"
	"runtime"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/stretchr/testify/require"
)

// TestAttackSaveFromGoexitLeavesNoTemp: DESIGN rule 8, "remove the temp on
// every error path": a write function that ends its goroutine.
func TestAttackSaveFromGoexitLeavesNoTemp(t *testing.T) {
	for name, comp := range attackComps() {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := openStore[[]byte](t, dir, comp...)
			done := make(chan struct{})
			go func() {
				defer close(done)
				s.SaveFrom(context.Background(), 1, func(w io.Writer) error {
					w.Write(payloadBytes(1, 100<<10))
					runtime.Goexit()
					return nil
				})
			}()
			<-done
			noTemps(t, dir)
		})
	}
}

// TestAttackAsyncQueuedSaveOfTheSameStep: "With Async, SaveFrom ...
// publishes the saves queued before it first, then its own": a queued
// Save of the same step wins, SaveFrom is ErrExists and write is not
// called.
func TestAttackAsyncQueuedSaveOfTheSameStep(t *testing.T) {
	ctx := context.Background()
	s := openStore[[]byte](t, t.TempDir(), checkpoint.Async(8))
	_, err := s.Save(ctx, 5, []byte("state"))
	require.NoError(t, err)
	called := 0
	_, err = s.SaveFrom(ctx, 5, func(w io.Writer) error { called++; return nil })
	require.ErrorIs(t, err, checkpoint.ErrExists)
	require.Zero(t, called)
	got, _, err := s.Load(ctx, 5)
	require.NoError(t, err)
	require.Equal(t, "state", string(got))
}
