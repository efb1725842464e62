package checkpoint_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/stretchr/testify/require"
)

// TestAttackPayloadOfANewerSchemaIsHandedOut: README, "Changing your state
// type": "1. Every save records its schema in the header" and "4. A newer
// file stops the program. A file of a newer schema than the store's (a
// newer release wrote it) is ErrNewerSchema"; "Byte payloads": "Every
// promise of a checkpoint holds for a byte payload". SaveFrom on a store
// WithSchema(2) records schema 0 (save.go forces it), so an older release
// (WithSchema(1)) gets a newer release's payload bytes with no error.
func TestAttackPayloadOfANewerSchemaIsHandedOut(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	newer := openStore[[]byte](t, dir, checkpoint.WithSchema(2, checkpoint.Migration{From: 1, Migrate: func(b json.RawMessage) (json.RawMessage, error) { return b, nil }}))
	info, err := newer.SaveFrom(ctx, 1, writeAll([]byte("v2 bytes")))
	require.NoError(t, err)
	require.NoError(t, newer.Close())
	if info.Schema != 2 {
		t.Errorf("the payload saved by a store WithSchema(2) records schema %d", info.Schema)
	}

	older := openStore[[]byte](t, dir, checkpoint.WithSchema(1))
	r, _, err := older.OpenPayload(ctx, 1)
	if err == nil {
		b, _ := readPayload(t, r)
		t.Fatalf("an older release read a newer release's payload %q with no ErrNewerSchema", b)
	}
	require.ErrorIs(t, err, checkpoint.ErrNewerSchema)
}

// TestAttackOpenPayloadExactOfAReplacedStep: OpenPayloadExact: "If the
// file no longer holds that checkpoint, the result is ErrNotFound".
func TestAttackOpenPayloadExactOfAReplacedStep(t *testing.T) {
	ctx := context.Background()
	for name, comp := range attackComps() {
		t.Run(name, func(t *testing.T) {
			s := openStore[[]byte](t, t.TempDir(), comp...)
			old, err := s.SaveFrom(ctx, 1, writeAll([]byte("old")))
			require.NoError(t, err)
			_, err = s.SaveFrom(ctx, 2, writeAll([]byte("two")))
			require.NoError(t, err)
			_, err = s.Truncate(ctx, 0)
			require.NoError(t, err)
			_, err = s.SaveFrom(ctx, 1, writeAll([]byte("new")))
			require.NoError(t, err)
			r, got, err := s.OpenPayloadExact(ctx, old)
			if err == nil {
				b, _ := readPayload(t, r)
				t.Fatalf("OpenPayloadExact of a replaced checkpoint read %q (%v)", b, got.Time)
			}
			require.ErrorIs(t, err, checkpoint.ErrNotFound)
			// A JSON state now at that name: ErrNotFound too, not a mismatch.
			_, err = s.Truncate(ctx, 0)
			require.NoError(t, err)
			_, err = s.Save(ctx, 1, []byte("state"))
			require.NoError(t, err)
			_, _, err = s.OpenPayloadExact(ctx, old)
			require.ErrorIs(t, err, checkpoint.ErrNotFound)
		})
	}
}

// TestAttackMixedKindsLatest: "Latest or LatestPayload ... stop there
// rather than resume from an older checkpoint of the kind they read", and
// damaged checkpoints are skipped: newest damaged payload over an older
// state: Latest resumes from the state; newest damaged state over an older
// payload: LatestPayload resumes from the payload.
func TestAttackMixedKindsLatest(t *testing.T) {
	ctx := context.Background()
	for name, comp := range attackComps() {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := openStore[[]byte](t, dir, comp...)
			_, err := s.Save(ctx, 1, []byte("state1"))
			require.NoError(t, err)
			p2, err := s.SaveFrom(ctx, 2, writeAll([]byte("payload2")))
			require.NoError(t, err)
			s3, err := s.Save(ctx, 3, []byte("state3"))
			require.NoError(t, err)
			damage(t, s3.Location, comp)
			r, info, err := s.LatestPayload(ctx)
			require.NoError(t, err)
			require.Equal(t, int64(2), info.Step)
			b, err := readPayload(t, r)
			require.NoError(t, err)
			require.Equal(t, "payload2", string(b))
			damage(t, p2.Location, comp)
			st, info, err := s.Latest(ctx)
			require.NoError(t, err)
			require.Equal(t, int64(1), info.Step)
			require.Equal(t, "state1", string(st))
			_, _, err = s.LatestPayload(ctx)
			require.ErrorIs(t, err, checkpoint.ErrPayloadMismatch)
		})
	}
}

// damage flips a byte in the middle of a checkpoint's decompressed bytes.
func damage(t *testing.T, path string, comp []checkpoint.Option) {
	t.Helper()
	data := mustRead(t, path)
	if len(comp) == 0 {
		data[len(data)-35] ^= 1
		require.NoError(t, writeFileT(path, data))
		return
	}
	// Compressed: cut the file short.
	require.NoError(t, writeFileT(path, data[:len(data)-5]))
}

func writeFileT(path string, data []byte) error { return os.WriteFile(path, data, 0o644) }
