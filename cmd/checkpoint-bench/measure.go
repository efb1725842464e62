package main

import (
	"bytes"
	stdgzip "compress/gzip"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/gocheckpoint/checkpoint/internal/benchkit"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// op is one measured operation; i numbers the calls, so that each save can
// use a step of its own.
type op func(i int) error

// compare is benchkit.Compare on ops.
func compare(rounds, perRound int, ops ...op) ([]time.Duration, error) {
	fs := make([]func(int) error, len(ops))
	for i, o := range ops {
		fs[i] = o
	}
	return benchkit.Compare(rounds, perRound, fs...)
}

var (
	median      = benchkit.Median
	machine     = benchkit.Machine
	loadAverage = benchkit.LoadAverage
	dur         = benchkit.Duration
)

// allocs measures what n calls of f allocate, per call, once warm, with
// the garbage collector off and one processor, so that every pool (the
// store's, and encoding/json's own) stays as the previous call left it: the
// bytes are what the heap grows by in a steady state. Two calls warm up: a
// store's first save of a large state learns its size and encodes it
// whole, and only the next streams it (and fills the pools of a streamed
// write).
func allocs(n int, f op) (bytesPerOp, allocsPerOp uint64, err error) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	const warm = 2
	for i := range warm {
		if err := f(i); err != nil {
			return 0, 0, err
		}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := warm; i < warm+n; i++ {
		if err := f(i); err != nil {
			return 0, 0, err
		}
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / uint64(n), (after.Mallocs - before.Mallocs) / uint64(n), nil
}

// baseline is the hand-written save the store is measured against: the
// state marshalled with encoding/json, compressed by a reused compressor if
// asked, written with renameio (temporary file in the directory, fsync,
// rename; see replaceDurably) and the directory fsynced. It has no
// envelope, no checksum and no protection against replacing a file.
type baseline struct {
	dir  string
	ext  string
	gzw  *gzip.Writer
	zstd *zstd.Encoder
	buf  bytes.Buffer
	sum  bool // append a CRC-32C of the bytes, as a checkpoint's trailer does
}

func newBaseline(dir, comp string) (*baseline, error) {
	b := &baseline{dir: dir, ext: ".json"}
	switch comp {
	case "gzip":
		b.ext, b.gzw = ".json.gz", gzip.NewWriter(io.Discard)
	case "zstd":
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		b.ext, b.zstd = ".json.zst", enc
	}
	return b, os.MkdirAll(dir, 0o755)
}

func (b *baseline) save(i int, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	switch {
	case b.gzw != nil:
		b.buf.Reset()
		b.gzw.Reset(&b.buf)
		b.gzw.Write(data)
		if err := b.gzw.Close(); err != nil {
			return err
		}
		data = b.buf.Bytes()
	case b.zstd != nil:
		data = b.zstd.EncodeAll(data, b.buf.Bytes()[:0])
	}
	if b.sum {
		data = fmt.Appendf(data, "%08x", crc32.Checksum(data, castagnoli))
	}
	if err := replaceDurably(b.dir, fmt.Sprintf("state_%08d%s", i, b.ext), data); err != nil {
		return err
	}
	return syncDir(b.dir)
}

// floorWrite is the least a durable save can do: write bytes to a new file
// in dir, fsync it, rename it into place and fsync the directory.
func floorWrite(dir, name string, data []byte) error {
	f, err := os.CreateTemp(dir, ".floor")
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
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
	if err := os.Rename(f.Name(), filepath.Join(dir, name)); err != nil {
		return err
	}
	return syncDir(dir)
}

// compressorResult is how one compressor did on the benchmark's data.
type compressorResult struct {
	name string
	mbs  float64 // compression, MB/s of input
	dmbs float64 // decompression, MB/s of output
	size int     // compressed size
}

// measureCompressors measures gzip (klauspost and the standard library, at
// the default level) and zstd (default level) on data, in memory, both
// ways, with writers and readers reused the way the store reuses them.
func measureCompressors(data []byte, budget time.Duration) ([]compressorResult, error) {
	type resetWriter interface {
		io.WriteCloser
		Reset(io.Writer)
	}
	ze, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true))
	if err != nil {
		return nil, err
	}
	zd, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	var kr gzip.Reader
	var sr stdgzip.Reader
	cases := []struct {
		name   string
		w      resetWriter
		reader func(io.Reader) (io.Reader, error)
	}{
		{"gzip (klauspost/compress)", gzip.NewWriter(io.Discard),
			func(r io.Reader) (io.Reader, error) { return &kr, kr.Reset(r) }},
		{"gzip (compress/gzip)", stdgzip.NewWriter(io.Discard),
			func(r io.Reader) (io.Reader, error) { return &sr, sr.Reset(r) }},
		{"zstd (klauspost/compress)", ze,
			func(r io.Reader) (io.Reader, error) { return zd, zd.Reset(r) }},
	}
	var out bytes.Buffer
	compress := func(w resetWriter) ([]byte, error) {
		out.Reset()
		w.Reset(&out)
		if _, err := w.Write(data); err != nil {
			return nil, err
		}
		err := w.Close()
		return out.Bytes(), err
	}
	compressed := make([][]byte, len(cases))
	for i, c := range cases {
		b, err := compress(c.w)
		if err != nil {
			return nil, err
		}
		compressed[i] = bytes.Clone(b)
	}
	decompress := func(i int) error {
		r, err := cases[i].reader(bytes.NewReader(compressed[i]))
		if err != nil {
			return err
		}
		n, err := io.Copy(io.Discard, r)
		if err == nil && n != int64(len(data)) {
			err = fmt.Errorf("%s: decompressed %d bytes, want %d", cases[i].name, n, len(data))
		}
		return err
	}
	// Interleave the cases, both ways, until the budget is spent.
	var ctime, dtime [3]time.Duration
	count := 0
	for deadline := time.Now().Add(budget); time.Now().Before(deadline) || count < 3; count++ {
		for i, c := range cases {
			start := time.Now()
			if _, err := compress(c.w); err != nil {
				return nil, err
			}
			ctime[i] += time.Since(start)
			start = time.Now()
			if err := decompress(i); err != nil {
				return nil, err
			}
			dtime[i] += time.Since(start)
		}
	}
	results := make([]compressorResult, len(cases))
	for i, c := range cases {
		mbs := func(d time.Duration) float64 { return float64(len(data)) * float64(count) / d.Seconds() / 1e6 }
		results[i] = compressorResult{name: c.name, mbs: mbs(ctime[i]), dmbs: mbs(dtime[i]), size: len(compressed[i])}
	}
	return results, nil
}

// creationCost compares compressing data with a new writer each time and
// with one reused writer.
func creationCost(data []byte, n int) (fresh, reused [2]time.Duration, err error) {
	var out bytes.Buffer
	newGzip := func() error {
		out.Reset()
		w := gzip.NewWriter(&out)
		w.Write(data)
		return w.Close()
	}
	kz := gzip.NewWriter(&out)
	reuseGzip := func() error {
		out.Reset()
		kz.Reset(&out)
		kz.Write(data)
		return kz.Close()
	}
	newZstd := func() error {
		out.Reset()
		w, err := zstd.NewWriter(&out, zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true))
		if err != nil {
			return err
		}
		w.Write(data)
		return w.Close()
	}
	ze, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true))
	if err != nil {
		return fresh, reused, err
	}
	reuseZstd := func() error {
		out.Reset()
		ze.Reset(&out)
		ze.Write(data)
		return ze.Close()
	}
	fs := []func() error{newGzip, reuseGzip, newZstd, reuseZstd}
	ds, err := compare(5, n, func(int) error { return fs[0]() }, func(int) error { return fs[1]() },
		func(int) error { return fs[2]() }, func(int) error { return fs[3]() })
	if err != nil {
		return fresh, reused, err
	}
	return [2]time.Duration{ds[0], ds[2]}, [2]time.Duration{ds[1], ds[3]}, nil
}

// filesystem names the file system holding dir, from /proc/mounts (Linux):
// the mount with the longest path that contains dir.
func filesystem(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "unknown file system"
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	data, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return "unknown file system"
	}
	best, fsType, dev := "", "unknown", ""
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		mnt := f[1]
		if (abs == mnt || strings.HasPrefix(abs, strings.TrimSuffix(mnt, "/")+"/")) && len(mnt) >= len(best) {
			best, dev, fsType = mnt, f[0], f[2]
		}
	}
	s := fmt.Sprintf("%s on %s (mounted at %s)", fsType, dev, best)
	if fsType == "tmpfs" || fsType == "ramfs" {
		s += ": memory, where fsync costs nothing; use -dir for a real disk"
	}
	return s
}
