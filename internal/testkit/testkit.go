// Package testkit holds what the tests of several packages share and that
// does not depend on the store: a sample state and small file helpers.
// Platform facts live in package platformtest, the kill -9 harness in
// package killtest.
package testkit

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Memory is one agent's memory in GameState.
type Memory struct {
	Summary string   `json:"summary"`
	Buffer  []string `json:"buffer"`
	Limit   int      `json:"limit"`
}

// GameState is a game's state as a host would save it: nested maps and
// slices, non-ASCII text, floats, a time and a nil pointer.
type GameState struct {
	Turn     int64                `json:"turn"`
	Log      []string             `json:"log"`
	Memories map[string]Memory    `json:"memories"`
	Scores   map[string][]float64 `json:"scores"`
	Started  time.Time            `json:"started"`
	Human    *string              `json:"human"`
}

// SampleState returns the GameState of a turn; equal turns give equal
// states.
func SampleState(turn int64) GameState {
	return GameState{
		Turn: turn,
		Log:  []string{"DM: Vous entrez dans la taverne «Le Dragon»", "Thorin: ⚔️ j'attaque!", fmt.Sprintf("turn %d", turn)},
		Memories: map[string]Memory{
			"dm":     {Summary: "夜のはじまり", Buffer: []string{"a", "b"}, Limit: 8000},
			"thorin": {Buffer: []string{}, Limit: 4000},
		},
		Scores:  map[string][]float64{"thorin": {1.5, -2, 1e-9}},
		Started: time.Date(2026, 11, 21, 9, 30, 0, 123456789, time.UTC),
	}
}

// DirNames returns the names in dir, sorted, and fails t if dir cannot be
// read.
func DirNames(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
