package format

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// EncodeState must write the bytes json.Marshal writes (they are what the
// checksum covers) and fail where it fails: on one goroutine, and cut into
// parts encoded on several (encode.go). FuzzEncodeStateIsEncodingJSON
// compares the two over generated types and values.

// Types with marshal methods, on value and pointer receivers. Their
// output is not compact and holds HTML characters and U+2028, which
// encoding/json rewrites.
type (
	valueJSON int
	ptrJSON   struct{ N int }
	valueText string
	ptrText   struct{ S string }
	textKey   string // a map key with MarshalText
)

func (v valueJSON) MarshalJSON() ([]byte, error) {
	if v < 0 {
		return nil, errors.New("negative valueJSON")
	}
	return fmt.Appendf(nil, "{ \"v\" : %d, \"h\": \"<&>\u2028\" }", int(v)), nil
}

func (p *ptrJSON) MarshalJSON() ([]byte, error) { return fmt.Appendf(nil, "[ %d ,\"<p>\" ]", p.N), nil }

func (v valueText) MarshalText() ([]byte, error) { return []byte("text:" + string(v)), nil }

func (p *ptrText) MarshalText() ([]byte, error) { return []byte("<" + p.S + ">"), nil }

func (k textKey) MarshalText() ([]byte, error) { return []byte("key-" + string(k)), nil }

// encLeaves are the types encType builds from.
var encLeaves = []reflect.Type{
	reflect.TypeFor[bool](), reflect.TypeFor[int](), reflect.TypeFor[int8](), reflect.TypeFor[uint8](),
	reflect.TypeFor[uint16](), reflect.TypeFor[int32](), reflect.TypeFor[int64](), reflect.TypeFor[uint](),
	reflect.TypeFor[uint64](), reflect.TypeFor[float32](), reflect.TypeFor[float64](), reflect.TypeFor[string](),
	reflect.TypeFor[label](), reflect.TypeFor[embedsPlain](), reflect.TypeFor[ambiguousNames](), reflect.TypeFor[[]byte](),
	reflect.TypeFor[[2]byte](), reflect.TypeFor[any](), reflect.TypeFor[json.Number](), reflect.TypeFor[json.RawMessage](),
	reflect.TypeFor[uintptr](), reflect.TypeFor[time.Time](), reflect.TypeFor[valueJSON](), reflect.TypeFor[ptrJSON](),
	reflect.TypeFor[valueText](), reflect.TypeFor[ptrText](), reflect.TypeFor[fmt.Stringer](), reflect.TypeFor[complex64](),
}

// Kinds of types encType builds besides the leaves.
const (
	encPointer = iota
	encSlice
	encArray
	encStringMap
	encIntMap
	encUintMap
	encTextKeyMap
	encStruct
	encEmbedding
	encKinds
)

// encType builds a type from spec's bytes (see encLeaves, fuzzTags,
// encKinds), as fuzzType does for loads.
func encType(spec *[]byte, depth int) reflect.Type {
	k := nextByte(spec) % (len(encLeaves) + encKinds)
	if k < len(encLeaves) || depth > 3 {
		return encLeaves[k%len(encLeaves)]
	}
	switch k - len(encLeaves) {
	case encPointer:
		return reflect.PointerTo(encType(spec, depth+1))
	case encSlice:
		return reflect.SliceOf(encType(spec, depth+1))
	case encArray:
		return reflect.ArrayOf(2, encType(spec, depth+1))
	case encStringMap:
		return reflect.MapOf(reflect.TypeFor[string](), encType(spec, depth+1))
	case encIntMap:
		return reflect.MapOf(reflect.TypeFor[int8](), encType(spec, depth+1))
	case encUintMap:
		return reflect.MapOf(reflect.TypeFor[uint](), encType(spec, depth+1))
	case encTextKeyMap:
		return reflect.MapOf(reflect.TypeFor[textKey](), encType(spec, depth+1))
	}
	return encStructOf(spec, depth, k-len(encLeaves) == encEmbedding)
}

// nextByte takes spec's first byte, or 0 once it is empty.
func nextByte(spec *[]byte) int {
	if len(*spec) == 0 {
		return 0
	}
	c := (*spec)[0]
	*spec = (*spec)[1:]
	return int(c)
}

// encStructOf builds a struct type from spec's bytes, as buildStruct does,
// of fields of encType's types.
func encStructOf(spec *[]byte, depth int, embeds bool) reflect.Type {
	fields := make([]reflect.StructField, 0, 4)
	for i := range nextByte(spec) % 5 {
		kind := fieldPlain
		if embeds {
			kind = nextByte(spec) % fieldKinds
		}
		tag := reflect.StructTag(fuzzTags[nextByte(spec)%len(fuzzTags)])
		f := reflect.StructField{Name: fmt.Sprintf("F%d", i), Tag: tag}
		switch kind {
		case fieldPlain:
			f.Type = encType(spec, depth+1)
		case fieldUnexported:
			f.Name, f.PkgPath = fmt.Sprintf("f%d", i), "github.com/gocheckpoint/checkpoint"
			f.Type = encType(spec, depth+1)
		case fieldEmbedBuilt, fieldEmbedBuiltP:
			f.Name, f.Anonymous = fmt.Sprintf("E%d", i), true
			if depth > 3 {
				f.Type = reflect.TypeFor[EmbedF0]()
				f.Name = f.Type.Name()
			} else {
				f.Type = encStructOf(spec, depth+1, true)
			}
			if kind == fieldEmbedBuiltP {
				f.Type = reflect.PointerTo(f.Type)
			}
		case fieldEmbedNamed, fieldEmbedNamedP:
			f.Type = fuzzEmbeds[nextByte(spec)%len(fuzzEmbeds)]
			f.Name, f.Anonymous = f.Type.Name(), true
			if kind == fieldEmbedNamedP {
				f.Type = reflect.PointerTo(f.Type)
			}
		}
		if slices.ContainsFunc(fields, func(g reflect.StructField) bool { return g.Name == f.Name }) {
			continue
		}
		fields = append(fields, f)
	}
	return reflect.StructOf(fields)
}

// Values fill draws from: the strings, floats and integers where encoders
// are known to differ.
var (
	encStrings = []string{
		"", "a", "agent-00001", "<script>&amp;</script>", "\u2028\u2029", "\xff", "a\xc3", "\xed\xa0\x80",
		"\ufffd", "\uffff", "\U00010000", "\x00\x1f\x7f", "quote\"back\\slash", "tab\tnl\n", "é", "\u212a",
		"1e21", "-0", "null", "NAME", "name", "F0",
	}
	encFloats = []float64{
		0, math.Copysign(0, -1), 1, -1, 0.1, 1e21, 1e20, 1e-7, 1e-6, 123456789e-30, math.MaxFloat64,
		math.SmallestNonzeroFloat64, math.MaxFloat32, 1.0000001, 3.4e38, 9007199254740993, math.NaN(), math.Inf(1),
	}
	encInts  = []int64{0, 1, -1, 7, 127, -128, 255, math.MaxInt32, math.MinInt64, math.MaxInt64, 1<<53 + 1, -(1<<53 + 1)}
	encUints = []uint64{0, 1, 255, 65535, 1<<53 + 1, math.MaxUint64}
	// encDynamic are values an interface field holds.
	encDynamic = []any{
		nil, 1, 1.5, "<&>", []any{1, "x"}, map[string]any{"b": 1, "a": nil}, valueJSON(3), &ptrJSON{N: 4},
		ptrJSON{N: 5}, valueText("t"), &ptrText{S: "p"}, json.Number("12.50"), json.RawMessage(` {"r" : 1} `),
		[]byte("bytes"), map[textKey]int{"z": 1, "a": 2}, (*ptrJSON)(nil), math.Copysign(0, -1),
	}
)

// fill sets v, of a type encType builds, from src's bytes.
func fill(v reflect.Value, src *[]byte, depth int) {
	b := nextByte(src)
	if !v.CanSet() {
		return
	}
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(b&1 == 1)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n := encInts[b%len(encInts)]
		if v.OverflowInt(n) {
			n = int64(b) - 128
		}
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n := encUints[b%len(encUints)]
		if v.OverflowUint(n) {
			n = uint64(b)
		}
		v.SetUint(n)
	case reflect.Float32, reflect.Float64:
		f := encFloats[b%len(encFloats)]
		if v.Kind() == reflect.Float32 && !math.IsInf(f, 0) && math.Abs(f) > math.MaxFloat32 {
			f = float64(float32(1e-7))
		}
		v.SetFloat(f)
	case reflect.Complex64:
		v.SetComplex(complex(float64(b), 1))
	case reflect.String:
		v.SetString(encStrings[b%len(encStrings)])
	case reflect.Interface:
		if d := encDynamic[b%len(encDynamic)]; d != nil && reflect.TypeOf(d).Implements(v.Type()) {
			v.Set(reflect.ValueOf(d))
		}
	case reflect.Pointer:
		if b%4 != 0 && depth < 8 {
			p := reflect.New(v.Type().Elem())
			fill(p.Elem(), src, depth+1)
			v.Set(p)
		}
	case reflect.Slice:
		if b%5 == 0 || depth >= 8 {
			return // nil
		}
		n := int(b % 4)
		if b%16 == 15 {
			n = splitMin + 1 // a slice the parallel encoder cuts into runs
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range s.Len() {
			fill(s.Index(i), src, depth+1)
		}
		v.Set(s)
	case reflect.Array:
		for i := range v.Len() {
			fill(v.Index(i), src, depth+1)
		}
	case reflect.Map:
		if b%5 == 0 || depth >= 8 {
			return // nil
		}
		m := reflect.MakeMap(v.Type())
		for range b % 4 {
			k := reflect.New(v.Type().Key()).Elem()
			e := reflect.New(v.Type().Elem()).Elem()
			fill(k, src, depth+1)
			fill(e, src, depth+1)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Field(i)
			if v.Type().Field(i).Anonymous && f.Kind() == reflect.Pointer && !f.CanSet() {
				continue // a pointer to an unexported struct: left nil
			}
			fill(f, src, depth+1)
		}
	}
}

// encSeeds are specs and values for the targets' seeds.
func encSeeds() [][2][]byte {
	leafOf := func(t reflect.Type) byte { return byte(slices.Index(encLeaves, t)) }
	kind := func(k int) byte { return byte(len(encLeaves) + k) }
	return [][2][]byte{
		{{leafOf(reflect.TypeFor[string]())}, {3}},
		{{leafOf(reflect.TypeFor[float64]())}, {1}},
		{{leafOf(reflect.TypeFor[float64]())}, {16}}, // NaN
		{{kind(encStruct), 3, 0, leafOf(reflect.TypeFor[string]()), 3, leafOf(reflect.TypeFor[int]()), 5, leafOf(reflect.TypeFor[float32]())}, {1, 3, 9, 5}},
		{{kind(encStringMap), leafOf(reflect.TypeFor[float64]())}, {3, 4, 5, 6, 7, 8, 9}},
		{{kind(encIntMap), leafOf(reflect.TypeFor[valueJSON]())}, {3, 1, 1, 2, 2}},
		{{kind(encTextKeyMap), leafOf(reflect.TypeFor[any]())}, {3, 1, 6, 2, 7}},
		{{kind(encSlice), leafOf(reflect.TypeFor[ptrJSON]())}, {3, 1, 2, 3}},
		{{kind(encEmbedding), 3, fieldEmbedNamed, 0, 1, fieldPlain, 5, leafOf(reflect.TypeFor[int]()), fieldEmbedBuilt, 1, 1, fieldPlain, 2, leafOf(reflect.TypeFor[string]())}, {1, 2, 3, 4, 5, 6}},
		{{kind(encStruct), 2, 5, leafOf(reflect.TypeFor[string]()), 5, leafOf(reflect.TypeFor[uint64]())}, {2, 5}},
	}
}

// FuzzEncodeStateIsEncodingJSON proves that EncodeState writes exactly the
// bytes json.Marshal writes and fails where it fails, with its error
// marked ErrInvalid, over types built from the fuzzer's bytes (tags,
// embedded structs, maps of string, integer and TextMarshaler keys,
// marshal methods on value and pointer receivers, interfaces, []byte,
// json.Number, json.RawMessage) and values of the strings, floats and
// integers where encoders differ (HTML characters, U+2028, invalid UTF-8,
// -0, 1e21, 1e-7, integers past 2^53, NaN).
func FuzzEncodeStateIsEncodingJSON(f *testing.F) {
	for _, s := range encSeeds() {
		f.Add(s[0], s[1])
	}
	c := NewCodec(CompressNone, 1<<20)
	f.Fuzz(func(t *testing.T, spec, values []byte) {
		typ := encType(&spec, 0)
		v := reflect.New(typ)
		fill(v.Elem(), &values, 0)
		// The value, a pointer to it, and containers the parallel
		// encoder always cuts: a slice of more than splitMin of it, and
		// a map of it under keys that sort and escape.
		many := reflect.MakeSlice(reflect.SliceOf(typ), splitMin+1, splitMin+1)
		keyed := reflect.MakeMap(reflect.MapOf(reflect.TypeFor[string](), typ))
		for i := range many.Len() {
			many.Index(i).Set(v.Elem())
		}
		for _, k := range []string{"b", "<a>", "\xff", "a"} {
			keyed.SetMapIndex(reflect.ValueOf(k), v.Elem())
		}
		for _, state := range []any{v.Elem().Interface(), v.Interface(), many.Interface(), keyed.Interface()} {
			want, werr := json.Marshal(state)
			// As if the last state was large: a state of a type that
			// runs none of the host's code is cut into parts as small
			// as they come, and encoded on every core.
			c.lastState.Store(MaxPooled)
			got, err := c.EncodeState(state)
			if werr != nil {
				if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), werr.Error()) {
					t.Fatalf("%v %#v: EncodeState says %v, json.Marshal %v", typ, state, err, werr)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%v %#v: EncodeState failed (%v), json.Marshal wrote %s", typ, state, err, want)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Fatalf("%v %#v: EncodeState wrote\n%q\njson.Marshal\n%q", typ, state, got.Bytes(), want)
			}
			c.PutBuffer(got)
		}
	})
}
