package format

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
)

// A Migration upgrades a state saved at schema version From to version
// From+1. The store's checkpoint.Migration is this type, and its doc says
// what Migrate gets, may keep and must not do; an error, a panic or output
// that is not valid JSON or is null fails the load with ErrMigration.
type Migration struct {
	// From is the schema version this migration reads.
	From int
	// Migrate turns a state of schema From into one of schema From+1.
	Migrate func(json.RawMessage) (json.RawMessage, error)
}

// Schema is the schema a store saves and reads states at, with the chain
// of migrations that brings older states up to it.
type Schema struct {
	Version    int
	Migrations []Migration // as given; validate sorts them by From
	Strict     bool        // StrictDecoding: unknown fields are an error
}

// Validate checks that the migrations form one unbroken chain ending at
// version: every From below version, none twice, no gap. The chain may
// start above 0: states older than its start do not load.
func (sc *Schema) Validate() error {
	if sc.Version < 0 {
		return fmt.Errorf("%w: WithSchema(%d): the version must be 0 or more", ErrInvalid, sc.Version)
	}
	slices.SortFunc(sc.Migrations, func(a, b Migration) int { return a.From - b.From })
	for i, m := range sc.Migrations {
		bad := func(why string, args ...any) error {
			return fmt.Errorf("%w: WithSchema(%d): migration from schema %d: %s", ErrInvalid, sc.Version, m.From, fmt.Sprintf(why, args...))
		}
		switch {
		case m.From < 0:
			return bad("From must be 0 or more")
		case m.From >= sc.Version:
			return bad("From must be below the version %d (a migration upgrades From to From+1)", sc.Version)
		case m.Migrate == nil:
			return bad("Migrate is nil")
		case i > 0 && m.From == sc.Migrations[i-1].From:
			return bad("given twice")
		case i > 0 && m.From != sc.Migrations[i-1].From+1:
			return bad("the chain has a gap: no migration from schema %d", sc.Migrations[i-1].From+1)
		}
	}
	if n := len(sc.Migrations); n > 0 && sc.Migrations[n-1].From != sc.Version-1 {
		return fmt.Errorf("%w: WithSchema(%d): the chain has a gap: no migration from schema %d", ErrInvalid, sc.Version, sc.Migrations[n-1].From+1)
	}
	return nil
}

// Oldest returns the oldest schema that loads: the start of the chain.
func (sc *Schema) Oldest() int {
	if len(sc.Migrations) == 0 {
		return sc.Version
	}
	return sc.Migrations[0].From
}

// Decode brings state, saved at schema from, up to the store's schema and
// decodes it into v. A state of a newer schema is ErrNewerSchema; one the
// chain cannot bring up, ErrMigration; one of the store's own schema that
// does not decode, ErrCorrupt, as before schemas existed.
//
// A null state (a nil state, saved as such) loads as nil into a type that
// can be nil (see Nilable), at every schema: no migration runs on it, and
// the type's UnmarshalJSON is not called. Into any other type, a null of
// an older schema goes through the migrations like any state (one may
// make a value of it; one that returns null fails with ErrMigration), and
// a null of the store's own schema is ErrCorrupt, as a state of the wrong
// type is: a struct (or number, string, array, bool) has no nil value, and
// loading its zero value instead would hide that the file is not this
// store's.
func (sc *Schema) Decode(from int, state []byte, v any) error {
	if from > sc.Version {
		return fmt.Errorf("%w: the file has schema %d, this store reads schema %d and older (see WithSchema)", ErrNewerSchema, from, sc.Version)
	}
	if IsNull(state) {
		target := reflect.ValueOf(v).Elem()
		switch {
		case Nilable(target.Type()):
			// Nil, without the type's UnmarshalJSON (which encoding/json
			// would call with null, and which may keep it: a
			// json.RawMessage would hold the four bytes).
			target.SetZero()
			return nil
		case from == sc.Version:
			return fmt.Errorf("%w: decode state: the state is null, and a %v cannot be nil", ErrCorrupt, target.Type())
		}
		// A null of an older schema goes through the migrations, which
		// may make a value of it.
	}
	if from == sc.Version {
		if err := Unmarshal(state, v, sc.Strict); err != nil {
			return fmt.Errorf("%w: decode state: %w", ErrCorrupt, err)
		}
		return nil
	}
	if from < sc.Oldest() {
		return fmt.Errorf("%w: the file has schema %d and no migration starts there (the oldest schema this store migrates from is %d)", ErrMigration, from, sc.Oldest())
	}
	// The state is a part of a pooled read buffer: a migration gets a copy
	// it may keep or change.
	data := json.RawMessage(bytes.Clone(state))
	for k := from; k < sc.Version; k++ {
		out, err := Migrate(sc.Migrations[k-sc.Oldest()], data)
		if err != nil {
			return fmt.Errorf("%w: migration from schema %d to %d: %w", ErrMigration, k, k+1, err)
		}
		data = out
	}
	if err := Unmarshal(data, v, sc.Strict); err != nil {
		return fmt.Errorf("%w: the state migrated from schema %d to %d does not decode: %w", ErrMigration, from, sc.Version, err)
	}
	return nil
}

// IsNull reports whether state, a state's exact bytes, is the JSON null:
// the state saved for a nil slice, map, pointer or interface.
func IsNull(state []byte) bool { return string(bytes.TrimSpace(state)) == "null" }

// Nilable reports whether a state of type t can be nil, and so be saved
// and loaded as null: a pointer, map, slice or interface.
func Nilable(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Interface:
		return true
	}
	return false
}

// Migrate runs one migration, checking what it returns.
func Migrate(m Migration, in json.RawMessage) (out json.RawMessage, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, Panicked(r)
		}
	}()
	out, err = m.Migrate(in)
	switch {
	case err != nil:
		return nil, err
	case !json.Valid(out):
		return nil, errors.New("it returned invalid JSON")
	case string(bytes.TrimSpace(out)) == "null":
		return nil, errors.New("it returned null")
	}
	return out, nil
}

// Panicked returns the error of a panic recovered with r: r wrapped if it
// is an error (a runtime error, say), else its text.
func Panicked(r any) error {
	if err, ok := r.(error); ok {
		return fmt.Errorf("panic: %w", err)
	}
	return fmt.Errorf("panic: %v", r)
}

// Unmarshal decodes data into v like json.Unmarshal; with strict, a field
// v's type does not have is an error. A panic in the state type's own code
// (UnmarshalJSON, UnmarshalText) is recovered and returned as an error
// (see Panicked): it fails the load of that file, as any decode failure
// does, instead of the program, and never leaves the store in a state its
// Close would wait on. data has verified by then: no byte of a file whose
// checksum fails reaches the host's code.
func Unmarshal(data []byte, v any, strict bool) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = Panicked(r)
		}
	}()
	if !strict {
		return json.Unmarshal(data, v)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("invalid data after the state's value")
	}
	return nil
}
