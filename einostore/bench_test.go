package einostore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/cloudwego/eino/compose"
	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/einostore"
)

// mapStore is the in-memory compose.CheckPointStore of Eino's own tests
// and examples: the floor.
type mapStore struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *mapStore) Get(_ context.Context, id string) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.m[id]
	return b, ok, nil
}

func (s *mapStore) Set(_ context.Context, id string, b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[id] = b
	return nil
}

// fileStore is what a host would write by hand: one file per ID, replaced
// by writing a temporary file, fsyncing it and renaming it over the old
// one. It has no checksum, no history and no directory fsync.
type fileStore struct{ dir string }

func (s fileStore) Get(_ context.Context, id string) ([]byte, bool, error) {
	b, err := os.ReadFile(filepath.Join(s.dir, id))
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	return b, err == nil, err
}

func (s fileStore) Set(_ context.Context, id string, b []byte) error {
	f, err := os.CreateTemp(s.dir, ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), filepath.Join(s.dir, id))
}

// BenchmarkCheckPointStore times the two calls Eino makes (Set at an
// interrupt, Get at the start of each Invoke with a checkpoint ID) on a
// checkpoint of 4 KiB and of 1 MiB: einostore (durable, and with NoSync),
// the in-memory map and the hand-written file store.
func BenchmarkCheckPointStore(b *testing.B) {
	stores := []struct {
		name string
		open func(b *testing.B) compose.CheckPointStore
	}{
		{"map", func(*testing.B) compose.CheckPointStore { return &mapStore{m: map[string][]byte{}} }},
		{"file", func(b *testing.B) compose.CheckPointStore { return fileStore{b.TempDir()} }},
		{"einostore", func(b *testing.B) compose.CheckPointStore { return openBench(b) }},
		{"einostore-nosync", func(b *testing.B) compose.CheckPointStore { return openBench(b, checkpoint.NoSync()) }},
	}
	for _, size := range []int{4 << 10, 1 << 20} {
		data := make([]byte, size)
		_, _ = rand.Read(data)
		for _, op := range []string{"Set", "Get"} {
			for _, st := range stores {
				b.Run(fmt.Sprintf("%s/%dKiB/%s", op, size>>10, st.name), func(b *testing.B) {
					ctx := context.Background()
					s := st.open(b)
					if err := s.Set(ctx, "run", data); err != nil {
						b.Fatal(err)
					}
					b.SetBytes(int64(size))
					b.ReportAllocs()
					for b.Loop() {
						var err error
						if op == "Set" {
							err = s.Set(ctx, "run", data)
						} else {
							var found bool
							_, found, err = s.Get(ctx, "run")
							if err == nil && !found {
								err = errors.New("not found")
							}
						}
						if err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// openBench opens an einostore keeping the last two checkpoints of an ID,
// as a host would, so that a long benchmark does not grow the directory.
func openBench(b *testing.B, opts ...checkpoint.Option) *einostore.Store {
	s, err := einostore.New(b.TempDir(), append([]checkpoint.Option{checkpoint.KeepLast(2)}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// BenchmarkEinoRun times what a host sees: one Eino run of the test graph
// (START -> a -> b -> c -> END) interrupted before c, then resumed to its
// end, under a new checkpoint ID each time, with an input (carried in the
// checkpoint) of 4 KiB and 1 MiB.
func BenchmarkEinoRun(b *testing.B) {
	stores := []struct {
		name string
		open func(b *testing.B) compose.CheckPointStore
	}{
		{"map", func(*testing.B) compose.CheckPointStore { return &mapStore{m: map[string][]byte{}} }},
		{"file", func(b *testing.B) compose.CheckPointStore { return fileStore{b.TempDir()} }},
		{"einostore", func(b *testing.B) compose.CheckPointStore { return openBench(b) }},
		{"einostore-nosync", func(b *testing.B) compose.CheckPointStore { return openBench(b, checkpoint.NoSync()) }},
	}
	for _, size := range []int{4 << 10, 1 << 20} {
		input := string(bytes.Repeat([]byte("x"), size))
		for _, st := range stores {
			b.Run(fmt.Sprintf("%dKiB/%s", size>>10, st.name), func(b *testing.B) {
				ctx := context.Background()
				s := st.open(b)
				first, err := compileGraph(ctx, s, false)
				if err != nil {
					b.Fatal(err)
				}
				resumed, err := compileGraph(ctx, s, true)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(size))
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					i++
					id := fmt.Sprint("run-", i)
					_, err := first.Invoke(ctx, input, compose.WithCheckPointID(id))
					if _, ok := compose.ExtractInterruptInfo(err); !ok {
						b.Fatalf("want an interrupt, got %v", err)
					}
					out, err := resumed.Invoke(ctx, "", compose.WithCheckPointID(id))
					if err != nil || len(out) != size+len("-a-b-c") {
						b.Fatalf("resume: %d bytes, %v", len(out), err)
					}
				}
			})
		}
	}
}
