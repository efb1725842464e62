package checkpoint_test

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
)

// openSealed returns the bytes sealed in the encrypted file data.
func openSealed(t *testing.T, id *age.X25519Identity, data []byte) []byte {
	t.Helper()
	line := keyLine(id.Recipient())
	require.True(t, bytes.HasPrefix(data, []byte(line)))
	r, err := age.Decrypt(bytes.NewReader(data[len(line):]), id)
	require.NoError(t, err)
	plain, err := io.ReadAll(r)
	require.NoError(t, err)
	return plain
}

// An encrypted checkpoint's Info.Size, from Save and from List (fresh or
// from the index), is the size of the checkpoint sealed inside it, as a
// plaintext store's would be, for states on both sides of the 64 KiB
// chunk boundaries; a byte payload's PayloadSize (SaveFrom, OpenPayload) is what was written.
func TestEncryptSizesAreThoseOfTheSealedCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, id := t.TempDir(), newIdentity(t)
	st := openStore[secretState](t, dir, checkpoint.Encrypt(id))
	saved := map[int64]checkpoint.Info{}
	const chunk = 64 << 10
	for i, n := range []int{0, 10, chunk - 100, chunk, chunk + 100, 2 * chunk, 3*chunk + 5} {
		step := int64(i + 1)
		info, err := st.Save(ctx, step, secretState{Step: step, Secret: strings.Repeat("s", n)})
		require.NoError(t, err)
		saved[step] = info
	}
	payload := strings.Repeat("p", 2*chunk+3)
	pinfo, err := st.SaveFrom(ctx, 100, func(w io.Writer) error { _, err := io.WriteString(w, payload); return err })
	require.NoError(t, err)
	require.Equal(t, int64(len(payload)), pinfo.PayloadSize)
	saved[100] = pinfo
	require.NoError(t, st.Close())

	for round := range 2 { // the second List reads the index the first wrote
		st := openStore[secretState](t, dir, checkpoint.Encrypt(id), checkpoint.ReadOnly())
		infos, err := st.List(ctx)
		require.NoError(t, err)
		require.Len(t, infos, len(saved))
		for _, info := range infos {
			inner := openSealed(t, id, mustRead(t, filepath.Join(dir, info.Name())))
			require.Equalf(t, int64(len(inner)), info.Size, "round %d, step %d", round, info.Step)
			require.Equal(t, saved[info.Step].Size, info.Size)
		}
		r, pinfo, err := st.OpenPayload(ctx, 100)
		require.NoError(t, err)
		got, err := io.ReadAll(r)
		require.NoError(t, err)
		require.NoError(t, r.Close())
		require.Equal(t, payload, string(got))
		require.Equal(t, int64(len(payload)), pinfo.PayloadSize)
		require.NoError(t, st.Close())
	}
}
