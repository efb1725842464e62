package checkpoint_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"hash/fnv"
	"strings"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/internal/benchkit"
	"github.com/gocheckpoint/checkpoint/internal/platformtest"
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
			opts := []checkpoint.Option{}
			if gz {
				opts = append(opts, checkpoint.Gzip())
			}
			s, err := checkpoint.Open[map[string]any](b.TempDir(), opts...)
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
	w, err := checkpoint.Open[map[string]any](dir, checkpoint.SaveEvery(1))
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
	s, err := checkpoint.Open[map[string]any](dir, checkpoint.ReadOnly())
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

// BenchmarkChecksum compares the checksums a checkpoint's trailer could use,
// on the state sizes the benchmark command measures: SHA-256 (format 1),
// CRC-32C (format 2: the CPU's CRC32 instruction where there is one), and
// the 64-bit non-cryptographic hashes of the standard library. The numbers
// and the choice are in BENCHMARKS.md.
//
//	go test -run '^$' -bench Checksum -benchtime 20x .
func BenchmarkChecksum(b *testing.B) {
	sums := []struct {
		name string
		new  func() hash.Hash
	}{
		{"sha256", sha256.New},
		{"crc32c", func() hash.Hash { return crc32.New(crc32.MakeTable(crc32.Castagnoli)) }},
		{"crc64-iso", func() hash.Hash { return crc64.New(crc64.MakeTable(crc64.ISO)) }},
		{"fnv64a", func() hash.Hash { return fnv.New64a() }},
	}
	for _, size := range []int{1 << 20, 10 << 20} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i*7 + i>>8) // not all zeros: no hash gets a shortcut
		}
		for _, sum := range sums {
			b.Run(fmt.Sprintf("%s/%dMB", sum.name, size>>20), func(b *testing.B) {
				h := sum.new()
				b.SetBytes(int64(size))
				for b.Loop() {
					h.Reset()
					h.Write(data)
					h.Sum(nil)
				}
			})
		}
	}
}

// BenchmarkFirstList measures the first List of a store opened anew on a
// directory of 10,000 checkpoints: every header is read once.
//
//	go test -run '^$' -bench FirstList -benchtime 10x .
func BenchmarkFirstList(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	w, err := checkpoint.Open[map[string]any](dir, checkpoint.NoSync())
	if err != nil {
		b.Fatal(err)
	}
	state := benchState()
	const files = 10000
	for i := 0; i < files; i++ {
		if _, err := w.Save(ctx, int64(i), state); err != nil {
			b.Fatal(err)
		}
	}
	w.Close()
	start, measured := platformtest.ProcessCPU()
	b.ResetTimer()
	defer func() {
		if end, ok := platformtest.ProcessCPU(); ok && measured {
			b.ReportMetric(float64(end-start)/float64(b.N)/1e6, "cpu-ms/op")
		}
	}()
	for b.Loop() {
		s, err := checkpoint.Open[map[string]any](dir, checkpoint.ReadOnly())
		if err != nil {
			b.Fatal(err)
		}
		list, err := s.List(ctx)
		if err != nil || len(list) != files {
			b.Fatal(len(list), err)
		}
		s.Close()
	}
}

// BenchmarkAppend appends a 10 KB state to a session, durably, as a host
// keyed by thread ID does: opening the session's store for each call
// (OpenSessionStore, Append, Close: the lock, a listing of the session for
// its newest step, the save) or holding it open. KeepLast(16) keeps the
// session the same size whatever b.N.
func BenchmarkAppend(b *testing.B) {
	ctx := context.Background()
	state := benchState()
	open := func(b *testing.B) *checkpoint.Sessions {
		r, err := checkpoint.OpenSessions(b.TempDir(), checkpoint.KeepLast(16))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { r.Close() })
		if _, err := r.Create(ctx, "thread-1", nil); err != nil {
			b.Fatal(err)
		}
		return r
	}
	b.Run("opened-per-call", func(b *testing.B) {
		r := open(b)
		b.ReportAllocs()
		for b.Loop() {
			s, err := checkpoint.OpenSessionStore[map[string]any](r, "thread-1")
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.Append(ctx, state); err != nil {
				b.Fatal(err)
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("held-open", func(b *testing.B) {
		r := open(b)
		s, err := checkpoint.OpenSessionStore[map[string]any](r, "thread-1")
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Append(ctx, state); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchWorld is a typed state of about 10 KB of JSON, decoded into
// structs as a host's state is.
type benchWorld struct {
	Turn   int64        `json:"turn"`
	Agents []benchAgent `json:"agents"`
}

type benchAgent struct {
	Name   string         `json:"name"`
	HP     int            `json:"hp"`
	Goals  []string       `json:"goals"`
	Memory string         `json:"memory"`
	Items  map[string]int `json:"items"`
}

func newBenchWorld() benchWorld {
	var w benchWorld
	for i := 0; i < 20; i++ {
		w.Agents = append(w.Agents, benchAgent{
			Name:   fmt.Sprintf("agent_%02d", i),
			HP:     i,
			Goals:  []string{"explore", "trade", "rest"},
			Memory: strings.Repeat("remembered things ", 20),
			Items:  map[string]int{"gold": i, "rope": 2},
		})
	}
	return w
}

// BenchmarkLatestOfTenThousand measures Latest on a directory of 10,000
// checkpoints of a 10 KB state, beside the naive reader a user would write
// (read the names, decode the newest file's state with encoding/json, no
// checksum): issue 28's target is that Latest costs no more.
//
//	go test -run '^$' -bench LatestOfTenThousand -cpuprofile /tmp/latest.prof .
func BenchmarkLatestOfTenThousand(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	w, err := checkpoint.Open[benchWorld](dir, checkpoint.NoSync())
	if err != nil {
		b.Fatal(err)
	}
	state := newBenchWorld()
	const files = 10000
	for i := 0; i < files; i++ {
		state.Turn = int64(i)
		if _, err := w.Save(ctx, int64(i), state); err != nil {
			b.Fatal(err)
		}
	}
	w.Close()
	s, err := checkpoint.Open[benchWorld](dir, checkpoint.ReadOnly())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.Run("Latest", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v, _, err := s.Latest(ctx)
			if err != nil || v.Turn != files-1 {
				b.Fatal(v.Turn, err)
			}
		}
	})
	b.Run("naive", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v, err := benchkit.NaiveLatest[benchWorld](dir, "step_")
			if err != nil || v.Turn != files-1 {
				b.Fatal(v.Turn, err)
			}
		}
	})
}
