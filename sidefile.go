package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/gocheckpoint/checkpoint/internal/format"
	"github.com/gocheckpoint/checkpoint/storage"
	"io"
	"io/fs"
)

// WriteJSON writes v as indented JSON to the file name in the store's
// directory, atomically and durably, replacing any previous version: a reader
// sees the old file or the new one, never a mix, and a crash leaves one of
// the two. Use it for files that belong beside the checkpoints, such as a
// run's result.json or a session's config.json. name is a plain file name of
// [A-Za-z0-9._-], ending in .json, not starting with a dot, not a checkpoint
// name of the store's layout, and not session.json (the metadata of a
// session: see Sessions.SetMeta). A v whose JSON is larger than the read
// limit (WithMaxReadSize), which ReadJSON would refuse, is ErrInvalid, and
// nothing is written.
//
// On a backend other than the local directory (object storage) the write
// is conditional on the object the store last saw under name: the one it
// wrote, or the one it listed at Open, or none (a create-if-absent).
// Another program's object written there since is an error wrapping
// ErrConflict, and is left as it is; the next WriteJSON replaces it.
func (s *Store[T]) WriteJSON(ctx context.Context, name string, v any) error {
	if err := s.cfg.layout.sideName(name); err != nil {
		return s.failed(opError("write json", name, err))
	}
	path := s.path(name)
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return s.failed(opError("write json", path, fmt.Errorf("%w: encode: %w", ErrInvalid, err)))
	}
	data = append(data, '\n')
	if int64(len(data)) > s.cfg.maxRead {
		// ReadJSON would refuse it: refuse it now, before anything is written.
		return s.failed(opError("write json", path, fmt.Errorf("%w: %d bytes, more than the read limit of %d bytes: ReadJSON could not read it back (see WithMaxReadSize)", ErrInvalid, len(data), s.cfg.maxRead)))
	}
	if err := s.beginWrite(ctx); err != nil {
		return s.failed(opError("write json", path, err))
	}
	_, err = s.replace(ctx, name, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
	s.endWrite()
	if err != nil {
		return s.failed(opError("write json", path, err))
	}
	return nil
}

// ReadJSON decodes the side file name, written by WriteJSON, into v. A missing
// file is ErrNotFound; a file that does not decode (v's UnmarshalJSON
// failed or panicked: the error wraps the panic's value), or is larger
// than the store's read limit, is ErrCorrupt.
func (s *Store[T]) ReadJSON(ctx context.Context, name string, v any) error {
	if err := s.cfg.layout.sideName(name); err != nil {
		return s.failed(opError("read json", name, err))
	}
	path := s.path(name)
	if err := s.begin(ctx); err != nil {
		return s.failed(opError("read json", path, err))
	}
	err := func() error {
		defer s.ops.Done() // as in load: v's UnmarshalJSON may panic
		return s.readJSON(ctx, name, v)
	}()
	if err != nil {
		return s.failed(opError("read json", path, err))
	}
	return nil
}

func (s *Store[T]) readJSON(ctx context.Context, name string, v any) error {
	f, o, err := s.b.Open(ctx, name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("%w: %w", ErrNotFound, err)
		}
		return err
	}
	defer f.Close()
	limit := s.cfg.maxRead
	if o.Size > limit {
		return fmt.Errorf("%w: larger than the read limit of %d bytes", ErrCorrupt, limit)
	}
	first := make([]byte, 0, o.Size+1) // a byte more sees a file that grew
	data, err := readLimited(f, first, limit)
	if errors.Is(err, errTooLarge) {
		return fmt.Errorf("%w: larger than the read limit of %d bytes", ErrCorrupt, limit)
	}
	if err != nil {
		return err
	}
	if err := format.Sealed(data); err != nil {
		return err
	}
	if err := unmarshal(data, v, false); err != nil { // a panic in v's methods too
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return nil
}

// replace writes the object name (the rolling file or a side file) through
// Backend.Replace, on the condition that it is still the object this store
// last saw there (see expected): another writer's object there (on object
// storage, one written by a writer whose lease had expired, or by the one
// that took it over, or by another program) is ErrConflict, not
// overwritten. A failed replacement may or may not have taken effect (a
// directory sync or a response lost), so the next one is unconditional.
// The caller holds the write lock.
func (s *Store[T]) replace(ctx context.Context, name string, write func(io.Writer) error) (Object, error) {
	o, err := s.b.Replace(ctx, name, s.expected(name), write)
	if err != nil {
		s.written[name] = "" // unconditional next time
		return Object{}, err
	}
	s.written[name] = o.Version
	if s.listed != nil {
		s.listed[name] = o.Version
	}
	return o, nil
}

// expected returns the ifVersion of the next replacement of name: the
// Version this store wrote there last; before its first write there, on
// a remote backend, the Version it listed at Open, or NoObject if it
// listed none (a create-if-absent: another program's object put there
// since Open is not overwritten); on the local directory, "" (the writer
// lock keeps other writers out, and the directory is not listed at Open).
// The caller holds the write lock.
func (s *Store[T]) expected(name string) string {
	if v, ok := s.written[name]; ok {
		return v
	}
	if s.listed != nil {
		if v, ok := s.listed[name]; ok {
			return v
		}
		return storage.NoObject
	}
	return ""
}
