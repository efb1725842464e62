package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"

	"github.com/gocheckpoint/checkpoint"
)

// payloadBlock is the block a measured payload repeats: random bytes, so
// that a plain file is as large as its payload, and a zstd file small (the
// block fits in the encoder's window), so that a payload of 1 GiB needs
// little disk when compressed. The heap a save or a load needs does not
// depend on what the bytes are.
const payloadBlock = 256 << 10

// payloadSource writes n bytes of repeated random blocks.
type payloadSource struct {
	block []byte
	n     int64
}

func newPayloadSource(n int64) *payloadSource {
	rng := rand.New(rand.NewPCG(24, 1))
	block := make([]byte, payloadBlock)
	for i := range block {
		block[i] = byte(rng.UintN(256))
	}
	return &payloadSource{block: block, n: n}
}

func (p *payloadSource) writeTo(w io.Writer) error {
	for left := p.n; left > 0; {
		k := min(left, int64(len(p.block)))
		if _, err := w.Write(p.block[:k]); err != nil {
			return err
		}
		left -= k
	}
	return nil
}

// allocatedBy returns the bytes f allocates on the heap (TotalAlloc: an
// upper bound on how much the heap grows while it runs, whatever the
// collector does). There is no warm-up: the first call of a store, which
// creates its compressor, is measured.
func allocatedBy(f func() error) (uint64, error) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	err := f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, err
}

// payloadHeap measures the heap that SaveFrom and OpenPayload (read to the
// end, verified) of a byte payload of payloadSize bytes allocate, plain and
// zstd: the target is under 16 MiB for 1 GiB, whatever the size.
func (b *bench) payloadHeap() ([]row, error) {
	const target = 16 << 20
	src := newPayloadSource(b.payloadSize)
	var rows []row
	for _, c := range []int{0, 2} { // plain, zstd
		comp := compressions[c]
		dir := b.subdir("payload-" + comp.name)
		s, err := checkpoint.Open[[]byte](dir, append(comp.opts, checkpoint.NoSync(), checkpoint.KeepLast(1), checkpoint.WithMaxReadSize(b.payloadSize))...)
		if err != nil {
			return nil, err
		}
		step := int64(0)
		var info checkpoint.Info
		save, err := allocatedBy(func() error {
			step++
			info, err = s.SaveFrom(b.ctx, step, src.writeTo)
			return err
		})
		if err != nil {
			s.Close()
			return nil, err
		}
		buf := make([]byte, 64<<10)
		load, err := allocatedBy(func() error {
			r, _, err := s.OpenPayload(b.ctx, step)
			if err != nil {
				return err
			}
			defer r.Close()
			var n int64
			for {
				k, err := r.Read(buf)
				n += int64(k)
				if err == io.EOF {
					break
				}
				if err != nil {
					return err
				}
			}
			if n != b.payloadSize {
				return fmt.Errorf("read %d bytes of a payload of %d", n, b.payloadSize)
			}
			return nil
		})
		s.Close()
		if err != nil {
			return nil, err
		}
		for _, m := range []struct {
			what string
			n    uint64
		}{{"SaveFrom", save}, {"OpenPayload read to its end", load}} {
			rows = append(rows, row{
				what:    fmt.Sprintf("heap allocated by %s of a %s byte payload, %s (file %s)", m.what, sizeName(int(b.payloadSize)), comp.name, sizeName(int(info.Size))),
				result:  sizeName(int(m.n)),
				against: "the payload's size",
				ratio:   fmt.Sprintf("%.4f", float64(m.n)/float64(b.payloadSize)),
				target:  "< 16 MB",
				met:     yesNo(m.n < target),
			})
		}
	}
	base, err := b.payloadAgainstBase64(min(b.payloadSize, 32<<20))
	if err != nil {
		return nil, err
	}
	return append(rows, base...), nil
}

// payloadAgainstBase64 compares, for a payload of n bytes, plain, SaveFrom
// with Save of the same bytes through a Store[[]byte] (base64 inside JSON,
// what a host did before byte payloads): heap allocated and file size.
func (b *bench) payloadAgainstBase64(n int64) ([]row, error) {
	src := newPayloadSource(n)
	var data []byte
	for len(data) < int(n) {
		data = append(data, src.block[:min(len(src.block), int(n)-len(data))]...)
	}
	dir := b.subdir("payload-vs-base64")
	s, err := checkpoint.Open[[]byte](dir, checkpoint.NoSync())
	if err != nil {
		return nil, err
	}
	defer s.Close()
	var raw, b64 checkpoint.Info
	rawAlloc, err := allocatedBy(func() error {
		raw, err = s.SaveFrom(b.ctx, 1, func(w io.Writer) error { _, err := w.Write(data); return err })
		return err
	})
	if err != nil {
		return nil, err
	}
	b64Alloc, err := allocatedBy(func() error {
		b64, err = s.Save(b.ctx, 2, data)
		return err
	})
	if err != nil {
		return nil, err
	}
	return []row{
		{
			what:    fmt.Sprintf("file of a %s payload, plain: SaveFrom (raw bytes)", sizeName(int(n))),
			result:  sizeName(int(raw.Size)),
			against: fmt.Sprintf("Store[[]byte].Save (base64 in JSON): %s", sizeName(int(b64.Size))),
			ratio:   fmt.Sprintf("%.2f", float64(raw.Size)/float64(b64.Size)),
			target:  "-", met: "-",
		},
		{
			what:    fmt.Sprintf("heap allocated saving a %s payload, plain: SaveFrom", sizeName(int(n))),
			result:  sizeName(int(rawAlloc)),
			against: fmt.Sprintf("Store[[]byte].Save: %s", sizeName(int(b64Alloc))),
			ratio:   fmt.Sprintf("%.4f", float64(rawAlloc)/float64(b64Alloc)),
			target:  "-", met: "-",
		},
	}, nil
}
