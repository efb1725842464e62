package checkpoint

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
)

// checkStateType refuses a state type that encoding/json would save as {}
// whatever its value: a struct whose fields are all unexported (or tagged
// "-") and that has no MarshalJSON or MarshalText method. Such a store
// would save nothing and restore zero values without a word. Maps, slices,
// interfaces, json.RawMessage and every type with a marshaler of its own
// (in its method set: a marshaler on *S serves a state of type *S, not S)
// are accepted, as is a struct with an exported field of any type, its
// own or promoted from an embedded struct.
func checkStateType(t reflect.Type) error {
	if t == nil || !encodesNothing(t, make(map[reflect.Type]bool)) {
		return nil
	}
	return fmt.Errorf("%w: state type %s has nothing to encode: it has no exported field and no MarshalJSON or MarshalText method, so every save would hold {} and every load a zero value", ErrInvalid, t)
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

// encodesNothing reports whether every value of t encodes as an empty JSON
// object (or null). seen stops the walk at a type that embeds itself.
func encodesNothing(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return true
	}
	seen[t] = true
	// Only t's own method set counts: a state is encoded as the value it
	// is, which encoding/json cannot address, so a marshaler declared on
	// *t is not used for a t (the value saves as {}), only for a *t.
	for _, m := range []reflect.Type{jsonMarshaler, textMarshaler} {
		if t.Implements(m) {
			return false
		}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return encodesNothing(t.Elem(), seen)
	case reflect.Struct:
	default:
		return false
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Tag.Get("json") == "-" {
			continue
		}
		if f.Anonymous {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			// An embedded struct's exported fields are promoted even
			// when the struct type itself is unexported.
			if ft.Kind() == reflect.Struct {
				if !encodesNothing(f.Type, seen) {
					return false
				}
				continue
			}
		}
		if f.IsExported() {
			return false
		}
	}
	return true
}
