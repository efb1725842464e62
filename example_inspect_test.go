package checkpoint_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"

	"github.com/gocheckpoint/checkpoint"
)

// A tool opens a store it knows nothing about: the layout comes from the
// file names, and json.RawMessage takes any state.
func ExampleDetectLayouts() {
	ctx := context.Background()
	dir := tempDir()
	defer os.RemoveAll(dir)
	w, err := checkpoint.Open[Game](dir, checkpoint.WithLayout("turn", 3))
	if err != nil {
		log.Fatal(err)
	}
	w.Save(ctx, 7, Game{Turn: 7})
	w.Close()

	layouts, err := checkpoint.DetectLayouts(dir)
	if err != nil || len(layouts) == 0 {
		log.Fatal("no checkpoints: ", err)
	}
	store, err := checkpoint.Open[json.RawMessage](dir, checkpoint.ReadOnly(), layouts[0].Option())
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	state, info, err := store.Latest(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(layouts[0], info.Name(), string(state))
	// Output: turn/3 turn_007.json {"turn":7,"log":null}
}
