package main

import (
	"encoding/json"
	"fmt"

	"github.com/gocheckpoint/checkpoint"
)

// schemaVersion is the version of GameState's JSON: the first release of
// the game saved schema 1, whose characters had two numbers, "hp": 9 and
// "max_hp": 12; schema 2 holds them in one object, "hp": {"current": 9,
// "max": 12}. A turn saved at schema 1 is migrated as it loads (the file on
// disk stays as it was) and plays on exactly as if it had been saved
// today; testdata/schema1 keeps a turn of the first release, and a test
// loads it on every run. Turns saved before the game recorded a schema
// (schema 0) hold the JSON of schema 1: they load through schema1From0,
// and testdata/schema0 keeps one of them.
const schemaVersion = 2

// campaignOptions are the options of the campaign and of every session's
// store.
func campaignOptions() []checkpoint.Option {
	return []checkpoint.Option{
		checkpoint.WithLayout("turn", 3),
		checkpoint.WithSchema(schemaVersion,
			checkpoint.Migration{From: 0, Migrate: schema1From0},
			checkpoint.Migration{From: 1, Migrate: hitPointsV2}),
	}
}

// schema1From0 migrates a game saved before the game recorded a schema:
// its JSON is that of schema 1, so the state is returned as it is. The
// release that started recording schemas changed nothing else; without
// this step its players' earlier campaigns would stop with ErrMigration.
func schema1From0(old json.RawMessage) (json.RawMessage, error) { return old, nil }

// HitPoints are a character's hit points (schema 2).
type HitPoints struct {
	Current int `json:"current"`
	Max     int `json:"max"`
}

// hitPointsV2 migrates a game from schema 1 to 2: each character's "hp"
// and "max_hp" numbers become one "hp" object.
func hitPointsV2(old json.RawMessage) (json.RawMessage, error) {
	var game map[string]json.RawMessage
	if err := json.Unmarshal(old, &game); err != nil {
		return nil, err
	}
	var characters map[string]map[string]json.RawMessage
	if err := json.Unmarshal(game["characters"], &characters); err != nil {
		return nil, fmt.Errorf("characters: %w", err)
	}
	for id, c := range characters {
		if c["hp"] == nil || c["max_hp"] == nil {
			return nil, fmt.Errorf("character %q has no hp or max_hp", id)
		}
		hp, err := json.Marshal(map[string]json.RawMessage{"current": c["hp"], "max": c["max_hp"]})
		if err != nil {
			return nil, fmt.Errorf("character %q: %w", id, err)
		}
		c["hp"] = hp
		delete(c, "max_hp")
	}
	var err error
	if game["characters"], err = json.Marshal(characters); err != nil {
		return nil, err
	}
	return json.Marshal(game)
}
