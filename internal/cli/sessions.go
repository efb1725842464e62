package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gocheckpoint/checkpoint"
)

var sessionsCommand = command{
	name:    "sessions",
	args:    "ls|rm|prune ROOT [ID..]",
	summary: "list, remove (rm ROOT ID...) or expire (prune ROOT --idle 720h) the sessions of a root",
	flags: func(fs *flag.FlagSet) func(context.Context, *cli, []string) error {
		dryRun := fs.Bool("dry-run", false, "rm, prune: print what would be removed and remove nothing (takes no lock)")
		idle := fs.String("idle", "", "prune: remove the sessions inactive for longer than `DURATION` (90m, 720h, 30d); pinned ones (meta "+checkpoint.PinMeta+") and damaged ones stay")
		asJSON := fs.Bool("json", false, "ls: print JSON instead of a table")
		layout := layoutFlag(fs)
		return func(ctx context.Context, c *cli, args []string) error {
			if len(args) == 0 {
				return usagef("missing ls, rm or prune")
			}
			sub, args := args[0], args[1:]
			switch sub {
			case "ls":
				if err := wantArgs(args, 1, "ROOT"); err != nil {
					return err
				}
			case "rm":
				if err := wantArgs(args, len(args), "ROOT", "ID"); err != nil {
					return err
				}
			case "prune":
				if err := wantArgs(args, 1, "ROOT"); err != nil {
					return err
				}
				if *idle == "" {
					return usagef("prune: missing --idle DURATION (such as 720h or 30d): the sessions inactive for longer are removed")
				}
			default:
				return usagef("unknown sessions command %q: want ls, rm or prune", sub)
			}
			if *idle != "" && sub != "prune" {
				return usagef("--idle is for prune")
			}
			if *dryRun && sub == "ls" {
				return usagef("--dry-run is for rm and prune")
			}
			if *asJSON && sub != "ls" {
				return usagef("--json is for ls")
			}
			t, err := c.sessionsRoot(ctx, args[0], *layout)
			if err != nil {
				return err
			}
			switch sub {
			case "ls":
				return c.sessionsLs(ctx, t, *asJSON)
			case "rm":
				return c.sessionsRm(ctx, t, args[1:], *dryRun)
			}
			d, err := parseDuration("--idle", *idle)
			if err != nil {
				return err
			}
			return c.sessionsPrune(ctx, t, d, *dryRun)
		}
	},
}

// sessionsRoot resolves ROOT, which must be a root of sessions, or a
// directory (a location) with no checkpoint in it: a root whose sessions
// were all removed.
func (c *cli) sessionsRoot(ctx context.Context, dir, layoutArg string) (target, error) {
	t, err := c.resolve(ctx, dir, layoutArg)
	if err != nil {
		return t, err
	}
	if !t.sessions && !t.empty {
		return t, usagef("%s is a store, not a root of sessions (checkpoint ls %s lists its checkpoints)", t.dir, t.dir)
	}
	return t, nil
}

// sessionsLs lists the sessions of the root t, the most recently active
// first.
func (c *cli) sessionsLs(ctx context.Context, t target, asJSON bool) error {
	if asJSON {
		return c.lsSessions(ctx, t, true)
	}
	root, err := t.openSessions(ctx, t.options(checkpoint.ReadOnly())...)
	if err != nil {
		return err
	}
	defer root.Close()
	list, err := root.List(ctx)
	if err != nil {
		return err
	}
	defer c.noteKeyErrors(sessionKeyErrors(list))
	if len(list) == 0 {
		fmt.Fprintf(c.stdout, "no sessions in %s\n", printable(t.dir))
		return nil
	}
	tw := newTable(c.stdout)
	// The METRICS column (of each session's last checkpoint) appears when
	// one records a metric (WithMetric).
	metricsHead := ""
	withMetrics := slices.ContainsFunc(list, func(s checkpoint.Session) bool { return len(s.LastMetrics) > 0 })
	if withMetrics {
		metricsHead = "METRICS\t"
	}
	fmt.Fprintf(tw, "SESSION\tCHECKPOINTS\tLAST STEP\tLAST ACTIVE\t%sNOTE\n", metricsHead)
	for _, s := range list {
		metrics := ""
		if withMetrics {
			metrics = formatMetrics(s.LastMetrics) + "\t"
		}
		last := "-"
		if !s.LastSaved.IsZero() {
			last = strconv.FormatInt(s.LastStep, 10)
		}
		active := "-"
		if !s.Active().IsZero() {
			active = c.when(s.Active())
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s%s\n", sessionLabel(s), s.Checkpoints, last, active, metrics, sessionNote(s))
	}
	return tw.Flush()
}

// sessionNote says what keeps a session from expiring: a pin, or damage.
func sessionNote(s checkpoint.Session) string {
	var notes []string
	if s.Pinned() {
		notes = append(notes, "pinned: "+printable(s.Meta[checkpoint.PinMeta]))
	}
	if s.Err != nil {
		notes = append(notes, sessionErrText(s.Err))
	}
	return strings.Join(notes, "; ")
}

// sessionsRm removes the sessions ids of the root t, going on past those
// it cannot remove. A session a writer holds makes it exit with
// exitLocked.
func (c *cli) sessionsRm(ctx context.Context, t target, ids []string, dryRun bool) error {
	opts := t.options()
	if dryRun {
		opts = append(opts, checkpoint.ReadOnly())
	}
	root, err := t.openSessions(ctx, opts...)
	if err != nil {
		return err
	}
	defer root.Close()
	var errs []error
	var locked error
	removed := 0
	for _, id := range ids {
		if dryRun {
			s, err := root.Get(ctx, id)
			if errors.Is(err, checkpoint.ErrNotFound) {
				s, err = damagedByName(ctx, root, id, err)
			}
			if err != nil && !errors.Is(err, checkpoint.ErrCorrupt) {
				errs = append(errs, err)
				continue
			}
			fmt.Fprintf(c.stdout, "would remove %s (%s)\n", printable(id), c.sessionSummary(s))
			removed++
			continue
		}
		err := root.Delete(ctx, id)
		switch {
		case errors.Is(err, checkpoint.ErrLocked):
			// Named by where the session is stored (an ID is no path).
			where := t.dir
			if s, gerr := root.Get(ctx, id); gerr == nil || s.Dir != "" {
				where = s.Dir
			}
			locked = lockedError{dir: printable(where), err: err}
		case err != nil:
			errs = append(errs, err)
		default:
			fmt.Fprintf(c.stdout, "removed %s\n", printable(id))
			removed++
		}
	}
	if dryRun {
		fmt.Fprintf(c.stdout, "dry run: would remove %d of %d sessions, unless a writer holds them; nothing was removed\n", removed, len(ids))
	}
	if len(errs) > 0 {
		if locked != nil {
			errs = append(errs, locked)
		}
		return errors.Join(errs...)
	}
	return locked
}

// damagedByName returns the damaged session of unknown ID that ls lists
// by its stored name, name, which Delete removes by that name; or notFound.
func damagedByName(ctx context.Context, root *checkpoint.Sessions, name string, notFound error) (checkpoint.Session, error) {
	list, err := root.List(ctx)
	if err != nil {
		return checkpoint.Session{}, notFound
	}
	for _, s := range list {
		if s.ID == "" && s.Err != nil && path.Base(filepath.ToSlash(s.Dir)) == name {
			return s, s.Err
		}
	}
	return checkpoint.Session{}, notFound
}

// sessionSummary describes a session for rm and prune.
func (c *cli) sessionSummary(s checkpoint.Session) string {
	what := fmt.Sprintf("%d checkpoints", s.Checkpoints)
	if !s.Active().IsZero() {
		what += ", last active " + c.when(s.Active())
	}
	if note := sessionNote(s); note != "" {
		what += "; " + note
	}
	return what
}

// sessionsPrune removes the sessions of the root t inactive for longer
// than idle (checkpoint.Sessions.PruneIdle), or lists them
// (Sessions.Idle).
func (c *cli) sessionsPrune(ctx context.Context, t target, idle time.Duration, dryRun bool) error {
	opts := t.options()
	if dryRun {
		opts = append(opts, checkpoint.ReadOnly())
	}
	root, err := t.openSessions(ctx, opts...)
	if err != nil {
		return err
	}
	defer root.Close()
	if dryRun {
		list, err := root.Idle(ctx, idle)
		if err != nil {
			return err
		}
		for _, s := range list {
			fmt.Fprintf(c.stdout, "would remove %s (%s)\n", printable(s.ID), c.sessionSummary(s))
		}
		fmt.Fprintf(c.stdout, "dry run: would remove %d sessions inactive for longer than %s, unless a writer holds them; nothing was removed\n", len(list), idle)
		return nil
	}
	removed, err := root.PruneIdle(ctx, idle)
	for _, id := range removed {
		fmt.Fprintf(c.stdout, "removed %s\n", printable(id))
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "removed %d sessions inactive for longer than %s from %s (pinned, damaged and running ones stay)\n", len(removed), idle, printable(t.dir))
	return nil
}

// sessionErrText says what keeps a session from being read: "damaged: "
// and why, or, for a session.json no identity opens (or a plaintext one
// read with identities), the error alone, which says so.
func sessionErrText(err error) string {
	if keyProblem(err) != "" {
		return printable(reason(err))
	}
	return "damaged: " + printable(reason(err))
}
