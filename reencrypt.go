package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync"

	"github.com/gocheckpoint/checkpoint/internal/sealed"
	"github.com/gocheckpoint/checkpoint/storage"
)

// Reencrypted is what Reencrypt did.
type Reencrypted struct {
	// Rewritten are the locations (Backend.Locate) of the files it
	// rewrote to the current key.
	Rewritten []string
	// Current is how many files were already encrypted to it.
	Current int
	// Failed are the files it could not rewrite, each an error naming
	// the file: damaged ones (ErrCorrupt), ones no identity opens
	// (ErrNoKey), plaintext ones without ReadPlaintext (ErrPlaintext), and
	// ones it could not read or write. They are left as they were.
	Failed []error
}

// Reencrypt rewrites every file of the store or root of sessions kept in
// b, and of its sessions if b is a root of sessions (the child stores of a
// b that holds no checkpoint), that is encrypted to another key
// than the current one of opts' Encrypt to that key, and leaves the others
// as they are: the rotation of a store's key, after which the older
// identities may be dropped. With ReadPlaintext it also encrypts the
// store's plaintext files (checkpoints of the store's layout, side files
// and session.json; any other file is left alone): the migration of a
// plaintext store. The header index (.checkpoint.index) is removed rather
// than rewritten: the store writes it again. opts other than Encrypt,
// ReadPlaintext, WithLayout and WaitLock are ignored.
//
// Each file is rewritten in one atomic replacement (Backend.Replace,
// conditional on the file it read), whole: a crash at any instant leaves
// every file encrypted to the old key or to the new one, and a rerun
// completes the work. Each store's files are rewritten under its writer
// lock (Backend.Lock), which WaitLock lets it wait for. A file that cannot
// be rewritten is reported in Failed and left as it is, and Reencrypt goes
// on; the error it returns then wraps each (so errors.Is finds ErrCorrupt
// or ErrNoKey). Reencrypt does not close b.
func Reencrypt(ctx context.Context, b Backend, opts ...Option) (Reencrypted, error) {
	var out Reencrypted
	cfg, err := newConfig(opts)
	if err != nil {
		return out, opError("reencrypt", b.Locate(""), err)
	}
	if cfg.sealKeys == nil {
		return out, opError("reencrypt", b.Locate(""), fmt.Errorf("%w: Reencrypt without Encrypt", ErrInvalid))
	}
	if err := reencryptStore(ctx, b, &cfg, &out, 0); err != nil {
		return out, opError("reencrypt", b.Locate(""), err)
	}
	if len(out.Failed) > 0 {
		return out, opError("reencrypt", b.Locate(""), fmt.Errorf("%d files not rewritten: %w", len(out.Failed), joinFew(out.Failed)))
	}
	return out, nil
}

// reencryptStore is Reencrypt of b and, below depth, of its children.
func reencryptStore(ctx context.Context, b Backend, cfg *config, out *Reencrypted, depth int) error {
	objs, err := b.List(ctx)
	if err != nil {
		return err
	}
	var todo []string
	store := false // b holds checkpoints: a store, not a root of sessions
	for _, o := range objs {
		if reencryptable(b, cfg, o.Name) {
			todo = append(todo, o.Name)
		}
		if _, ok := cfg.layout.parse(o.Name); ok {
			store = true
		}
	}
	if len(todo) > 0 {
		if err := reencryptFiles(ctx, b, cfg, todo, out); err != nil {
			return err
		}
	}
	if store || depth > 0 {
		// A store's subdirectories are not its own, and a session has no
		// sessions: only a root's children (its sessions) are visited.
		return nil
	}
	children, err := b.Children(ctx)
	if err != nil {
		return err
	}
	for _, name := range children {
		sub, err := b.Sub(ctx, name, false)
		if err != nil {
			return err
		}
		err = reencryptStore(ctx, sub, cfg, out, depth+1)
		if cerr := sub.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// reencryptable reports whether Reencrypt looks at the object name of b:
// anything but a backend's own objects (a lock, a lease, a temporary
// file) and damaged checkpoints moved aside.
func reencryptable(b Backend, cfg *config, name string) bool {
	if _, _, temp := storage.TempOf(b, name); temp {
		return false
	}
	if _, aside := quarantinedStem(name); aside {
		return false
	}
	return name == indexName || !strings.HasPrefix(name, ".checkpoint.")
}

// reencryptFiles rewrites the files names of b under b's writer lock.
func reencryptFiles(ctx context.Context, b Backend, cfg *config, names []string, out *Reencrypted) error {
	unlock, err := lock(ctx, b, cfg.waitLock)
	if err != nil {
		return err
	}
	defer unlock()
	// The writer's privilege: a rewrite a crash interrupted left its
	// temporary file (sealed), as a save does.
	if tc, ok := storage.As[storage.TempCleaner](b); ok {
		if _, err := tc.RemoveTemps(ctx, cfg.layout.ownsTemp); err != nil {
			return fmt.Errorf("remove stale temporary files: %w", err)
		}
	}
	k := cfg.sealKeys
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		switch did, err := reencryptFile(ctx, b, cfg, k, name); {
		case err != nil:
			out.Failed = append(out.Failed, fmt.Errorf("%s: %w", b.Locate(name), err))
		case did == rewritten:
			out.Rewritten = append(out.Rewritten, b.Locate(name))
		case did == current:
			out.Current++
		}
	}
	return nil
}

// What reencryptFile did with a file.
type reencryptOutcome int

const (
	skipped   reencryptOutcome = iota // not a file, or not the store's: left alone
	current                           // already encrypted to the current key
	rewritten                         // rewritten to it (the index: removed)
)

// reencryptFile rewrites the file name of b to k's current key if it is
// encrypted to another one (or, if k reads plaintext, is a plaintext file
// of the store), and says what it did.
func reencryptFile(ctx context.Context, b Backend, cfg *config, k *sealed.Keys, name string) (reencryptOutcome, error) {
	for attempt := 0; ; attempt++ {
		rc, o, err := b.Open(ctx, name)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, storage.ErrNotRegular) {
			return skipped, nil // removed since the listing, or not a file
		}
		if err != nil {
			return skipped, err
		}
		first := make([]byte, sealed.KeyLineLen)
		n, err := io.ReadFull(rc, first)
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			rc.Close()
			return skipped, err
		}
		first = first[:n]
		if k.Current(first) {
			rc.Close()
			return current, nil
		}
		if name == indexName {
			// A cache, whatever it holds (another key's, damaged,
			// plaintext): the store writes it again.
			rc.Close()
			if _, err := b.Remove(ctx, name); err != nil {
				return skipped, err
			}
			return rewritten, nil
		}
		r, plain, err := k.Open(io.MultiReader(bytes.NewReader(first), rc), b.Locate(name))
		switch {
		case errors.Is(err, ErrPlaintext) && !ours(cfg, name):
			rc.Close()
			return skipped, nil // not the store's: neither read nor reported
		case err != nil:
			rc.Close()
			return skipped, err
		case plain && !ours(cfg, name):
			rc.Close()
			return skipped, nil
		}
		if fn, ok := cfg.layout.parse(name); ok {
			// A checkpoint is verified before it is rewritten: a damaged
			// one is reported, not sealed anew as if it were good.
			if err := verifyForReencrypt(ctx, b, cfg, k, name, fn); err != nil {
				rc.Close()
				return skipped, err
			}
		}
		var once sync.Once
		closeSrc := func() { once.Do(func() { rc.Close() }) }
		_, err = b.Replace(ctx, name, o.Version, k.Seal(func(w io.Writer) error {
			_, err := io.Copy(w, r)
			// Closed before the replacement is published: Windows
			// renames nothing over a file that is open.
			closeSrc()
			return err
		}))
		closeSrc()
		if errors.Is(err, ErrConflict) && attempt < 3 {
			continue // rewritten meanwhile (a writer of an older release?): read it again
		}
		if err != nil {
			return skipped, err
		}
		return rewritten, nil
	}
}

// ours reports whether name is a file a store writes: a checkpoint of the
// layout, a side file or session.json, or the header index.
func ours(cfg *config, name string) bool {
	if _, ok := cfg.layout.parse(name); ok {
		return true
	}
	return name == indexName || name == sessionFile || cfg.layout.sideName(name) == nil
}

// verifyForReencrypt reads the checkpoint name of b, whose name says fn,
// through k to its end, and returns the error that says it is damaged (or
// could not be read), nil if it verifies.
func verifyForReencrypt(ctx context.Context, b Backend, cfg *config, k *sealed.Keys, name string, fn fileName) error {
	f, o, err := sealed.Wrap(b, k).Open(ctx, name)
	if err != nil {
		return err
	}
	defer f.Close()
	return newCodec(cfg.compression(), cfg.maxRead).Read(f, o.Size, func(h header, _ []byte) error { return fn.agrees(h) })
}
