package einostore_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/cloudwego/eino/compose"
	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/einostore"
)

// An Eino graph interrupted before its node "review" keeps its checkpoint
// in the store; invoking it again with the same checkpoint ID, in this
// process or another one after a crash, resumes it there.
func ExampleNew() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "einostore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// Each checkpoint ID keeps its last 3 checkpoints.
	store, err := einostore.New(dir, checkpoint.KeepLast(3))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	g := compose.NewGraph[string, string]()
	_ = g.AddLambdaNode("draft", compose.InvokableLambda(func(_ context.Context, in string) (string, error) {
		return "draft of " + in, nil
	}))
	_ = g.AddLambdaNode("review", compose.InvokableLambda(func(_ context.Context, in string) (string, error) {
		return "reviewed " + in, nil
	}))
	_ = g.AddEdge(compose.START, "draft")
	_ = g.AddEdge("draft", "review")
	_ = g.AddEdge("review", compose.END)
	run, err := g.Compile(ctx,
		compose.WithCheckPointStore(store),
		compose.WithInterruptBeforeNodes([]string{"review"}))
	if err != nil {
		log.Fatal(err)
	}

	_, err = run.Invoke(ctx, "the report", compose.WithCheckPointID("run-42"))
	if info, ok := compose.ExtractInterruptInfo(err); ok {
		fmt.Println("interrupted before", info.BeforeNodes)
	}

	// Later, or in a new process: the same ID resumes the run.
	out, err := run.Invoke(ctx, "the report", compose.WithCheckPointID("run-42"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out)

	// The run is finished: its checkpoints can go.
	if err := store.Delete(ctx, "run-42"); err != nil {
		log.Fatal(err)
	}
	// Output:
	// interrupted before [review]
	// reviewed draft of the report
}
