package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/gocheckpoint/checkpoint"
)

// Exit codes; the package doc lists them for users.
const (
	exitOK     = 0
	exitFound  = 1 // verify found a bad checkpoint, or diff a difference
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
}

var commands = []command{lsCommand, showCommand, verifyCommand, diffCommand, pruneCommand, gcCommand}

// cli is what a running command writes to.
type cli struct {
	stdout, stderr io.Writer
	cmd            string
	skipped        []*checkpoint.Error // damaged checkpoints a load passed over
}

// notef writes a note to stderr.
func (c *cli) notef(format string, args ...any) {
	fmt.Fprintf(c.stderr, "checkpoint %s: note: %s\n", c.cmd, fmt.Sprintf(format, args...))
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
	return fmt.Sprintf("%s is open by a running writer (%v); stop it or try again", e.dir, e.err)
}

func (e lockedError) Unwrap() error { return e.err }

// run runs the command line args (without the program name) and returns the
// exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	name, args := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(args) == 0 {
			usage(stdout)
			return exitOK
		}
		cmd, ok := lookup(args[0])
		if !ok {
			fmt.Fprintf(stderr, "checkpoint help: unknown command %q\n", args[0])
			usage(stderr)
			return exitUsage
		}
		fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
		cmd.flags(fs)
		commandUsage(stdout, cmd, fs)
		return exitOK
	}
	cmd, ok := lookup(name)
	if !ok {
		fmt.Fprintf(stderr, "checkpoint: unknown command %q\n", name)
		usage(stderr)
		return exitUsage
	}
	fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	do := cmd.flags(fs)
	pos, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		commandUsage(stdout, cmd, fs)
		return exitOK
	}
	c := &cli{stdout: stdout, stderr: stderr, cmd: cmd.name}
	if err != nil {
		err = usageError{err.Error()}
	} else {
		err = do(context.Background(), c, pos)
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
		fmt.Fprintf(stderr, "checkpoint %s: %v\n", cmd.name, err)
		commandUsage(stderr, cmd, fs)
		return exitUsage
	case errors.As(err, &lerr):
		fmt.Fprintf(stderr, "checkpoint %s: %v\n", cmd.name, err)
		return exitLocked
	default:
		msg := err.Error()
		if !strings.HasPrefix(msg, "checkpoint: ") {
			msg = "checkpoint " + cmd.name + ": " + msg
		}
		fmt.Fprintln(stderr, msg)
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

func usage(w io.Writer) {
	fmt.Fprint(w, `checkpoint inspects and maintains checkpoint directories
(github.com/gocheckpoint/checkpoint).

Usage:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  checkpoint %-6s %-22s %s\n", c.name, c.args, c.summary)
	}
	fmt.Fprint(w, `  checkpoint help   [COMMAND]

DIR is a store's directory or a root of sessions. Flags may come before or
after the arguments. Only prune and gc write, and they take the store's
writer lock; the others open stores read-only, safe beside a running program.

Exit codes: 0 ok; 1 verify found a bad checkpoint, or diff a difference;
2 usage error; 3 failure (missing directory or step, I/O, unloadable
checkpoint); 4 a writer holds the store's lock (prune, gc).
`)
}

func commandUsage(w io.Writer, cmd command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: checkpoint %s %s\n\n%s.\n", cmd.name, cmd.args, upperFirst(cmd.summary))
	var b strings.Builder
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
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

// wantArgs checks the number of positional arguments.
func wantArgs(args []string, min, max int, names string) error {
	if len(args) < min {
		return usagef("missing %s", names)
	}
	if len(args) > max {
		return usagef("too many arguments: %q", args[max:])
	}
	return nil
}
