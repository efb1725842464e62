package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/dirstore"
)

var cpCommand = command{
	name:    "cp",
	args:    "SRC DST",
	summary: "copy a store or a root of sessions to another place (a directory, a bucket), verifying every checkpoint",
	flags: func(fs *flag.FlagSet) func(context.Context, *cli, []string) error {
		asJSON := fs.Bool("json", false, "print a JSON report instead of lines")
		quiet := fs.Bool("q", false, "show no progress on stderr")
		wait := fs.String("wait", "", "wait up to `DURATION` (90s, 5m) for each destination store's writer lock while a program holds it; without it, refuse at once (exit code 4)")
		jobs := fs.Int("j", checkpoint.DefaultCopyConcurrency, "copy up to `N` files at once")
		layout := layoutFlag(fs)
		return func(ctx context.Context, c *cli, args []string) error {
			if err := wantArgs(args, 2, "SRC", "DST"); err != nil {
				return err
			}
			if *jobs < 1 {
				return usagef("-j %d: want at least 1", *jobs)
			}
			var d time.Duration
			if *wait != "" {
				var err error
				if d, err = parseDuration("--wait", *wait); err != nil {
					return err
				}
			}
			t, err := c.resolve(ctx, args[0], *layout)
			if err != nil {
				return err
			}
			if t.empty && !t.sessions {
				c.noCheckpoints(ctx, c.stderr, "checkpoint cp: %s: nothing to copy\n", t)
				return exitCode(exitFailed)
			}
			opts := t.options(checkpoint.WaitLock(d), checkpoint.CopyConcurrency(*jobs))
			return c.cp(ctx, t, args[1], opts, *asJSON, *quiet)
		}
	},
}

// cpReport is what cp did; --json prints it as it is.
type cpReport struct {
	Src      string       `json:"src"`
	Dst      string       `json:"dst"`
	Layout   string       `json:"layout"`
	OK       bool         `json:"ok"` // everything copied
	Copied   int          `json:"copied"`
	Present  int          `json:"present"` // already at DST with the same bytes
	Bytes    int64        `json:"bytes"`
	Sessions int          `json:"sessions"`
	Skipped  []fileResult `json:"skipped"`
	Failed   []string     `json:"failed"`
}

// cp copies the store or root of sessions t to the location dst.
func (c *cli) cp(ctx context.Context, t target, dst string, opts []checkpoint.Option, asJSON, quiet bool) error {
	src, err := c.backendAt(ctx, t.dir, true)
	if err != nil {
		return err
	}
	defer src.Close()
	to, err := c.backendAt(ctx, dst, false)
	if err != nil {
		return err
	}
	defer to.Close()
	m := c.newMeter("files", true, quiet)
	opts = append(opts, checkpoint.OnCopyProgress(func(p checkpoint.CopyProgress) { m.set(p.Done, p.Total, p.Bytes) }))
	res, err := checkpoint.Copy(ctx, to, src, opts...)
	m.stop()
	if err != nil && len(res.Skipped) == 0 && len(res.Failed) == 0 {
		if errors.Is(err, checkpoint.ErrLocked) {
			return lockedError{dir: dst, err: err}
		}
		return err
	}
	r := cpReport{Src: t.dir, Dst: dst, Layout: t.layout.String(), OK: err == nil, Copied: res.Copied, Present: res.Present, Bytes: res.Bytes, Sessions: res.Sessions, Skipped: []fileResult{}, Failed: []string{}}
	var keyErrs []error
	for _, e := range res.Skipped {
		kind := "checkpoint"
		var ce *checkpoint.Error
		if errors.As(e, &ce) && ce.Op == "copy session" {
			kind = "session"
		}
		r.Skipped = append(r.Skipped, fileResult{Path: pathOf(e, ""), Kind: kind, Problem: problem(e), Error: reason(e)})
		keyErrs = appendKeyErr(keyErrs, e)
	}
	for _, e := range res.Failed {
		r.Failed = append(r.Failed, e.Error())
	}
	if asJSON {
		if err := c.printJSON(r); err != nil {
			return err
		}
	} else {
		tw := newTable(c.stdout)
		for _, s := range r.Skipped {
			fmt.Fprintf(tw, "SKIPPED (%s)\t%s\t%s\n", s.Problem, printable(s.Path), printable(s.Error))
		}
		tw.Flush()
		for _, f := range r.Failed {
			fmt.Fprintf(c.stderr, "checkpoint cp: failed: %s\n", printableLines(f))
		}
		what := ""
		if t.sessions {
			what = fmt.Sprintf(", %d sessions whole", r.Sessions)
		}
		fmt.Fprintf(c.stdout, "copied %s (%s) from %s to %s, %d already there%s; %d skipped, %d failed\n",
			files(r.Copied), size(r.Bytes, false), printable(t.dir), printable(dst), r.Present, what, len(r.Skipped), len(r.Failed))
	}
	if len(keyErrs) > 0 {
		fmt.Fprintf(c.stderr, "checkpoint cp: %s\n", c.keyHint(errors.Join(keyErrs...)))
	}
	locked := slices.ContainsFunc(res.Failed, func(e error) bool { return errors.Is(e, checkpoint.ErrLocked) })
	if locked {
		fmt.Fprintf(c.stderr, "checkpoint cp: a writer holds the lock of a session at %s: stop it, or give --wait, and run cp again\n", printable(dst))
	}
	switch {
	case locked && !slices.ContainsFunc(res.Failed, func(e error) bool { return !errors.Is(e, checkpoint.ErrLocked) }):
		// As gc: the sessions a writer holds are left, the others copied.
		return exitCode(exitLocked)
	case len(r.Failed) > 0:
		return exitCode(exitFailed)
	case len(r.Skipped) > 0:
		return exitCode(exitFound)
	}
	return nil
}

// backendAt opens the location loc, a directory or SCHEME://..., as a
// Backend: read-only, or created on its first write.
func (c *cli) backendAt(ctx context.Context, loc string, readOnly bool) (checkpoint.Backend, error) {
	scheme := schemeOf(loc)
	if scheme == "" {
		if readOnly {
			return dirstore.Open(loc, dirstore.ReadOnly())
		}
		return dirstore.Open(loc)
	}
	i := slices.IndexFunc(c.remotes, func(r Remote) bool { return r.Scheme == scheme })
	if i < 0 || c.remotes[i].Open == nil {
		if i >= 0 && c.remotes[i].Missing != "" {
			return nil, usagef("%s: this checkpoint command reads local directories only; for %s:// locations install the one with %s support: %s", loc, scheme, scheme, c.remotes[i].Missing)
		}
		return nil, usagef("%s: unknown location scheme %q: give a directory", loc, scheme)
	}
	return c.remotes[i].Open(ctx, loc)
}
