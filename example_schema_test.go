package checkpoint_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"

	"github.com/gocheckpoint/checkpoint"
)

// Release 1 of a program saved a player's score as "points"; release 2
// calls it "score". Release 2 bumps the schema to 2 and migrates.
func ExampleWithSchema() {
	ctx := context.Background()
	dir := tempDir()
	defer os.RemoveAll(dir)

	// Release 1.
	type PlayerV1 struct {
		Points int `json:"points"`
	}
	v1, err := checkpoint.Open[PlayerV1](dir, checkpoint.WithSchema(1))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := v1.Save(ctx, 1, PlayerV1{Points: 42}); err != nil {
		log.Fatal(err)
	}
	v1.Close()

	// Release 2.
	type Player struct {
		Score int `json:"score"`
	}
	pointsToScore := func(old json.RawMessage) (json.RawMessage, error) {
		var p struct {
			Points int `json:"points"`
		}
		if err := json.Unmarshal(old, &p); err != nil {
			return nil, err
		}
		return json.Marshal(Player{Score: p.Points})
	}
	store, err := checkpoint.Open[Player](dir, checkpoint.WithSchema(2,
		checkpoint.Migration{From: 1, Migrate: pointsToScore}))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	player, info, err := store.Latest(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("step %d, saved at schema %d: score %d\n", info.Step, info.Schema, player.Score)
	info, err = store.Save(ctx, 2, player)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("step %d saved at schema %d\n", info.Step, info.Schema)
	// Output:
	// step 1, saved at schema 1: score 42
	// step 2 saved at schema 2
}
