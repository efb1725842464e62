package format

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// loaded is what one load of a file's bytes ended with.
type loaded[T any] struct {
	v      T
	h      Header
	err    error
	reread bool // the streamed load read the file again the buffered way
}

// stepIs is a load's header check: the file must hold step.
func stepIs(step int64) func(Header) error {
	return func(h Header) error {
		if h.Step != step {
			return fmt.Errorf("%w: the file holds step %d", errNotFound, h.Step)
		}
		return nil
	}
}

// loadBuffered loads data the buffered way: read whole, verified, then
// decoded by encoding/json.
func loadBuffered[T any](data []byte, sc *Schema, limit int64, check func(Header) error) loaded[T] {
	var out loaded[T]
	out.err = NewCodec(CompressNone, limit).Read(bytes.NewReader(data), int64(len(data)), func(h Header, state []byte) error {
		out.h = h
		if err := check(h); err != nil {
			return err
		}
		if IsPayload(h.Format) {
			return errNotState // no state to decode, and no damage
		}
		return sc.Decode(h.Schema, state, &out.v)
	})
	return out
}

// loadStreamed loads data as a store does now.
func loadStreamed[T any](c *Codec, data []byte, sc *Schema, check func(Header) error) loaded[T] {
	var out loaded[T]
	reopen := func() (io.ReadCloser, int64, error) {
		out.reread = true
		return io.NopCloser(bytes.NewReader(data)), int64(len(data)), nil
	}
	out.h, out.err = c.LoadState(bytes.NewReader(data), int64(len(data)), sc, check, &out.v, reopen)
	return out
}

// sameOutcome fails t unless the streamed load ended as the buffered one:
// the same state and header, or errors of the same kinds (the messages may
// differ), the same proof of damage or its absence among them.
func sameOutcome[T any](t *testing.T, name string, buffered, streamed loaded[T]) {
	t.Helper()
	if (buffered.err == nil) != (streamed.err == nil) {
		t.Fatalf("%s: buffered load says %v, streamed load %v", name, buffered.err, streamed.err)
	}
	if buffered.err == nil {
		if !reflect.DeepEqual(buffered.v, streamed.v) {
			t.Fatalf("%s: buffered load decoded %+v, streamed load %+v", name, buffered.v, streamed.v)
		}
		if !reflect.DeepEqual(buffered.h, streamed.h) {
			t.Fatalf("%s: buffered load read the header %+v, streamed load %+v", name, buffered.h, streamed.h)
		}
		return
	}
	for _, sentinel := range []error{ErrCorrupt, errNotFound, ErrNewerSchema, ErrMigration, ErrFormat, ErrTooLarge, ErrUnsupported} {
		if errors.Is(buffered.err, sentinel) != errors.Is(streamed.err, sentinel) {
			t.Fatalf("%s: errors.Is(%v): buffered load says %v, streamed load %v", name, sentinel, buffered.err, streamed.err)
		}
	}
	if IsDamage(buffered.err) != IsDamage(streamed.err) {
		t.Fatalf("%s: proof of damage: buffered load says %v (%v), streamed load %v (%v)", name, IsDamage(buffered.err), buffered.err, IsDamage(streamed.err), streamed.err)
	}
	if !reflect.ValueOf(streamed.v).IsZero() {
		t.Fatalf("%s: a failed streamed load left a state: %+v", name, streamed.v)
	}
}

// withTrailerV2 completes an envelope body (everything before the
// checksum) with format 2's correct checksum.
func withTrailerV2(body string) []byte {
	sum := TrailerV2.Sum()
	sum.Write([]byte(body))
	return AppendTrailer([]byte(body), TrailerV2, sum)
}

// streamCorpus is the corrupt-file corpus (corrupt_test.go) for format 2,
// which loads stream: every truncation and flipped bit of a plain, a gzip
// and a zstd file, and checksummed envelopes whose every byte after the
// format is wrong in another way.
func streamCorpus(t *testing.T) map[string][]byte {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	state, err := encodeState(corpusStateAt(2))
	require.NoError(t, err)
	h := Header{Format: 2, Step: 2, Kind: KindStep, Time: now}
	cases := map[string][]byte{}
	for _, comp := range Compressions {
		good := encodeBytes(h, state, comp)
		cases["good "+comp.String()] = good
		for i := range good {
			cases[fmt.Sprintf("%s truncated at %d", comp, i)] = good[:i]
			for _, bit := range []byte{0x01, 0x80} {
				b := bytes.Clone(good)
				b[i] ^= bit
				cases[fmt.Sprintf("%s bit %#x flipped at %d", comp, bit, i)] = b
			}
		}
	}
	head := `{"format":2,"step":2,"kind":"step","time":"2026-11-21T10:00:00Z"`
	body := head + `,"state":` + string(state)
	for _, tc := range []struct{ name, body string }{
		{"good", body},
		{"step is a string", strings.Replace(body, `"step":2`, `"step":"2"`, 1)},
		{"step disagrees with the name", strings.Replace(body, `"step":2`, `"step":3`, 1)},
		{"negative step", strings.Replace(body, `"step":2`, `"step":-2`, 1)},
		{"unknown kind", strings.Replace(body, `"kind":"step"`, `"kind":"weekly"`, 1)},
		{"time is not a time", strings.Replace(body, `"2026-11-21T10:00:00Z"`, `"yesterday"`, 1)},
		{"no time", strings.Replace(body, `,"time":"2026-11-21T10:00:00Z"`, ``, 1)},
		{"meta is a list", strings.Replace(body, `,"state":`, `,"meta":[1,2],"state":`, 1)},
		{"meta and an unknown field", strings.Replace(body, `,"state":`, `,"meta":{"a":"b"},"x":[{"state":1}],"state":`, 1)},
		{"error record on a step checkpoint", strings.Replace(body, `,"state":`, `,"error":{"message":"x"},"state":`, 1)},
		{"format 3 after format 2", strings.Replace(body, `"format":2,`, `"format":2,"format":3,`, 1)},
		{"format 1 after format 2", strings.Replace(body, `"format":2,`, `"format":2,"format":1,`, 1)},
		{"schema 1", strings.Replace(body, `,"state":`, `,"schema":1,"state":`, 1)},
		{"key STATE", strings.Replace(body, `"state"`, `"STATE"`, 1)},
		{"key escaped state", strings.Replace(body, `"state"`, `"\u0073tate"`, 1)},
		{"key state twice", strings.Replace(body, `,"state":`, `,"state":1,"state":`, 1)},
		{"spaces around the state", head + `, "state" : ` + string(state) + " \n\t"},
		{"state is null", head + `,"state":null`},
		{"state is null and more", head + `,"state":null,"x":1`},
		{"state is empty", head + `,"state":`},
		{"state is spaces", head + `,"state":  `},
		{"no colon", head + `,"state"`},
		{"state is a string", head + `,"state":"turn 2"`},
		{"state field of the wrong type", head + `,"state":{"turn":"two","agents":{},"log":[]}`},
		{"state agents of the wrong type", head + `,"state":{"turn":2,"agents":[1],"log":[]}`},
		{"state with a field after it", body + `,"x":1`},
		{"state with a value after it", body + ` 7`},
		{"state not closed", head + `,"state":{"turn":2`},
		{"state in upper case", head + `,"state":{"TURN":2,"Agents":{"a":"b"}}`},
		{"no state", head},
		{"two objects", body + `}{"x":1`},
		{"invalid UTF-8 in meta", strings.Replace(body, `,"state":`, ",\"meta\":{\"a\":\"\xff\xfe\"},\"state\":", 1)},
	} {
		cases["checksummed, "+tc.name] = withTrailerV2(tc.body)
		cases["format 1's checksum, "+tc.name] = withTrailer(tc.body)
	}
	cases["over the read limit"] = withTrailerV2(head + `,"state":{"turn":2,"log":["` + strings.Repeat("x", corpusMaxRead) + `"]}`)
	cases["gzip bomb"] = gzipped(t, append(withTrailerV2(head+`,"state":"`), bytes.Repeat([]byte("A"), corpusMaxRead*4)...))
	cases["gzip of a state over the read limit"] = gzipped(t, withTrailerV2(head+`,"state":{"turn":2,"log":["`+strings.Repeat("x", corpusMaxRead)+`"]}`))
	cases["empty"] = []byte{}
	cases["the prefix only"] = []byte(StreamPrefix)
	return cases
}

func TestStreamedLoadEndsAsTheBufferedLoadOnEveryDamage(t *testing.T) {
	t.Parallel()
	sc := &Schema{Version: 0}
	c := NewCodec(CompressNone, corpusMaxRead)
	streamedGood := 0
	for name, data := range streamCorpus(t) {
		buffered := loadBuffered[corpusState](data, sc, corpusMaxRead, stepIs(2))
		streamed := loadStreamed[corpusState](c, data, sc, stepIs(2))
		sameOutcome(t, name, buffered, streamed)
		if streamed.err == nil && !streamed.reread {
			streamedGood++
		}
		if strings.HasPrefix(name, "good") {
			require.NoError(t, streamed.err, name)
			require.False(t, streamed.reread, "%s: a good file was read twice", name)
		}
	}
	require.True(t, c.Streaming(), "a damaged file turned streaming off")
	require.GreaterOrEqual(t, streamedGood, 4)
}

func TestStreamedLoadOfAnotherStepOrANewerSchemaNeedsNoSecondRead(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	state, err := encodeState(corpusStateAt(2))
	require.NoError(t, err)
	c := NewCodec(CompressNone, defaultMaxRead)
	for name, tc := range map[string]struct {
		h     Header
		sc    Schema
		check func(Header) error
		want  error
	}{
		"another step":  {Header{Format: 2, Step: 3, Kind: KindStep, Time: now}, Schema{}, stepIs(2), errNotFound},
		"newer schema":  {Header{Format: 2, Step: 2, Kind: KindStep, Time: now, Schema: 4}, Schema{Version: 3}, stepIs(2), ErrNewerSchema},
		"no migration":  {Header{Format: 2, Step: 2, Kind: KindStep, Time: now, Schema: 1}, Schema{Version: 3}, stepIs(2), ErrMigration},
		"strict":        {Header{Format: 2, Step: 2, Kind: KindStep, Time: now}, Schema{Strict: true}, stepIs(2), nil},
		"the same step": {Header{Format: 2, Step: 2, Kind: KindStep, Time: now}, Schema{}, stepIs(2), nil},
	} {
		data := encodeBytes(tc.h, state, CompressZstd)
		streamed := loadStreamed[corpusState](c, data, &tc.sc, tc.check)
		sameOutcome(t, name, loadBuffered[corpusState](data, &tc.sc, defaultMaxRead, tc.check), streamed)
		require.False(t, streamed.reread, name)
		if tc.want == nil {
			require.NoError(t, streamed.err, name)
			require.Equal(t, corpusStateAt(2), streamed.v, name)
		} else {
			require.ErrorIs(t, streamed.err, tc.want, name)
		}
	}
}

// The state types below hold what encoding/json gives a meaning to, and
// the streamed decoder must give the same: names in another case, methods
// on values, map keys and pointers, numbers into interfaces, raw messages.

type upper string

func (u *upper) UnmarshalText(b []byte) error {
	if bytes.ContainsRune(b, '!') {
		return errors.New("no shouting")
	}
	*u = upper(strings.ToUpper(string(b)))
	return nil
}

type point struct{ X, Y int }

func (p *point) UnmarshalJSON(b []byte) error {
	var xy [2]int
	if err := json.Unmarshal(b, &xy); err != nil {
		return err
	}
	*p = point{xy[0], xy[1]}
	return nil
}

type innerPart struct {
	Depth int `json:"depth"`
	Note  string
}

type meaningState struct {
	innerPart
	Name   string            `json:"name"`
	Where  point             `json:"where"`
	Path   []point           `json:"path"`
	Tags   map[upper]upper   `json:"tags"`
	Any    any               `json:"any"`
	Raw    json.RawMessage   `json:"raw"`
	Quoted int64             `json:"quoted,string"`
	Bytes  []byte            `json:"bytes"`
	When   time.Time         `json:"when"`
	Ptr    *int              `json:"ptr"`
	Skip   string            `json:"-"`
	Fixed  [2]int            `json:"fixed"`
	Nested map[string][]bool `json:"nested"`
	//lint:ignore U1000 a "private" key must not reach it
	private int
}

func TestStreamedLoadDecodesAsEncodingJSON(t *testing.T) {
	t.Parallel()
	c := NewCodec(CompressNone, defaultMaxRead)
	for name, state := range map[string]string{
		"exact names":         `{"depth":3,"Note":"n","name":"a","where":[1,2],"path":[[1,2],[3,4]],"tags":{"k":"v"},"any":{"a":[1,"x",true,null]},"raw":{"z": 1},"quoted":"42","bytes":"aGk=","when":"2026-11-21T10:00:00.5Z","ptr":7,"Skip":"no","fixed":[1,2,3],"nested":{"a":[true]},"private":1}`,
		"names in other case": `{"DEPTH":3,"note":"n","NAME":"a","Where":[1,2],"TAGS":{"k":"v"},"ANY":1.5e3,"Ptr":null}`,
		"duplicate names":     `{"name":"a","name":"b","NAME":"c","tags":{"k":"v","k":"w"}}`,
		"nulls":               `{"name":null,"where":null,"path":null,"tags":null,"any":null,"raw":null,"ptr":null,"fixed":null}`,
		"short array":         `{"fixed":[9]}`,
		"invalid UTF-8":       "{\"name\":\"a\xffb\",\"tags\":{\"\xfe\":\"x\"}}",
		"escapes":             `{"name":"\u00e9\ud83d\ude00\n\"","tags":{"\u006b":"v"}}`,
		"a method's error":    `{"tags":{"k":"v!"}}`,
		"wrong type":          `{"name":5}`,
		"wrong type deep":     `{"nested":{"a":[1]}}`,
		"a bad quoted number": `{"quoted":"4x"}`,
		"a bad time":          `{"when":"yesterday"}`,
		"an array":            `[1,2]`,
		"a number":            `12`,
		"big number into int": `{"depth":1e400}`,
	} {
		data := withTrailerV2(`{"format":2,"step":1,"kind":"step","time":"2026-11-21T10:00:00Z","state":` + state)
		buffered := loadBuffered[meaningState](data, &Schema{}, defaultMaxRead, stepIs(1))
		streamed := loadStreamed[meaningState](c, data, &Schema{}, stepIs(1))
		sameOutcome(t, name, buffered, streamed)
		if streamed.err == nil {
			require.False(t, streamed.reread, "%s: streamed load needed the buffered one", name)
		}
		// The same inputs into a plain type, which streams.
		plain := NewCodec(CompressNone, defaultMaxRead)
		streamedPlain := loadStreamed[plainState](plain, data, &Schema{}, stepIs(1))
		sameOutcome(t, name, loadBuffered[plainState](data, &Schema{}, defaultMaxRead, stepIs(1)), streamedPlain)
		if streamedPlain.err == nil {
			require.False(t, streamedPlain.reread, "%s: streamed load of a plain type needed the buffered one", name)
		}
	}
	require.True(t, c.Streaming())
	require.False(t, c.Streams(reflect.TypeFor[meaningState]()), "a type with methods of its own streams")
	require.True(t, c.Streams(reflect.TypeFor[plainState]()))
}

// tolerated is a plain type with two fields whose names differ only in
// case.
type tolerated struct {
	Lower string `json:"name"`
	Upper string `json:"NAME"`
}

// An input of a plain type that the streamed decoder refuses and
// encoding/json decodes (a name that matches two fields in other cases:
// encoding/json takes the first) loads as encoding/json decodes it, by a
// second read, and the codec then reads the buffered way. (Types that are
// not plain never stream: the store's tests prove it.)
func TestInputOnlyEncodingJSONAcceptsLoadsByASecondReadAndEndsStreaming(t *testing.T) {
	t.Parallel()
	c := NewCodec(CompressNone, defaultMaxRead)
	data := withTrailerV2(`{"format":2,"step":1,"kind":"step","time":"2026-11-21T10:00:00Z","state":{"Name":"x"}`)
	streamed := loadStreamed[tolerated](c, data, &Schema{}, stepIs(1))
	require.NoError(t, streamed.err)
	require.Equal(t, tolerated{Lower: "x"}, streamed.v)
	require.True(t, streamed.reread)
	require.False(t, c.Streaming(), "the store kept streaming a type its decoder refuses")
	streamed = loadStreamed[tolerated](c, data, &Schema{}, stepIs(1))
	require.NoError(t, streamed.err)
	require.Equal(t, tolerated{Lower: "x"}, streamed.v)
	require.False(t, streamed.reread)
}

// plainState is a state type that streams (see PlainType), with the
// fields of meaningState that are plain.
type plainState struct {
	innerPart
	Name   string            `json:"name"`
	Path   [][2]int          `json:"path,omitempty"`
	Tags   map[label]label   `json:"tags"`
	Any    any               `json:"any"`
	Ptr    *int              `json:"ptr,omitzero"`
	Skip   string            `json:"-"`
	Fixed  [2]int            `json:"fixed"`
	Nested map[string][]bool `json:"nested"`
	Small  *uint8            `json:"small"`
	Float  float32           `json:"float"`
}

// FuzzStreamedLoadAgreesWithBuffered feeds arbitrary bytes, and the same
// bytes behind format 2's prefix and with its correct checksum, to the
// streamed and the buffered load: they must end the same way (see
// sameOutcome).
//
//	go test -run '^$' -fuzz FuzzStreamedLoadAgreesWithBuffered -fuzztime 60s .
func FuzzStreamedLoadAgreesWithBuffered(f *testing.F) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	h := Header{Format: 2, Step: 1, Kind: KindStep, Time: now}
	f.Add(encodeBytes(h, []byte(`{"name":"a","where":[1,2],"tags":{"k":"v"}}`), CompressNone))
	f.Add(encodeBytes(h, []byte(`{"name":"a"}`), CompressGzip))
	f.Add([]byte(`"step":1,"kind":"step","time":"2026-11-21T10:00:00Z","state":{"NAME":"b","any":[1,{"x":null}]}`))
	f.Add([]byte(`"step":1,"kind":"step","time":"2026-11-21T10:00:00Z","meta":{"a":"b"},"state":{"quoted":"7"},"x":1`))
	f.Add(encodeBytes(h, []byte(`null`), CompressNone)) // a nil state
	f.Add([]byte(`"step":1,"kind":"step","time":"2026-11-21T10:00:00Z","state": null `))
	const limit = 1 << 20
	f.Fuzz(func(t *testing.T, data []byte) {
		// A codec per load: one whose decoder refused a stream reads
		// whole files from then on (noStream), and a shared one would
		// compare the buffered load with itself for the rest.
		for _, b := range [][]byte{data, append([]byte(StreamPrefix), data...), withTrailerV2(StreamPrefix + string(data))} {
			buffered := loadBuffered[meaningState](b, &Schema{}, limit, stepIs(1))
			streamed := loadStreamed[meaningState](NewCodec(CompressNone, limit), b, &Schema{}, stepIs(1))
			sameOutcome(t, fmt.Sprintf("%q", b), buffered, streamed)
			// A plain type: this one streams.
			sameOutcome(t, fmt.Sprintf("%q", b), loadBuffered[plainState](b, &Schema{}, limit, stepIs(1)), loadStreamed[plainState](NewCodec(CompressNone, limit), b, &Schema{}, stepIs(1)))
			// A type that can be nil: a null state loads into it.
			sameOutcome(t, fmt.Sprintf("%q", b), loadBuffered[*plainState](b, &Schema{}, limit, stepIs(1)), loadStreamed[*plainState](NewCodec(CompressNone, limit), b, &Schema{}, stepIs(1)))
		}
	})
}

// label is a named string: plain.
type label string

// ambiguousNames has two fields whose names differ only in case.
type ambiguousNames struct {
	Lower string `json:"name"`
	Upper string `json:"NAME"`
}

// embedsPlain embeds a struct, whose fields are promoted.
type embedsPlain struct {
	innerPart
	Name label `json:"name"`
}

// fuzzLeaves are the types FuzzStreamedLoadMeansWhatEncodingJSONMeans
// builds from: plain ones, and ones the gate must refuse.
var fuzzLeaves = []reflect.Type{
	reflect.TypeFor[bool](), reflect.TypeFor[int](), reflect.TypeFor[int8](), reflect.TypeFor[uint8](),
	reflect.TypeFor[uint16](), reflect.TypeFor[int32](), reflect.TypeFor[int64](), reflect.TypeFor[uint](),
	reflect.TypeFor[uint64](), reflect.TypeFor[float32](), reflect.TypeFor[float64](), reflect.TypeFor[string](),
	reflect.TypeFor[any](), reflect.TypeFor[label](), reflect.TypeFor[embedsPlain](), reflect.TypeFor[ambiguousNames](),
	// Not plain.
	reflect.TypeFor[json.Number](), reflect.TypeFor[[]byte](), reflect.TypeFor[time.Time](), reflect.TypeFor[upper](),
	reflect.TypeFor[point](), reflect.TypeFor[map[float64]int](), reflect.TypeFor[[2]byte](), reflect.TypeFor[uintptr](),
	reflect.TypeFor[json.RawMessage](), reflect.TypeFor[map[int]string](), reflect.TypeFor[fmt.Stringer](),
}

// fuzzTags are the struct tags its struct types take: those encoding/json
// and v2 read alike, those they read differently (the options v2 adds,
// quoted names, names v1 refuses), and names that differ in case, in
// their delimiters or by Unicode folding.
var fuzzTags = []string{
	``, `json:"name"`, `json:"NAME"`, `json:"name,omitempty"`, `json:",omitzero"`,
	`json:",string"`, `json:",embed"`, `json:"name,case:strict"`, `json:"name,case:ignore"`, `json:",inline"`,
	`json:",unknown"`, `json:"'x'"`, `json:"-"`, `json:"-,"`, `json:"name,"`,
	`json:"name, omitempty"`, `json:",format:RFC3339"`, `json:"na_me"`, `json:"k"`, "json:\"\u212a\"",
	`json:"s"`, `json:"x,omitempty,string"`, `json:"a b"`, `json:"a\\b"`, `json:"F0"`,
	`json:"f1"`, `json:",case:strict"`, `json:"name,omitempty,omitzero"`, `json:"é"`, `json:"name" yaml:"x"`,
	`json:"Name"`, `json:"na-me"`, `json:"F0,omitempty"`, `json:"x"`,
}

// Kinds of types fuzzType builds besides the leaves.
const (
	fuzzPointer = iota
	fuzzSlice
	fuzzArray
	fuzzStringMap
	fuzzIntMap
	fuzzUintMap
	fuzzStruct
	fuzzEmbedding
	fuzzKinds
)

// Named struct types that fuzzType's structs embed (fuzzEmbedding) beside
// the structs it builds, whose fields are named F<i>: untagged and tagged
// fields of one name at one depth and at different depths, an unexported
// embedded type (which reflect.StructOf cannot embed: its field would be
// unexported, and an embedded field takes no PkgPath), an embedded pointer
// to one, and a named type that is not a struct.
type (
	// EmbedF0 has an untagged F0 and a field tagged name.
	EmbedF0 struct {
		F0 int
		F1 string `json:"name"`
	}
	// EmbedTaggedF0 names a field F0 by its tag, at the depth of
	// EmbedF0's F0.
	EmbedTaggedF0 struct {
		Z    string `json:"F0"`
		Name int    `json:"name"`
	}
	// EmbedDeepF0 names a field F0 by its tag above EmbedF0's untagged F0.
	EmbedDeepF0 struct {
		EmbedF0
		W int `json:"F0"`
	}
	// embedLower is unexported, with exported fields that are promoted.
	embedLower struct {
		F0  int
		Low string `json:"name"`
	}
	// EmbedsLower embeds an unexported struct beside a field tagged F0.
	EmbedsLower struct {
		embedLower
		Y int `json:"F0,omitempty"`
	}
	// EmbedsLowerPointer embeds a pointer to an unexported struct, which
	// encoding/json cannot allocate.
	EmbedsLowerPointer struct {
		*embedLower
		F1 int
	}
	// EmbedText is a named string: embedded, it is a field of its name.
	EmbedText string
)

// fuzzEmbeds are the named types fuzzEmbedding's structs embed.
var fuzzEmbeds = []reflect.Type{
	reflect.TypeFor[EmbedF0](), reflect.TypeFor[EmbedTaggedF0](), reflect.TypeFor[EmbedDeepF0](),
	reflect.TypeFor[EmbedsLower](), reflect.TypeFor[EmbedsLowerPointer](), reflect.TypeFor[EmbedText](),
}

// Kinds of the fields of fuzzEmbedding's structs.
const (
	fieldPlain       = iota // an exported field, F<i>
	fieldUnexported         // an unexported field, f<i>
	fieldEmbedBuilt         // an embedded struct fuzzType builds, E<i>
	fieldEmbedBuiltP        // an embedded pointer to one
	fieldEmbedNamed         // an embedded type of fuzzEmbeds
	fieldEmbedNamedP        // an embedded pointer to one
	fieldKinds
)

// fuzzType builds a type from spec's bytes (see fuzzLeaves, fuzzTags,
// fuzzKinds): a byte picks a leaf or a kind; a struct's next bytes are its
// fields (see buildStruct), with embedded and unexported fields for
// fuzzEmbedding.
func fuzzType(spec *[]byte, depth int) reflect.Type {
	next := func() int {
		if len(*spec) == 0 {
			return 0
		}
		c := (*spec)[0]
		*spec = (*spec)[1:]
		return int(c)
	}
	k := next() % (len(fuzzLeaves) + fuzzKinds)
	if k < len(fuzzLeaves) || depth > 3 {
		return fuzzLeaves[k%len(fuzzLeaves)]
	}
	switch k - len(fuzzLeaves) {
	case fuzzPointer:
		return reflect.PointerTo(fuzzType(spec, depth+1))
	case fuzzSlice:
		return reflect.SliceOf(fuzzType(spec, depth+1))
	case fuzzArray:
		return reflect.ArrayOf(2, fuzzType(spec, depth+1))
	case fuzzStringMap:
		return reflect.MapOf(reflect.TypeFor[string](), fuzzType(spec, depth+1))
	case fuzzIntMap:
		return reflect.MapOf(reflect.TypeFor[int8](), fuzzType(spec, depth+1))
	case fuzzUintMap:
		return reflect.MapOf(reflect.TypeFor[uint](), fuzzType(spec, depth+1))
	}
	return buildStruct(spec, depth, k-len(fuzzLeaves) == fuzzEmbedding)
}

// buildStruct builds a struct type from spec's bytes: its number of fields,
// then for each a byte for its tag and a type; with embeds, a byte for the
// field's kind (fieldKinds) first. The embedded structs buildStruct builds
// are of unnamed types, which Go source cannot write but reflect.StructOf
// can: to both decoders such a field E<i> is an embedded named type E<i>
// of the same fields (they read an embedded field's name and type, never
// the name of its type). Their fields are named F<i> too, so that names
// conflict across depths; the same named type embedded twice is left out
// (Go refuses it).
func buildStruct(spec *[]byte, depth int, embeds bool) reflect.Type {
	next := func() int {
		if len(*spec) == 0 {
			return 0
		}
		c := (*spec)[0]
		*spec = (*spec)[1:]
		return int(c)
	}
	fields := make([]reflect.StructField, 0, 4)
	for i := range next() % 5 {
		kind := fieldPlain
		if embeds {
			kind = next() % fieldKinds
		}
		tag := reflect.StructTag(fuzzTags[next()%len(fuzzTags)])
		f := reflect.StructField{Name: fmt.Sprintf("F%d", i), Tag: tag}
		switch kind {
		case fieldPlain:
			f.Type = fuzzType(spec, depth+1)
		case fieldUnexported:
			f.Name, f.PkgPath = fmt.Sprintf("f%d", i), "github.com/gocheckpoint/checkpoint"
			f.Type = fuzzType(spec, depth+1)
		case fieldEmbedBuilt, fieldEmbedBuiltP:
			f.Name, f.Anonymous = fmt.Sprintf("E%d", i), true
			if depth > 3 {
				f.Type = reflect.TypeFor[EmbedF0]()
				f.Name = f.Type.Name()
			} else {
				f.Type = buildStruct(spec, depth+1, true)
			}
			if kind == fieldEmbedBuiltP {
				f.Type = reflect.PointerTo(f.Type)
			}
		case fieldEmbedNamed, fieldEmbedNamedP:
			f.Type = fuzzEmbeds[next()%len(fuzzEmbeds)]
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

// fuzzSpec returns the spec of a struct of the given fields, each a tag
// index and a type's spec, for seeds.
func fuzzSpec(fields ...[]byte) []byte {
	spec := []byte{byte(len(fuzzLeaves) + fuzzStruct), byte(len(fields))}
	for _, f := range fields {
		spec = append(spec, f...)
	}
	return spec
}

// leaf returns the spec byte of the leaf type t.
func leaf(t reflect.Type) byte { return byte(slices.Index(fuzzLeaves, t)) }

// checkMeaning fails t unless a load of state, inside a checkpoint with a
// correct checksum, as type typ means what encoding/json means: the same
// value, or an error from both. encoding/json decodes the state as the
// buffered read finds it in the file.
func checkMeaning(t *testing.T, typ reflect.Type, state []byte, strict bool) {
	t.Helper()
	data := withTrailerV2(`{"format":2,"step":1,"kind":"step","time":"2026-11-21T10:00:00Z","state":` + string(state))
	sc := &Schema{Strict: strict}
	const limit = 1 << 20
	v := reflect.New(typ)
	reopen := func() (io.ReadCloser, int64, error) {
		return io.NopCloser(bytes.NewReader(data)), int64(len(data)), nil
	}
	_, err := NewCodec(CompressNone, limit).LoadState(bytes.NewReader(data), int64(len(data)), sc, stepIs(1), v.Interface(), reopen)
	got := v.Elem()
	want := reflect.New(typ)
	werr := NewCodec(CompressNone, limit).Read(bytes.NewReader(data), int64(len(data)), func(h Header, state []byte) error {
		// The one documented departure from encoding/json: a null state
		// is a nil state, so it loads as nil into a type that can be nil
		// and is damage into one that cannot (encoding/json would leave
		// the zero value, hiding that the file is not this store's).
		if IsNull(state) {
			if !Nilable(typ) {
				return fmt.Errorf("a null state into a %v", typ)
			}
			return nil
		}
		return Unmarshal(state, want.Interface(), strict)
	})
	if (err == nil) != (werr == nil) {
		t.Fatalf("%v of %s (strict %v): the load says %v, encoding/json says %v", typ, state, strict, err, werr)
	}
	if err == nil && !reflect.DeepEqual(got.Interface(), want.Elem().Interface()) {
		t.Fatalf("%v of %s (strict %v): the load decoded %#v, encoding/json %#v", typ, state, strict, got.Interface(), want.Elem().Interface())
	}
}

// meaningSeeds are inputs on which the two decoders could differ: a
// type's spec, a state, strictness.
func meaningSeeds() []struct {
	spec, state []byte
	strict      bool
} {
	tag := func(s string) byte { return byte(slices.Index(fuzzTags, s)) }
	intLeaf, strLeaf, f64Leaf, anyLeaf := leaf(reflect.TypeFor[int]()), leaf(reflect.TypeFor[string]()), leaf(reflect.TypeFor[float64]()), leaf(reflect.TypeFor[any]())
	embedded := fuzzSpec([]byte{tag(`json:",embed"`), byte(len(fuzzLeaves) + fuzzStruct), 1, tag(``), intLeaf})
	// Structs with embedded fields (see buildStruct): a field is its
	// kind, its tag (one of fuzzTags), then what the kind takes.
	tagOf := func(s string) byte {
		i := slices.Index(fuzzTags, s)
		if i < 0 {
			panic("no fuzz tag " + s)
		}
		return byte(i)
	}
	embedding := func(fields ...[]byte) []byte {
		spec := []byte{byte(len(fuzzLeaves) + fuzzEmbedding), byte(len(fields))}
		for _, f := range fields {
			spec = append(spec, f...)
		}
		return spec
	}
	named := func(kind int, tagged string, t reflect.Type) []byte {
		return []byte{byte(kind), tagOf(tagged), byte(slices.Index(fuzzEmbeds, t))}
	}
	built := func(kind int, tagged string, fields ...[]byte) []byte {
		return append([]byte{byte(kind), tagOf(tagged)}, embedding(fields...)[1:]...)
	}
	field := func(kind int, tagged string, typ byte) []byte { return []byte{byte(kind), tagOf(tagged), typ} }
	embedF0, taggedF0, deepF0 := reflect.TypeFor[EmbedF0](), reflect.TypeFor[EmbedTaggedF0](), reflect.TypeFor[EmbedDeepF0]()
	type seed = struct {
		spec, state []byte
		strict      bool
	}
	return []seed{
		{embedded, []byte(`{"F0":{"F0":1}}`), false},
		{embedded, []byte(`{"F0":1}`), false},
		{fuzzSpec([]byte{tag(`json:"name,case:strict"`), strLeaf}), []byte(`{"NAME":"x"}`), false},
		{fuzzSpec([]byte{tag(`json:",string"`), f64Leaf}), []byte(`{"F0":"NaN"}`), false},
		{fuzzSpec([]byte{tag(`json:",string"`), f64Leaf}), []byte(`{"F0":"Inf"}`), false},
		{fuzzSpec([]byte{tag(`json:",string"`), f64Leaf}), []byte(`{"F0":"+3"}`), false},
		{[]byte{leaf(reflect.TypeFor[map[float64]int]())}, []byte(`{"1.5":1}`), false},
		{[]byte{leaf(reflect.TypeFor[ambiguousNames]())}, []byte(`{"Name":"x"}`), false},
		{fuzzSpec([]byte{tag(`json:"'x'"`), intLeaf}), []byte(`{"x":1,"'x'":2}`), false},
		{fuzzSpec([]byte{tag(`json:"k"`), intLeaf}), []byte("{\"\u212a\":1}"), false},
		{fuzzSpec([]byte{tag(`json:"na_me"`), intLeaf}), []byte(`{"NAME":1,"na-me":2}`), false},
		{fuzzSpec([]byte{tag(`json:"name"`), intLeaf}, []byte{tag(`json:"NAME"`), intLeaf}), []byte(`{"Name":1}`), true},
		{fuzzSpec([]byte{tag(`json:"a\\b"`), intLeaf}), []byte(`{"F0":1,"a\\b":2}`), false},
		{[]byte{byte(len(fuzzLeaves) + fuzzStringMap), anyLeaf}, []byte(`{"a":[1,{"b":null}],"a":2,"c":1e400}`), false},
		{fuzzSpec([]byte{tag(``), byte(len(fuzzLeaves) + fuzzStringMap), intLeaf}), []byte(`{"F0":{"a":1},"F0":{"b":2},"f0":null}`), false},
		{fuzzSpec([]byte{tag(``), byte(len(fuzzLeaves) + fuzzArray), intLeaf}), []byte(`{"F0":[1,2,3],"x":1}`), true},
		{[]byte{leaf(reflect.TypeFor[embedsPlain]())}, []byte(`{"depth":1,"NOTE":"n","name":"a","Depth":2}`), false},
		{fuzzSpec([]byte{tag(`json:"x,omitempty,string"`), intLeaf}), []byte(`{"x":"12"}`), false},
		{fuzzSpec([]byte{tag(``), byte(len(fuzzLeaves) + fuzzPointer), intLeaf}), []byte(`{"F0":null,"F0":1e2}`), false},
		{fuzzSpec([]byte{tag(``), leaf(reflect.TypeFor[float32]())}), []byte(`{"F0":1e39}`), false},
		{fuzzSpec([]byte{tag(``), strLeaf}), []byte("{\"F0\":\"a\xffb\\ud800\"}"), false},
		// v2 unquotes a time before parsing it, encoding/json does not.
		{fuzzSpec([]byte{tag(``), leaf(reflect.TypeFor[time.Time]())}), []byte(`{"F0":"2026-11-21T10:00:00\u005a"}`), false},
		{[]byte{byte(len(fuzzLeaves) + fuzzIntMap), intLeaf}, []byte(`{"+3":1,"03":2,"-0":3,"-128":4,"127":5}`), false},
		{[]byte{byte(len(fuzzLeaves) + fuzzIntMap), intLeaf}, []byte(`{"128":1}`), false},
		{[]byte{byte(len(fuzzLeaves) + fuzzIntMap), intLeaf}, []byte(`{"1e2":1," 1":2}`), false},
		{[]byte{byte(len(fuzzLeaves) + fuzzUintMap), strLeaf}, []byte(`{"+3":"a","-0":"b"}`), false},
		{[]byte{byte(len(fuzzLeaves) + fuzzUintMap), strLeaf}, []byte(`{"18446744073709551615":"a","00":"b","0x10":"c"}`), false},
		// Embedded fields: a name at a shallower depth wins; at one
		// depth a tagged name wins over untagged ones, and two of a kind
		// cancel each other out.
		{embedding(field(fieldPlain, `json:"name"`, intLeaf), named(fieldEmbedNamed, ``, embedF0)), []byte(`{"F0":1,"name":2,"NAME":"a"}`), false},
		{embedding(named(fieldEmbedNamed, ``, embedF0), named(fieldEmbedNamed, ``, taggedF0)), []byte(`{"F0":"s","name":3,"f0":"t"}`), false},
		{embedding(named(fieldEmbedNamed, ``, embedF0), named(fieldEmbedNamed, ``, taggedF0)), []byte(`{"F0":1}`), true},
		{embedding(named(fieldEmbedNamed, ``, embedF0), named(fieldEmbedNamed, ``, deepF0)), []byte(`{"F0":1,"name":"a","W":2}`), true},
		{embedding(named(fieldEmbedNamed, ``, deepF0)), []byte(`{"F0":1,"EmbedF0":{"F0":2},"name":"a"}`), false},
		{embedding(field(fieldPlain, ``, strLeaf), named(fieldEmbedNamed, ``, deepF0)), []byte(`{"F0":"a","name":"b"}`), false},
		{embedding(built(fieldEmbedBuilt, ``, field(fieldPlain, ``, intLeaf)), built(fieldEmbedBuilt, ``, field(fieldPlain, ``, strLeaf))), []byte(`{"F0":1}`), true},
		{embedding(built(fieldEmbedBuilt, ``, field(fieldPlain, `json:"name"`, intLeaf)), field(fieldPlain, `json:"NAME"`, strLeaf)), []byte(`{"name":1,"Name":"a"}`), false},
		{embedding(built(fieldEmbedBuilt, ``, built(fieldEmbedBuilt, ``, field(fieldPlain, ``, intLeaf)), field(fieldPlain, `json:"F0"`, strLeaf))), []byte(`{"F0":"a","E0":{"F0":1}}`), false},
		{embedding(built(fieldEmbedBuilt, ``, field(fieldPlain, `json:"F0"`, intLeaf), field(fieldPlain, ``, intLeaf)), built(fieldEmbedBuilt, ``, field(fieldPlain, ``, intLeaf))), []byte(`{"F0":1,"F1":2,"f0":3}`), false},
		{embedding(built(fieldEmbedBuilt, `json:"name"`, field(fieldPlain, ``, intLeaf)), field(fieldPlain, ``, intLeaf)), []byte(`{"name":{"F0":1},"F1":2,"E0":{"F0":3}}`), false},
		{embedding(built(fieldEmbedBuilt, `json:",omitzero"`, field(fieldPlain, ``, intLeaf))), []byte(`{"F0":1,"E0":{"F0":2}}`), false},
		{embedding(built(fieldEmbedBuiltP, ``, field(fieldPlain, ``, intLeaf))), []byte(`{"F0":1}`), false},
		{embedding(named(fieldEmbedNamed, ``, reflect.TypeFor[EmbedsLower]())), []byte(`{"F0":1,"name":"l","embedLower":{"F0":2}}`), false},
		{embedding(named(fieldEmbedNamed, ``, reflect.TypeFor[EmbedsLower]()), named(fieldEmbedNamed, ``, embedF0)), []byte(`{"F0":1,"name":"l"}`), false},
		{embedding(named(fieldEmbedNamed, ``, reflect.TypeFor[EmbedsLowerPointer]())), []byte(`{"F0":1,"F1":2}`), false},
		{embedding(named(fieldEmbedNamedP, ``, embedF0)), []byte(`{"F0":1,"EmbedF0":null}`), false},
		{embedding(named(fieldEmbedNamed, ``, reflect.TypeFor[EmbedText]()), named(fieldEmbedNamed, `json:"x"`, embedF0)), []byte(`{"EmbedText":"a","x":{"F0":1},"F0":2}`), false},
		{embedding(field(fieldUnexported, ``, intLeaf), field(fieldUnexported, `json:"x"`, intLeaf), field(fieldPlain, ``, intLeaf)), []byte(`{"f0":1,"x":2,"F2":3,"f2":4}`), false},
		{embedding(field(fieldUnexported, ``, intLeaf), field(fieldPlain, `json:"F0"`, intLeaf)), []byte(`{"f0":1,"F0":2}`), true},
	}
}

// On the inputs where encoding/json and the streaming decoder could
// differ, a load means what encoding/json means.
func TestStreamedLoadMeansWhatEncodingJSONMeans(t *testing.T) {
	t.Parallel()
	for _, s := range meaningSeeds() {
		spec := bytes.Clone(s.spec)
		checkMeaning(t, fuzzType(&spec, 0), s.state, s.strict)
	}
	// A map of integer keys: v2 takes the key "null" as 0, encoding/json
	// refuses it, for every integer key type.
	type namedKey int8
	type intKeys struct {
		A map[namedKey]int
		B map[uint8]string
		C map[int64]any
		D map[label][]int
		E map[uint64]int
		F map[time.Duration]int
	}
	// A null state into a struct is damage; into a pointer, nil.
	for _, strict := range []bool{false, true} {
		checkMeaning(t, reflect.TypeFor[struct {
			F0 float32 `json:"F0,omitempty"`
			F1 bool
		}](), []byte(" null "), strict)
		checkMeaning(t, reflect.TypeFor[*intKeys](), []byte("null"), strict)
		checkMeaning(t, reflect.TypeFor[json.RawMessage](), []byte("null"), strict)
	}
	for _, state := range []string{`{"A":{"null":1}}`, `{"B":{"null":"x"}}`, `{"C":{"null":1}}`, `{"D":{"null":[1]}}`,
		`{"E":{"null":1}}`, `{"F":{"null":1}}`, `{"A":{"1":1,"1":null}}`, `{"A":{"-0":1}}`, `{"A":{"+1":1}}`,
		`{"B":{"+1":"x"}}`, `{"B":{"-0":"x"}}`, `{"A":{"1_0":1}}`, `{"A":{"0b1":1}}`, `{"A":{"１":1}}`,
		`{"F":{"1":1}}`, `{"F":{"1s":1}}`, `{"F":{"+1":1}}`} {
		for _, strict := range []bool{false, true} {
			checkMeaning(t, reflect.TypeFor[intKeys](), []byte(state), strict)
		}
	}
}

// FuzzStreamedLoadMeansWhatEncodingJSONMeans builds a state type from the
// fuzzer's bytes (struct types by reflect.StructOf, their fields' tags
// from fuzzTags, with embedded structs, built or named, and unexported
// fields: the shapes the gate streams or refuses) and loads a state of arbitrary bytes into it: the load,
// streamed where the gate (PlainType) lets it, must end as encoding/json
// does, with the same value or an error from both. The seed corpus is in
// testdata/fuzz/FuzzStreamedLoadMeansWhatEncodingJSONMeans.
//
//	go test -run '^$' -fuzz FuzzStreamedLoadMeansWhatEncodingJSONMeans -fuzztime 60s .
func FuzzStreamedLoadMeansWhatEncodingJSONMeans(f *testing.F) {
	for _, s := range meaningSeeds() {
		f.Add(s.spec, s.state, s.strict)
	}
	f.Fuzz(func(t *testing.T, spec, state []byte, strict bool) {
		typ := fuzzType(&spec, 0)
		checkMeaning(t, typ, state, strict)
	})
}
