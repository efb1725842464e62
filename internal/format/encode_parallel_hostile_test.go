package format

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A reviewer's attacks on the parallel encoder (issue 28): each test is a
// property the encoder must have. A test that found a bug is skipped with
// the reason "BUG: ..." so that the branch stays green.

type (
	atkName                      string
	atkBytes                     []byte
	atkBytes2                    []atkBytes
	atkU8                        uint8
	atkPair[K comparable, V any] struct {
		Key K `json:"key"`
		Val V `json:"val,omitempty"`
	}
	atkInner struct {
		A int    `json:"a,omitempty"`
		B string `json:"b"`
	}
	atkOdd struct {
		Dollar int `json:"$x"`
		Space  int `json:"a b"`
		//lint:ignore SA5008 a name of "-" is what is tested
		Dash    int `json:"-,"`
		Empty   int `json:""`
		Comma   int `json:",omitempty"`
		Unicode int `json:"ü"`
		//lint:ignore SA5008 a tag encoding/json takes as invalid is what is tested
		Bad   int `json:"a\"b"`
		Größe int
		lower int //nolint:unused // encoding/json skips it
		Lower int
		Str   int `json:",string"`
		Zero  int `json:",omitzero"`
	}
	atkDup struct {
		A int `json:"B"`
		B int
		C int `json:"c"`
		D int `json:"C"`
	}
	atkEmbedNonStruct struct {
		atkName
		atkU8 `json:"u8"`
		X     int
	}
	atkOmit struct {
		Arr0   [0]int             `json:"arr0,omitempty"`
		Arr2   [2]int             `json:"arr2,omitempty"`
		NilS   []int              `json:"nils,omitempty"`
		EmptyS []int              `json:"empty,omitempty"`
		NilM   map[string]int     `json:"nilm,omitempty"`
		EmptyM map[string]int     `json:"emptym,omitempty"`
		PZero  *atkInner          `json:"pzero,omitempty"`
		PNil   *atkInner          `json:"pnil,omitempty"`
		Struct atkInner           `json:"struct,omitempty"`
		F      float64            `json:"f,omitempty"`
		NegZ   float64            `json:"negz,omitempty"`
		B      bool               `json:"b,omitempty"`
		Str    string             `json:"str,omitempty"`
		Time   time.Time          `json:"time,omitempty"`
		Raw    json.RawMessage    `json:"raw,omitempty"`
		Num    json.Number        `json:"num,omitempty"`
		U      uintptr            `json:"u,omitempty"`
		MS     map[atkName]string `json:"ms,omitempty"`
	}
	atkAll struct {
		Keys    map[atkName]int            `json:"keys"`
		Sort    map[string]int             `json:"sort"`
		Big     map[string]atkInner        `json:"big"`
		Arr     [4]atkInner                `json:"arr"`
		ArrB    [5]byte                    `json:"arrb"`
		NamedB  atkBytes                   `json:"namedb"`
		NamedBB atkBytes2                  `json:"namedbb"`
		U8s     []atkU8                    `json:"u8s"`
		BB      [][]byte                   `json:"bb"`
		Gen     []atkPair[string, float32] `json:"gen"`
		GenM    map[string]atkPair[int, []atkInner]
		Odd     []atkOdd `json:"odd"`
		Dup     []atkDup `json:"dup"`
		Emb     []atkEmbedNonStruct
		Omit    []atkOmit     `json:"omit"`
		Ptrs    []**atkInner  `json:"ptrs"`
		Slices  [][][]string  `json:"slices"`
		Nums    []json.Number `json:"nums"`
		Raws    []json.RawMessage
		Times   []time.Time
		Floats  []float32
		Chars   []string
		Empty   struct{}
		Unexp   atkUnexported
		MapPtrs map[string]*[]atkInner
	}
	atkUnexported struct {
		a, b int
	}
)

func newAtkAll(n int) atkAll {
	v := atkAll{
		Keys:   map[atkName]int{"b": 1, "a<": 2, "\xff": 3, "\u00ff": 4, "z\u2028": 5, "&": 6, "": 7},
		Sort:   map[string]int{"\u00e9": 1, "\u1000": 2, "\U0001F600": 3, "\xf0": 4, "e\u0301": 5, "A": 6, "a": 7, "\x7f": 8},
		Big:    map[string]atkInner{},
		ArrB:   [5]byte{1, 2, 3, 4, 255},
		NamedB: atkBytes("named\xff<"),
		GenM:   map[string]atkPair[int, []atkInner]{"x": {Key: 1}, "y": {Key: 2, Val: []atkInner{{A: 1}}}},
		Empty:  struct{}{},
		Unexp:  atkUnexported{1, 2},
		MapPtrs: map[string]*[]atkInner{
			"nil": nil, "empty": {}, "some": {{A: 1, B: "<>"}, {}, {}, {}, {}, {}, {}, {}, {}, {}},
		},
	}
	for i := range n {
		in := atkInner{A: i, B: fmt.Sprintf("<%d>&\u2029\xfe", i)}
		v.Big[fmt.Sprintf("k%05d\xff", i)] = in
		v.Arr[i%4] = in
		v.NamedBB = append(v.NamedBB, atkBytes{byte(i)})
		v.U8s = append(v.U8s, atkU8(i))
		v.BB = append(v.BB, []byte(fmt.Sprint(i)), nil, []byte{})
		v.Gen = append(v.Gen, atkPair[string, float32]{Key: fmt.Sprint(i), Val: float32(i) / 3})
		v.Odd = append(v.Odd, atkOdd{Dollar: i, Space: i, Dash: i, Empty: i, Comma: i % 2, Unicode: i, Bad: i, Größe: i, lower: i, Lower: i, Str: i, Zero: i % 2})
		v.Dup = append(v.Dup, atkDup{A: i, B: i + 1, C: i, D: i})
		v.Emb = append(v.Emb, atkEmbedNonStruct{atkName: "e", atkU8: 3, X: i})
		o := atkOmit{PZero: &atkInner{}, NegZ: math.Copysign(0, -1), Raw: json.RawMessage(`{"a" : 1}`), EmptyS: []int{}, EmptyM: map[string]int{}}
		if i%2 == 0 {
			o = atkOmit{Arr2: [2]int{}, Struct: atkInner{}, Num: "1e3", U: 1}
		}
		v.Omit = append(v.Omit, o)
		p := &atkInner{A: i}
		v.Ptrs = append(v.Ptrs, &p, nil)
		v.Slices = append(v.Slices, [][]string{{"a", "<b>"}, nil, {}})
		v.Nums = append(v.Nums, json.Number(fmt.Sprint(i)), json.Number(""))
		v.Raws = append(v.Raws, json.RawMessage(" [ \"<\" ,\n1 ] "), nil)
		v.Times = append(v.Times, time.Date(2026, 1, 2, 3, 4, 5, i, time.FixedZone("x", 3600)))
		v.Floats = append(v.Floats, float32(i)*1e20, float32(1e-7), float32(i))
		v.Chars = append(v.Chars, "\xff\xfe\u2028<>&\t\x00"+strings.Repeat("é", i%5))
	}
	return v
}

// sameAsMarshal checks that the parts of v, cut as of several sizes, and
// EncodeState on a codec that last saw a large state, give json.Marshal's
// bytes or json.Marshal's error.
func sameAsMarshal(t *testing.T, v any) {
	t.Helper()
	want, wantErr := json.Marshal(v)
	for _, size := range []int64{parallelMin, 1 << 20, MaxPooled, 1 << 30} {
		if wantErr == nil {
			var got bytes.Buffer
			cut, err := encodeParallel(&got, reflect.ValueOf(v), size)
			if err != nil {
				t.Fatalf("%T as of %d: json.Marshal succeeds, the parts fail: %v", v, size, err)
			}
			if cut && !bytes.Equal(got.Bytes(), want) {
				i := 0
				for i < min(got.Len(), len(want)) && got.Bytes()[i] == want[i] {
					i++
				}
				t.Fatalf("%T as of %d: the parts differ at byte %d:\n%.200q\njson.Marshal:\n%.200q", v, size, i, got.Bytes()[i:], want[i:])
			}
		}
		// EncodeState sizes its buffer after the last state: as of
		// MaxPooled at most, which cuts the state as finely as any.
		c := NewCodec(CompressNone, defaultMaxRead)
		c.lastState.Store(min(size, MaxPooled))
		buf, err := c.EncodeState(v)
		switch {
		case wantErr == nil && err != nil:
			t.Fatalf("%T as of %d: EncodeState fails: %v", v, size, err)
		case wantErr == nil && !bytes.Equal(buf.Bytes(), want):
			t.Fatalf("%T as of %d: EncodeState's bytes are not json.Marshal's", v, size)
		case wantErr != nil && (!errors.Is(err, ErrInvalid) || !strings.HasSuffix(err.Error(), ": "+wantErr.Error())):
			t.Fatalf("%T as of %d: EncodeState gives %v, json.Marshal %v", v, size, err, wantErr)
		}
	}
}

// TestParallelIsMarshalOnOddTypes checks the bytes on struct, map and
// slice shapes where encoding/json's rules are subtle: tags of odd but
// valid names, duplicate names, embedded non-structs, omitempty on every
// kind, named key types, keys that sort differently as bytes and as
// runes, invalid UTF-8 and HTML characters, named byte slices and arrays,
// generic types.
func TestParallelIsMarshalOnOddTypes(t *testing.T) {
	t.Parallel()
	v := newAtkAll(300)
	if !NewCodec(CompressNone, defaultMaxRead).Parallel(reflect.TypeOf(v)) {
		t.Fatal("atkAll is not encoded in parts")
	}
	if cut, err := encodeParallel(io.Discard, reflect.ValueOf(v), MaxPooled); !cut || err != nil {
		t.Fatalf("atkAll is not cut into parts: %v, %v", cut, err)
	}
	sameAsMarshal(t, v)
	sameAsMarshal(t, &v)
	sameAsMarshal(t, []atkAll{v, newAtkAll(3), {}})
	sameAsMarshal(t, map[atkName]atkAll{"b": v, "a": newAtkAll(20), "<": {}})
	sameAsMarshal(t, [3]atkAll{v})
	sameAsMarshal(t, v.Odd)
	sameAsMarshal(t, v.Omit)
	sameAsMarshal(t, v.BB)
	sameAsMarshal(t, v.NamedBB)
	sameAsMarshal(t, map[string][]atkOmit{"x": v.Omit})
}

type atkDeep struct {
	Next *atkDeep
	Kids []atkDeep
	V    float64
}

func deepChain(n int) *atkDeep {
	var d *atkDeep
	for i := range n {
		d = &atkDeep{Next: d, V: float64(i)}
	}
	return d
}

// TestParallelFailsAsMarshal checks that each value encoding/json
// refuses fails with json.Marshal's error for the whole value, whatever
// part met an error first: a time out of range, an invalid RawMessage or
// Number, a NaN late while an earlier part holds an infinity, a cycle, and
// that very deep (not cyclic) nesting encodes.
func TestParallelFailsAsMarshal(t *testing.T) {
	t.Parallel()
	late := newAtkAll(300)
	late.Floats[5] = float32(math.Inf(1))
	late.Gen[290].Val = float32(math.NaN())
	badTime := newAtkAll(300)
	badTime.Times[250] = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	badRaw := newAtkAll(300)
	badRaw.Raws[280] = json.RawMessage(`{"a":`)
	badNum := newAtkAll(300)
	badNum.Nums[10] = "1x"
	loop := &atkDeep{}
	loop.Kids = []atkDeep{{}, {}, {}, {}, {}, {}, {}, {}, {}, {Next: loop}}
	for _, v := range []any{late, badTime, badRaw, badNum, loop, []*atkDeep{nil, nil, nil, nil, nil, nil, nil, nil, loop}} {
		if _, err := json.Marshal(v); err == nil {
			t.Fatalf("%T: json.Marshal succeeds", v)
		}
		sameAsMarshal(t, v)
	}
	deep := deepChain(5000)
	sameAsMarshal(t, []*atkDeep{deep, deep, deep, deep, deep, deep, deep, deep, deep})
}

// TestParallelLeavesNoGoroutine checks that encoding in parts, whether
// it succeeds, fails in a part, or fails in the destination, leaves no
// goroutine behind.
func TestParallelLeavesNoGoroutine(t *testing.T) {
	// Not parallel: it counts goroutines.
	good := newAtkAll(2000)
	bad := newAtkAll(2000)
	bad.Gen[100].Val = float32(math.NaN())
	before := runtime.NumGoroutine()
	for range 20 {
		c := NewCodec(CompressNone, defaultMaxRead)
		c.lastState.Store(MaxPooled)
		if _, err := c.EncodeState(good); err != nil {
			t.Fatal(err)
		}
		if _, err := c.EncodeState(bad); !errors.Is(err, ErrInvalid) {
			t.Fatal(err)
		}
		full := errors.New("full")
		if err := c.encodeState(failingWriter{after: 10, err: full}, good, false); !errors.Is(err, full) || errors.Is(err, ErrInvalid) {
			t.Fatal(err)
		}
		if err := c.encodeState(failingWriter{after: 0, err: full}, good, true); !errors.Is(err, full) || errors.Is(err, ErrInvalid) {
			t.Fatal(err)
		}
	}
	// A helper has returned once encodeParallel does (it waits for them),
	// but the runtime counts its goroutine until it has wound down, which
	// on a loaded machine can take a while: wait for the count to settle,
	// as goleak does, and fail only if it never does.
	after := runtime.NumGoroutine()
	for deadline := time.Now().Add(10 * time.Second); after > before && time.Now().Before(deadline); after = runtime.NumGoroutine() {
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
	if after > before {
		t.Fatalf("%d goroutines before, %d after", before, after)
	}
}

// TestParallelOnOneCore checks the bytes with GOMAXPROCS=1 (one
// encoder) and with more encoders than cores.
func TestParallelOnOneCore(t *testing.T) {
	// Not parallel: it sets GOMAXPROCS.
	v := newAtkAll(500)
	for _, procs := range []int{1, 3, 16} {
		old := runtime.GOMAXPROCS(procs)
		sameAsMarshal(t, v)
		runtime.GOMAXPROCS(old)
	}
}

// TestParallelConcurrentCalls checks that EncodeState called on one
// codec from several goroutines at once (run it with -race) gives each its
// own value's bytes.
func TestParallelConcurrentCalls(t *testing.T) {
	t.Parallel()
	c := NewCodec(CompressNone, defaultMaxRead)
	c.lastState.Store(MaxPooled)
	vals := []any{newAtkAll(300), newAtkAll(301), newParallelDoc(400), []atkOmit{{}, {}}}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 8 {
		wg.Go(func() {
			for k := range 4 {
				v := vals[(g+k)%len(vals)]
				want, _ := json.Marshal(v)
				buf, err := c.EncodeState(v)
				if err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(buf.Bytes(), want) {
					errs <- fmt.Errorf("%T: bytes differ", v)
					return
				}
				c.PutBuffer(buf)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// atkAlias is a struct whose slice may alias its own array: at the same
// address and of the same length as the one-element slice that holds it.
type atkAlias struct {
	Arr [1]int
	Sub []int
}

type atkChain struct {
	Next *atkChain
	Leaf []atkAlias
}

// aliasChain returns n links, the last holding a slice whose element's Sub
// has the slice's own address and length, which encoding/json takes for a
// cycle once it is more than 1000 levels deep.
func aliasChain(n int) *atkChain {
	leaf := make([]atkAlias, 1)
	leaf[0].Sub = leaf[0].Arr[:]
	c := &atkChain{Leaf: leaf}
	for range n - 1 {
		c = &atkChain{Next: c}
	}
	return c
}

// TestParallelCycleCheckDepth checks that a value encoding/json
// refuses only because of how deep it lies (its cycle check starts past
// 1000 levels of pointers, slices and maps, and keys slices by address
// and length alone) is refused in parts too: a part starts its count of
// levels at zero, where json.Marshal's count includes the levels the walk
// descended.
func TestParallelCycleCheckDepth(t *testing.T) {
	t.Parallel()
	n := 990
	for ; n < 1010; n++ {
		if _, err := json.Marshal(aliasChain(n)); err != nil {
			break
		}
	}
	v := aliasChain(n)
	_, want := json.Marshal(v)
	if want == nil {
		// encoding/json built with GOEXPERIMENT=jsonv2 counts no levels.
		t.Skip("this build's json.Marshal takes every chain: no cycle check by depth to agree with")
	}
	sameAsMarshal(t, v)
}

type atkWide struct {
	A, B, C, D, E, F, G, H, I, J int
	S                            []int
}

// TestParallelWalkLimits checks shapes that reach the walk's limits:
// more values than it hands over one by one (a few structs of small maps
// of wide structs), nesting deeper than it descends, small slices of
// small slices, and maps at the size past which they are encoded whole.
func TestParallelWalkLimits(t *testing.T) {
	t.Parallel()
	wide := make([]map[string]atkWide, 7)
	for i := range wide {
		wide[i] = map[string]atkWide{}
		for k := range 8 {
			wide[i][fmt.Sprintf("<%d>", k)] = atkWide{A: i, J: k, S: make([]int, k*3)}
		}
	}
	sameAsMarshal(t, wide)
	nine := map[string][]int{}
	for k := range 9 {
		nine[fmt.Sprint(k)] = make([]int, 100)
	}
	eight := map[string][]int{}
	for k := range 8 {
		eight[fmt.Sprint(k)] = make([]int, 100)
	}
	sameAsMarshal(t, []map[string][]int{nine, eight, {}, nil})
	sameAsMarshal(t, [][][][][][][][][]int{{{{{{{{{1, 2}, {3}}}}}}}, {{{{{{{4, 5, 6, 7, 8, 9, 10, 11, 12}}}}}}}}})
	sameAsMarshal(t, [][]int{{1}, {2, 3}, nil, {}, {4}})
	sameAsMarshal(t, deepChain(20))
}

// largestWrite records the largest single write to it.
type largestWrite struct{ n, most int }

func (l *largestWrite) Write(b []byte) (int, error) {
	l.n += len(b)
	l.most = max(l.most, len(b))
	return len(b), nil
}

// streamedLargestWrite returns the state's size and the largest write of
// WriteStateEnvelope of v by a codec for which a save of v is streamed.
func streamedLargestWrite(t *testing.T, v any) (size, most int) {
	t.Helper()
	c := NewCodec(CompressNone, defaultMaxRead)
	c.lastState.Store(MaxPooled)
	if !c.Streamed(reflect.TypeOf(v)) {
		t.Fatalf("%T is not streamed", v)
	}
	var w largestWrite
	h := Header{Format: Version, Step: 1, Kind: KindStep, Time: time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)}
	if err := c.WriteStateEnvelope(&w, h, v); err != nil {
		t.Fatal(err)
	}
	return w.n, w.most
}

// TestStreamedStructHoldsNoWholeState checks the streaming claim on
// the shape it was built for (a struct of large slices): no write of the
// state holds more than a quarter of it, so no buffer held it whole.
func TestStreamedStructHoldsNoWholeState(t *testing.T) {
	t.Parallel()
	size, most := streamedLargestWrite(t, newParallelDoc(5000))
	if most > size/4 {
		t.Fatalf("a streamed state of %d bytes was written %d bytes at once", size, most)
	}
}

// TestStreamedOnOneCoreHoldsNoWholeState checks the streaming claim
// with GOMAXPROCS=1, where Streamed still admits the type but encodeState
// takes the one-goroutine path: json.Encoder buffers the whole state.
func TestStreamedOnOneCoreHoldsNoWholeState(t *testing.T) {
	// Not parallel: it sets GOMAXPROCS.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	size, most := streamedLargestWrite(t, newParallelDoc(5000))
	if most > size/4 {
		t.Fatalf("a streamed state of %d bytes was written %d bytes at once", size, most)
	}
}

// atkAppender has an AppendText method and no other: encoding/json built
// with GOEXPERIMENT=jsonv2 (a Go 1.25+ experiment, where encoding/json is
// implemented by encoding/json/v2) calls it, the default build does not.
type atkAppender struct{}

var atkAppends atomic.Int64

func (a atkAppender) AppendText(b []byte) ([]byte, error) {
	atkAppends.Add(1)
	return append(b, "host-code"...), nil
}

// TestParallelGateSeesEveryHostMethod checks that a type whose
// encoding, as this build's encoding/json encodes it, runs a method of the
// host's is not admitted by Parallel: its method would run on several
// goroutines at once and under the store's write lock.
func TestParallelGateSeesEveryHostMethod(t *testing.T) {
	t.Parallel()
	type appends struct{ Rows []atkAppender }
	type appendsPtr struct{ Rows map[string]atkToPtr }
	for _, typ := range []reflect.Type{reflect.TypeFor[appends](), reflect.TypeFor[appendsPtr]()} {
		if NewCodec(CompressNone, defaultMaxRead).Parallel(typ) {
			t.Errorf("Parallel admits %v, whose elements have a method encoding/json may call", typ)
		}
	}
	// Where this build's encoding/json does call AppendText, it is seen.
	before := atkAppends.Load()
	if _, err := json.Marshal(appends{Rows: make([]atkAppender, 3)}); err != nil {
		t.Fatal(err)
	}
	t.Logf("this build's encoding/json calls AppendText: %v", atkAppends.Load() > before)
}

// atkToPtr has a MarshalJSONTo method on its pointer, which encoding/json
// built with GOEXPERIMENT=jsonv2 calls on an addressable value.
type atkToPtr struct{ N int }

func (p *atkToPtr) MarshalJSONTo(enc any) error { return nil }
