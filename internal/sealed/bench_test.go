package sealed_test

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing"

	"filippo.io/age"

	"github.com/gocheckpoint/checkpoint/internal/sealed"
)

// benchSizes are the sizes of the targets: the 60 KB save and the
// 1 MB load.
var benchSizes = []struct {
	name string
	size int
}{{"60KB", 60 << 10}, {"1MB", 1 << 20}}

func benchPayload(size int) []byte {
	p := make([]byte, size)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range p {
		p[i] = byte(r.UintN(256))
	}
	return p
}

// BenchmarkSeal measures the layer alone: sealing a payload into memory,
// as a write of the store hands it over (one Write of the whole payload).
func BenchmarkSeal(b *testing.B) {
	k := testKeys(b)
	for _, c := range benchSizes {
		b.Run(c.name, func(b *testing.B) {
			payload := benchPayload(c.size)
			write := k.Seal(func(w io.Writer) error { _, err := w.Write(payload); return err })
			var out bytes.Buffer
			b.SetBytes(int64(c.size))
			b.ReportAllocs()
			for b.Loop() {
				out.Reset()
				if err := write(&out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkOpen measures the layer alone: opening a sealed object in
// memory and reading it to its end.
func BenchmarkOpen(b *testing.B) {
	k := testKeys(b)
	for _, c := range benchSizes {
		b.Run(c.name, func(b *testing.B) {
			payload := benchPayload(c.size)
			var sealedBytes bytes.Buffer
			if err := k.Seal(func(w io.Writer) error { _, err := w.Write(payload); return err })(&sealedBytes); err != nil {
				b.Fatal(err)
			}
			obj := sealedBytes.Bytes()
			b.SetBytes(int64(c.size))
			b.ReportAllocs()
			for b.Loop() {
				r, _, err := k.Open(bytes.NewReader(obj), "bench")
				if err != nil {
					b.Fatal(err)
				}
				if n, err := io.Copy(io.Discard, r); err != nil || n != int64(c.size) {
					b.Fatal(n, err)
				}
			}
		})
	}
}

// BenchmarkOpenHeader measures what reading a checkpoint's header costs
// through the layer: opening a 1 MB object and reading its first 4 KiB
// (the key's unwrap and the first chunk).
func BenchmarkOpenHeader(b *testing.B) {
	k := testKeys(b)
	payload := benchPayload(1 << 20)
	var sealedBytes bytes.Buffer
	if err := k.Seal(func(w io.Writer) error { _, err := w.Write(payload); return err })(&sealedBytes); err != nil {
		b.Fatal(err)
	}
	obj := sealedBytes.Bytes()
	buf := make([]byte, 4<<10)
	b.ReportAllocs()
	for b.Loop() {
		r, _, err := k.Open(bytes.NewReader(obj), "bench")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(r, buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSealEmpty isolates what sealing costs beyond the payload: an
// empty payload (the key agreement, the header, one empty chunk).
func BenchmarkSealEmpty(b *testing.B) {
	k := testKeys(b)
	write := k.Seal(func(io.Writer) error { return nil })
	var out bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		out.Reset()
		if err := write(&out); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpenWithAgeDecrypt is BenchmarkOpen with age.Decrypt reading
// the payload, as this package did before it decrypted the payload itself:
// the reference its reader is measured against.
func BenchmarkOpenWithAgeDecrypt(b *testing.B) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		b.Fatal(err)
	}
	k, err := sealed.NewKeys(id, nil, false)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range benchSizes {
		b.Run(c.name, func(b *testing.B) {
			payload := benchPayload(c.size)
			var sealedBytes bytes.Buffer
			if err := k.Seal(func(w io.Writer) error { _, err := w.Write(payload); return err })(&sealedBytes); err != nil {
				b.Fatal(err)
			}
			obj := sealedBytes.Bytes()[sealed.KeyLineLen:]
			b.SetBytes(int64(c.size))
			b.ReportAllocs()
			for b.Loop() {
				r, err := age.Decrypt(bytes.NewReader(obj), id)
				if err != nil {
					b.Fatal(err)
				}
				if n, err := io.Copy(io.Discard, r); err != nil || n != int64(c.size) {
					b.Fatal(n, err)
				}
			}
		})
	}
}
