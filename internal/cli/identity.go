package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	agelib "filippo.io/age"

	"github.com/gocheckpoint/checkpoint"
)

// identityEnv names the environment variable that lists identity files
// (separated by os.PathListSeparator) when no --identity flag is given.
const identityEnv = "CHECKPOINT_IDENTITY"

// identityFlag is the --identity flag, which every command but keygen
// takes, repeatable: the files given, in order.
type identityFlag []string

func (f *identityFlag) String() string { return strings.Join(*f, ", ") }

func (f *identityFlag) Set(s string) error {
	if s == "" {
		return errors.New("empty identity file name")
	}
	*f = append(*f, s)
	return nil
}

// addIdentityFlag adds --identity to fs, appending to files.
func addIdentityFlag(fs *flag.FlagSet, files *identityFlag) {
	fs.Var(files, "identity", "an age identity `FILE` that reads encrypted stores (repeatable: the first key is the one written to); without it, the files listed in "+identityEnv)
}

// leadingIdentities takes the --identity flags that come before the
// command's name (checkpoint --identity k.txt ls DIR) off args.
func leadingIdentities(args []string, files *identityFlag) ([]string, error) {
	for len(args) > 0 {
		a := args[0]
		name, ok := strings.CutPrefix(a, "--")
		if !ok {
			name, ok = strings.CutPrefix(a, "-")
		}
		if !ok {
			return args, nil
		}
		switch {
		case name == "identity":
			if len(args) < 2 {
				return nil, usagef("flag needs an argument: -identity")
			}
			if err := files.Set(args[1]); err != nil {
				return nil, usagef("--identity: %v", err)
			}
			args = args[2:]
		case strings.HasPrefix(name, "identity="):
			if err := files.Set(strings.TrimPrefix(name, "identity=")); err != nil {
				return nil, usagef("--identity: %v", err)
			}
			args = args[1:]
		default:
			return args, nil
		}
	}
	return args, nil
}

// keyring is the identities a command reads encrypted stores with, and
// where they came from.
type keyring struct {
	ids    []*agelib.X25519Identity // ids[0] is the current key
	files  []string
	source string // "--identity" or identityEnv
}

// identities loads, once, the identities of the --identity files or, if
// none was given, of the files CHECKPOINT_IDENTITY lists: none at all if
// neither is set.
func (c *cli) identities() (keyring, error) {
	if c.keysLoaded {
		return c.keys, c.keysErr
	}
	c.keysLoaded = true
	k := keyring{files: c.identityFiles, source: "--identity"}
	if len(k.files) == 0 {
		k.source = identityEnv
		for _, f := range filepath.SplitList(c.getenv(identityEnv)) {
			if f != "" {
				k.files = append(k.files, f)
			}
		}
	}
	for _, f := range k.files {
		ids, err := readIdentities(f, k.source)
		if err != nil {
			c.keysErr = err
			return k, err
		}
		k.ids = append(k.ids, ids...)
	}
	c.keys = k
	return k, nil
}

// encryption returns the option that opens every store of the command:
// Encrypt with the current identity and the others, or none without
// identities.
func (c *cli) encryption() ([]checkpoint.Option, error) {
	k, err := c.identities()
	if err != nil || len(k.ids) == 0 {
		return nil, err
	}
	return []checkpoint.Option{checkpoint.Encrypt(k.ids[0], k.ids[1:]...)}, nil
}

// secretDetail matches what follows "malformed secret key" in age's
// errors: a detail that may quote a character of the key.
var secretDetail = regexp.MustCompile(`malformed secret key.*`)

// readIdentities reads the age identity file file (given with source,
// for messages), which must hold X25519 identities only. Its errors name
// the file and never quote a key.
func readIdentities(file, source string) ([]*agelib.X25519Identity, error) {
	what := source + " " + file
	if source == identityEnv {
		what = identityEnv + " file " + file
	}
	// Stat before opening: opening a named pipe would wait for a writer.
	fi, err := os.Stat(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, unwrapPath(err))
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s: not a regular file (an age identity file is)", checkpoint.ErrInvalid, what)
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, unwrapPath(err))
	}
	defer f.Close()
	ids, err := agelib.ParseIdentities(f)
	if err != nil {
		msg := secretDetail.ReplaceAllString(err.Error(), "malformed secret key")
		return nil, fmt.Errorf("%w: %s: not an age identity file (want lines AGE-SECRET-KEY-1..., as checkpoint keygen writes): %s", checkpoint.ErrInvalid, what, msg)
	}
	out := make([]*agelib.X25519Identity, 0, len(ids))
	for i, id := range ids {
		x, ok := id.(*agelib.X25519Identity)
		if !ok {
			kind := fmt.Sprintf("%T", id)
			if _, pq := id.(*agelib.HybridIdentity); pq {
				kind = "a post-quantum (AGE-SECRET-KEY-PQ-1...) identity"
			}
			return nil, fmt.Errorf("%w: %s: identity %d is %s: checkpoint reads X25519 identities only (AGE-SECRET-KEY-1..., as checkpoint keygen and age-keygen write)", checkpoint.ErrInvalid, what, i+1, kind)
		}
		out = append(out, x)
	}
	return out, nil
}

// unwrapPath returns the error of a *os.PathError without its path and
// operation, which the caller names.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// keyHint says what to do about err if a file no identity opens
// (ErrNoKey) or a plaintext file read with identities (ErrPlaintext) is
// behind it; "" otherwise.
func (c *cli) keyHint(err error) string {
	switch {
	case errors.Is(err, checkpoint.ErrNoKey):
		k, _ := c.identities()
		if len(k.ids) == 0 {
			return "the store is encrypted and no identity was given: pass the key's identity file with --identity FILE, or set " + identityEnv
		}
		return fmt.Sprintf("none of the identities given (%s %s) opens it: pass the identity file of the key it names with --identity FILE", k.source, strings.Join(k.files, ", "))
	case errors.Is(err, checkpoint.ErrPlaintext):
		k, _ := c.identities()
		return fmt.Sprintf("identities were given (%s), so only encrypted files are read: read a plaintext store without them, or encrypt it with checkpoint rekey --plaintext --to FILE", k.source)
	}
	return ""
}

// keyProblem names what keeps an encrypted file, or a plaintext one, from
// being read: "" for another error.
func keyProblem(err error) string {
	switch {
	case errors.Is(err, checkpoint.ErrNoKey):
		return "encrypted to a key no identity given opens"
	case errors.Is(err, checkpoint.ErrPlaintext):
		return "not encrypted: read only without identities"
	}
	return ""
}

// noteKeyErrors notes on stderr the files, errs, that no identity given
// opens or that are plaintext, with what to do.
func (c *cli) noteKeyErrors(errs []error) {
	if len(errs) == 0 {
		return
	}
	n := files(len(errs))
	if len(errs) > 1 {
		n += ", the first:"
	}
	c.notef("%s %s", n, errs[0])
	fmt.Fprintf(c.stderr, "checkpoint %s: %s\n", c.cmd, c.keyHint(errors.Join(errs...)))
}

// sessionKeyErrors returns the errors of the sessions in list whose
// session.json no identity opens, or is plaintext.
func sessionKeyErrors(list []checkpoint.Session) []error {
	var errs []error
	for _, s := range list {
		if s.Err != nil && keyProblem(s.Err) != "" {
			errs = append(errs, s.Err)
		}
	}
	return errs
}

// headerErrors is a slog.Handler that records, from a store's Warn
// records (an unreadable checkpoint header, logged by List), the error of
// each file by its path. It is safe for concurrent use.
type headerErrors struct {
	mu     sync.Mutex
	byPath map[string]error
	keys   []error // the errors that are ErrNoKey or ErrPlaintext, in the order met
}

func (h *headerErrors) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *headerErrors) Handle(_ context.Context, rec slog.Record) error {
	var path string
	var err error
	rec.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "path":
			path = a.Value.String()
		case "error":
			err, _ = a.Value.Any().(error)
		}
		return true
	})
	if err == nil || path == "" {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byPath == nil {
		h.byPath = make(map[string]error)
	}
	if _, seen := h.byPath[path]; !seen && keyProblem(err) != "" {
		h.keys = append(h.keys, fmt.Errorf("%s: %w", path, err))
	}
	h.byPath[path] = err
	return nil
}

func (h *headerErrors) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *headerErrors) WithGroup(string) slog.Handler      { return h }

// of returns the error of the file at path, if its header did not read.
func (h *headerErrors) of(path string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.byPath[path]
}

// keyErrs returns the files no identity given opens, or that are
// plaintext, with their errors, in the order met.
func (h *headerErrors) keyErrs() []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.keys)
}
