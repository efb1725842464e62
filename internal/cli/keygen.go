package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"time"

	agelib "filippo.io/age"

	"github.com/gocheckpoint/checkpoint"
)

var keygenCommand = command{
	name:    "keygen",
	args:    "[-o FILE]",
	summary: "make the key of encrypted stores: an age X25519 identity file (-o FILE: mode 0600, never overwritten)",
	noKeys:  true,
	flags: func(fs *flag.FlagSet) func(context.Context, *cli, []string) error {
		out := fs.String("o", "", "write the identity to `FILE`, created with mode 0600; an existing FILE is an error, never overwritten")
		return func(ctx context.Context, c *cli, args []string) error {
			if err := wantArgs(args, 0); err != nil {
				return err
			}
			return c.keygen(*out)
		}
	},
}

// keygen makes an X25519 identity and writes its identity file, as
// age-keygen does (comments, then the AGE-SECRET-KEY-1... line), to out or
// to stdout; and its public key and key ID to stderr.
func (c *cli) keygen(out string) error {
	id, err := agelib.GenerateX25519Identity()
	if err != nil {
		return err
	}
	pub := id.Recipient()
	var b bytes.Buffer
	fmt.Fprintf(&b, "# created: %s\n", c.now.UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "# public key: %s\n", pub)
	fmt.Fprintf(&b, "# key ID: %s (how encrypted checkpoint files and errors name this key)\n", checkpoint.KeyID(pub))
	fmt.Fprintf(&b, "%s\n", id)
	if out == "" || out == "-" {
		if _, err := c.stdout.Write(b.Bytes()); err != nil {
			return err
		}
	} else if err := writeNewFile(out, b.Bytes()); err != nil {
		return err
	}
	fmt.Fprintf(c.stderr, "# public key: %s\n# key ID: %s\n", pub, checkpoint.KeyID(pub))
	if out != "" && out != "-" {
		fmt.Fprintf(c.stderr, "# wrote the identity to %s: keep it secret and keep a copy; without it, what was encrypted to it cannot be read\n", printable(out))
	}
	return nil
}

// writeNewFile creates name with mode 0600 and writes data to it durably
// (a synced file); it never overwrites a file: an existing name is an
// error wrapping fs.ErrExist. On a failed write the file it created is
// removed.
func writeNewFile(name string, data []byte) (err error) {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("-o %s: %w: keygen never overwrites a file (remove it, or choose another name)", name, fs.ErrExist)
	}
	if err != nil {
		return fmt.Errorf("-o %s: %w", name, unwrapPath(err))
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(name)
			err = fmt.Errorf("-o %s: %w", name, unwrapPath(err))
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Close()
}
