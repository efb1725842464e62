package checkpoint_test

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/stretchr/testify/require"
)

// TestAttackOpenPayloadOfADamagedPayloadIsReportedAsRestored: Hooks:
// "OnError is called with every error the store returns" and OnLoad
// "after Load, Latest or LatestClean returns a checkpoint"; WithLogger
// logs "checkpoint restored" for a load. OpenPayload of a damaged payload
// calls OnLoad (and logs "checkpoint restored") when it opens, and the
// ErrCorrupt its reader returns at the end never reaches OnError: a host
// that watches OnError for damage never hears of it, and its OnLoad says
// the checkpoint was restored.
func TestAttackOpenPayloadOfADamagedPayloadIsReportedAsRestored(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var loads []checkpoint.Info
	var errs []error
	s := openStore[[]byte](t, dir, checkpoint.WithHooks(checkpoint.Hooks{
		OnLoad:  func(info checkpoint.Info, _ time.Duration) { loads = append(loads, info) },
		OnError: func(err error) { errs = append(errs, err) },
	}))
	info, err := s.SaveFrom(ctx, 1, writeAll(payloadBytes(1, 5000)))
	require.NoError(t, err)
	data := mustRead(t, info.Location)
	data[2000] ^= 1
	require.NoError(t, os.WriteFile(info.Location, data, 0o644))

	r, _, err := s.OpenPayload(ctx, 1)
	require.NoError(t, err)
	_, err = readPayload(t, r)
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	reported := false
	for _, e := range errs {
		reported = reported || errors.Is(e, checkpoint.ErrCorrupt)
	}
	if !reported {
		t.Errorf("the damaged payload's ErrCorrupt never reached OnError (errors reported: %v)", errs)
	}
	if len(loads) != 0 {
		t.Errorf("OnLoad was called for a payload that failed verification: %v", loads[0].Location)
	}
}

// TestAttackPayloadReaderClosedEarlyAndShared: a reader closed before its
// end never returns io.EOF afterwards; Close twice is fine; two goroutines
// reading one reader never get a clean io.EOF while the bytes they read
// together differ from the payload (run with -race too).
func TestAttackPayloadReaderClosedEarlyAndShared(t *testing.T) {
	ctx := context.Background()
	for name, comp := range attackComps() {
		t.Run(name, func(t *testing.T) {
			s := openStore[[]byte](t, t.TempDir(), comp...)
			payload := payloadBytes(4, 300<<10)
			_, err := s.SaveFrom(ctx, 1, writeAll(payload))
			require.NoError(t, err)

			r, _, err := s.OpenPayload(ctx, 1)
			require.NoError(t, err)
			buf := make([]byte, 100)
			_, err = io.ReadFull(r, buf)
			require.NoError(t, err)
			require.NoError(t, r.Close())
			require.NoError(t, r.Close())
			n, err := r.Read(buf)
			require.Zero(t, n)
			require.ErrorIs(t, err, checkpoint.ErrClosed)
			_, err = r.Read(buf)
			require.ErrorIs(t, err, checkpoint.ErrClosed)

			r, _, err = s.OpenPayload(ctx, 1)
			require.NoError(t, err)
			var mu sync.Mutex
			total := 0
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for g := 0; g < 2; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					b := make([]byte, 777)
					for {
						n, err := r.Read(b)
						mu.Lock()
						total += n
						mu.Unlock()
						if err != nil {
							errs[g] = err
							return
						}
					}
				}()
			}
			wg.Wait()
			require.NoError(t, r.Close())
			require.Equal(t, len(payload), total)
			require.Equal(t, io.EOF, errs[0])
			require.Equal(t, io.EOF, errs[1])
		})
	}
}

// TestAttackSaveFromWriterKeptAndUsedDuringTheNextSave: "The io.Writer
// must not be used after write returns (such a write fails and never
// reaches the file)": a writer kept from one save and used while the next
// SaveFrom streams must not reach the next file either.
func TestAttackSaveFromWriterKeptAndUsedDuringTheNextSave(t *testing.T) {
	ctx := context.Background()
	for name, comp := range attackComps() {
		t.Run(name, func(t *testing.T) {
			s := openStore[[]byte](t, t.TempDir(), comp...)
			var kept io.Writer
			_, err := s.SaveFrom(ctx, 1, func(w io.Writer) error { kept = w; _, err := w.Write([]byte("one")); return err })
			require.NoError(t, err)
			_, err = s.SaveFrom(ctx, 2, func(w io.Writer) error {
				if _, err := w.Write([]byte("two-a")); err != nil {
					return err
				}
				if n, err := kept.Write([]byte("EVIL")); err == nil || n != 0 {
					t.Errorf("a kept writer wrote %d bytes during the next save (%v)", n, err)
				}
				_, err := w.Write([]byte("two-b"))
				return err
			})
			require.NoError(t, err)
			r, _, err := s.OpenPayload(ctx, 2)
			require.NoError(t, err)
			b, err := readPayload(t, r)
			require.NoError(t, err)
			require.Equal(t, "two-atwo-b", string(b))
		})
	}
}
