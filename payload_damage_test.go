package checkpoint_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/stretchr/testify/require"
)

// awkwardPayloads are payloads of awkward sizes and contents: around the
// trailer's length (31 bytes) and holding or ending with trailer text.
func awkwardPayloads() map[string][]byte {
	trailer := []byte(`,"checksum":"crc32c:00000000"}` + "\n")
	m := map[string][]byte{}
	for _, n := range []int{0, 1, 30, 31, 32, 33, 62} {
		m[fmt.Sprint("random", n)] = payloadBytes(uint64(n), n)
	}
	m["trailer"] = trailer
	m["trailerTwice"] = append(append([]byte{}, trailer...), trailer...)
	m["endsWithTrailer"] = append([]byte("xyz"), trailer...)
	m["checksumKey"] = []byte(`,"checksum":"`)
	m["json"] = []byte(`{"a":1}`)
	m["spaces"] = []byte("   \n\t ")
	return m
}

// damageCheckpoint damages the checkpoint at path: a plain file gets a
// byte of its state flipped, a compressed one is cut short.
func damageCheckpoint(t *testing.T, path string, comp []checkpoint.Option) {
	t.Helper()
	data := mustRead(t, path)
	if len(comp) == 0 {
		data[len(data)-35] ^= 1
	} else {
		data = data[:len(data)-5]
	}
	require.NoError(t, os.WriteFile(path, data, 0o644))
}

// TestDamagedPayloadNeverReadsClean proves that a payload reader read to
// its end returns a nil error only with the bytes that were saved: whatever
// byte of the file is flipped, wherever it is cut short or added to, in
// every compression and for payloads that hold or end with trailer text.
// A damaged plain file never reads clean at all.
func TestDamagedPayloadNeverReadsClean(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for cname, comp := range compressions() {
		for name, payload := range awkwardPayloads() {
			t.Run(cname+"/"+name, func(t *testing.T) {
				t.Parallel()
				s := openStore[[]byte](t, t.TempDir(), comp...)
				info, err := s.SaveFrom(ctx, 1, writeAll(payload))
				require.NoError(t, err)
				orig := mustRead(t, info.Location)
				try := func(what string, data []byte) {
					require.NoError(t, os.WriteFile(info.Location, data, 0o644))
					r, _, err := s.OpenPayload(ctx, 1)
					if err != nil {
						return
					}
					got, err := io.ReadAll(r)
					r.Close()
					if err == nil && !bytes.Equal(got, payload) {
						t.Errorf("%s: read %q with no error; saved %q", what, got, payload)
					}
					if err == nil && bytes.Equal(got, payload) && !bytes.Equal(data, orig) && len(comp) == 0 {
						t.Errorf("%s: a damaged plain file read clean", what)
					}
				}
				for n := 0; n < len(orig); n++ {
					try(fmt.Sprint("truncated to ", n), orig[:n])
				}
				for i := range orig {
					for _, x := range []byte{0x01, 0x20, 0xff} {
						d := bytes.Clone(orig)
						d[i] ^= x
						try(fmt.Sprintf("byte %d ^ %#x", i, x), d)
					}
				}
				try("extra byte", append(bytes.Clone(orig), '\n'))
				try("extra trailer", append(bytes.Clone(orig), orig[len(orig)-31:]...))
			})
		}
	}
}

// TestDamagedPayloadIsReportedToOnErrorNotOnLoad proves that a payload
// whose reader fails its checksum at the end reports that ErrCorrupt to
// the OnError hook, and that OnLoad is never called for it: a host that
// watches the hooks hears of the damage and never of a restore.
func TestDamagedPayloadIsReportedToOnErrorNotOnLoad(t *testing.T) {
	t.Parallel()
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

// TestLatestAndLatestPayloadSkipDamageOfEitherKind proves that in a store
// of JSON states and byte payloads, a damaged checkpoint of either kind is
// skipped: LatestPayload resumes from an older payload past a damaged
// newer state, and Latest from an older state past a damaged newer
// payload; LatestPayload still stops at a state that verifies.
func TestLatestAndLatestPayloadSkipDamageOfEitherKind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	eachCompression(t, func(t *testing.T, comp []checkpoint.Option) {
		s := openStore[[]byte](t, t.TempDir(), comp...)
		_, err := s.Save(ctx, 1, []byte("state1"))
		require.NoError(t, err)
		p2, err := s.SaveFrom(ctx, 2, writeAll([]byte("payload2")))
		require.NoError(t, err)
		s3, err := s.Save(ctx, 3, []byte("state3"))
		require.NoError(t, err)
		damageCheckpoint(t, s3.Location, comp)
		r, info, err := s.LatestPayload(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(2), info.Step)
		b, err := readPayload(t, r)
		require.NoError(t, err)
		require.Equal(t, "payload2", string(b))
		damageCheckpoint(t, p2.Location, comp)
		st, info, err := s.Latest(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(1), info.Step)
		require.Equal(t, "state1", string(st))
		_, _, err = s.LatestPayload(ctx)
		require.ErrorIs(t, err, checkpoint.ErrPayloadMismatch)
	})
}
