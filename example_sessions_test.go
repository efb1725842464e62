package checkpoint_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/dirstore"
)

// Workers sharing one root of sessions on a Backend: here the local
// directory, in production a bucket (the module s3store). Each worker
// opens the root itself and runs the session it is given; a second writer
// of one session is refused.
func ExampleOpenSessionsBackend() {
	ctx := context.Background()
	dir := tempDir()
	worker := func() *checkpoint.Sessions {
		b, err := dirstore.Open(dir)
		if err != nil {
			log.Fatal(err)
		}
		root, err := checkpoint.OpenSessionsBackend(b, checkpoint.WithLayout("turn", 3))
		if err != nil {
			log.Fatal(err)
		}
		return root
	}
	a, b := worker(), worker()
	defer a.Close()
	defer b.Close()

	// Of two workers creating one run, one wins.
	if _, err := a.Create(ctx, "run-7", map[string]string{"owner": "a"}); err != nil {
		log.Fatal(err)
	}
	_, err := b.Create(ctx, "run-7", map[string]string{"owner": "b"})
	fmt.Println("second create:", errors.Is(err, checkpoint.ErrExists))

	store, err := checkpoint.OpenSessionStore[Game](a, "run-7")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := store.Save(ctx, 1, Game{Turn: 1}); err != nil {
		log.Fatal(err)
	}
	_, err = checkpoint.OpenSessionStore[Game](b, "run-7")
	fmt.Println("second writer:", errors.Is(err, checkpoint.ErrLocked))
	if err := store.Close(); err != nil {
		log.Fatal(err)
	}

	// Once its writer is gone, any worker resumes it.
	store, s, err := checkpoint.ResumeLatestSession[Game](ctx, b)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	game, _, err := store.Latest(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(s.ID, s.Meta["owner"], "turn", game.Turn)
	// Output:
	// second create: true
	// second writer: true
	// run-7 a turn 1
}

// A host that names its work with strings of its own, such as an agent
// framework's thread IDs, uses them as session IDs as they are: the root
// stores each under a safe name of its own and gives the ID back.
func ExampleSessions_Create() {
	ctx := context.Background()
	root, err := checkpoint.OpenSessions(tempDir())
	if err != nil {
		log.Fatal(err)
	}
	defer root.Close()
	for _, thread := range []string{"user:42/thread#7", "Ünïcode ✓"} {
		if _, err := root.Create(ctx, thread, nil); err != nil {
			log.Fatal(err)
		}
		st, err := checkpoint.OpenSessionStore[[]string](root, thread)
		if err != nil {
			log.Fatal(err)
		}
		if _, err := st.Save(ctx, 1, []string{"hello"}); err != nil {
			log.Fatal(err)
		}
		st.Close()
	}
	s, err := root.Get(ctx, "user:42/thread#7")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q: %d checkpoint\n", s.ID, s.Checkpoints)
	// Output:
	// "user:42/thread#7": 1 checkpoint
}
