package checkpoint_test

import (
	"context"
	"io"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/stretchr/testify/require"
)

// TestAttackCloseWhileSaveFromWrites: a Close while write streams: the
// save either publishes the whole payload or fails leaving nothing, and no
// temporary file is left once both returned.
func TestAttackCloseWhileSaveFromWrites(t *testing.T) {
	for name, comp := range attackComps() {
		t.Run(name, func(t *testing.T) {
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
			noTemps(t, dir, "step_00000001.json", "step_00000001.json.gz", "step_00000001.json.zst")
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
}
