package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
)

// WriteJSON writes v as indented JSON to the file name in the store's
// directory, atomically and durably: a temporary file, fsync, a rename over
// any previous version, fsync of the directory. Use it for files that belong
// beside the checkpoints, such as a run's result.json or a session's
// config.json. name is a plain file name of [A-Za-z0-9._-], ending in .json,
// not starting with a dot, not a checkpoint name of the store's layout, and
// not session.json (the metadata of a session: see Sessions.SetMeta).
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
	if err := s.beginWrite(ctx); err != nil {
		return s.failed(opError("write json", path, err))
	}
	_, err = replaceFile(s.root, name, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}, s.fileIO())
	s.endWrite()
	if err != nil {
		return s.failed(opError("write json", path, err))
	}
	return nil
}

// ReadJSON decodes the side file name, written by WriteJSON, into v. A missing
// file is ErrNotFound; a file that does not decode, or is larger than the
// store's read limit, is ErrCorrupt.
func (s *Store[T]) ReadJSON(ctx context.Context, name string, v any) error {
	if err := s.cfg.layout.sideName(name); err != nil {
		return s.failed(opError("read json", name, err))
	}
	path := s.path(name)
	if err := s.begin(ctx); err != nil {
		return s.failed(opError("read json", path, err))
	}
	err := s.readJSON(name, v)
	s.ops.Done()
	if err != nil {
		return s.failed(opError("read json", path, err))
	}
	return nil
}

func (s *Store[T]) readJSON(name string, v any) error {
	f, fi, err := openRegular(s.root, name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("%w: %w", ErrNotFound, err)
		}
		return err
	}
	defer f.Close()
	limit := s.cfg.maxRead
	if fi.Size() > limit {
		return fmt.Errorf("%w: larger than the read limit of %d bytes", ErrCorrupt, limit)
	}
	first := make([]byte, 0, fi.Size()+1) // a byte more sees a file that grew
	data, err := readLimited(f, first, limit)
	if errors.Is(err, errTooLarge) {
		return fmt.Errorf("%w: larger than the read limit of %d bytes", ErrCorrupt, limit)
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return nil
}
