package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/gocheckpoint/checkpoint"
)

var pruneCommand = command{
	name:    "prune",
	args:    "DIR --keep-last N ...",
	summary: "remove the checkpoints that no retention rule keeps",
	flags: func(fs *flag.FlagSet) func(context.Context, *cli, []string) error {
		keepLast := fs.Int("keep-last", 0, "keep the newest `N` checkpoints")
		keepEvery := fs.Int64("keep-every", 0, "keep every checkpoint whose step is a multiple of `K`")
		keepWithin := fs.String("keep-within", "", "keep every checkpoint saved less than `DURATION` ago (90m, 36h, 7d)")
		keepOnePer := fs.String("keep-one-per", "", "keep the newest checkpoint of each `PERIOD` (1h, 1d), counted in UTC")
		pruneKinds := fs.String("prune-kinds", "", "make these `KINDS` subject to the rules too: final, error or final,error (by default they are always kept)")
		dryRun := fs.Bool("dry-run", false, "print what would be removed and remove nothing (takes no lock)")
		exact := fs.Bool("bytes", false, "print sizes in bytes, exactly (by default 4.2 KiB)")
		layout := layoutFlag(fs)
		return func(ctx context.Context, c *cli, args []string) error {
			rules, err := retentionRules(*keepLast, *keepEvery, *keepWithin, *keepOnePer, *pruneKinds)
			if err != nil {
				return err
			}
			t, err := c.oneDir(ctx, args, *layout)
			if err != nil {
				return err
			}
			if err := t.requireStore("prune"); err != nil {
				return err
			}
			if t.empty {
				// Opening a writer would leave a lock file in a directory
				// that may be no store at all.
				fmt.Fprintf(c.stdout, "nothing to prune in %s: no checkpoint files (give --layout if they have another name)\n", printable(t.dir))
				return nil
			}
			return c.prune(ctx, t, rules, *dryRun, *exact)
		}
	},
}

// retentionRules turns the prune flags into store options; at least one
// rule must be set, or nothing would ever be removed.
func retentionRules(last int, every int64, within, onePer, kinds string) ([]checkpoint.Option, error) {
	var opts []checkpoint.Option
	if last < 0 {
		return nil, usagef("--keep-last %d: want a positive count", last)
	}
	if last > 0 {
		opts = append(opts, checkpoint.KeepLast(last))
	}
	if every < 0 {
		return nil, usagef("--keep-every %d: want a positive interval", every)
	}
	if every > 0 {
		opts = append(opts, checkpoint.KeepMultiplesOf(every))
	}
	if within != "" {
		d, err := parseDuration("--keep-within", within)
		if err != nil {
			return nil, err
		}
		opts = append(opts, checkpoint.KeepWithin(d))
	}
	if onePer != "" {
		d, err := parseDuration("--keep-one-per", onePer)
		if err != nil {
			return nil, err
		}
		opts = append(opts, checkpoint.KeepOnePer(d))
	}
	if len(opts) == 0 {
		return nil, usagef("no retention rule: give --keep-last, --keep-every, --keep-within or --keep-one-per (with none, nothing would be removed)")
	}
	if kinds != "" {
		var ks []checkpoint.Kind
		for k := range strings.SplitSeq(kinds, ",") {
			switch k := checkpoint.Kind(strings.TrimSpace(k)); k {
			case checkpoint.KindFinal, checkpoint.KindError:
				ks = append(ks, k)
			default:
				return nil, usagef("--prune-kinds %q: want final, error or final,error", kinds)
			}
		}
		opts = append(opts, checkpoint.PruneKinds(ks...))
	}
	return opts, nil
}

// totalSize formats the size of what prune removes: "21100 bytes" with
// --bytes, else "20.6 KiB".
func totalSize(n int64, exact bool) string {
	if exact {
		return strconv.FormatInt(n, 10) + " bytes"
	}
	return size(n, false)
}

// parseDuration parses a Go duration or a whole number of days ("7d").
func parseDuration(flagName, s string) (time.Duration, error) {
	var d time.Duration
	var err error
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int64
		n, err = strconv.ParseInt(days, 10, 64)
		if n > int64(1<<63-1)/int64(24*time.Hour) {
			err = errors.New("too long")
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		d, err = time.ParseDuration(s)
	}
	if err != nil || d <= 0 {
		return 0, usagef("%s %q: want a positive duration such as 90m, 36h or 7d", flagName, s)
	}
	return d, nil
}

func (c *cli) prune(ctx context.Context, t target, rules []checkpoint.Option, dryRun, exact bool) error {
	// Files no identity opens are never pruned (they do not count toward
	// retention): a note says so, and what to pass.
	keyErrs := &headerErrors{}
	opts := t.options(append(rules, checkpoint.WithLogger(slog.New(keyErrs)))...)
	if dryRun {
		opts = append(opts, checkpoint.ReadOnly())
	}
	defer func() { c.noteKeyErrors(keyErrs.keyErrs()) }()
	// On a terminal, a bar shows the reads and removals of the store's
	// backend; it is erased before anything is printed.
	progress := c.newPruneProgress(t.layout)
	defer progress.stop()
	st, err := progress.open(ctx, t, dryRun, opts...)
	if err != nil {
		if errors.Is(err, checkpoint.ErrLocked) {
			return lockedError{dir: t.dir, err: err}
		}
		return err
	}
	defer st.Close()
	all, err := st.List(ctx)
	if err != nil {
		return err
	}
	var removed []checkpoint.Info
	if dryRun {
		removed, err = st.PruneDryRun(ctx)
	} else {
		removed, err = st.Prune(ctx)
	}
	progress.stop()
	if err != nil {
		return err
	}
	if len(removed) == 0 {
		fmt.Fprintf(c.stdout, "nothing to prune in %s: the rules keep all %d checkpoints (layout %s)\n", printable(t.dir), len(all), t.layout)
		return nil
	}
	if dryRun {
		fmt.Fprintln(c.stdout, "would remove:")
	} else {
		fmt.Fprintln(c.stdout, "removed:")
	}
	tw := newTable(c.stdout)
	fmt.Fprintln(tw, "  STEP\tKIND\tTIME\tSIZE\tFILE")
	var total int64
	for _, info := range removed {
		total += info.Size
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\n", info.Step, info.Kind, c.when(info.Time), size(info.Size, exact), printable(info.Name()))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	kept := max(0, len(all)-len(removed))
	if dryRun {
		fmt.Fprintf(c.stdout, "dry run: would remove %d of %d checkpoints (%s) and keep %d; nothing was removed\n", len(removed), len(all), totalSize(total, exact), kept)
	} else {
		fmt.Fprintf(c.stdout, "removed %d of %d checkpoints (%s) from %s; kept %d\n", len(removed), len(all), totalSize(total, exact), printable(t.dir), kept)
	}
	return nil
}
