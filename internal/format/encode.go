package format

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The state encoder: encoding/json, run on several cores at once.
//
// A state's bytes must be exactly json.Marshal's: they are what the
// checksum covers, and what every release and every other reader decodes.
// No faster encoder measured writes them (see BENCHMARKS.md, issue 28), so
// this one does not encode anything itself. It cuts the value into parts
// where encoding/json's output is a plain concatenation (the members of a
// struct, of a map, runs of a slice's elements), has encoding/json encode
// the parts on as many goroutines as there are cores, and writes the parts'
// bytes in order between the punctuation encoding/json would have written.
// It does so only for types whose encoding runs none of the host's code
// (see parallelType): the host's MarshalJSON may not be safe to run on two
// goroutines at once, nor under the store's write lock, where a streamed
// save encodes. FuzzEncodeStateIsEncodingJSON proves the bytes identical.

// parallelMin is the size of the last state below which a state is encoded
// on one goroutine: the parts' hand-over costs more than it saves.
const parallelMin = 24 << 10

// partBytes is the size of encoded bytes a part aims at, judged from the
// last state's size: large enough that a part's hand-over is noise, small
// enough that a streamed save holds a few parts, not the state.
const partBytes = 48 << 10

// splitMin is the fewest elements of a slice that is cut into runs, and the
// most members of a container whose members are walked one by one.
const splitMin = 8

// maxWalkDepth bounds how deep the walk descends before encoding what it
// finds whole: the parts that matter are near the top.
const maxWalkDepth = 6

// maxItems bounds the values the walk gives encoding/json one by one: past
// it, what is left is encoded in larger values (each value handed over
// costs a call of encoding/json's).
const maxItems = 512

// maxEncoders bounds the goroutines that encode one state.
const maxEncoders = 8

// encoders is how many goroutines encode a state: one per core, at most
// maxEncoders.
func encoders() int { return min(runtime.GOMAXPROCS(0), maxEncoders) }

var (
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
	timeType      = reflect.TypeFor[time.Time]()
)

// marshalMethods are the methods encoding/json may call to encode a value:
// MarshalJSON and MarshalText, and, built with GOEXPERIMENT=jsonv2 (where
// it is encoding/json/v2 underneath), AppendText and MarshalJSONTo.
var marshalMethods = [...]string{"MarshalJSON", "MarshalText", "AppendText", "MarshalJSONTo"}

// hostMethods reports whether t, or a pointer to it, has a method that
// encoding/json may call to encode it.
func hostMethods(t reflect.Type) bool {
	for _, name := range marshalMethods {
		if _, ok := t.MethodByName(name); ok {
			return true
		}
		if _, ok := reflect.PointerTo(t).MethodByName(name); ok {
			return true
		}
	}
	return false
}

// parallelType reports whether encoding a value of t runs none of the
// host's code, so that its parts may be encoded on other goroutines and
// under a lock: no type in it (nor a pointer to one) has a method
// encoding/json may call (marshalMethods), except time.Time, json.Number
// and json.RawMessage,
// whose encodings are the standard library's own, and it holds no
// interface, whose dynamic type could be anything. seen holds the types
// being judged: a type that refers to itself is judged by its other parts.
func parallelType(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return true
	}
	seen[t] = true
	if t == timeType || t == jsonNumber || t == jsonRawMessage {
		return true
	}
	if hostMethods(t) {
		return false
	}
	switch t.Kind() {
	case reflect.Interface:
		return false
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return parallelType(t.Elem(), seen)
	case reflect.Map:
		return parallelType(t.Key(), seen) && parallelType(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			if !parallelType(t.Field(i).Type, seen) {
				return false
			}
		}
	}
	// Scalars, and what encoding/json refuses (channels, functions,
	// complex numbers): it refuses them on any goroutine alike.
	return true
}

// field is a struct field the walk writes itself.
type field struct {
	index     int
	key       []byte // `"name":`, as encoding/json writes it
	omitEmpty bool
}

// walkPlan is how the walk writes a type: whether it writes the
// punctuation of its values and walks into their members (false: it has
// encoding/json encode them whole), and a struct's fields.
type walkPlan struct {
	walk   bool    // the walk writes the container's punctuation
	fields []field // of a struct the walk writes
}

var plans sync.Map // reflect.Type → *walkPlan

// planOf returns how the walk treats values of t: it walks structs whose
// fields encoding/json names by a simple rule (exported, not embedded, a
// tag of a plain name and at most omitempty, no two of one name), maps of
// string keys, slices (not of bytes) and pointers, where neither t nor a
// pointer to it has a marshal method. Any other value is encoded whole by
// encoding/json, which is always right.
func planOf(t reflect.Type) *walkPlan {
	if p, ok := plans.Load(t); ok {
		return p.(*walkPlan)
	}
	p := &walkPlan{walk: walkable(t)}
	if p.walk && t.Kind() == reflect.Struct {
		p.fields, p.walk = structFields(t)
	}
	plans.Store(t, p)
	return p
}

func walkable(t reflect.Type) bool {
	if hostMethods(t) {
		return false
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Pointer:
		return true
	case reflect.Slice:
		return t.Elem().Kind() != reflect.Uint8 // []byte is base64
	case reflect.Map:
		return t.Key().Kind() == reflect.String && !t.Key().Implements(textMarshaler)
	}
	return false
}

// structFields returns the fields encoding/json writes for t, in its order,
// or false where its rules are more than the walk follows.
func structFields(t reflect.Type) ([]field, bool) {
	var fields []field
	names := make(map[string]bool)
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			return nil, false // promoted fields and their dominance rules
		}
		tag, tagged := f.Tag.Lookup("json")
		if !f.IsExported() {
			if tagged {
				return nil, false
			}
			continue
		}
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if opts != "" && opts != "omitempty" {
			return nil, false // string, omitzero, and options to come
		}
		if name == "" {
			name = f.Name
		} else if !simpleName(name) {
			return nil, false
		}
		if names[name] {
			return nil, false // encoding/json drops both, or picks one
		}
		names[name] = true
		key, err := json.Marshal(name)
		if err != nil {
			return nil, false
		}
		fields = append(fields, field{index: i, key: append(key, ':'), omitEmpty: opts == "omitempty"})
	}
	return fields, true
}

// simpleName reports whether a tag's name is one encoding/json takes as it
// is: letters, digits, '_' and '-', of ASCII.
func simpleName(s string) bool {
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// isEmpty is encoding/json's omitempty test.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64,
		reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

// item is one value of a state's encoding: the literal bytes pre, then v
// encoded by encoding/json. A run (a slice of a slice's elements) is
// written without its brackets; an item to split stands for a whole slice
// until cut makes runs of it.
type item struct {
	pre   []byte
	v     reflect.Value
	run   bool
	split bool
	// levels is how many pointers, maps and slices encoding/json enters
	// before it reaches v in the whole value: its cycle check counts them
	// (it looks for a pointer seen before only past 1000 of them), so v
	// is encoded behind as many pointers.
	levels int
}

// part is what one goroutine encodes at a time: items in a row.
type part struct {
	items []item
	out   *bytes.Buffer
	err   error
	ready chan struct{} // closed once out or err is set
}

// done reports whether p's encoding is over.
func (p *part) done() bool {
	select {
	case <-p.ready:
		return true
	default:
		return false
	}
}

// walker cuts a value into items.
type walker struct {
	lit    []byte // the literals; each item's pre is a piece of it
	start  int    // where the literal of the next item starts
	items  []item
	weight int // items, counting a slice to split as its elements
	tail   []byte
}

func (w *walker) literal(s string) { w.lit = append(w.lit, s...) }

// value adds v, encoded whole, after the literals since the last item.
func (w *walker) value(v reflect.Value, levels int) {
	w.items = append(w.items, item{pre: w.lit[w.start:len(w.lit):len(w.lit)], v: v, levels: levels})
	w.start = len(w.lit)
	w.weight++
}

// walk adds v: its punctuation as literals and its members as parts, or v
// whole where encoding/json's rules are not the walk's (see planOf).
func (w *walker) walk(v reflect.Value, depth, levels int) {
	p := planOf(v.Type())
	if !p.walk || depth > maxWalkDepth || len(w.items) >= maxItems {
		w.value(v, levels)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			w.value(v, levels)
			return
		}
		w.walk(v.Elem(), depth+1, levels+1)
	case reflect.Struct:
		w.literal("{")
		first := true
		for _, f := range p.fields {
			fv := v.Field(f.index)
			if f.omitEmpty && isEmpty(fv) {
				continue
			}
			if !first {
				w.literal(",")
			}
			first = false
			w.lit = append(w.lit, f.key...)
			w.walk(fv, depth+1, levels)
		}
		w.literal("}")
	case reflect.Map:
		if v.IsNil() || v.Len() == 0 || v.Len() > splitMin {
			// A large map is encoded whole: its members one by one
			// would cost more than they gain.
			w.value(v, levels)
			return
		}
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		w.literal("{")
		for i, k := range keys {
			if i > 0 {
				w.literal(",")
			}
			key, _ := json.Marshal(k.String()) // a string always encodes
			w.lit = append(append(w.lit, key...), ':')
			w.walk(v.MapIndex(k), depth+1, levels+1)
		}
		w.literal("}")
	case reflect.Slice:
		n := v.Len()
		switch {
		case v.IsNil() || n == 0:
			w.value(v, levels)
		case n >= splitMin:
			w.value(v, levels)
			w.items[len(w.items)-1].split = true
			w.weight += n - 1
		case !containerElem(v.Type().Elem()):
			w.value(v, levels)
		default:
			w.literal("[")
			for i := range n {
				if i > 0 {
					w.literal(",")
				}
				w.walk(v.Index(i), depth+1, levels+1)
			}
			w.literal("]")
		}
	default:
		w.value(v, levels)
	}
}

// containerElem reports whether elements of t may hold much: a container
// of few such elements is walked into, one of many scalars encoded whole.
func containerElem(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Struct, reflect.Pointer, reflect.Map, reflect.Slice, reflect.Array, reflect.Interface:
		return true
	}
	return false
}

// parts groups the items into parts of about even weight, as many as make
// partBytes each of a state of about size bytes and at least two for each
// core, cutting the slices to split into runs.
func (w *walker) parts(size int64) []part {
	w.tail = w.lit[w.start:len(w.lit):len(w.lit)]
	if w.weight == 0 {
		return nil // all punctuation: an empty struct
	}
	want := min(max(int(size/partBytes), 2*encoders()), w.weight)
	per := max(1, (w.weight+want-1)/want)
	parts := make([]part, 0, want+1)
	var cur []item
	load := 0
	flush := func() {
		if len(cur) > 0 {
			parts = append(parts, part{items: cur})
			cur, load = nil, 0
		}
	}
	var carry []byte // literals to write before the next item
	pre := func(b []byte) []byte {
		if carry == nil {
			return b
		}
		b = append(carry, b...)
		carry = nil
		return b
	}
	for _, it := range w.items {
		if !it.split {
			it.pre = pre(it.pre)
			cur = append(cur, it)
			if load++; load >= per {
				flush()
			}
			continue
		}
		n := it.v.Len()
		for j := 0; j < n; {
			k := min(n, j+per-load)
			lead := []byte(",")
			if j == 0 {
				lead = pre(append(it.pre[:len(it.pre):len(it.pre)], '['))
			}
			cur = append(cur, item{pre: lead, v: it.v.Slice(j, k), run: true, levels: it.levels})
			if load += k - j; load >= per {
				flush()
			}
			j = k
		}
		carry = []byte("]")
	}
	flush()
	w.tail = pre(w.tail)
	return parts
}

// trimWriter writes what an Encoder writes to dst, but for the first skip
// bytes (a run's opening bracket).
type trimWriter struct {
	dst  *bytes.Buffer
	skip int
}

func (t *trimWriter) Write(b []byte) (int, error) {
	n := len(b)
	if t.skip > 0 {
		k := min(t.skip, len(b))
		b, t.skip = b[k:], t.skip-k
	}
	t.dst.Write(b)
	return n, nil
}

// maxPartBuffer is the largest part buffer kept for reuse: a part is
// larger than partBytes only where one value in it is.
const maxPartBuffer = 8 * partBytes

// partBuffers holds the buffers parts are encoded into.
var partBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// encodePart encodes p's items into a buffer of its own.
func encodePart(p *part, enc *json.Encoder, tw *trimWriter) {
	defer func() {
		if r := recover(); r != nil {
			p.err = &partPanic{r}
		}
		close(p.ready)
	}()
	p.out = partBuffers.Get().(*bytes.Buffer)
	p.out.Reset()
	tw.dst = p.out
	for _, it := range p.items {
		p.out.Write(it.pre)
		arg := behind(it.v, it.levels)
		tw.skip = 0
		trim := 1 // the newline Encode ends a value with
		if it.run {
			tw.skip, trim = 1, 2 // and the run's brackets
		}
		if err := enc.Encode(arg.Interface()); err != nil {
			p.err = &encodeError{err}
			return
		}
		p.out.Truncate(p.out.Len() - trim)
	}
}

// behind returns v behind levels pointers (v itself if none): encoding/json
// then counts the levels it counted in the whole value before v. The types
// the parts are made of call no method with a pointer receiver, so that v
// being addressable or not changes nothing.
func behind(v reflect.Value, levels int) reflect.Value {
	if levels == 0 {
		return v
	}
	if v.CanAddr() {
		v = v.Addr()
	} else {
		p := reflect.New(v.Type())
		p.Elem().Set(v)
		v = p
	}
	for range levels - 1 {
		p := reflect.New(v.Type())
		p.Elem().Set(v)
		v = p
	}
	return v
}

// partPanic carries a panic of a part's goroutine to the caller's.
type partPanic struct{ v any }

func (p *partPanic) Error() string { return fmt.Sprint("panic encoding a state: ", p.v) }

// encodeParallel writes the encoding of v, a value of a parallelType of
// about size bytes, to dst: parts encoded on a goroutine per core (see encoders),
// written in order, at most a few parts ahead of the writing. It returns
// false, having written nothing, where v does not cut into parts.
func encodeParallel(dst io.Writer, v reflect.Value, size int64) (bool, error) {
	w := walker{lit: make([]byte, 0, 256)}
	w.walk(v, 0, 0)
	parts := w.parts(size)
	if len(parts) < 2 {
		return false, nil
	}
	for i := range parts {
		parts[i].ready = make(chan struct{})
	}
	procs := encoders()
	slots := make(chan struct{}, 2*procs) // parts claimed and not yet written
	quit := make(chan struct{})
	var next atomic.Int64
	claim := func() int {
		i := int(next.Add(1) - 1)
		if i >= len(parts) {
			<-slots
			return -1
		}
		return i
	}
	var helpers sync.WaitGroup
	for range min(procs, len(parts)) - 1 {
		helpers.Go(func() {
			tw := new(trimWriter)
			enc := json.NewEncoder(tw)
			for {
				select {
				case slots <- struct{}{}:
				case <-quit:
					return
				}
				i := claim()
				if i < 0 {
					return
				}
				encodePart(&parts[i], enc, tw)
			}
		})
	}
	var stop sync.Once
	finish := func() {
		stop.Do(func() {
			close(quit)
			helpers.Wait()
			for i := range parts {
				if parts[i].out != nil && parts[i].out.Cap() <= maxPartBuffer {
					partBuffers.Put(parts[i].out)
					parts[i].out = nil
				}
			}
		})
	}
	defer finish()
	tw := new(trimWriter)
	enc := json.NewEncoder(tw)
	for idx := range parts {
		p := &parts[idx]
		for !p.done() {
			// Encode the next part here while a slot is free; wait for
			// this one otherwise (a helper has it).
			select {
			case slots <- struct{}{}:
				if i := claim(); i >= 0 {
					encodePart(&parts[i], enc, tw)
					continue
				}
			default:
			}
			<-p.ready
		}
		if p.err != nil {
			finish()
			if pp, ok := p.err.(*partPanic); ok {
				panic(pp.v)
			}
			return true, p.err
		}
		_, err := dst.Write(p.out.Bytes())
		if p.out.Cap() <= maxPartBuffer {
			partBuffers.Put(p.out)
		}
		p.out = nil
		<-slots
		if err != nil {
			return true, err
		}
	}
	_, err := dst.Write(w.tail)
	return true, err
}

// encodeError is encoding/json's refusal of a value, told apart from an
// error of the writer the encoding goes to.
type encodeError struct{ err error }

func (e *encodeError) Error() string { return e.err.Error() }
func (e *encodeError) Unwrap() error { return e.err }

// holdWriter writes what an Encoder writes to w but for its last byte, the
// newline it ends a value with, and keeps w's error.
type holdWriter struct {
	w    io.Writer
	last []byte // the byte held back, once one was written
	err  error
}

func (h *holdWriter) Write(b []byte) (int, error) {
	n := len(b)
	if n == 0 || h.err != nil {
		return 0, h.err
	}
	if len(h.last) == 1 {
		if _, h.err = h.w.Write(h.last); h.err != nil {
			return 0, h.err
		}
	}
	if _, h.err = h.w.Write(b[:n-1]); h.err != nil {
		return 0, h.err
	}
	h.last = append(h.last[:0], b[n-1])
	return n, nil
}

// parallelVerdict is parallelType's answer for one type.
type parallelVerdict struct {
	t  reflect.Type
	ok bool
}

// Parallel reports whether states of type t are encoded on several cores
// and may be encoded under a lock, as a streamed save does: whether
// encoding them runs none of the host's code (see parallelType). The
// answer is kept for the last type asked about.
func (c *Codec) Parallel(t reflect.Type) bool {
	if t == nil {
		return false
	}
	if p := c.parallel.Load(); p != nil && p.t == t {
		return p.ok
	}
	p := &parallelVerdict{t: t, ok: parallelType(t, make(map[reflect.Type]bool))}
	c.parallel.Store(p)
	return p.ok
}

// streamMin is the size of the last state from which a gzip save encodes
// its state as it writes it (see Streamed); below it, the state is
// encoded into a buffer and compressed in pieces on several cores.
const streamMin = 512 << 10

// Streamed reports whether a save is to encode a state of type t as it
// writes it (WriteStateEnvelope) rather than into a buffer first
// (EncodeState): where t is a type Parallel admits and the last state was
// large enough, which is for a plain file parallelMin (the file's writes
// then overlap the encoding), for gzip streamMin, and for zstd ZstdWindow
// (a frame of no declared size is decoded with a window of that size).
func (c *Codec) Streamed(t reflect.Type) bool {
	least := int64(parallelMin)
	switch c.comp {
	case CompressGzip:
		least = streamMin
	case CompressZstd:
		least = ZstdWindow
	}
	if c.lastState.Load() < least {
		return false
	}
	return c.Parallel(t)
}

// encodeState writes v's encoding, exactly json.Marshal's bytes, to dst:
// on several cores where v's type allows it and the last state was large
// enough to gain from it, and in parts on one core if streamed. An error of encoding/json's is ErrInvalid; an
// error of dst is returned as it is.
func (c *Codec) encodeState(dst io.Writer, v any, streamed bool) error {
	// A streamed state is cut into parts on one core too: they are
	// written one by one, and no buffer holds the state.
	if last := c.lastState.Load(); last >= parallelMin && (streamed || encoders() > 1) && c.Parallel(reflect.TypeOf(v)) {
		done, err := encodeParallel(dst, reflect.ValueOf(v), last)
		if done {
			return c.encodeFailed(v, err)
		}
	}
	hw := holdWriter{w: dst}
	if err := json.NewEncoder(&hw).Encode(v); err != nil {
		if hw.err != nil {
			return hw.err
		}
		return c.encodeFailed(v, &encodeError{err})
	}
	return nil
}

// encodeFailed returns err, where an error of encoding/json's is the one
// json.Marshal gives for the whole of v (a part of it may have met another
// first), as ErrInvalid.
func (c *Codec) encodeFailed(v any, err error) error {
	var ee *encodeError
	if !errors.As(err, &ee) {
		return err
	}
	if _, whole := json.Marshal(v); whole != nil {
		err = whole
	} else {
		err = ee.err
	}
	return fmt.Errorf("%w: encode state: %w", ErrInvalid, err)
}
