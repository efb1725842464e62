package checkpoint

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// benchState is about 10 KB of JSON.
func benchState() map[string]any {
	agents := make(map[string]any, 20)
	for i := 0; i < 20; i++ {
		agents[fmt.Sprintf("agent_%02d", i)] = map[string]any{
			"memory": strings.Repeat("remembered things ", 20),
			"hp":     i,
			"goals":  []string{"explore", "trade", "rest"},
		}
	}
	return map[string]any{"turn": 1, "agents": agents}
}

func BenchmarkSave(b *testing.B) {
	for _, gz := range []bool{false, true} {
		b.Run(map[bool]string{false: "plain", true: "gzip"}[gz], func(b *testing.B) {
			ctx := context.Background()
			opts := []Option{}
			if gz {
				opts = append(opts, Gzip())
			}
			s, err := Open[map[string]any](b.TempDir(), opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			state := benchState()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if _, err := s.Save(ctx, int64(i), state); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkLatestAndList(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	w, err := Open[map[string]any](dir, Every(1))
	if err != nil {
		b.Fatal(err)
	}
	state := benchState()
	for i := 0; i < 1000; i++ {
		if _, err := w.Save(ctx, int64(i), state); err != nil {
			b.Fatal(err)
		}
	}
	w.Close()
	// A fresh reader, as after a restart; its header cache warms on the
	// first call.
	s, err := Open[map[string]any](dir, ReadOnly())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.Run("Latest/1000", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := s.Latest(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("List/1000", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.List(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Load", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := s.Load(ctx, 500); err != nil {
				b.Fatal(err)
			}
		}
	})
}
