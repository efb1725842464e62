package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gocheckpoint/checkpoint"
)

var showCommand = command{
	name:    "show",
	args:    "DIR STEP|latest",
	summary: "print a checkpoint's header and its state as indented JSON (a byte payload: its size, or with --payload its bytes)",
	flags: func(fs *flag.FlagSet) func(context.Context, *cli, []string) error {
		stateOnly := fs.Bool("state", false, "print the state alone (for jq)")
		payload := fs.Bool("payload", false, "write the checkpoint's byte payload to stdout as it is, once verified, and nothing else")
		kind := fs.String("kind", "", "show the newest checkpoint of this `KIND` (of the step, or that loads for latest): step, final, error or rolling")
		file := fs.String("file", "", "show the checkpoint file `NAME` (STEP may be left out)")
		layout := layoutFlag(fs)
		return func(ctx context.Context, c *cli, args []string) error {
			if *file != "" {
				if err := wantArgs(args, 2, "DIR"); err != nil {
					return err
				}
			} else if err := wantArgs(args, 2, "DIR", "STEP"); err != nil {
				return err
			}
			if *stateOnly && *payload {
				return usagef("--state and --payload exclude each other")
			}
			sel := selector{kind: checkpoint.Kind(*kind), file: *file}
			if sel.kind != "" && sel.file != "" {
				return usagef("--kind and --file exclude each other")
			}
			if sel.kind != "" && !slices.Contains(kinds, sel.kind) {
				return usagef("--kind %q: want step, final, error or rolling", *kind)
			}
			if len(args) == 2 {
				var err error
				if sel.step, sel.latest, err = parseStep(args[1]); err != nil {
					return err
				}
				sel.hasStep = true
			}
			t, st, err := c.openReader(ctx, args[0], *layout)
			if err != nil {
				return err
			}
			defer st.Close()
			state, info, err := c.load(ctx, st, t.layout, sel)
			if errors.Is(err, checkpoint.ErrPayloadMismatch) {
				c.noteSkipped()
				if *stateOnly {
					// --state promises JSON for jq: a byte payload has none.
					return err
				}
				return c.showPayload(ctx, st, err, *payload)
			}
			if err != nil {
				return err
			}
			c.noteSkipped()
			if *payload {
				return &checkpoint.Error{Op: "show", Step: info.Step, HasStep: true, Path: info.Location,
					Err: fmt.Errorf("%w: a JSON state, not a byte payload (show it without --payload)", checkpoint.ErrPayloadMismatch)}
			}
			if !*stateOnly {
				printHeader(c, info)
				fmt.Fprintln(c.stdout, "state:")
			}
			return printIndented(c, state)
		}
	},
}

var kinds = []checkpoint.Kind{checkpoint.KindStep, checkpoint.KindFinal, checkpoint.KindError, checkpoint.KindRolling}

// selector says which checkpoint to load.
type selector struct {
	step    int64
	latest  bool // STEP was "latest"
	hasStep bool
	kind    checkpoint.Kind
	file    string
}

// parseStep parses a STEP argument: a step number or "latest".
func parseStep(s string) (step int64, latest bool, err error) {
	if s == "latest" {
		return 0, true, nil
	}
	step, err = strconv.ParseInt(s, 10, 64)
	if err != nil || step < 0 {
		return 0, false, usagef("step %q: want a step number (0 or more) or latest", s)
	}
	return step, false, nil
}

// skippedHook returns an option that records each damaged checkpoint that
// Latest passes over on its way to one that loads, for noteSkipped.
func (c *cli) skippedHook() checkpoint.Option {
	return checkpoint.WithHooks(checkpoint.Hooks{OnError: func(err error) {
		// Where Latest stops (a byte payload that verified, a newer
		// schema, a failed migration) is its answer, not a skip.
		stop := errors.Is(err, checkpoint.ErrPayloadMismatch) || errors.Is(err, checkpoint.ErrNewerSchema) || errors.Is(err, checkpoint.ErrMigration)
		var e *checkpoint.Error
		if !stop && errors.As(err, &e) && e.Op == "latest" && e.HasStep {
			c.skipped = append(c.skipped, e)
		}
	}})
}

// noteSkipped reports the damaged checkpoints passed over by a load that
// succeeded (when it fails, its error names them all).
func (c *cli) noteSkipped() {
	for _, e := range c.skipped {
		c.notef("skipped %s: %s", e.Path, reason(e)) // notef escapes
	}
	c.skipped = nil
}

// load loads the checkpoint sel selects: without --kind or --file, the one
// Load or Latest returns; with --kind, the newest checkpoint of that kind of
// the step (for latest, the newest of that kind that loads); with --file,
// that file.
func (c *cli) load(ctx context.Context, st *checkpoint.Store[json.RawMessage], layout checkpoint.Layout, sel selector) (json.RawMessage, checkpoint.Info, error) {
	switch {
	case sel.file == "" && sel.kind == "" && sel.latest:
		return st.Latest(ctx)
	case sel.file == "" && sel.kind == "":
		state, info, err := st.Load(ctx, sel.step)
		if errors.Is(err, checkpoint.ErrNotFound) {
			err = nearestKept(ctx, st, sel.step, err)
		}
		return state, info, err
	}
	infos, err := st.List(ctx)
	if err != nil {
		return nil, checkpoint.Info{}, err
	}
	if sel.file != "" {
		name := filepath.Base(sel.file)
		i := slices.IndexFunc(infos, func(info checkpoint.Info) bool { return info.Name() == name })
		if i < 0 {
			return nil, checkpoint.Info{}, &checkpoint.Error{Op: "show", Path: joinName(st.Location(), name),
				Err: fmt.Errorf("%w: no checkpoint file of that name (layout %s)", checkpoint.ErrNotFound, layout)}
		}
		if sel.hasStep && !sel.latest && infos[i].Step != sel.step {
			return nil, checkpoint.Info{}, usagef("%s holds step %d, not %d", name, infos[i].Step, sel.step)
		}
		return st.LoadExact(ctx, infos[i])
	}
	infos = slices.DeleteFunc(infos, func(info checkpoint.Info) bool {
		return info.Kind != sel.kind || !sel.latest && info.Step != sel.step
	})
	if len(infos) == 0 {
		e := &checkpoint.Error{Op: "show", Path: st.Location(), Err: fmt.Errorf("%w: no %s checkpoint", checkpoint.ErrNotFound, sel.kind)}
		if !sel.latest {
			e.Step, e.HasStep = sel.step, true
		}
		return nil, checkpoint.Info{}, e
	}
	if !sel.latest {
		return st.LoadExact(ctx, infos[len(infos)-1])
	}
	var errs []error
	for i := len(infos) - 1; i >= 0; i-- {
		state, info, err := st.LoadExact(ctx, infos[i])
		if err == nil {
			return state, info, nil
		}
		if errors.Is(err, checkpoint.ErrNotFound) {
			continue // removed since the listing
		}
		if errors.Is(err, checkpoint.ErrPayloadMismatch) {
			return nil, checkpoint.Info{}, err // a byte payload that verified: show it
		}
		if e, ok := err.(*checkpoint.Error); ok {
			c.skipped = append(c.skipped, e)
		}
		errs = append(errs, err)
	}
	c.skipped = nil // the error names them
	return nil, checkpoint.Info{}, &checkpoint.Error{Op: "show", Path: st.Location(),
		Err: fmt.Errorf("none of the %s checkpoints loads: %w", sel.kind, errors.Join(errs...))}
}

// nearestKept adds to err, the ErrNotFound of a Load of step, the kept
// steps nearest to it, below and above: a step pruned by retention (or
// never saved, with SaveEvery) is most often looked at for what is around it.
// A store without checkpoints, or one that cannot be listed, leaves err as
// it is.
func nearestKept(ctx context.Context, st *checkpoint.Store[json.RawMessage], step int64, err error) error {
	e, ok := err.(*checkpoint.Error)
	if !ok {
		return err
	}
	infos, lerr := st.List(ctx)
	if lerr != nil || len(infos) == 0 {
		return err
	}
	below, above := int64(-1), int64(-1)
	for _, info := range infos { // ascending by step
		if info.Step < step {
			below = info.Step
		} else if info.Step > step && above < 0 {
			above = info.Step
		}
	}
	var near string
	switch {
	case below >= 0 && above >= 0:
		near = fmt.Sprintf("the nearest kept steps are %d (below) and %d (above)", below, above)
	case below >= 0:
		near = fmt.Sprintf("the nearest kept step is %d (below; none above)", below)
	default:
		near = fmt.Sprintf("the nearest kept step is %d (above; none below)", above)
	}
	wrapped := *e
	wrapped.Err = fmt.Errorf("%w; %s", e.Err, near)
	return &wrapped
}

// checksumName names the checksum of a checkpoint of format: SHA-256 in
// format 1, CRC-32C since format 2.
func checksumName(format int) string {
	if format == 1 {
		return "sha256"
	}
	return "crc32c"
}

// printHeader prints what info says. Its strings come from the file, so
// they are printed escaped (see printable).
func printHeader(c *cli, info checkpoint.Info) {
	line := func(key, value string) { fmt.Fprintf(c.stdout, "%-11s %s\n", key+":", value) }
	line("file", printable(info.Location))
	line("format", strconv.Itoa(info.Format))
	if info.Schema != 0 {
		line("schema", strconv.Itoa(info.Schema))
	}
	line("step", strconv.FormatInt(info.Step, 10))
	line("kind", printable(string(info.Kind)))
	line("time", info.Time.UTC().Format(time.RFC3339Nano)+" ("+age(c.now.Sub(info.Time))+")")
	line("size", size(info.Size, false)+" ("+strconv.FormatInt(info.Size, 10)+" bytes)")
	line("compressed", compression(info))
	line("checksum", "ok ("+checksumName(info.Format)+" verified)")
	if len(info.Meta) > 0 {
		line("meta", formatMeta(info.Meta))
	}
	if e := info.Error; e != nil {
		line("error", printable(e.Message))
		sub := func(key, value string) { fmt.Fprintf(c.stdout, "  %-9s %s\n", key+":", value) }
		if len(e.Types) > 0 {
			sub("types", printable(strings.Join(e.Types, ", ")))
		}
		sub("step", strconv.FormatInt(e.Step, 10))
		sub("time", e.Time.UTC().Format(time.RFC3339Nano))
		if e.Panic {
			sub("panic", "yes")
		}
		if e.Stack != "" {
			fmt.Fprintln(c.stdout, "  stack:")
			for l := range strings.SplitSeq(strings.TrimRight(e.Stack, "\n"), "\n") {
				// A stack indents with tabs: keep the indent, escape the rest.
				l = strings.ReplaceAll(l, "\t", "    ")
				fmt.Fprintf(c.stdout, "    %s\n", printable(l))
			}
		}
	}
}

// printIndented prints a JSON value indented by two spaces, its strings
// made safe for a terminal (see safeJSON).
func printIndented(c *cli, v json.RawMessage) error {
	var b bytes.Buffer
	if err := json.Indent(&b, v, "", "  "); err != nil {
		return err
	}
	_, err := c.stdout.Write(append(safeJSON(b.Bytes()), '\n'))
	return err
}

// showPayload shows the byte payload whose load as a state failed with
// mismatch (an error naming its file): its header and size once it has
// read it to its end and verified it, or with raw, its bytes, written to
// stdout as they are once verified (a second read, which verifies again:
// if the file changed in between, the command fails after writing them).
func (c *cli) showPayload(ctx context.Context, st *checkpoint.Store[json.RawMessage], mismatch error, raw bool) error {
	var e *checkpoint.Error
	if !errors.As(mismatch, &e) {
		return mismatch
	}
	infos, err := st.List(ctx)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(infos, func(info checkpoint.Info) bool { return info.Location == e.Path })
	if i < 0 {
		return mismatch // removed since the load
	}
	r, info, err := st.OpenPayloadExact(ctx, infos[i])
	if err != nil {
		return err
	}
	n, err := io.Copy(io.Discard, r)
	r.Close()
	if err != nil {
		return err
	}
	if !raw {
		printHeader(c, info)
		fmt.Fprintf(c.stdout, "%-11s %s (%d bytes, byte payload: show --payload writes it)\n", "payload:", size(n, false), n)
		return nil
	}
	if r, _, err = st.OpenPayloadExact(ctx, info); err != nil {
		return err
	}
	defer r.Close()
	_, err = io.Copy(c.stdout, r)
	return err
}
