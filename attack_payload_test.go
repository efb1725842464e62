package checkpoint_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/stretchr/testify/require"
)

// attackPayloads are payloads of awkward sizes and contents: around the
// trailer's length (31 bytes) and holding or ending with trailer text.
func attackPayloads() map[string][]byte {
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

// TestAttackPayloadDamageNeverReadsClean: README, "Checksummed": "the Read
// that reaches the end returns io.EOF only if the checksum matches, and
// otherwise an error wrapping ErrCorrupt". A caller that reads the reader
// to EOF and checks the error must never get other bytes than the ones
// saved with a nil error, whatever byte of the file is flipped and
// wherever it is truncated.
func TestAttackPayloadDamageNeverReadsClean(t *testing.T) {
	ctx := context.Background()
	for ci, comp := range []checkpoint.Option{nil, checkpoint.Gzip(), checkpoint.Zstd()} {
		for name, payload := range attackPayloads() {
			t.Run(fmt.Sprint(ci, name), func(t *testing.T) {
				var opts []checkpoint.Option
				if comp != nil {
					opts = append(opts, comp)
				}
				s := openStore[[]byte](t, t.TempDir(), opts...)
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
					if err == nil && bytes.Equal(got, payload) && !bytes.Equal(data, orig) && comp == nil {
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
