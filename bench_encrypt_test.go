package checkpoint_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/gocheckpoint/checkpoint"
)

// encryptBenchState is about size bytes of JSON.
func encryptBenchState(size int) map[string]any {
	n := size / 480
	agents := make(map[string]any, n)
	for i := 0; i < n; i++ {
		agents[fmt.Sprintf("agent_%05d", i)] = map[string]any{
			"memory": strings.Repeat("remembered things ", 20),
			"hp":     i,
			"goals":  []string{"explore", "trade", "rest"},
		}
	}
	return map[string]any{"turn": 1, "agents": agents}
}

// BenchmarkEncryptedSave measures a Save of a 60 KB state, plain and
// encrypted, durable and not (cmd/checkpoint-bench -only encrypt compares
// the durable ones interleaved).
func BenchmarkEncryptedSave(b *testing.B) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		b.Fatal(err)
	}
	state := encryptBenchState(60 << 10)
	for _, durable := range []bool{false, true} {
		for _, enc := range []bool{false, true} {
			name := map[bool]string{false: "nosync", true: "durable"}[durable] + "/" + map[bool]string{false: "plain", true: "encrypted"}[enc]
			b.Run(name, func(b *testing.B) {
				var opts []checkpoint.Option
				if !durable {
					opts = append(opts, checkpoint.NoSync())
				}
				if enc {
					opts = append(opts, checkpoint.Encrypt(id))
				}
				s, err := checkpoint.Open[map[string]any](b.TempDir(), opts...)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				ctx := context.Background()
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					if _, err := s.Save(ctx, int64(i), state); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkEncryptedLoad measures a Load of a 1 MB state, plain and
// encrypted.
func BenchmarkEncryptedLoad(b *testing.B) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		b.Fatal(err)
	}
	state := encryptBenchState(1 << 20)
	for _, enc := range []bool{false, true} {
		b.Run(map[bool]string{false: "plain", true: "encrypted"}[enc], func(b *testing.B) {
			opts := []checkpoint.Option{checkpoint.NoSync()}
			if enc {
				opts = append(opts, checkpoint.Encrypt(id))
			}
			s, err := checkpoint.Open[map[string]any](b.TempDir(), opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			if _, err := s.Save(ctx, 1, state); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := s.Load(ctx, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
