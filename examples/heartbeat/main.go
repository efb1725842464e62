// Command heartbeat is a daemon with a beat loop that survives kill -9.
//
// Every beat it updates a small cognitive state (an affect map, a working
// memory and goals) and hands it to store.Tick, which saves a gzip-compressed
// checkpoint every 50 beats and keeps the newest 10. On start it resumes from
// the newest checkpoint; on SIGINT or SIGTERM it saves a final checkpoint and
// exits. Checkpoint events are printed through checkpoint.Hooks:
//
//	checkpoint created beat=150 size=412 kind=step
//	checkpoint restored beat=150 age=2.31s kind=step
//
// With -async, Tick only encodes the state and the checkpoint is written in
// the background (checkpoint.Async), so a slow disk never delays a beat;
// "checkpoint created" is printed once the checkpoint is on disk.
//
// Usage:
//
//	heartbeat [-dir heartbeat-data] [-beats N] [-interval 20ms] [-async] [-v]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/gocheckpoint/checkpoint"
)

const (
	every    = 50 // beats between checkpoints
	keep     = 10 // step checkpoints kept
	wmSize   = 7  // working memory capacity
	pulseGap = 25 // beats between status lines
)

// State is everything the daemon must not lose in a crash. It round-trips
// through encoding/json, as a checkpoint.Store requires.
type State struct {
	Beat          int64              `json:"beat"`
	Affect        map[string]float64 `json:"affect"`
	WorkingMemory []string           `json:"working_memory"`
	Goals         []Goal             `json:"goals"`
}

// Goal is a long-running intention whose progress must survive restarts.
type Goal struct {
	Name     string  `json:"name"`
	Progress float64 `json:"progress"` // 0 to 1
}

func newState() State {
	return State{
		Affect: map[string]float64{"valence": 0, "arousal": 0.5, "curiosity": 0.8},
		Goals: []Goal{
			{Name: "understand the user", Progress: 0},
			{Name: "tidy long-term memory", Progress: 0},
			{Name: "learn a new word", Progress: 0},
		},
	}
}

// beat advances the state by one beat. It depends only on the previous state,
// so a run resumed from a checkpoint ends exactly where an uninterrupted run
// would: the tests rely on that to prove the whole state was restored.
func (s *State) beat() {
	s.Beat++
	b := float64(s.Beat)
	s.Affect["valence"] = 0.9*s.Affect["valence"] + 0.1*math.Sin(b/7)
	s.Affect["arousal"] = 0.95*s.Affect["arousal"] + 0.05*(0.5+0.5*math.Cos(b/11))
	s.Affect["curiosity"] = 0.98*s.Affect["curiosity"] + 0.02*(0.5+0.5*math.Sin(b/13))

	s.WorkingMemory = append(s.WorkingMemory, fmt.Sprintf("thought at beat %d", s.Beat))
	if n := len(s.WorkingMemory); n > wmSize {
		s.WorkingMemory = append([]string(nil), s.WorkingMemory[n-wmSize:]...)
	}

	g := &s.Goals[int(s.Beat)%len(s.Goals)]
	g.Progress = math.Min(1, g.Progress+0.004*(1+s.Affect["curiosity"]))
}

func main() {
	os.Exit(daemon(os.Args[1:]))
}

// daemon runs the heartbeat until it is done or signalled and returns the
// process's exit code.
func daemon(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, args, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "heartbeat:", err)
		return 1
	}
	return 0
}

// run is the whole program: it returns when -beats is reached (after saving
// a final checkpoint) or when ctx is cancelled (after saving the beat in
// hand).
func run(ctx context.Context, args []string, stdout io.Writer) error {
	// With -async the hooks print from the store's goroutine while the loop
	// prints its status lines: one lock keeps their lines whole and their
	// writes from racing on a writer that is not safe for concurrent use.
	stdout = &lockedWriter{w: stdout}
	fs := flag.NewFlagSet("heartbeat", flag.ContinueOnError)
	fs.SetOutput(stdout)
	dir := fs.String("dir", "heartbeat-data", "checkpoint directory")
	beats := fs.Int64("beats", 0, "stop after reaching this beat (0: run until SIGINT or SIGTERM)")
	interval := fs.Duration("interval", 20*time.Millisecond, "time between beats")
	verbose := fs.Bool("v", false, "log every store operation")
	async := fs.Bool("async", false, "write checkpoints in the background")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}

	level := slog.LevelWarn // stale temporary files, skipped corrupt checkpoints
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stdout, &slog.HandlerOptions{Level: level}))

	opts := []checkpoint.Option{
		checkpoint.SaveEvery(every),
		checkpoint.Gzip(),
		checkpoint.KeepLast(keep),
		checkpoint.WithLayout("beat", 8),
		checkpoint.WithLogger(logger),
		checkpoint.WithHooks(events(stdout)),
	}
	if *async {
		opts = append(opts, checkpoint.Async(4))
	}
	store, err := checkpoint.Open[State](*dir, opts...)
	if err != nil {
		return err
	}
	defer store.Close()

	state, _, err := store.Latest(ctx)
	switch {
	case errors.Is(err, checkpoint.ErrNotFound):
		state = newState()
		fmt.Fprintf(stdout, "fresh start in %s\n", *dir)
	case err != nil:
		return err
	default:
		fmt.Fprintf(stdout, "resuming at beat %d\n", state.Beat)
	}
	start := state.Beat
	saved := state.Beat // the newest beat on disk

	var tick <-chan time.Time
	if *interval > 0 {
		t := time.NewTicker(*interval)
		defer t.Stop()
		tick = t.C
	}
loop:
	for *beats == 0 || state.Beat < *beats {
		if tick != nil {
			select {
			case <-ctx.Done():
				break loop
			case <-tick:
			}
		} else if ctx.Err() != nil {
			break
		}
		state.beat()
		if state.Beat%pulseGap == 0 {
			fmt.Fprintln(stdout, pulse(state))
		}
		_, ok, err := store.Tick(ctx, state.Beat, state)
		if err != nil {
			if ctx.Err() != nil {
				break // a signal cancelled the save; the save below keeps this beat
			}
			return err
		}
		if ok {
			saved = state.Beat
		}
	}

	if state.Beat == start {
		fmt.Fprintf(stdout, "stopped at beat %d; nothing new to save\n", state.Beat)
		return nil
	}
	// A signal stops the daemon, not its life: the beat in hand is saved as
	// an ordinary checkpoint, which KeepLast counts, unless Tick saved it (a
	// signal may have cancelled the Tick of a due beat). Reaching -beats ends
	// the run: that is its final checkpoint. ctx is cancelled after a signal;
	// SaveFinal saves anyway, Save needs a context that is not.
	var saveErr error
	switch {
	case *beats != 0 && state.Beat >= *beats:
		_, saveErr = store.SaveFinal(ctx, state.Beat, state)
	case state.Beat > saved:
		_, saveErr = store.Save(context.WithoutCancel(ctx), state.Beat, state)
	}
	if saveErr != nil {
		return saveErr
	}
	fmt.Fprintf(stdout, "stopped at beat %d\n", state.Beat)
	return store.Close()
}

// events turns store operations into the daemon's checkpoint events.
func events(w io.Writer) checkpoint.Hooks {
	return checkpoint.Hooks{
		OnSave: func(info checkpoint.Info) {
			fmt.Fprintf(w, "checkpoint created beat=%d size=%d kind=%s\n", info.Step, info.Size, info.Kind)
		},
		OnLoad: func(info checkpoint.Info, age time.Duration) {
			fmt.Fprintf(w, "checkpoint restored beat=%d age=%s kind=%s\n", info.Step, age.Round(time.Millisecond), info.Kind)
		},
		OnPrune: func(removed []checkpoint.Info) {
			for _, info := range removed {
				fmt.Fprintf(w, "checkpoint pruned beat=%d\n", info.Step)
			}
		},
		OnError: func(err error) {
			fmt.Fprintf(w, "checkpoint error: %v\n", err)
		},
	}
}

// lockedWriter serialises the writes of several goroutines to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func pulse(s State) string {
	latest := ""
	if n := len(s.WorkingMemory); n > 0 {
		latest = s.WorkingMemory[n-1]
	}
	return fmt.Sprintf("beat %d: valence=%+.2f arousal=%.2f curiosity=%.2f goals=%.0f%%/%.0f%%/%.0f%% wm=%q",
		s.Beat, s.Affect["valence"], s.Affect["arousal"], s.Affect["curiosity"],
		100*s.Goals[0].Progress, 100*s.Goals[1].Progress, 100*s.Goals[2].Progress, latest)
}
