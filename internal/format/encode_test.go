package format

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// A faster encoder for a Save's state must write the bytes json.Marshal
// writes (they are what the checksum covers) and fail where it fails. The
// candidate measured so far, github.com/go-json-experiment/json with
// encoding/json's options, is not faster on the benchmark's states
// (BenchmarkEncodeState), so EncodeState still uses encoding/json. These
// targets are what a faster path must pass: FuzzEncodeStateIsEncodingJSON
// compares EncodeState with json.Marshal over generated types and values;
// FuzzAlikeTypesEncodeAsEncodingJSON proves the candidate on the types
// encodesAlike admits.

// encodeOptions are the candidate's options: encoding/json's (HTML
// characters, U+2028 and U+2029 escaped, invalid UTF-8 replaced, map keys
// sorted, nil slices and maps as null).
var encodeOptions = jsonv1.DefaultOptionsV1()

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
	jsonv2To      = reflect.TypeFor[jsonv2.MarshalerTo]()
)

// encodesAlike reports whether the candidate writes every value of t that
// it encodes as the same bytes as json.Marshal, which is what
// FuzzAlikeTypesEncodeAsEncodingJSON proves. Alike are booleans, integers
// (not uintptr), floats, strings, and pointers, slices, arrays, maps with
// string or integer keys, and structs of such types, where no type (nor a
// pointer to it) has a MarshalJSON, MarshalText or MarshalJSONTo method:
// those run the host's code, whose output encoding/json reformats, and
// which it calls by rules of its own (a pointer receiver's only on an
// addressable value). A field's tag may give a name of the characters
// encoding/json accepts and the options omitempty, omitzero and string
// (not on a string, which json.Marshal quotes twice);
// an embedded field must be a struct, without a tag. Not alike:
// interfaces (their dynamic types are not known from t), json.Number and
// json.RawMessage (the candidate has types of its own for them), uintptr,
// an unexported field with a tag, an embedded pointer, and what
// encoding/json refuses (channels, functions, complex numbers). seen
// holds the types being judged: a type that refers to itself is judged by
// its other parts.
func encodesAlike(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return true
	}
	seen[t] = true
	if t == jsonNumber || t == jsonRawMessage {
		return false
	}
	for _, m := range [...]reflect.Type{jsonMarshaler, textMarshaler, jsonv2To} {
		if t.Implements(m) || reflect.PointerTo(t).Implements(m) {
			return false
		}
	}
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64, reflect.String:
		return true
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return encodesAlike(t.Elem(), seen)
	case reflect.Map:
		switch t.Key().Kind() {
		case reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			return encodesAlike(t.Key(), seen) && encodesAlike(t.Elem(), seen)
		}
		return false
	case reflect.Struct:
		for i := range t.NumField() {
			if !alikeField(t.Field(i), seen) {
				return false
			}
		}
		return true
	}
	return false
}

// alikeField reports whether the struct field f encodes alike (see
// encodesAlike).
func alikeField(f reflect.StructField, seen map[reflect.Type]bool) bool {
	tag, tagged := f.Tag.Lookup("json")
	switch {
	case tag == "-":
		return true // ignored by both
	case f.Anonymous:
		return !tagged && f.Type.Kind() == reflect.Struct && encodesAlike(f.Type, seen)
	case !f.IsExported():
		return !tagged // ignored by both; the candidate refuses a tag there
	}
	name, opts, _ := strings.Cut(tag, ",")
	if name != "" && !validTagName(name) {
		return false
	}
	if opts != "" {
		for o := range strings.SplitSeq(opts, ",") {
			switch {
			case o == "string" && quotesString(f.Type):
				// json.Marshal writes invalid UTF-8 in the quoted
				// string as an escape of an escape: it decodes to
				// another value than the candidate's U+FFFD would.
				return false
			case o != "omitempty" && o != "omitzero" && o != "string":
				return false
			}
		}
	}
	return encodesAlike(f.Type, seen)
}

// quotesString reports whether a field of type t with the option
// ",string" holds a string that encoding/json quotes again.
func quotesString(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer && t.Name() == "" {
		t = t.Elem()
	}
	return t.Kind() == reflect.String
}

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
		s := reflect.MakeSlice(v.Type(), b%4, b%4)
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
		for _, state := range []any{v.Elem().Interface(), v.Interface()} {
			want, werr := json.Marshal(state)
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

// FuzzAlikeTypesEncodeAsEncodingJSON proves the candidate on the types
// encodesAlike admits: where json.Marshal fails, it fails (where it fails
// and json.Marshal does not, a save would fall back to json.Marshal), and
// where it encodes a value, its bytes are json.Marshal's, except in one
// way no type can be kept from: a string of invalid UTF-8, which
// json.Marshal writes with the escape \ufffd and the candidate with the
// character U+FFFD itself. There encoding/json decodes both to the same
// value. The types and values are FuzzEncodeStateIsEncodingJSON's.
func FuzzAlikeTypesEncodeAsEncodingJSON(f *testing.F) {
	for _, s := range encSeeds() {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, spec, values []byte) {
		typ := encType(&spec, 0)
		if !encodesAlike(typ, make(map[reflect.Type]bool)) {
			return
		}
		v := reflect.New(typ)
		fill(v.Elem(), &values, 0)
		for _, state := range []any{v.Elem().Interface(), v.Interface()} {
			want, werr := json.Marshal(state)
			var got bytes.Buffer
			err := jsonv2.MarshalWrite(&got, state, encodeOptions)
			switch {
			case werr != nil && err == nil:
				t.Fatalf("%v %#v: the candidate wrote %s, json.Marshal failed: %v", typ, state, got.Bytes(), werr)
			case werr == nil && err == nil && !bytes.Equal(got.Bytes(), want):
				// The one difference: json.Marshal writes invalid UTF-8
				// as the escape \ufffd, the candidate as the character.
				// encoding/json decodes both to the same value.
				if !bytes.Contains(want, []byte(`\ufffd`)) {
					t.Fatalf("%v %#v: the candidate wrote\n%q\njson.Marshal\n%q", typ, state, got.Bytes(), want)
				}
				for _, dst := range []func() any{func() any { return new(any) }, func() any { return reflect.New(typ).Interface() }} {
					a, b := dst(), dst()
					aerr, berr := json.Unmarshal(got.Bytes(), a), json.Unmarshal(want, b)
					if (aerr == nil) != (berr == nil) || !reflect.DeepEqual(a, b) {
						t.Fatalf("%v: encoding/json decodes the candidate's\n%q\nto %#v (%v), json.Marshal's\n%q\nto %#v (%v)", typ, got.Bytes(), a, aerr, want, b, berr)
					}
				}
			}
		}
	})
}

// TestEncodesAlikeRefusesWhatItCannotProve checks the candidate's gate on
// the types it must refuse: marshal methods on either receiver, also deep
// inside, interfaces, json.Number and json.RawMessage, TextMarshaler map
// keys, embedded pointers, a string quoted by ",string", and tag options
// it does not know.
func TestEncodesAlikeRefusesWhatItCannotProve(t *testing.T) {
	for _, tc := range []struct {
		typ   reflect.Type
		alike bool
	}{
		{reflect.TypeFor[struct {
			A int              `json:"a,omitempty"`
			B *int64           `json:",string"`
			C map[int8]float64 `json:"-"`
			D map[string]*[2]uint
			e chan int
		}](), true},
		{reflect.TypeFor[valueJSON](), false},
		{reflect.TypeFor[ptrJSON](), false},
		{reflect.TypeFor[[]struct{ X *ptrText }](), false},
		{reflect.TypeFor[map[string]valueText](), false},
		{reflect.TypeFor[map[textKey]int](), false},
		{reflect.TypeFor[time.Time](), false},
		{reflect.TypeFor[[]any](), false},
		{reflect.TypeFor[json.Number](), false},
		{reflect.TypeFor[map[string]json.RawMessage](), false},
		{reflect.TypeFor[EmbedsLowerPointer](), false},
		{reflect.TypeFor[struct {
			X int `json:",inline"`
		}](), false},
		{reflect.StructOf([]reflect.StructField{{Name: "S", Type: reflect.TypeFor[string](), Tag: `json:",string"`}}), false},
		{reflect.TypeFor[uintptr](), false},
		{reflect.TypeFor[complex128](), false},
	} {
		if got := encodesAlike(tc.typ, make(map[reflect.Type]bool)); got != tc.alike {
			t.Errorf("encodesAlike(%v) = %v, want %v", tc.typ, got, tc.alike)
		}
	}
}
