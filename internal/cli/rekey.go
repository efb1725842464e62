package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/storage"
)

var rekeyCommand = command{
	name:    "rekey",
	args:    "--to FILE [--plaintext] DIR",
	summary: "re-encrypt a store or root of sessions to a new key (or encrypt a plaintext one), file by file",
	flags: func(fs *flag.FlagSet) func(context.Context, *cli, []string) error {
		to := fs.String("to", "", "the identity `FILE` of the new key: its first identity (the --identity ones read the files encrypted to older keys)")
		plaintext := fs.Bool("plaintext", false, "also encrypt the store's plaintext files: the migration of a plaintext store")
		wait := fs.String("wait", "", "wait up to `DURATION` (90s, 5m) for each store's writer lock while a program holds it; without it, refuse at once (exit code 4)")
		layout := layoutFlag(fs)
		return func(ctx context.Context, c *cli, args []string) error {
			if *to == "" {
				return usagef("missing --to FILE: the identity file of the key to re-encrypt to (checkpoint keygen makes one)")
			}
			var d time.Duration
			if *wait != "" {
				var err error
				if d, err = parseDuration("--wait", *wait); err != nil {
					return err
				}
			}
			newIDs, err := readIdentities(*to, "--to")
			if err != nil {
				return err
			}
			t, err := c.oneDir(ctx, args, *layout)
			if err != nil {
				return err
			}
			if t.empty && !t.sessions {
				fmt.Fprintf(c.stdout, "nothing to rekey in %s: no checkpoint files (give --layout if they have another name)\n", printable(t.dir))
				return nil
			}
			old, _ := c.identities() // loaded by oneDir
			opts := []checkpoint.Option{checkpoint.Encrypt(newIDs[0], old.ids...), t.layout.Option(), checkpoint.WaitLock(d)}
			if *plaintext {
				opts = append(opts, checkpoint.ReadPlaintext())
			}
			return c.rekey(ctx, t, opts, checkpoint.KeyID(newIDs[0].Recipient()))
		}
	},
}

// rekey runs checkpoint.Reencrypt on the backend of t with opts, printing
// each file it rewrites as it goes, then what it did.
func (c *cli) rekey(ctx context.Context, t target, opts []checkpoint.Option, keyID string) error {
	var b checkpoint.Backend
	var err error
	if t.remote == nil {
		b, err = dirstore.Open(t.dir)
	} else {
		b, err = t.remote.Open(ctx, t.dir)
	}
	if err != nil {
		return err
	}
	p := &progress{w: c.stdout}
	res, err := checkpoint.Reencrypt(ctx, &progressBackend{Backend: b, p: p}, opts...)
	if cerr := b.Close(); err == nil && cerr != nil {
		return cerr
	}
	if err != nil && len(res.Failed) == 0 {
		if errors.Is(err, checkpoint.ErrLocked) {
			return lockedError{dir: t.dir, err: err}
		}
		return err
	}
	for _, f := range res.Failed {
		fmt.Fprintf(c.stderr, "checkpoint rekey: failed: %s\n", printableLines(f.Error()))
	}
	fmt.Fprintf(c.stdout, "rekey of %s to key %s: rewritten %d, already current %d, failed %d\n", printable(t.dir), keyID, len(res.Rewritten), res.Current, len(res.Failed))
	if len(res.Failed) > 0 {
		all := errors.Join(res.Failed...)
		if errors.Is(all, checkpoint.ErrPlaintext) {
			fmt.Fprintf(c.stderr, "checkpoint rekey: plaintext files are encrypted only with --plaintext (the migration of a plaintext store)\n")
		}
		if errors.Is(all, checkpoint.ErrNoKey) {
			fmt.Fprintf(c.stderr, "checkpoint rekey: files are encrypted to a key that no --identity given opens: %s\n", c.keyHint(checkpoint.ErrNoKey))
		}
		return exitCode(exitFailed)
	}
	return nil
}

// progress prints each file a rekey rewrites, with the count so far.
type progress struct {
	w io.Writer
	n int
}

// progressBackend is a storage.Wrapper that reports each replacement its
// backend makes (a file rewritten), in it and in its child stores.
type progressBackend struct {
	checkpoint.Backend
	p *progress
}

func (b *progressBackend) Unwrap() storage.Backend { return b.Backend }

func (b *progressBackend) Replace(ctx context.Context, name, ifVersion string, write func(io.Writer) error) (checkpoint.Object, error) {
	o, err := b.Backend.Replace(ctx, name, ifVersion, write)
	if err == nil {
		b.p.n++
		fmt.Fprintf(b.p.w, "rewrote %s (%d so far)\n", printable(b.Locate(name)), b.p.n)
	}
	return o, err
}

func (b *progressBackend) Sub(ctx context.Context, name string, create bool) (checkpoint.Backend, error) {
	sub, err := b.Backend.Sub(ctx, name, create)
	if err != nil {
		return nil, err
	}
	return &progressBackend{Backend: sub, p: b.p}, nil
}
