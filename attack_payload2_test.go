package checkpoint_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/stretchr/testify/require"
)

func attackComps() map[string][]checkpoint.Option {
	return map[string][]checkpoint.Option{"plain": nil, "gzip": {checkpoint.Gzip()}, "zstd": {checkpoint.Zstd()}}
}

// noTemps fails if dir holds anything but checkpoints and the lock.
func noTemps(t *testing.T, dir string, want ...string) {
	t.Helper()
	names := dirNames(t, dir)
	for _, n := range names {
		if n == ".checkpoint.lock" || n == ".checkpoint.index" || strings.HasPrefix(n, ".checkpoint.index") {
			continue
		}
		ok := false
		for _, w := range want {
			ok = ok || n == w
		}
		if !ok {
			t.Errorf("unexpected %q in %v", n, names)
		}
	}
}

// TestAttackSaveFromIgnoredWriteErrorStillFails: "writes more bytes than
// the read limit (WithMaxReadSize; ErrInvalid), the save fails with that
// error and nothing is published" - also when write ignores the error its
// Write returned and returns nil.
func TestAttackSaveFromIgnoredWriteErrorStillFails(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[[]byte](t, dir, checkpoint.WithMaxReadSize(4096))
	_, err := s.SaveFrom(ctx, 1, func(w io.Writer) error {
		w.Write(make([]byte, 4000))
		w.Write(make([]byte, 200)) // refused, ignored
		w.Write(make([]byte, 10))  // would fit
		return nil
	})
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	noTemps(t, dir)
}

// TestAttackSaveFromGoexitInWrite: a write function that ends its
// goroutine (t.FailNow, runtime.Goexit) is neither an error nor a panic.
// The store must stay usable: no write lock held for ever, no temporary
// file left.
func TestAttackSaveFromGoexitInWrite(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore[[]byte](t, dir)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.SaveFrom(ctx, 1, func(w io.Writer) error {
			w.Write([]byte("partial"))
			runtime.Goexit()
			return nil
		})
	}()
	<-done
	res := make(chan error, 1)
	go func() { _, err := s.SaveFrom(ctx, 2, writeAll([]byte("next"))); res <- err }()
	select {
	case err := <-res:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("the store is stuck after a write function called runtime.Goexit")
	}
	list, err := s.List(ctx)
	require.NoError(t, err)
	for _, i := range list {
		require.NotEqual(t, int64(1), i.Step, "a payload whose write never returned was published")
	}
}

// TestAttackPayloadAtTheReadLimit: "writes more bytes than WithMaxReadSize
// [fails]": a payload of exactly the limit saves, so every read of the same
// store must take it back: OpenPayload, LatestPayload, and Load (which must
// say ErrPayloadMismatch, not ErrCorrupt).
func TestAttackPayloadAtTheReadLimit(t *testing.T) {
	ctx := context.Background()
	const limit = 100 << 10
	for name, comp := range attackComps() {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := openStore[[]byte](t, dir, append(comp, checkpoint.WithMaxReadSize(limit))...)
			payload := payloadBytes(3, limit)
			_, err := s.SaveFrom(ctx, 1, writeAll(payload))
			require.NoError(t, err)
			r, _, err := s.OpenPayload(ctx, 1)
			require.NoError(t, err)
			b, err := readPayload(t, r)
			require.NoError(t, err)
			require.True(t, bytes.Equal(b, payload))
			r, _, err = s.LatestPayload(ctx)
			require.NoError(t, err)
			b, err = readPayload(t, r)
			require.NoError(t, err)
			require.True(t, bytes.Equal(b, payload))
			_, _, err = s.Load(ctx, 1)
			require.ErrorIs(t, err, checkpoint.ErrPayloadMismatch)
			_, _, err = s.Latest(ctx)
			require.ErrorIs(t, err, checkpoint.ErrPayloadMismatch)
			_, err = s.SaveFrom(ctx, 2, writeAll(append(payload, 1)))
			require.ErrorIs(t, err, checkpoint.ErrInvalid)
		})
	}
}

// TestAttackPayloadTooLargeForAReaderIsNeverMovedAside: WithMaxReadSize: "a
// larger checkpoint fails with ErrCorrupt (and is never moved aside as
// damaged: it may be good)". A store of a smaller limit than the writer's
// reads, falls back past, and saves at the payload's step.
func TestAttackPayloadTooLargeForAReaderIsNeverMovedAside(t *testing.T) {
	ctx := context.Background()
	for name, comp := range attackComps() {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			w := openStore[[]byte](t, dir, comp...)
			_, err := w.SaveFrom(ctx, 1, writeAll([]byte("small")))
			require.NoError(t, err)
			info, err := w.SaveFrom(ctx, 2, writeAll(payloadBytes(1, 50<<10)))
			require.NoError(t, err)
			before := mustRead(t, info.Location)
			require.NoError(t, w.Close())

			s := openStore[[]byte](t, dir, append(comp, checkpoint.WithMaxReadSize(10<<10))...)
			r, _, err := s.OpenPayload(ctx, 2)
			if err == nil {
				_, err = readPayload(t, r)
			}
			require.ErrorIs(t, err, checkpoint.ErrCorrupt)
			r, got, err := s.LatestPayload(ctx)
			if err == nil {
				r.Close()
				require.Equal(t, int64(1), got.Step)
			}
			_, _, err = s.Load(ctx, 2)
			require.Error(t, err)
			_, err = s.SaveFrom(ctx, 2, writeAll([]byte("other")))
			require.ErrorIs(t, err, checkpoint.ErrExists)
			_, err = s.Save(ctx, 2, []byte("x"))
			require.ErrorIs(t, err, checkpoint.ErrExists)
			_, err = s.Prune(ctx)
			require.NoError(t, err)
			requireUntouched(t, info.Location, before)
		})
	}
}

// TestAttackSaveFromCancelledMidWrite: a context cancelled while write
// runs: either the save fails and nothing is published (no temp left), or
// it succeeds and the checkpoint is whole.
func TestAttackSaveFromCancelledMidWrite(t *testing.T) {
	for name, comp := range attackComps() {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := openStore[[]byte](t, dir, comp...)
			ctx, cancel := context.WithCancel(context.Background())
			info, err := s.SaveFrom(ctx, 1, func(w io.Writer) error {
				w.Write(payloadBytes(1, 70<<10))
				cancel()
				_, err := w.Write(payloadBytes(2, 70<<10))
				return err
			})
			if err != nil {
				require.ErrorIs(t, err, context.Canceled)
				noTemps(t, dir)
				return
			}
			r, _, err := s.OpenPayload(context.Background(), info.Step)
			require.NoError(t, err)
			b, err := readPayload(t, r)
			require.NoError(t, err)
			require.Len(t, b, 140<<10)
		})
	}
}

// TestAttackReadsInsideWrite: "write runs under the store's write lock: it
// must not write to the store" - reads are allowed; they must not hang.
func TestAttackReadsInsideWrite(t *testing.T) {
	ctx := context.Background()
	s := openStore[[]byte](t, t.TempDir())
	_, err := s.SaveFrom(ctx, 1, writeAll([]byte("one")))
	require.NoError(t, err)
	res := make(chan error, 1)
	go func() {
		_, err := s.SaveFrom(ctx, 2, func(w io.Writer) error {
			if _, err := s.List(ctx); err != nil {
				return err
			}
			r, _, err := s.LatestPayload(ctx)
			if err != nil {
				return err
			}
			defer r.Close()
			_, err = io.Copy(w, r)
			return err
		})
		res <- err
	}()
	select {
	case err := <-res:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("a read inside write hangs")
	}
}

var _ = errors.New
var _ = fmt.Sprint
var _ = os.ReadFile
