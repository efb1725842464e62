package dirstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/gocheckpoint/checkpoint/storage"
)

// Link hard-links the file name of src, another child of d's parent, into
// d, through the parent's os.Root (no path reaches outside it), then
// fsyncs d's directory (see Linker).
func (d *dirBackend) Link(ctx context.Context, src storage.Backend, name string) (storage.Object, error) {
	if err := d.mayWrite(ctx, name); err != nil {
		return storage.Object{}, err
	}
	s, ok := storage.As[*dirBackend](src)
	if !ok || d.parent == nil || s.parent != d.parent {
		return storage.Object{}, fmt.Errorf("link %s: %w: not a child of the same directory", d.Locate(name), errors.ErrUnsupported)
	}
	root, err := d.opened(true)
	if err != nil {
		return storage.Object{}, err
	}
	proot, err := d.parent.opened(false)
	if err != nil {
		return storage.Object{}, err
	}
	d.writing.RLock() // Close waits for the link
	err = proot.Link(s.name+"/"+name, d.name+"/"+name)
	d.writing.RUnlock()
	if errors.Is(err, fs.ErrExist) {
		return storage.Object{}, fmt.Errorf("%w: %s: %w", storage.ErrExists, d.Locate(name), err)
	}
	if err != nil {
		return storage.Object{}, err
	}
	if err := d.io().syncDir(root); err != nil {
		// The link may not survive a power cut: take it back.
		return storage.Object{}, errors.Join(err, root.Remove(name))
	}
	fi, err := d.lstat(root, name)
	if err != nil {
		return storage.Object{Name: name, Size: -1}, nil // linked and durable all the same
	}
	return objectOf(name, fi), nil
}

// RemoveChild removes the empty subdirectory name (see ChildRemover).
func (d *dirBackend) RemoveChild(ctx context.Context, name string) error {
	if err := d.mayWrite(ctx, name); err != nil {
		return err
	}
	root, err := d.existing()
	if root == nil {
		return err
	}
	fi, err := root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a child store", storage.ErrInvalid, d.Locate(name))
	}
	// Remove takes an empty directory only: one that anything was put in
	// meanwhile stays.
	if err := root.Remove(name); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if sub, oerr := openChild(root, name, d.Locate(name), false); oerr == nil {
			names, _ := readNames(sub)
			sub.Close()
			if len(names) > 0 {
				return fmt.Errorf("%w: %s is not empty: %w", storage.ErrExists, d.Locate(name), err)
			}
		}
		return err
	}
	return d.io().syncDir(root)
}
