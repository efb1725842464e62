package checkpoint_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"filippo.io/age"
	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
)

// hostileStanzas returns a file at our key line whose age header holds
// n X25519 stanzas (age's limit is 1024), none of them ours: every open
// does n X25519 multiplications before it finds the file damaged.
func hostileStanzas(b testing.TB, ours *age.X25519Identity, n int) []byte {
	var to []age.Recipient
	for range n {
		id, err := age.GenerateX25519Identity()
		require.NoError(b, err)
		to = append(to, id.Recipient())
	}
	return append([]byte(keyLine(ours.Recipient())), ageTo(b, []byte("x"), to...)...)
}

// BenchmarkEncryptListOfHostileHeaders measures a first List of a store
// of 20 files, each a hostile header of 1024 stanzas (ns/op per List):
// the cost someone who can write files imposes without any key.
func BenchmarkEncryptListOfHostileHeaders(b *testing.B) {
	ctx := context.Background()
	ours, _ := age.GenerateX25519Identity()
	for _, c := range []struct {
		name     string
		stanzas  int
		identity []*age.X25519Identity
	}{{"1-stanza", 1, nil}, {"1024-stanzas", 1024, nil}} {
		b.Run(c.name, func(b *testing.B) {
			dir := b.TempDir()
			data := hostileStanzas(b, ours, c.stanzas)
			for i := range 20 {
				name := filepath.Join(dir, fmt.Sprintf("step_%08d.json", i))
				require.NoError(b, os.WriteFile(name, data, 0o644))
			}
			b.ResetTimer()
			for range b.N {
				st, err := checkpoint.Open[secretState](dir, checkpoint.Encrypt(ours), checkpoint.ReadOnly())
				require.NoError(b, err)
				_, err = st.List(ctx)
				require.NoError(b, err)
				require.NoError(b, st.Close())
			}
		})
	}
}
