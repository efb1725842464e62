package format

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint/internal/benchkit"
)

// Shapes the parallel encoder cuts: fields with tags, omitempty, skipped
// and unexported fields, slices of structs and of slices, maps of
// structs, pointers, and the standard library's own marshalers.
type (
	parallelDoc struct {
		ID      string            `json:"id"`
		Skipped int               `json:"-"`
		hidden  int               //nolint:unused // encoding/json skips it
		Empty   []int             `json:"empty,omitempty"`
		Zero    int               `json:",omitempty"`
		NilPtr  *parallelRow      `json:"nil_ptr"`
		Rows    []parallelRow     `json:"rows"`
		ByName  map[string]parRow `json:"by_name"`
		Grid    [][]float64       `json:"grid"`
		Few     []*parallelRow    `json:"few"`
		Stamp   time.Time         `json:"stamp"`
		Raw     json.RawMessage   `json:"raw"`
		Bytes   []byte            `json:"bytes"`
		Num     json.Number       `json:"num"`
		Arr     [3]parallelRow    `json:"arr"`
		Nested  *parallelDoc      `json:"nested,omitempty"`
	}
	parallelRow struct {
		Name string         `json:"name"`
		Tags []string       `json:"tags"`
		Inv  map[string]int `json:"inv,omitempty"`
		X    float64
	}
	parRow = parallelRow
)

func newParallelDoc(rows int) parallelDoc {
	d := parallelDoc{ID: "<doc>&\u2028", Skipped: 7, hidden: 8, Stamp: time.Date(2026, 11, 27, 8, 0, 0, 5, time.UTC),
		Raw: json.RawMessage(` { "r" : [1, 2] } `), Bytes: []byte("bytes\xff"), Num: "12.50", ByName: map[string]parRow{}}
	for i := range rows {
		r := parallelRow{Name: fmt.Sprintf("row-%d\xff<", i), Tags: []string{"a", "b"}, X: float64(i) / 3}
		if i%3 == 0 {
			r.Inv = map[string]int{"z": i, "a": -i}
		}
		d.Rows = append(d.Rows, r)
		d.Grid = append(d.Grid, []float64{float64(i), 1e21, 1e-7})
		if i < 5 {
			d.ByName[fmt.Sprintf("k%d", 5-i)] = r
			d.Few = append(d.Few, &d.Rows[i])
		}
	}
	inner := d
	inner.Nested = nil
	d.Nested = &inner
	return d
}

// TestParallelEncodingIsEncodingJSON checks, on states the encoder cuts
// into parts (it says so), that the bytes are json.Marshal's, whether the
// parts are many and small or few and large.
func TestParallelEncodingIsEncodingJSON(t *testing.T) {
	t.Parallel()
	doc := newParallelDoc(300)
	for _, state := range []any{doc, &doc, []parallelDoc{doc, doc}, map[string]parallelDoc{"b": doc, "a": doc}, benchkit.NewWorld(200 << 10), doc.Rows, doc.Grid} {
		want, err := json.Marshal(state)
		if err != nil {
			t.Fatal(err)
		}
		for _, size := range []int64{parallelMin, 1 << 20, MaxPooled} {
			var got bytes.Buffer
			cut, err := encodeParallel(&got, reflect.ValueOf(state), size)
			if !cut || err != nil {
				t.Fatalf("%T, as of %d bytes: cut %v, error %v", state, size, cut, err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Fatalf("%T, as of %d bytes: the parts make\n%.300q\njson.Marshal\n%.300q", state, size, got.Bytes(), want)
			}
		}
	}
}

// TestParallelEncodingTakesOnlyTypesThatRunNoHostCode checks the gate: a
// type with a marshal method anywhere in it, or an interface, is encoded
// on one goroutine (a host's MarshalJSON may not be safe to run on two,
// or under the store's lock).
func TestParallelEncodingTakesOnlyTypesThatRunNoHostCode(t *testing.T) {
	t.Parallel()
	type withIface struct{ V []any }
	type withMarshaler struct{ V []valueJSON }
	type withPtrText struct{ V map[string][]ptrText }
	type recursive struct{ Next []recursive }
	for _, tc := range []struct {
		v    any
		want bool
	}{
		{parallelDoc{}, true}, {benchkit.World{}, true}, {recursive{}, true}, {[]int{}, true}, {map[string][]time.Time{}, true},
		{withIface{}, false}, {withMarshaler{}, false}, {withPtrText{}, false}, {map[string]any{}, false}, {[]fmt.Stringer{}, false},
	} {
		c := NewCodec(CompressNone, defaultMaxRead)
		if got := c.Parallel(reflect.TypeOf(tc.v)); got != tc.want {
			t.Errorf("Parallel(%T) = %v, want %v", tc.v, got, tc.want)
		}
	}
}

type cyclic struct {
	Name string
	Next *cyclic
}

// TestParallelEncodingFailsAsJSONMarshal checks that a state encoding/json
// refuses (a NaN deep in one part, a cycle) fails with json.Marshal's own
// error for the whole state, as ErrInvalid, and that an error of the
// destination is returned as it is, not as an invalid state.
func TestParallelEncodingFailsAsJSONMarshal(t *testing.T) {
	t.Parallel()
	doc := newParallelDoc(300)
	doc.Grid[250][1] = math.NaN()
	loop := &cyclic{Name: "a"}
	loop.Next = &cyclic{Name: "b", Next: loop}
	loops := make([]cyclic, 20)
	loops[12] = *loop
	for _, state := range []any{doc, loops} {
		_, want := json.Marshal(state)
		c := NewCodec(CompressNone, defaultMaxRead)
		c.lastState.Store(MaxPooled)
		_, err := c.EncodeState(state)
		if !errors.Is(err, ErrInvalid) || want == nil || !strings.HasSuffix(err.Error(), want.Error()) {
			t.Fatalf("%T: EncodeState says %v, json.Marshal %v", state, err, want)
		}
	}
	full := errors.New("disk full")
	for _, last := range []int64{0, MaxPooled} {
		c := NewCodec(CompressNone, defaultMaxRead)
		c.lastState.Store(last)
		err := c.encodeState(failingWriter{after: 100, err: full}, newParallelDoc(300), last > 0)
		if !errors.Is(err, full) || errors.Is(err, ErrInvalid) {
			t.Fatalf("last state %d: a destination that fails gives %v", last, err)
		}
	}
}

type failingWriter struct {
	after int
	err   error
}

func (f failingWriter) Write(b []byte) (int, error) {
	if len(b) > f.after {
		return 0, f.err
	}
	return len(b), nil
}

// TestStreamedEnvelopeIsTheBufferedOne checks that WriteStateEnvelope
// writes what WriteEnvelope writes for the state's bytes (the same bytes
// uncompressed; the same header and state once read, compressed), and
// that a state larger than the codec reads is refused as ErrInvalid.
func TestStreamedEnvelopeIsTheBufferedOne(t *testing.T) {
	t.Parallel()
	h := Header{Format: Version, Step: 12, Kind: KindStep, Time: time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC), Meta: map[string]string{"k": "v"}}
	for _, comp := range []Compression{CompressNone, CompressGzip, CompressZstd} {
		for _, last := range []int64{0, MaxPooled} {
			state := newParallelDoc(500)
			want, err := json.Marshal(state)
			if err != nil {
				t.Fatal(err)
			}
			c := NewCodec(comp, defaultMaxRead)
			c.lastState.Store(last)
			var streamed, buffered bytes.Buffer
			if err := c.WriteStateEnvelope(&streamed, h, state); err != nil {
				t.Fatal(err)
			}
			if err := c.WriteEnvelope(&buffered, h, want); err != nil {
				t.Fatal(err)
			}
			if comp == CompressNone && !bytes.Equal(streamed.Bytes(), buffered.Bytes()) {
				t.Fatalf("last state %d: the streamed envelope differs from the buffered one", last)
			}
			err = c.Read(bytes.NewReader(streamed.Bytes()), int64(streamed.Len()), func(got Header, s []byte) error {
				if got.Step != h.Step || got.Meta["k"] != "v" || !bytes.Equal(s, want) {
					return fmt.Errorf("read back step %d meta %v, state equal %v", got.Step, got.Meta, bytes.Equal(s, want))
				}
				return nil
			})
			if err != nil {
				t.Fatalf("%v, last state %d: %v", comp, last, err)
			}
		}
	}
	small := NewCodec(CompressNone, 4096)
	err := small.WriteStateEnvelope(&bytes.Buffer{}, h, newParallelDoc(500))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "4096") {
		t.Fatalf("a state larger than the codec reads: %v", err)
	}
}
