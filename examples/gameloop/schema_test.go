package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/checkpointtest"
	"github.com/stretchr/testify/require"
)

// goldenSchema1 holds turn 4 of session 001 as the first release of the
// game (schema 1) saved it. Never regenerate or edit it: it stands for the
// campaigns that release left on players' disks.
var goldenSchema1 = filepath.Join("testdata", "schema1")

// goldenSchema0 holds turn 4 of session 001 as the release before
// WithSchema saved it (no "schema" in its header: schema 0), the same JSON
// as schema 1. Never regenerate or edit it either.
var goldenSchema0 = filepath.Join("testdata", "schema0")

// A game is deterministic, so turn 4 of every earlier release, migrated,
// must equal turn 4 played today: the migrations lose nothing.
func TestOldTurnsLoadAsTodaysGame(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		dir    string
		schema int
	}{{goldenSchema0, 0}, {goldenSchema1, 1}} {
		t.Run(c.dir, func(t *testing.T) {
			t.Parallel()
			loaded := checkpointtest.LoadAll[GameState](t, c.dir, campaignOptions()...)
			require.Len(t, loaded, 1)
			require.Equal(t, c.schema, loaded[0].Info.Schema)

			today := NewGame("001")
			for turn := int64(1); turn <= 4; turn++ {
				today.PlayTurn(turn)
			}
			require.Equal(t, today, loaded[0].State)
			require.Equal(t, HitPoints{Current: 9, Max: 12}, loaded[0].State.Characters["brynja"].HP)
		})
	}
}

// A campaign of the first release resumes: its turns load, migrated, the
// next turn is saved at schema 2, and the old file stays as it was.
func TestSchema1CampaignResumes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	campaign, err := checkpoint.OpenSessions(dir, campaignOptions()...)
	require.NoError(t, err)
	_, err = campaign.New(ctx, map[string]string{"turn": "4"})
	require.NoError(t, err)
	require.NoError(t, campaign.Close())
	golden, err := os.ReadFile(filepath.Join(goldenSchema1, "turn_004.json"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(turnFile(dir, "001", 4), golden, 0o644))

	out := mustPlay(t, "-dir", dir, "-turns", "1")
	require.Contains(t, out, "resuming session 001 from turn 4")
	require.Contains(t, out, "Brynja fighter, 9/12 HP")
	require.Contains(t, out, "── turn 5 ")

	after, err := os.ReadFile(turnFile(dir, "001", 4))
	require.NoError(t, err)
	require.Equal(t, string(golden), string(after), "the schema 1 file was rewritten")
	next, err := os.ReadFile(turnFile(dir, "001", 5))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(next), `{"format":2,"schema":2,`), "turn 5 is saved at schema 2")
}

func TestHitPointsMigrationRefusesIncompleteCharacter(t *testing.T) {
	t.Parallel()
	_, err := hitPointsV2([]byte(`{"characters":{"zoe":{"name":"Zoë","hp":3}}}`))
	require.ErrorContains(t, err, `character "zoe" has no hp or max_hp`)
}
