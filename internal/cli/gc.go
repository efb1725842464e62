package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/gocheckpoint/checkpoint"
)

var gcCommand = command{
	name:    "gc",
	args:    "DIR",
	summary: "remove temporary files of interrupted saves, quarantined checkpoints and superseded error checkpoints",
	flags: func(fs *flag.FlagSet) func(context.Context, *cli, []string) error {
		dryRun := fs.Bool("dry-run", false, "print what would be removed and remove nothing (takes no lock)")
		layout := layoutFlag(fs)
		return func(ctx context.Context, c *cli, args []string) error {
			t, err := c.oneDir(ctx, args, *layout)
			if err != nil {
				return err
			}
			g := gc{cli: c, dryRun: *dryRun, meter: c.newMeter("sessions", false, false)}
			defer g.meter.stop()
			if t.sessions && t.remote != nil {
				// Its sessions are listed by the library, but what crashed
				// forks left is not (RemoveStaging removes it unlisted).
				return usagef("%s is a root of sessions in object storage, which gc does not clean as a whole yet; give one session (checkpoint gc %s)", t.dir, joinName(t.dir, "ID"))
			}
			if t.sessions {
				err = g.sessions(ctx, t)
			} else {
				err = g.store(ctx, t, t.dir)
			}
			if err != nil {
				return err
			}
			return g.summary(t)
		}
	},
}

// gc removes leftovers and counts what it removed.
type gc struct {
	*cli
	dryRun  bool
	removed int
	locked  []error // stores it skipped because a writer holds them
	meter   *meter  // the sessions of a root cleaned so far, on a terminal
}

const (
	whatTemp        = "temporary file of an interrupted save"
	whatQuarantined = "damaged checkpoint moved aside"
	whatStaging     = "session left half-made by a crash"
	whatSuperseded  = "error checkpoint superseded by a clean checkpoint saved after it"
	// What a --dry-run says of a temporary file when the writer lock is
	// held (whatLiveTemp, with the holder where known), when the system
	// shows no holder (whatUnseenTemp: a writer in another container or
	// on another host would not be shown), or when it cannot tell
	// (whatMaybeTemp). gc without --dry-run takes the lock: every
	// temporary file it finds is stale.
	whatLiveTemp   = "temporary file of a save in progress: a live writer holds the lock%s; gc without --dry-run leaves the store alone while it runs"
	whatUnseenTemp = "temporary file of an interrupted save, unless a writer this system cannot see (in another container, or on another host) holds the lock"
	whatMaybeTemp  = "temporary file of an interrupted save, or of a save in progress if a writer is running"
)

func (g *gc) report(path, what string) {
	g.meter.clear() // the line goes where the bar was
	verb := "removed"
	if g.dryRun {
		verb = "would remove"
	}
	fmt.Fprintf(g.stdout, "%s %s (%s)\n", verb, printable(path), what)
	g.removed++
}

// store cleans the store in dir. A writer's Open removes the stale
// temporary files (it logs each one, which is how they are counted here),
// then RemoveLeftovers removes the quarantined checkpoints.
func (g *gc) store(ctx context.Context, t target, dir string) error {
	if t.empty {
		// No file of any layout: nothing to remove, and opening a writer
		// would leave a lock file in a directory that may be no store.
		return nil
	}
	if g.dryRun {
		st, err := t.open(ctx, dir, t.options(checkpoint.ReadOnly())...)
		if err != nil {
			return err
		}
		defer st.Close()
		left, err := st.Leftovers(ctx)
		if err != nil {
			return err
		}
		g.reportLeftovers(left, tempWhat(left))
		// With no retention rule, what Prune would remove is the error
		// checkpoints that a clean checkpoint superseded.
		superseded, err := st.PruneDryRun(ctx)
		if err != nil {
			return err
		}
		g.reportSuperseded(superseded)
		return nil
	}
	rec := &pathRecorder{}
	st, err := t.open(ctx, dir, t.options(checkpoint.WithLogger(slog.New(rec)))...)
	if err != nil {
		if errors.Is(err, checkpoint.ErrLocked) {
			return lockedError{dir: dir, err: err}
		}
		return err
	}
	defer st.Close()
	opened := rec.stop()
	for _, p := range opened {
		g.report(p, whatTemp)
	}
	left, err := st.RemoveLeftovers(ctx)
	if err != nil {
		return err
	}
	g.reportLeftovers(left, whatTemp)
	// A writer removes the error checkpoints that a clean checkpoint
	// superseded (at the latest when it closes): gc does it here, to say so.
	superseded, err := st.Prune(ctx)
	g.reportSuperseded(superseded)
	if err != nil {
		return err
	}
	return st.Close()
}

func (g *gc) reportSuperseded(infos []checkpoint.Info) {
	for _, info := range infos {
		g.report(info.Location, whatSuperseded)
	}
}

// tempWhat says what the temporary files of left, listed by a dry run
// beside a writer that may be running, are.
func tempWhat(left checkpoint.Leftovers) string {
	switch left.Lock {
	case checkpoint.LockNotSeen:
		return whatUnseenTemp
	case checkpoint.LockHeld:
		holder := ""
		if left.LockHolder == os.Getpid() {
			holder = " (this process)"
		} else if left.LockHolder > 0 {
			holder = fmt.Sprintf(" (process %d)", left.LockHolder)
		}
		return fmt.Sprintf(whatLiveTemp, holder)
	}
	return whatMaybeTemp
}

func (g *gc) reportLeftovers(left checkpoint.Leftovers, temp string) {
	for _, p := range left.Temps {
		g.report(p, temp)
	}
	for _, p := range left.Quarantined {
		g.report(p, whatQuarantined)
	}
}

// sessions cleans a root of sessions: half-made sessions (under the root's
// lock), then every session's store. A session whose writer runs is skipped
// and reported; the others are cleaned all the same.
func (g *gc) sessions(ctx context.Context, t target) error {
	if g.dryRun {
		dirents, err := os.ReadDir(t.dir)
		if err != nil {
			return &checkpoint.Error{Op: "gc", Path: t.dir, Err: err}
		}
		for _, d := range dirents {
			if d.IsDir() && strings.HasPrefix(d.Name(), ".staging-") {
				g.report(filepath.Join(t.dir, d.Name()), whatStaging)
			}
		}
	} else {
		root, err := checkpoint.OpenSessions(t.dir, t.options()...)
		if err != nil {
			return err
		}
		staged, err := root.RemoveStaging(ctx)
		root.Close()
		for _, p := range staged {
			g.report(p, whatStaging)
		}
		if errors.Is(err, checkpoint.ErrLocked) {
			g.locked = append(g.locked, lockedError{dir: t.dir, err: err, sessions: true})
		} else if err != nil {
			return err
		}
	}
	ids, _ := sessionDirs(t.dir)
	for i, id := range ids {
		err := g.store(ctx, t, filepath.Join(t.dir, id))
		g.meter.set(i+1, len(ids), -1)
		var lerr lockedError
		if errors.As(err, &lerr) {
			g.locked = append(g.locked, lerr)
		} else if err != nil {
			return err
		}
	}
	return nil
}

func (g *gc) summary(t target) error {
	g.meter.stop()
	switch {
	case g.removed == 0 && len(g.locked) == 0 && t.empty:
		fmt.Fprintf(g.stdout, "nothing to remove in %s: no checkpoint files (give --layout if they have another name)\n", printable(t.dir))
	case g.removed == 0 && len(g.locked) == 0:
		fmt.Fprintf(g.stdout, "nothing to remove in %s (layout %s)\n", printable(t.dir), t.layout)
	case g.dryRun:
		fmt.Fprintf(g.stdout, "dry run: would remove %s; nothing was removed\n", files(g.removed))
	default:
		fmt.Fprintf(g.stdout, "removed %s\n", files(g.removed))
	}
	if len(g.locked) == 0 {
		return nil
	}
	for _, err := range g.locked[:len(g.locked)-1] {
		fmt.Fprintf(g.stderr, "checkpoint gc: %s\n", printableLines(err.Error()))
	}
	return g.locked[len(g.locked)-1]
}

// pathRecorder is a slog.Handler that records the "path" of every Warn
// record until stopped: while a writer's Open runs, those are the stale
// temporary files it removes.
type pathRecorder struct {
	paths   []string
	stopped bool
}

func (r *pathRecorder) Enabled(_ context.Context, l slog.Level) bool {
	return !r.stopped && l >= slog.LevelWarn
}

func (r *pathRecorder) Handle(_ context.Context, rec slog.Record) error {
	if r.stopped {
		return nil
	}
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "path" {
			r.paths = append(r.paths, a.Value.String())
		}
		return true
	})
	return nil
}

func (r *pathRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *pathRecorder) WithGroup(string) slog.Handler      { return r }

// stop ends the recording and returns the paths recorded.
func (r *pathRecorder) stop() []string {
	r.stopped = true
	return r.paths
}
