package sealed_test

import (
	"bytes"
	"io"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// The payload size of a sealed object follows from its size alone, for
// payloads of every size around the 64 KiB chunk boundaries.
func TestPayloadSizeOfEverySealedSize(t *testing.T) {
	t.Parallel()
	k := testKeys(t)
	const chunk = 64 << 10
	for _, n := range []int{0, 1, 15, 16, 17, chunk - 17, chunk - 16, chunk - 1, chunk, chunk + 1, chunk + 16, 2*chunk - 1, 2 * chunk, 2*chunk + 1, 3*chunk + 7} {
		var buf bytes.Buffer
		payload := bytes.Repeat([]byte{'x'}, n)
		require.NoError(t, k.Seal(func(w io.Writer) error { _, err := w.Write(payload); return err })(&buf))
		require.Equal(t, int64(n), k.PayloadSize(int64(buf.Len())), "payload of %d bytes", n)
	}
}

// A size no sealed object has (a hostile listing, a damaged or plaintext
// object) maps to a payload size that is never negative (but -1 for -1)
// and never larger than the object: nothing that trusts it to size a
// buffer over-allocates.
func TestPayloadSizeOfHostileSizes(t *testing.T) {
	t.Parallel()
	k := testKeys(t)
	for _, size := range []int64{-1, 0, 1, 50, 200, 250, 300, 1 << 40, math.MaxInt64 - 70000, math.MaxInt64 - 65551, math.MaxInt64 - 1, math.MaxInt64} {
		for d := int64(-300); d <= 300; d++ {
			s := size + d
			if size > math.MaxInt64-300 && d > 0 || s < -1 {
				continue
			}
			p := k.PayloadSize(s)
			if s == -1 {
				require.Equal(t, int64(-1), p)
				continue
			}
			require.GreaterOrEqualf(t, p, int64(0), "size %d", s)
			require.LessOrEqualf(t, p, s, "size %d", s)
		}
	}
}
