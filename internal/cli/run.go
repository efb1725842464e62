// Package cli is the checkpoint command-line tool (its documentation is
// the package doc of github.com/gocheckpoint/checkpoint/cmd/checkpoint). It
// lives here, not in the command, so that two binaries share it: cmd/checkpoint,
// which reads local directories and pulls in no dependency, and
// github.com/gocheckpoint/checkpoint/s3store/cmd/checkpoint, which adds
// s3:// locations through a Remote (the core module stays free of the AWS
// SDK; Go lets the s3store module import this internal package because its
// import path is below this package's parent).
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/gocheckpoint/checkpoint"
)

// Exit codes; the package doc lists them for users.
const (
	exitOK     = 0
	exitFound  = 1 // verify found a bad checkpoint, diff a difference, cp skipped one
	exitUsage  = 2
	exitFailed = 3
	exitLocked = 4
)

// A command is one subcommand: its name, its usage line and summary, its
// flags (set up by flags, which returns the function that runs it).
type command struct {
	name    string
	args    string // the arguments after the name, for usage
	summary string
	flags   func(fs *flag.FlagSet) func(ctx context.Context, c *cli, args []string) error
	// noKeys: the command opens no store, and takes no --identity.
	noKeys bool
}

var commands = []command{lsCommand, showCommand, verifyCommand, diffCommand, cpCommand, pruneCommand, gcCommand, sessionsCommand, serveCommand, keygenCommand, rekeyCommand}

// A Remote opens the stores at locations of one URL scheme, such as
// s3://bucket/prefix, as Backends. Open is called once for every store a
// command opens (checkpoint.OpenBackend owns and closes what it returns),
// with the location as the user gave it.
type Remote struct {
	Scheme string // "s3", for locations s3://...
	Open   func(ctx context.Context, loc string) (checkpoint.Backend, error)
	// Missing, for a binary without the scheme, is what to install to
	// get it; not used when Open is set.
	Missing string
	// Usage, with Open, is the paragraph of the usage text that says what
	// a location of the scheme is and how it is reached.
	Usage string
}

// cli is what a running command writes to.
type cli struct {
	stdout, stderr io.Writer
	stderrTTY      bool // stderr is a terminal: progress is a bar (see meter)
	cmd            string
	remotes        []Remote
	now            time.Time           // for the age of a save time
	skipped        []*checkpoint.Error // damaged checkpoints a load passed over

	identityFiles identityFlag        // --identity
	getenv        func(string) string // os.Getenv, for CHECKPOINT_IDENTITY
	keys          keyring             // loaded by identities
	keysErr       error
	keysLoaded    bool
}

// notef writes a note to stderr, made printable: notes name files.
func (c *cli) notef(format string, args ...any) {
	fmt.Fprintf(c.stderr, "checkpoint %s: note: %s\n", c.cmd, printable(fmt.Sprintf(format, args...)))
}

// usageError is a bad command line: run prints it with the usage and exits
// with exitUsage.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// exitCode is an outcome that is not an error but not a success either
// (verify found a bad file, diff a difference): run exits with it silently.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit code %d", int(e)) }

// lockedError reports that a writer holds a store's lock, or that a
// session is being made in a root of sessions (sessions).
type lockedError struct {
	dir      string
	err      error
	sessions bool
}

func (e lockedError) Error() string {
	if e.sessions {
		return fmt.Sprintf("%s: a session is being created or forked right now (%v); try again", e.dir, e.err)
	}
	// The library's advice to open the store ReadOnly is for programs;
	// the read-only commands are this tool's way to do it.
	why, _, _ := strings.Cut(reason(e.err), "; to read the store beside its writer")
	return fmt.Sprintf("%s is open by a running writer (%s); stop it or try again (ls, show, verify, diff and --dry-run work beside it)", e.dir, why)
}

func (e lockedError) Unwrap() error { return e.err }

// Run runs the command line args (without the program name) and returns the
// exit code. A location SCHEME://... is opened by the remote of that scheme
// (one with Open set); without one, it is a usage error that says what to
// install (Missing).
func Run(args []string, stdout, stderr io.Writer, remotes ...Remote) int {
	return runContext(context.Background(), time.Now(), args, stdout, stderr, remotes)
}

// RunContext is Run with a context: serve, which runs until it is
// interrupted, also stops when ctx is done.
func RunContext(ctx context.Context, args []string, stdout, stderr io.Writer, remotes ...Remote) int {
	return runContext(ctx, time.Now(), args, stdout, stderr, remotes)
}

// runAt is Run with the time that save times' ages are counted from.
func runAt(now time.Time, args []string, stdout, stderr io.Writer, remotes []Remote) int {
	return runContext(context.Background(), now, args, stdout, stderr, remotes)
}

// runContext is runAt with a context: serve stops when it is done.
func runContext(ctx context.Context, now time.Time, args []string, stdout, stderr io.Writer, remotes []Remote) int {
	if len(args) == 0 {
		usage(stderr, remotes)
		return exitUsage
	}
	var ids identityFlag
	args, err := leadingIdentities(args, &ids)
	if err != nil {
		fmt.Fprintf(stderr, "checkpoint: %s\n", err)
		usage(stderr, remotes)
		return exitUsage
	}
	if len(args) == 0 {
		usage(stderr, remotes)
		return exitUsage
	}
	name, args := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(args) == 0 {
			usage(stdout, remotes)
			return exitOK
		}
		cmd, ok := lookup(args[0])
		if !ok {
			fmt.Fprintf(stderr, "checkpoint help: unknown command %q\n", args[0])
			usage(stderr, remotes)
			return exitUsage
		}
		fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
		cmd.flags(fs)
		if !cmd.noKeys {
			addIdentityFlag(fs, new(identityFlag))
		}
		commandUsage(stdout, cmd, fs)
		return exitOK
	}
	cmd, ok := lookup(name)
	if !ok {
		fmt.Fprintf(stderr, "checkpoint: unknown command %q\n", name)
		usage(stderr, remotes)
		return exitUsage
	}
	fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	do := cmd.flags(fs)
	if !cmd.noKeys {
		addIdentityFlag(fs, &ids)
	} else if len(ids) > 0 {
		fmt.Fprintf(stderr, "checkpoint %s: --identity is not a flag of %s\n", cmd.name, cmd.name)
		return exitUsage
	}
	pos, err := parseFlags(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		commandUsage(stdout, cmd, fs)
		return exitOK
	}
	c := &cli{stdout: stdout, stderr: stderr, stderrTTY: isTerminal(stderr), cmd: cmd.name, now: now, remotes: remotes, identityFiles: ids, getenv: os.Getenv}
	if err != nil {
		err = usageError{err.Error()}
	} else {
		err = do(ctx, c, pos)
	}
	var code exitCode
	var uerr usageError
	var lerr lockedError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &code):
		return int(code)
	case errors.As(err, &uerr), errors.Is(err, checkpoint.ErrInvalid):
		fmt.Fprintf(stderr, "checkpoint %s: %s\n", cmd.name, printableLines(err.Error()))
		commandUsage(stderr, cmd, fs)
		return exitUsage
	case errors.As(err, &lerr):
		fmt.Fprintf(stderr, "checkpoint %s: %s\n", cmd.name, printableLines(err.Error()))
		return exitLocked
	default:
		// An error may quote what it read (a path, a damaged file's
		// message): print it escaped, keeping the lines of a joined error.
		msg := printableLines(err.Error())
		if !strings.HasPrefix(msg, "checkpoint: ") {
			msg = "checkpoint " + cmd.name + ": " + msg
		}
		fmt.Fprintln(stderr, msg)
		if hint := c.keyHint(err); hint != "" {
			fmt.Fprintf(stderr, "checkpoint %s: %s\n", cmd.name, hint)
		}
		return exitFailed
	}
}

func lookup(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// parseInterleaved parses flags that may come before, between or after the
// positional arguments, which it returns in order. The flag package stops at
// the first argument that is not a flag; parsing resumes after it. After
// "--", everything is positional.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// takesValue reports whether the last of args is a flag that takes a value
// (--keep-last, not --dry-run or --keep-last=3), which the next argument is.
func takesValue(fs *flag.FlagSet, args []string) bool {
	if len(args) == 0 {
		return false
	}
	name, ok := strings.CutPrefix(args[len(args)-1], "-")
	if !ok || strings.Contains(name, "=") {
		return false
	}
	f := fs.Lookup(strings.TrimPrefix(name, "-"))
	if f == nil {
		return false
	}
	b, isBool := f.Value.(interface{ IsBoolFlag() bool })
	return !isBool || !b.IsBoolFlag()
}

// negativeNumber matches an argument that the flag package would take for
// a flag but that is a (bad) step: -3.
var negativeNumber = regexp.MustCompile(`^-[0-9]+$`)

// parseFlags is parseInterleaved, except that a negative number is an
// argument, so that "show DIR -3" is told that steps are 0 or more rather
// than that -3 is no flag.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	start := 0
	for i, a := range args {
		if a == "--" {
			break
		}
		if negativeNumber.MatchString(a) && !takesValue(fs, args[:i]) {
			more, err := parseInterleaved(fs, args[start:i])
			if err != nil {
				return nil, err
			}
			pos = append(append(pos, more...), a)
			start = i + 1
		}
	}
	more, err := parseInterleaved(fs, args[start:])
	if err != nil {
		return nil, err
	}
	return append(pos, more...), nil
}

// usage writes the tool's usage: its commands, and what DIR may be, which
// the remotes that open locations add to.
func usage(w io.Writer, remotes []Remote) {
	var schemes, paragraphs []string
	for _, r := range remotes {
		if r.Open != nil {
			schemes = append(schemes, r.Scheme+"://")
			if r.Usage != "" {
				paragraphs = append(paragraphs, r.Usage)
			}
		}
	}
	what := "checkpoint directories"
	if len(schemes) > 0 {
		what = "checkpoint directories and the stores at " + strings.Join(schemes, ", ") + " locations"
	}
	fmt.Fprintf(w, "checkpoint inspects and maintains %s\n(github.com/gocheckpoint/checkpoint).\n\nUsage:\n", what)
	for _, c := range commands {
		fmt.Fprintf(w, "  checkpoint %-6s %-22s %s\n", c.name, c.args, c.summary)
	}
	fmt.Fprint(w, `  checkpoint help   [COMMAND]

DIR is a store's directory or a root of sessions. Flags may come before or
after the arguments. Only prune, gc, rekey and sessions rm|prune write, and
cp writes DST; they take the store's writer lock; the others open stores
read-only, safe beside a running program.

Encrypted stores (checkpoint.Encrypt) are read with --identity FILE, an age
identity file (checkpoint keygen makes one), given to any command, before
its name or among its flags, and repeatable; without it, the files listed in
`+identityEnv+` (separated by '`+string(os.PathListSeparator)+`'). Every identity is read; the
first is the current key: what a command writes is encrypted to it.
rekey --to FILE re-encrypts a store (or a root of sessions) to a new key,
file by file, and --plaintext encrypts a plaintext one.
`)
	for _, p := range paragraphs {
		fmt.Fprintf(w, "\n%s\n", strings.TrimRight(p, "\n"))
	}
	fmt.Fprint(w, `
Exit codes: 0 ok; 1 verify found a bad checkpoint, diff a difference, or
cp skipped one; 2 usage error; 3 failure (missing directory or step, I/O,
unloadable checkpoint, a file rekey or cp could not write); 4 a writer
holds the store's lock (prune, gc, rekey, sessions rm, cp's DST), or a
session is being made in the root (gc).
`)
}

func commandUsage(w io.Writer, cmd command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: checkpoint %s %s\n\n%s.\n", cmd.name, cmd.args, upperFirst(cmd.summary))
	var b strings.Builder
	fs.VisitAll(func(f *flag.Flag) {
		// As the README and the package doc write them: --name, and -v
		// for a one-letter flag (either form works).
		dash := "--"
		if len(f.Name) == 1 {
			dash = "-"
		}
		name, usage := flag.UnquoteUsage(f)
		fmt.Fprintf(&b, "  %s%s", dash, f.Name)
		if name != "" {
			fmt.Fprintf(&b, " %s", name)
		}
		fmt.Fprintf(&b, "\n    \t%s", strings.ReplaceAll(usage, "\n", "\n    \t"))
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" {
			fmt.Fprintf(&b, " (default %s)", f.DefValue)
		}
		b.WriteByte('\n')
	})
	if b.Len() > 0 {
		fmt.Fprintf(w, "\nFlags (before or after the arguments):\n%s", b.String())
	}
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// layoutFlag adds the --layout flag that every command has.
func layoutFlag(fs *flag.FlagSet) *string {
	return fs.String("layout", "", "the store's file `LAYOUT`: PREFIX/DIGITS (turn/3) or PREFIX; inferred from the file names if not set")
}

// wantArgs checks the positional arguments: the required ones, named in
// order by names, then at most max in all. A missing argument is named:
// "missing STEP", "missing A and B".
func wantArgs(args []string, max int, names ...string) error {
	if len(args) < len(names) {
		missing := names[len(args):]
		list := missing[len(missing)-1]
		if len(missing) > 1 {
			list = strings.Join(missing[:len(missing)-1], ", ") + " and " + list
		}
		return usagef("missing %s", list)
	}
	if len(args) > max {
		return usagef("too many arguments: %q", args[max:])
	}
	return nil
}
