// Package corpus holds the format's test files: what each golden
// checkpoint of every format version holds, and the corrupt-file corpus,
// every way its authors could think of to damage the bytes of a
// checkpoint. The format's tests read each file with the codec, the
// store's tests load each through a store; both require that a golden
// file reads as it was written, that no damaged file yields a wrong state,
// and that every refusal is ErrCorrupt.
package corpus

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"strings"
	"time"

	"github.com/gocheckpoint/checkpoint/internal/format"
	"github.com/klauspost/compress/gzip"
)

// MaxRead is the read limit the corpus is built for: small, so that the
// bomb and the oversized file stay cheap to build. A reader of the corpus
// reads with it.
const MaxRead = 64 << 10

// A Case is one damaged checkpoint of step 2, kind "step", in the layout
// ("c", 3).
type Case struct {
	Name string
	File string // the file's name: c_002.json or c_002.json.gz
	Data []byte
}

// Step is the step every case's file is named for.
const Step = 2

// Cases returns the corpus built around state, the bytes of the state a
// good checkpoint of step 2 holds (as encoding/json writes it): every
// truncation and flipped bit of a plain and a gzip file of format 1 that
// holds it, checksummed envelopes whose header or state is wrong in
// another way, damaged gzip streams, a bomb and a file over MaxRead. A few
// cases change nothing that matters (a gzip header field) and read as the
// good checkpoint.
func Cases(state []byte) []Case {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	good := encode(format.Header{Format: 1, Step: 2, Kind: format.KindStep, Time: now}, state, format.CompressNone)
	goodGz := encode(format.Header{Format: 1, Step: 2, Kind: format.KindStep, Time: now}, state, format.CompressGzip)

	var cases []Case
	for i := 0; i < len(good); i++ {
		cases = append(cases, Case{Name: fmt.Sprintf("plain truncated at %d", i), File: "c_002.json", Data: good[:i]})
	}
	for i := 0; i < len(goodGz); i++ {
		cases = append(cases, Case{Name: fmt.Sprintf("gzip truncated at %d", i), File: "c_002.json.gz", Data: goodGz[:i]})
	}
	for i := range good {
		for _, bit := range []byte{0x01, 0x80} {
			b := bytes.Clone(good)
			b[i] ^= bit
			cases = append(cases, Case{Name: fmt.Sprintf("plain bit %#x flipped at %d", bit, i), File: "c_002.json", Data: b})
		}
	}
	for i := range goodGz {
		b := bytes.Clone(goodGz)
		b[i] ^= 0x01
		cases = append(cases, Case{Name: fmt.Sprintf("gzip bit flipped at %d", i), File: "c_002.json.gz", Data: b})
	}

	head := `{"format":1,"step":2,"kind":"step","time":"2026-11-21T10:00:00Z"`
	body := head + `,"state":` + string(state)
	for _, tc := range []struct{ name, body string }{
		{"step is a string", strings.Replace(body, `"step":2`, `"step":"2"`, 1)},
		{"step is a float", strings.Replace(body, `"step":2`, `"step":2.5`, 1)},
		{"step disagrees with the name", strings.Replace(body, `"step":2`, `"step":3`, 1)},
		{"negative step", strings.Replace(body, `"step":2`, `"step":-2`, 1)},
		{"kind is a number", strings.Replace(body, `"kind":"step"`, `"kind":5`, 1)},
		{"unknown kind", strings.Replace(body, `"kind":"step"`, `"kind":"weekly"`, 1)},
		{"kind disagrees with the name", strings.Replace(body, `"kind":"step"`, `"kind":"final"`, 1)},
		{"time is not a time", strings.Replace(body, `"2026-11-21T10:00:00Z"`, `"yesterday"`, 1)},
		{"no time", strings.Replace(body, `,"time":"2026-11-21T10:00:00Z"`, ``, 1)},
		{"meta is a list", strings.Replace(body, `,"state":`, `,"meta":[1,2],"state":`, 1)},
		{"metrics is a list", strings.Replace(body, `,"state":`, `,"metrics":[1,2],"state":`, 1)},
		{"metric is a string", strings.Replace(body, `,"state":`, `,"metrics":{"loss":"NaN"},"state":`, 1)},
		{"metric out of range", strings.Replace(body, `,"state":`, `,"metrics":{"loss":1e999},"state":`, 1)},
		{"error record on a step checkpoint", strings.Replace(body, `,"state":`, `,"error":{"message":"x"},"state":`, 1)},
		{"format 4", strings.Replace(body, `"format":1`, `"format":4`, 1)},
		{"format 3 (a byte payload) with the checksum of format 1", strings.Replace(body, `"format":1`, `"format":3`, 1)},
		{"format 2 with the checksum of format 1", strings.Replace(body, `"format":1`, `"format":2`, 1)},
		{"format 0", strings.Replace(body, `"format":1`, `"format":0`, 1)},
		{"format is a string", strings.Replace(body, `"format":1`, `"format":"1"`, 1)},
		{"no format", strings.Replace(body, `"format":1,`, ``, 1)},
		{"state is null", head + `,"state":null`},
		{"state is a string", head + `,"state":"turn 2"`},
		{"state is a list", head + `,"state":[1,2]`},
		{"state field of the wrong type", head + `,"state":{"turn":"two","agents":{},"log":[]}`},
		{"state agents of the wrong type", head + `,"state":{"turn":2,"agents":[1],"log":[]}`},
		{"no state", head},
		{"not an object", `[` + body[1:]},
		{"two objects", body + `}{"x":1`},
	} {
		cases = append(cases, Case{Name: "checksummed, " + tc.name, File: "c_002.json", Data: WithTrailer(tc.body)})
		cases = append(cases, Case{Name: "checksummed gzip, " + tc.name, File: "c_002.json.gz", Data: Gzipped(WithTrailer(tc.body))})
	}

	badCRC := bytes.Clone(goodGz)
	badCRC[len(badCRC)-8] ^= 0xff // the CRC-32 of the gzip trailer
	badSize := bytes.Clone(goodGz)
	badSize[len(badSize)-1] ^= 0xff // ISIZE
	return append(cases,
		Case{Name: "empty file", File: "c_002.json", Data: []byte{}},
		Case{Name: "empty gzip name", File: "c_002.json.gz", Data: []byte{}},
		Case{Name: "gzip magic only", File: "c_002.json.gz", Data: []byte{0x1f, 0x8b}},
		Case{Name: "gzip with a bad CRC", File: "c_002.json.gz", Data: badCRC},
		Case{Name: "gzip with a bad size", File: "c_002.json.gz", Data: badSize},
		Case{Name: "gzip of nothing", File: "c_002.json.gz", Data: Gzipped(nil)},
		Case{Name: "gzip of plain garbage", File: "c_002.json.gz", Data: Gzipped([]byte("garbage"))},
		Case{Name: "gzip bomb", File: "c_002.json.gz", Data: Gzipped(append(WithTrailer(head+`,"state":"`), bytes.Repeat([]byte("A"), MaxRead*4)...))},
		Case{Name: "plain file over the read limit", File: "c_002.json", Data: WithTrailer(head + `,"state":{"turn":2,"log":["` + strings.Repeat("x", MaxRead) + `"]}`)},
		Case{Name: "NUL bytes", File: "c_002.json", Data: make([]byte, 4096)},
		Case{Name: "the checkpoint of another step", File: "c_002.json", Data: encode(format.Header{Format: 1, Step: 9, Kind: format.KindStep, Time: now}, state, format.CompressNone)},
	)
}

// Good returns the good checkpoint of step 2 the corpus damages: a plain
// file of format 1 holding state.
func Good(state []byte) []byte {
	return encode(format.Header{Format: 1, Step: 2, Kind: format.KindStep, Time: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}, state, format.CompressNone)
}

// WithTrailer completes an envelope body of format 1 (everything before the
// checksum) with a correct checksum, so that only what the body says is
// wrong.
func WithTrailer(body string) []byte {
	sum := sha256.New()
	sum.Write([]byte(body))
	return format.AppendTrailer([]byte(body), format.TrailerV1, sum)
}

// Gzipped returns b compressed as one gzip member.
func Gzipped(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		panic(err) // a bytes.Buffer does not fail
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

func encode(h format.Header, state []byte, comp format.Compression) []byte {
	var buf bytes.Buffer
	if err := format.NewCodec(comp, MaxRead).WriteEnvelope(&buf, h, state); err != nil {
		panic(err) // the corpus's own headers encode
	}
	return buf.Bytes()
}
