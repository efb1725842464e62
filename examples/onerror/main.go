// Command onerror runs a five-step workflow that keeps its work when a step
// fails or panics.
//
// Each step (brief, design, build, test, ship) writes its output part by part.
// A clean checkpoint is saved after every step. When a step fails, the
// workflow saves an error checkpoint (store.SaveError) holding every completed
// output, the partial output of the failed step and the error; a panic does
// the same through a deferred store.SaveOnPanic. The next run finds the error
// checkpoint with store.Latest, says what went wrong (the error checkpoint is
// the record of the failure: read or copy it before the next save), and
// finishes the failed step from its partial output. The clean checkpoint of
// the redone step supersedes the error checkpoint, and the store removes it
// by itself: no store.ClearError is needed.
//
// Usage:
//
//	onerror [-dir onerror-data] [-fail-at STEP] [-panic-at STEP] [-delay 50ms]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/gocheckpoint/checkpoint"
)

// steps are the workflow's steps in order. Step i is saved as checkpoint
// step i+1, so the files read step_01.json ... step_05.final.json.
var steps = []string{"brief", "design", "build", "test", "ship"}

// parts is how many parts each step's output has. An injected failure
// strikes before part failPart, after the earlier parts are written.
const (
	parts    = 4
	failPart = 3
)

// State is the workflow's progress. Partial is the output of the step in
// progress, kept so that a failed step resumes where it stopped.
type State struct {
	Current int               `json:"current"` // index in steps of the step in progress
	Outputs map[string]string `json:"outputs"` // completed steps' outputs, by step name
	Partial string            `json:"partial,omitempty"`
}

// errInjected is the cause of a failure asked for with -fail-at.
var errInjected = errors.New("toolchain crashed")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "onerror:", err)
		os.Exit(1)
	}
}

// openStore opens the workflow's checkpoint directory.
func openStore(dir string, opts ...checkpoint.Option) (*checkpoint.Store[State], error) {
	return checkpoint.Open[State](dir, append([]checkpoint.Option{checkpoint.WithLayout("step", 2)}, opts...)...)
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("onerror", flag.ContinueOnError)
	fs.SetOutput(stdout)
	dir := fs.String("dir", "onerror-data", "checkpoint directory")
	failAt := fs.String("fail-at", "", "make this step fail midway (one of "+strings.Join(steps, ", ")+")")
	panicAt := fs.String("panic-at", "", "make this step panic midway")
	delay := fs.Duration("delay", 50*time.Millisecond, "time to write one part of an output")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	for _, name := range []string{*failAt, *panicAt} {
		if name != "" && !slices.Contains(steps, name) {
			return fmt.Errorf("unknown step %q: want one of %s", name, strings.Join(steps, ", "))
		}
	}

	// The store removes an error checkpoint once a clean checkpoint saved
	// after it supersedes it; OnPrune says so.
	store, err := openStore(*dir, checkpoint.WithHooks(checkpoint.Hooks{OnPrune: func(removed []checkpoint.Info) {
		for _, info := range removed {
			if info.Kind == checkpoint.KindError {
				fmt.Fprintf(stdout, "the store removed %s: the redone step's checkpoint superseded it\n", info.Name())
			}
		}
	}}))
	if err != nil {
		return err
	}
	defer store.Close()

	state, info, err := store.Latest(ctx)
	switch {
	case errors.Is(err, checkpoint.ErrNotFound):
		state = State{Outputs: map[string]string{}}
		fmt.Fprintln(stdout, "starting a new workflow")
	case err != nil:
		return err
	case info.Kind == checkpoint.KindFinal:
		fmt.Fprintf(stdout, "the workflow is complete (%s); remove %s to run it again\n", info.Name(), *dir)
		return nil
	case info.Kind == checkpoint.KindError:
		describeFailure(stdout, info, state)
	default:
		fmt.Fprintf(stdout, "resuming at step %q after %s\n", steps[state.Current], info.Name())
	}
	// Work done is saved even when a signal has cancelled ctx.
	saveCtx := context.WithoutCancel(ctx)
	// The panic path: whatever the step was doing when it panicked is saved
	// as an error checkpoint, and the panic goes on. SaveOnPanic must be
	// deferred directly, and after store.Close so that it runs before it.
	defer store.SaveOnPanic(saveCtx, func() (int64, State) { return stepNumber(state.Current), state })

	for state.Current < len(steps) {
		name := steps[state.Current]
		step := stepNumber(state.Current)
		inject := func(part int) error {
			switch {
			case part != failPart:
				return nil
			case name == *failAt:
				return fmt.Errorf("%s: writing part %d: %w", name, part, errInjected)
			case name == *panicAt:
				panic(fmt.Sprintf("%s: out of memory writing part %d", name, part))
			}
			return nil
		}
		if err := work(ctx, stdout, name, &state, *delay, inject); err != nil {
			saved, serr := store.SaveError(saveCtx, step, state, err)
			if serr != nil {
				return errors.Join(err, serr)
			}
			fmt.Fprintf(stdout, "step %q failed; saved %s with %d completed outputs and %d bytes of partial output\n",
				name, saved.Name(), len(state.Outputs), len(state.Partial))
			return fmt.Errorf("%w (error checkpoint %s)", err, saved.Name())
		}

		state.Outputs[name] = state.Partial
		state.Partial = ""
		state.Current++
		var saved checkpoint.Info
		var err error
		if state.Current == len(steps) {
			saved, err = store.SaveFinal(saveCtx, step, state)
		} else {
			saved, err = store.Save(saveCtx, step, state)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "step %q done; saved %s\n", name, saved.Name())
	}

	fmt.Fprintln(stdout, "workflow complete:")
	for _, name := range steps {
		fmt.Fprintf(stdout, "  %-6s %d parts\n", name, strings.Count(state.Outputs[name], "\n"))
	}
	return store.Close()
}

// stepNumber is the checkpoint step of the step at index i.
func stepNumber(i int) int64 { return int64(i) + 1 }

// describeFailure says what went wrong in the run that saved an error
// checkpoint, from the checkpoint alone.
func describeFailure(w io.Writer, info checkpoint.Info, state State) {
	rec := info.Error
	what := "failed"
	if rec.Panic {
		what = "panicked"
	}
	fmt.Fprintf(w, "the last run %s at step %q (%s, %s ago): %s\n",
		what, steps[state.Current], info.Name(), time.Since(rec.Time).Round(time.Millisecond), rec.Message)
	fmt.Fprintf(w, "  error types: %s\n", strings.Join(rec.Types, " > "))
	if rec.Panic {
		frames := strings.Count(rec.Stack, "\n")
		fmt.Fprintf(w, "  stack: %d lines saved in the checkpoint\n", frames)
	}
	fmt.Fprintf(w, "  completed outputs: %d\n", len(state.Outputs))
	fmt.Fprintf(w, "  partial output of %q:\n", steps[state.Current])
	for line := range strings.Lines(state.Partial) {
		fmt.Fprintf(w, "    | %s", line)
	}
	fmt.Fprintf(w, "resuming step %q from part %d of %d\n", steps[state.Current], strings.Count(state.Partial, "\n")+1, parts)
}

// work produces the output of step name into state.Partial, part by part,
// starting after the parts already there. inject may fail or panic before a
// part, as a real step might.
func work(ctx context.Context, w io.Writer, name string, state *State, delay time.Duration, inject func(part int) error) error {
	for part := strings.Count(state.Partial, "\n") + 1; part <= parts; part++ {
		if err := inject(part); err != nil {
			return err
		}
		if err := sleep(ctx, delay); err != nil {
			return fmt.Errorf("%s: writing part %d: %w", name, part, err)
		}
		state.Partial += fmt.Sprintf("%s part %d/%d, based on %s\n", name, part, parts, basis(state))
		fmt.Fprintf(w, "%s: wrote part %d/%d\n", name, part, parts)
	}
	return nil
}

// basis names the outputs a step builds on: those of the steps before it.
func basis(state *State) string {
	if state.Current == 0 {
		return "the request"
	}
	return strings.Join(steps[:state.Current], ", ")
}

// sleep stands in for real work; a signal interrupts it.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
