package checkpoint_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/gocheckpoint/checkpoint"
)

type Game struct {
	Turn int      `json:"turn"`
	Log  []string `json:"log"`
}

func tempDir() string {
	dir, err := os.MkdirTemp("", "checkpoint-example")
	if err != nil {
		log.Fatal(err)
	}
	return dir
}

// A turn loop that resumes where it stopped.
func Example() {
	ctx := context.Background()
	dir := filepath.Join(tempDir(), "session_001")
	defer os.RemoveAll(filepath.Dir(dir))

	play := func(turns int) {
		store, err := checkpoint.Open[Game](dir, checkpoint.WithLayout("turn", 3))
		if err != nil {
			log.Fatal(err)
		}
		defer store.Close()

		game, info, err := store.Latest(ctx)
		switch {
		case errors.Is(err, checkpoint.ErrNotFound):
			fmt.Println("new game")
		case err != nil:
			log.Fatal(err)
		default:
			fmt.Printf("resuming after turn %d\n", info.Step)
		}
		for i := 0; i < turns; i++ {
			game.Turn++
			game.Log = append(game.Log, fmt.Sprintf("turn %d played", game.Turn))
			info, _, err := store.Tick(ctx, int64(game.Turn), game)
			if err != nil {
				log.Fatal(err)
			}
			fmt.Println("saved", info.Name())
		}
	}
	play(2)
	play(1) // a new process would do the same
	// Output:
	// new game
	// saved turn_001.json
	// saved turn_002.json
	// resuming after turn 2
	// saved turn_003.json
}

// Interval saves, a rolling file for the steps between them, and a final
// checkpoint that is always written.
func ExampleStore_Tick() {
	ctx := context.Background()
	dir := tempDir()
	defer os.RemoveAll(dir)
	store, err := checkpoint.Open[int](dir, checkpoint.SaveEvery(5), checkpoint.WithRolling())
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	const last = 12
	for step := int64(1); step < last; step++ {
		if _, _, err := store.Tick(ctx, step, int(step)); err != nil {
			log.Fatal(err)
		}
	}
	if _, err := store.SaveFinal(ctx, last, last); err != nil {
		log.Fatal(err)
	}
	list, err := store.List(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, info := range list {
		fmt.Println(info.Step, info.Kind, info.Name())
	}
	// Output:
	// 5 step step_00000005.json
	// 10 step step_00000010.json
	// 11 rolling step_last.json
	// 12 final step_00000012.final.json
}

// An error checkpoint keeps the partial work and what went wrong; the next
// run resumes from it, and once the step is redone and saved, the clean
// checkpoint supersedes it: the store removes it.
func ExampleStore_SaveError() {
	ctx := context.Background()
	dir := tempDir()
	defer os.RemoveAll(dir)
	store, err := checkpoint.Open[Game](dir)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	game := Game{Turn: 3, Log: []string{"turn 1", "turn 2", "turn 3: the dragon"}}
	cause := fmt.Errorf("turn 3: %w", context.DeadlineExceeded)
	if _, err := store.SaveError(ctx, 3, game, cause); err != nil {
		log.Fatal(err)
	}

	// Next run:
	resumed, info, err := store.Latest(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if info.Kind == checkpoint.KindError {
		fmt.Printf("step %d failed: %s (%s)\n", info.Step, info.Error.Message, info.Error.Types[len(info.Error.Types)-1])
		fmt.Println("partial output:", resumed.Log[len(resumed.Log)-1])
		// ... redo the step and save it:
		if _, err := store.Save(ctx, 3, resumed); err != nil {
			log.Fatal(err)
		}
	}
	list, err := store.List(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, info := range list {
		fmt.Println("kept:", info.Kind, info.Step)
	}
	// Output:
	// step 3 failed: turn 3: context deadline exceeded (context.deadlineExceededError)
	// partial output: turn 3: the dragon
	// kept: step 3
}

// A panic inside the loop saves the state as it was, then goes on panicking.
func ExampleStore_SaveOnPanic() {
	ctx := context.Background()
	dir := tempDir()
	defer os.RemoveAll(dir)
	store, err := checkpoint.Open[Game](dir)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	run := func() {
		var game Game
		defer store.SaveOnPanic(ctx, func() (int64, Game) { return int64(game.Turn), game })
		for game.Turn = 1; game.Turn <= 3; game.Turn++ {
			if game.Turn == 2 {
				panic("out of dice")
			}
		}
	}
	func() {
		defer func() { fmt.Println("recovered:", recover()) }()
		run()
	}()
	_, info, err := store.Latest(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.Kind, info.Step, info.Error.Message, info.Error.Panic)
	// Output:
	// recovered: out of dice
	// error 2 out of dice true
}

// A host with many sessions resumes the most recently active one, or starts
// the first.
func ExampleResumeLatestSession() {
	ctx := context.Background()
	dir := tempDir()
	defer os.RemoveAll(dir)

	play := func() {
		root, err := checkpoint.OpenSessions(dir, checkpoint.WithLayout("turn", 3))
		if err != nil {
			log.Fatal(err)
		}
		defer root.Close()
		store, sess, err := checkpoint.ResumeLatestSession[Game](ctx, root)
		if errors.Is(err, checkpoint.ErrNotFound) || errors.Is(err, checkpoint.ErrCorrupt) {
			// No session yet, or the last one is damaged: start a new one.
			if sess, err = root.New(ctx, nil); err != nil {
				log.Fatal(err)
			}
			store, err = checkpoint.OpenSessionStore[Game](root, sess.ID)
		}
		if err != nil {
			log.Fatal(err)
		}
		defer store.Close()
		game, _, err := store.Latest(ctx)
		if err != nil && !errors.Is(err, checkpoint.ErrNotFound) {
			log.Fatal(err)
		}
		game.Turn++
		if _, err := store.Save(ctx, int64(game.Turn), game); err != nil {
			log.Fatal(err)
		}
		err = root.SetMeta(ctx, sess.ID, map[string]string{"turn": fmt.Sprint(game.Turn)})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("session %s played turn %d\n", sess.ID, game.Turn)
	}
	play()
	play()
	// Output:
	// session 001 played turn 1
	// session 001 played turn 2
}

// Restoring turn 2 of 3 and playing on in a fork leaves turn 3 of the
// original session as it was.
func ExampleSessions_Fork() {
	ctx := context.Background()
	dir := tempDir()
	defer os.RemoveAll(dir)
	root, err := checkpoint.OpenSessions(dir, checkpoint.WithLayout("turn", 3))
	if err != nil {
		log.Fatal(err)
	}
	defer root.Close()
	sess, err := root.New(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	store, err := checkpoint.OpenSessionStore[Game](root, sess.ID)
	if err != nil {
		log.Fatal(err)
	}
	for turn := 1; turn <= 3; turn++ {
		if _, err := store.Save(ctx, int64(turn), Game{Turn: turn, Log: []string{"original"}}); err != nil {
			log.Fatal(err)
		}
	}
	store.Close()

	fork, err := root.Fork(ctx, sess.ID, 2, map[string]string{"why": "try the other door"})
	if err != nil {
		log.Fatal(err)
	}
	fstore, err := checkpoint.OpenSessionStore[Game](root, fork.ID)
	if err != nil {
		log.Fatal(err)
	}
	defer fstore.Close()
	game, info, err := fstore.Latest(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("session %s (from %s at turn %d) resumes after turn %d\n", fork.ID, fork.Parent, fork.ParentStep, info.Step)
	game.Turn++
	game.Log = []string{"forked"}
	if _, err := fstore.Save(ctx, int64(game.Turn), game); err != nil {
		log.Fatal(err)
	}

	sessions, err := root.List(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range sessions {
		fmt.Printf("%s: %d checkpoints, last turn %d\n", s.ID, s.Checkpoints, s.LastStep)
	}
	// Output:
	// session 002 (from 001 at turn 2) resumes after turn 2
	// 002: 3 checkpoints, last turn 3
	// 001: 3 checkpoints, last turn 3
}

// Retention rules combine: a checkpoint survives if any rule keeps it.
func ExampleKeepMultiplesOf() {
	ctx := context.Background()
	dir := tempDir()
	defer os.RemoveAll(dir)
	store, err := checkpoint.Open[int](dir, checkpoint.WithLayout("beat", 3),
		checkpoint.KeepLast(2), checkpoint.KeepMultiplesOf(5))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	for beat := int64(1); beat <= 12; beat++ {
		if _, err := store.Save(ctx, beat, int(beat)); err != nil {
			log.Fatal(err)
		}
	}
	infos, err := store.List(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, info := range infos {
		fmt.Print(info.Name(), " ")
	}
	fmt.Println()
	// Output:
	// beat_005.json beat_010.json beat_011.json beat_012.json
}

// A heartbeat that cannot wait for the disk: Tick returns once the state is
// encoded, so the loop may change it at once, and the checkpoints are
// published in the background, in order. Flush waits for them; a failure in
// the background would be returned by the next Tick, Flush or Close, wrapping
// ErrAsync: a Tick that returns it has queued its own state all the same.
func ExampleAsync() {
	ctx := context.Background()
	dir := tempDir()
	defer os.RemoveAll(dir)
	store, err := checkpoint.Open[map[string]int](dir, checkpoint.Async(4), checkpoint.Zstd(), checkpoint.SaveEvery(10))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	state := map[string]int{"beat": 0}
	for beat := 1; beat <= 30; beat++ {
		state["beat"] = beat // safe: the previous Tick has encoded its copy
		_, _, err := store.Tick(ctx, int64(beat), state)
		if errors.Is(err, checkpoint.ErrAsync) {
			log.Print(err) // an earlier save failed; this beat is queued
		} else if err != nil {
			log.Fatal(err)
		}
	}
	if err := store.Flush(ctx); err != nil {
		log.Fatal(err)
	}
	list, err := store.List(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, info := range list {
		v, _, err := store.LoadExact(ctx, info)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(info.Name(), v["beat"])
	}
	// Output:
	// step_00000010.json.zst 10
	// step_00000020.json.zst 20
	// step_00000030.json.zst 30
}
