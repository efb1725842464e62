package format

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint/internal/benchkit"
)

// BenchmarkParseHeader measures parsing the header that every file of a
// directory has, as the first List does for each, against decoding its
// fields with encoding/json.
func BenchmarkParseHeader(b *testing.B) {
	data := encodeBytes(Header{Format: 2, Step: 1234, Kind: KindStep, Time: time.Date(2026, 11, 21, 10, 0, 0, 123456789, time.UTC)}, []byte(`{"turn":1}`), CompressNone)
	b.Run("parseHeader", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := ParseHeader(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	withMetrics := encodeBytes(Header{Format: 2, Step: 1234, Kind: KindStep, Time: time.Date(2026, 11, 21, 10, 0, 0, 123456789, time.UTC), Metrics: map[string]float64{"loss": 0.0123456789, "acc": 0.875}}, []byte(`{"turn":1}`), CompressNone)
	b.Run("parseHeader-metrics", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := ParseHeader(withMetrics); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		keyStart, _, _, err := splitHeader(data, false)
		if err != nil {
			b.Fatal(err)
		}
		head := append(bytes.TrimRight(bytes.Clone(data[:keyStart]), ","), '}')
		b.ReportAllocs()
		for b.Loop() {
			if _, _, _, err := splitHeader(data, false); err != nil {
				b.Fatal(err)
			}
			var h Header
			if err := json.Unmarshal(head, &h); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDecodeHeaderJSON measures decoding a header as the store's index
// holds it (the one decoder, closed), against fastHeader alone.
func BenchmarkDecodeHeaderJSON(b *testing.B) {
	j, err := json.Marshal(Header{Format: 2, Step: 1234, Kind: KindStep, Time: time.Date(2026, 11, 21, 10, 0, 0, 123456789, time.UTC)})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("DecodeHeaderJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeHeaderJSON(j); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fastHeader", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var h Header
			if !fastHeader(j[:len(j)-1], &h) || h.Check() != nil {
				b.Fatal("not decoded")
			}
		}
	})
}

// BenchmarkEncodeState measures encoding the benchmark's states (see
// benchkit.World) into a reused buffer: encoding/json, which EncodeState
// uses on one goroutine, against EncodeState itself, which cuts the
// state into parts encoded on every core, into its pooled buffers.
func BenchmarkEncodeState(b *testing.B) {
	for _, size := range []int{10 << 10, 100 << 10, 1 << 20} {
		w := benchkit.NewWorld(size)
		var buf bytes.Buffer
		b.Run(fmt.Sprintf("encoding-json/%dKB", size>>10), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				buf.Reset()
				if err := json.NewEncoder(&buf).Encode(w); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(buf.Len()))
		})
		c := NewCodec(CompressNone, 1<<30)
		b.Run(fmt.Sprintf("EncodeState/%dKB", size>>10), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				out, err := c.EncodeState(w)
				if err != nil {
					b.Fatal(err)
				}
				c.PutBuffer(out)
			}
		})
	}
}
