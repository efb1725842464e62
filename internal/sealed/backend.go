package sealed

import (
	"context"
	"io"

	"github.com/gocheckpoint/checkpoint/internal/format"
	"github.com/gocheckpoint/checkpoint/storage"
)

// damaged returns the damage error of the object at loc that fails to
// open: proof that it is damaged (see format.IsDamage).
func damaged(loc, why string, args ...any) error {
	return format.Damaged("%s fails authentication: "+why, append([]any{loc}, args...)...)
}

// backend seals every object written through it, and opens only sealed
// objects (see Keys.Open). Object sizes are those of the sealed bytes
// (see Keys.PayloadSize), so that it keeps the contract of Backend as the
// backend it wraps does.
type backend struct {
	b storage.Backend
	k *Keys
}

// Wrap returns b sealing with k. A b that Wrap returned is unwrapped
// first: a backend is never sealed twice.
func Wrap(b storage.Backend, k *Keys) storage.Backend {
	if s, ok := b.(*backend); ok {
		if s.k.Same(k) {
			return s
		}
		b = s.b
	}
	return &backend{b: b, k: k}
}

func (s *backend) Unwrap() storage.Backend { return s.b }

func (s *backend) object(o storage.Object) storage.Object {
	if o.Mode.IsRegular() {
		o.Size = s.k.PayloadSize(o.Size)
	}
	return o
}

func (s *backend) Create(ctx context.Context, name string, write func(io.Writer) error) (storage.Object, error) {
	o, err := s.b.Create(ctx, name, s.k.Seal(write))
	return s.object(o), err
}

func (s *backend) Replace(ctx context.Context, name, ifVersion string, write func(io.Writer) error) (storage.Object, error) {
	o, err := s.b.Replace(ctx, name, ifVersion, s.k.Seal(write))
	return s.object(o), err
}

// ReplaceUnsynced is the wrapped backend's, sealed; Replace where it has
// none.
func (s *backend) ReplaceUnsynced(ctx context.Context, name string, write func(io.Writer) error) (storage.Object, error) {
	u, ok := s.b.(storage.Unsynced)
	if !ok {
		return s.Replace(ctx, name, "", write)
	}
	o, err := u.ReplaceUnsynced(ctx, name, s.k.Seal(write))
	return s.object(o), err
}

// RemoveUnsynced is the wrapped backend's; Remove where it has none.
func (s *backend) RemoveUnsynced(ctx context.Context, names ...string) ([]bool, error) {
	if u, ok := s.b.(storage.Unsynced); ok {
		return u.RemoveUnsynced(ctx, names...)
	}
	return s.b.Remove(ctx, names...)
}

func (s *backend) Open(ctx context.Context, name string) (io.ReadCloser, storage.Object, error) {
	rc, o, err := s.b.Open(ctx, name)
	if err != nil {
		return nil, o, err
	}
	r, plain, err := s.k.Open(rc, s.b.Locate(name))
	if err != nil {
		rc.Close()
		return nil, storage.Object{}, err
	}
	if plain {
		return readCloser{r, rc}, o, nil
	}
	return &sealedReadCloser{r.(*payloadReader), rc}, s.object(o), nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// sealedReadCloser is a sealed object's stream; Close gives its buffers
// back.
type sealedReadCloser struct {
	*payloadReader
	c io.Closer
}

func (r *sealedReadCloser) Close() error {
	r.release()
	return r.c.Close()
}

func (s *backend) Stat(ctx context.Context, name string) (storage.Object, error) {
	o, err := s.b.Stat(ctx, name)
	return s.object(o), err
}

func (s *backend) List(ctx context.Context) ([]storage.Object, error) {
	objs, err := s.b.List(ctx)
	for i := range objs {
		objs[i] = s.object(objs[i])
	}
	return objs, err
}

func (s *backend) Remove(ctx context.Context, names ...string) ([]bool, error) {
	return s.b.Remove(ctx, names...)
}

func (s *backend) Rename(ctx context.Context, from, to string) error {
	return s.b.Rename(ctx, from, to)
}

func (s *backend) Lock(ctx context.Context) (func() error, error) { return s.b.Lock(ctx) }

func (s *backend) Sub(ctx context.Context, name string, create bool) (storage.Backend, error) {
	sub, err := s.b.Sub(ctx, name, create)
	if err != nil {
		return nil, err
	}
	return &backend{b: sub, k: s.k}, nil
}

func (s *backend) Children(ctx context.Context) ([]string, error) { return s.b.Children(ctx) }

func (s *backend) Locate(name string) string { return s.b.Locate(name) }

func (s *backend) Close() error { return s.b.Close() }
