package format

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"
	"time"
)

// FuzzReadEnvelope feeds arbitrary bytes to the checkpoint decoder. Whatever
// the input, it must not panic or allocate past its read limit; it fails
// only with ErrCorrupt; and what it accepts (and a load would decode) is a
// verified envelope whose re-encoding carries the same header and state. The seed corpus is in
// testdata/fuzz/FuzzReadEnvelope.
//
//	go test -run '^$' -fuzz FuzzReadEnvelope -fuzztime 60s .
func FuzzReadEnvelope(f *testing.F) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	h := Header{Format: 1, Step: 3, Kind: KindStep, Time: now, Meta: map[string]string{"k": "v"}}
	f.Add(encodeBytes(h, []byte(`{"turn":3}`), CompressNone))
	f.Add(encodeBytes(h, []byte(`[1,2,3]`), CompressGzip))
	rec := &ErrorRecord{Message: "boom", Types: []string{"*errors.errorString"}, Step: 3, Time: now}
	f.Add(encodeBytes(Header{Format: 1, Step: 3, Kind: KindError, Time: now, Error: rec}, []byte(`"s"`), CompressNone))
	f.Add(encodeBytes(Header{Format: 2, Step: 3, Kind: KindStep, Time: now, Schema: 2}, []byte(`{"turn":3}`), CompressNone))
	f.Add([]byte{})
	f.Add([]byte{0x1f, 0x8b})
	const limit = 1 << 20
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, data, limit)
		// The same bytes with a correct checksum of each format get past
		// verification, so the JSON decoding and the header checks are
		// fuzzed too.
		checkDecode(t, withTrailer(string(data)), limit)
		sum := TrailerV2.Sum()
		sum.Write(data)
		checkDecode(t, AppendTrailer(bytes.Clone(data), TrailerV2, sum), limit)
	})
}

// FuzzHeaderParsersAgree checks that ParseHeader, which decodes the fields
// before "state" as one struct, means what decodeHeader, field by field,
// means: the same header, or an error from both. So too for the same bytes
// read as an index's header (DecodeHeaderJSON: the fields alone, the
// object's end where "state" would be).
func FuzzHeaderParsersAgree(f *testing.F) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	rec := &ErrorRecord{Message: "boom", Types: []string{"*errors.errorString"}, Step: 3, Time: now}
	f.Add(encodeBytes(Header{Format: 2, Step: 3, Kind: KindError, Time: now, Error: rec, Meta: map[string]string{"state": "x"}}, []byte(`"s"`), CompressNone))
	f.Add([]byte(`{"format":2,"STEP":3,"step":4,"kind":"step","time":"2026-11-21T10:00:00Z","state":1}`))
	f.Add([]byte(`{"format":2,"step":3,"kind":"step","time":"2026-11-21T10:00:00Z","\u0073tate":1}`))
	f.Add([]byte(`{"format":2,"step":3,"step":5,"x":[{"state":1}],"kind":"step","time":"2026-11-21T10:00:00Z", "state" :1}`))
	f.Add([]byte(`{"format":2,"step":3,"kind":"error","time":"2026-11-21T10:00:00Z","meta":{"a":"b"},"error":{"message":"m","step":3,"time":"2026-11-21T10:00:00Z"}}`))
	f.Add([]byte(`{"format":2,"step":3,"kind":"step","time":"2026-11-21T10:00:00Z","Step":4} `))
	// Metrics: as the writer puts them, of every form of number, and wrong.
	f.Add(encodeBytes(Header{Format: 2, Step: 3, Kind: KindStep, Time: now, Metrics: map[string]float64{"loss": 0.25, "acc": 1e-9, "n": -3}}, []byte(`"s"`), CompressNone))
	f.Add(encodeBytes(Header{Format: 2, Step: 3, Kind: KindError, Time: now, Error: rec, Meta: map[string]string{"a": "b"}, Metrics: map[string]float64{"Ünï": 1e300}}, []byte(`"s"`), CompressNone))
	f.Add([]byte(`{"format":2,"step":3,"kind":"step","time":"2026-11-21T10:00:00Z","metrics":{"a":1,"a":2,"b":null},"Metrics":{"c":3},"state":1}`))
	f.Add([]byte(`{"format":2,"step":3,"kind":"step","time":"2026-11-21T10:00:00Z","metrics":{"a":1e999},"state":1}`))
	f.Add([]byte(`{"format":2,"step":3,"kind":"step","time":"2026-11-21T10:00:00Z","metrics":{"a":"NaN"},"state":1}`))
	f.Add([]byte(`{"format":2,"step":3,"kind":"step","time":"2026-11-21T10:00:00Z","metrics":null,"metrics":{"\u00e9":-0.0}}`))
	f.Add([]byte(`{"format":2,"step":3,"kind":"step","time":"2026-11-21T10:00:00Z","metrics":{"a":1,"b":-2.5e-3},"metrics":{ "b" : 0 , "c":1E+2 },"state":1}`))
	f.Add([]byte(`{"format":2,"step":3,"kind":"step","time":"2026-11-21T10:00:00Z","metrics":{},"state":1}`))
	f.Add([]byte(`{"format":2,"step":3,"kind":"step","time":"2026-11-21T10:00:00Z","metrics":{"a":01,"b":1.,"c":.5,"d":-,"e":1e,"f":0x1,"g":1_0,"h":Inf},"state":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		fast, _, ferr := ParseHeader(bytes.Clone(data))
		slow, found, serr := decodeHeader(json.NewDecoder(bytes.NewReader(data)), false)
		if serr == nil && !found {
			serr = errors.New("no state")
		}
		if errors.Is(ferr, ErrShortHeader) {
			ferr = errors.New("short")
		}
		if (ferr == nil) != (serr == nil) {
			t.Fatalf("parseHeader says %v, decodeHeader says %v", ferr, serr)
		}
		if ferr == nil && !reflect.DeepEqual(fast, slow) {
			t.Fatalf("parseHeader read %+v, decodeHeader %+v", fast, slow)
		}

		index, ierr := DecodeHeaderJSON(bytes.Clone(data))
		dec := json.NewDecoder(bytes.NewReader(data))
		want, found, werr := decodeHeader(dec, true)
		if werr == nil && !found {
			werr = errors.New("not closed")
		}
		if werr == nil {
			if _, err := dec.Token(); err != io.EOF {
				werr = errors.New("bytes after the object")
			}
		}
		if (ierr == nil) != (werr == nil) {
			t.Fatalf("DecodeHeaderJSON says %v, decodeHeader says %v", ierr, werr)
		}
		if ierr == nil && !reflect.DeepEqual(index, want) {
			t.Fatalf("DecodeHeaderJSON read %+v, decodeHeader %+v", index, want)
		}
	})
}

func checkDecode(t *testing.T, data []byte, limit int64) {
	env, err := readEnvelope(bytes.NewReader(data), limit)
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error without ErrCorrupt: %v", err)
		}
		return
	}
	if err := env.Header.Check(); err != nil {
		t.Fatalf("accepted a bad header: %v", err)
	}
	// A load decodes the state; bytes that are not one JSON value (a field
	// after the state, say) fail there, as ErrCorrupt, and go no further.
	var raw json.RawMessage
	if err := json.Unmarshal(env.State, &raw); err != nil {
		return
	}
	// What loads round-trips through the writer.
	again, err := readEnvelope(bytes.NewReader(encodeBytes(env.Header, env.State, CompressNone)), limit)
	if err != nil {
		t.Fatalf("re-encoded envelope does not load: %v", err)
	}
	if again.Step != env.Step || again.Kind != env.Kind || !again.Time.Equal(env.Time) || !bytes.Equal(again.State, env.State) {
		t.Fatalf("round trip changed the envelope: %+v vs %+v", again.Header, env.Header)
	}
	// The header reader, used by List, agrees with the full decoder.
	h, err := NewCodec(CompressNone, limit).ReadHeader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("full decode accepted what the header reader refuses: %v", err)
	}
	if h.Step != env.Step || h.Kind != env.Kind || !h.Time.Equal(env.Time) {
		t.Fatalf("header reader disagrees: %+v vs %+v", h, env.Header)
	}
}

// TestMetricsRoundTrip proves that a header's metrics read back as they
// were written, through a checkpoint (ParseHeader) and through the header
// index's form (DecodeHeaderJSON of the header as encoding/json writes
// it), and that a reader that does not know the field, as every release
// before it, reads the same checkpoint with the field ignored.
func TestMetricsRoundTrip(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	metrics := map[string]float64{"loss": 0.125, "acc": 0.9, "tiny": 1e-300, "huge": -1.7976931348623157e308, "Ünïcode": 3}
	h := Header{Format: Version, Step: 7, Kind: KindFinal, Time: now, Meta: map[string]string{"k": "v"}, Metrics: metrics}
	data := encodeBytes(h, []byte(`{"turn":7}`), CompressNone)
	got, _, err := ParseHeader(bytes.Clone(data))
	if err != nil || !reflect.DeepEqual(got, h) {
		t.Fatalf("ParseHeader: %+v, %v; want %+v", got, err, h)
	}
	j, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	got, err = DecodeHeaderJSON(j)
	if err != nil || !reflect.DeepEqual(got, h) {
		t.Fatalf("DecodeHeaderJSON: %+v, %v; want %+v", got, err, h)
	}
	// Releases before metrics decode the header with the struct above
	// less its Metrics field (json.Unmarshal ignores a field it does not
	// know; decodeHeader and splitHeader skip any key they do not know):
	// the checkpoint reads there with the field ignored.
	type oldHeader struct {
		Format int               `json:"format"`
		Step   int64             `json:"step"`
		Kind   Kind              `json:"kind"`
		Time   time.Time         `json:"time"`
		Meta   map[string]string `json:"meta"`
		State  json.RawMessage   `json:"state"`
	}
	tr, err := Verify(data)
	if err != nil {
		t.Fatal(err)
	}
	var old oldHeader
	if err := json.Unmarshal(append(bytes.Clone(data[:len(data)-tr.size()]), '}'), &old); err != nil {
		t.Fatalf("a reader without metrics: %v", err)
	}
	if old.Step != 7 || old.Kind != KindFinal || string(old.State) != `{"turn":7}` {
		t.Fatalf("a reader without metrics read %+v", old)
	}
}

// A metric's value reads as encoding/json reads it, whatever its spelling:
// the same number, or an error from both; but a null, which encoding/json
// reads as 0, is damage.
func TestMetricNumbersReadAsEncodingJSONReadsThem(t *testing.T) {
	t.Parallel()
	for _, lit := range []string{"0", "-0", "01", "1.", "1.5", ".5", "-", "1e", "1e5", "1E+2", "2e-3", "1e-400", "1e400", "-1e400",
		"0x1", "1_0", "Inf", "NaN", "+1", "-1.5e-3", "123456789012345678901234567890", "1.7976931348623157e308", "4.9e-324", `"1"`, "null", "[1]", "true"} {
		data := []byte(`{"format":2,"step":3,"kind":"step","time":"2026-11-21T10:00:00Z","metrics":{"m":` + lit + `},"state":1}`)
		h, _, err := ParseHeader(bytes.Clone(data))
		var want map[string]float64
		werr := json.Unmarshal([]byte(`{"m":`+lit+`}`), &want)
		if lit == "null" {
			// encoding/json reads a null as 0; a header's metric that is
			// not a number is damage instead (see Metrics).
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("null: ParseHeader says %v, want ErrCorrupt", err)
			}
			continue
		}
		if (err == nil) != (werr == nil) {
			t.Fatalf("%s: ParseHeader says %v, encoding/json %v", lit, err, werr)
		}
		if err == nil && !reflect.DeepEqual(map[string]float64(h.Metrics), want) {
			t.Fatalf("%s: ParseHeader read %v, encoding/json %v", lit, h.Metrics, want)
		}
	}
}
