package raftstore_test

import (
	"io"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/gocheckpoint/checkpoint/raftstore"
	"github.com/hashicorp/raft"
)

// The benchmarks compare raft's FileSnapshotStore with a Store, each with
// retain 1 in a directory of its own: creating a snapshot (Create, Write in
// 64 KiB pieces, Close) and opening one (Open, read to the end, Close).
// disk-B is the bytes the directory holds with one snapshot in it.
//
//	go test -run '^$' -bench . -benchmem -count 5

var benchSizes = []struct {
	name string
	size int
}{{"32MiB", 32 << 20}, {"128MiB", 128 << 20}}

type benchStore struct {
	name string
	open func(b *testing.B, dir string) raft.SnapshotStore
}

var benchStores = []benchStore{
	{"FileSnapshotStore", func(b *testing.B, dir string) raft.SnapshotStore {
		s, err := raft.NewFileSnapshotStore(dir, 1, io.Discard)
		if err != nil {
			b.Fatal(err)
		}
		return s
	}},
	{"raftstore", func(b *testing.B, dir string) raft.SnapshotStore {
		s, err := raftstore.New(dir, 1)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	}},
}

func writeSnapshot(b *testing.B, s raft.SnapshotStore, index uint64, chunk []byte, size int) string {
	_, trans := raft.NewInmemTransport("") // FileSnapshotStore encodes the peers with it
	sink, err := s.Create(raft.SnapshotVersionMax, index, 1, testConfig(), 1, trans)
	if err != nil {
		b.Fatal(err)
	}
	for left := size; left > 0; left -= len(chunk) {
		if _, err := sink.Write(chunk[:min(left, len(chunk))]); err != nil {
			b.Fatal(err)
		}
	}
	if err := sink.Close(); err != nil {
		b.Fatal(err)
	}
	return sink.ID()
}

func diskBytes(b *testing.B, dir string) float64 {
	return float64(dirBytes(b, dir))
}

// dirBytes is the total size of the regular files under dir.
func dirBytes(tb testing.TB, dir string) int64 {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			total += fi.Size()
		}
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return total
}

// benchChunk is 64 KiB of bytes that do not compress to nothing.
func benchChunk() []byte {
	chunk := make([]byte, 64<<10)
	for i := range chunk {
		chunk[i] = byte(i*7 + i>>8)
	}
	return chunk
}

func BenchmarkCreate(b *testing.B) {
	for _, sz := range benchSizes {
		for _, st := range benchStores {
			b.Run(sz.name+"/"+st.name, func(b *testing.B) {
				dir := b.TempDir()
				s := st.open(b, dir)
				chunk := benchChunk()
				b.SetBytes(int64(sz.size))
				b.ReportAllocs()
				index := uint64(0)
				for b.Loop() {
					index++
					writeSnapshot(b, s, index, chunk, sz.size)
				}
				b.ReportMetric(diskBytes(b, dir), "disk-B")
			})
		}
	}
}

func BenchmarkOpen(b *testing.B) {
	for _, sz := range benchSizes {
		for _, st := range benchStores {
			b.Run(sz.name+"/"+st.name, func(b *testing.B) {
				dir := b.TempDir()
				s := st.open(b, dir)
				id := writeSnapshot(b, s, 1, benchChunk(), sz.size)
				buf := make([]byte, 64<<10)
				b.SetBytes(int64(sz.size))
				b.ReportAllocs()
				for b.Loop() {
					meta, r, err := s.Open(id)
					if err != nil {
						b.Fatal(err)
					}
					n, err := io.CopyBuffer(io.Discard, r, buf)
					if err != nil || n != meta.Size || n != int64(sz.size) {
						b.Fatal(n, meta.Size, err)
					}
					if err := r.Close(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(diskBytes(b, dir), "disk-B")
			})
		}
	}
}
