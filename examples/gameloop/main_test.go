package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/stretchr/testify/require"
)

// play runs the game in-process and returns what it printed.
func play(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), args, &out)
	return out.String(), err
}

func turnFile(dir string, turn int) string {
	return filepath.Join(dir, session, fmt.Sprintf("turn_%03d.json", turn))
}

func loadTurn(t *testing.T, dir string, turn int64) GameState {
	t.Helper()
	store, err := checkpoint.Open[GameState](filepath.Join(dir, session), checkpoint.WithLayout("turn", 3), checkpoint.ReadOnly())
	require.NoError(t, err)
	defer store.Close()
	game, info, err := store.Load(context.Background(), turn)
	require.NoError(t, err)
	require.Equal(t, checkpoint.KindStep, info.Kind)
	return game
}

func TestSecondRunResumesAndLeavesOldTurnsUntouched(t *testing.T) {
	dir := t.TempDir()

	out, err := play(t, "-dir", dir, "-turns", "3")
	require.NoError(t, err)
	require.Contains(t, out, "starting a fresh game")
	require.NotContains(t, out, "resuming")
	before := make(map[int][]byte)
	for turn := 1; turn <= 3; turn++ {
		data, err := os.ReadFile(turnFile(dir, turn))
		require.NoError(t, err, "turn %d", turn)
		before[turn] = data
		require.Contains(t, out, "saved "+turnFile(dir, turn))
	}
	require.NoFileExists(t, turnFile(dir, 4))

	out, err = play(t, "-dir", dir, "-turns", "2")
	require.NoError(t, err)
	require.Contains(t, out, "resuming session_001 from turn 3 (saved ")
	require.NotContains(t, out, "fresh game")
	require.Contains(t, out, "── turn 4 ")
	require.NotContains(t, out, "── turn 3 ", "a saved turn was played again")
	for turn := 4; turn <= 5; turn++ {
		require.FileExists(t, turnFile(dir, turn))
	}
	require.NoFileExists(t, turnFile(dir, 6))
	for turn, data := range before {
		after, err := os.ReadFile(turnFile(dir, turn))
		require.NoError(t, err)
		require.True(t, bytes.Equal(data, after), "turn_%03d.json changed", turn)
	}

	game := loadTurn(t, dir, 5)
	require.Equal(t, int64(5), game.Turn)
	for turn := 1; turn <= 5; turn++ {
		prefix := fmt.Sprintf("[turn %d] ", turn)
		n := 0
		for _, line := range game.Log {
			if strings.HasPrefix(line, prefix) {
				n++
			}
		}
		require.GreaterOrEqual(t, n, len(game.TurnQueue), "log lines of turn %d", turn)
	}
	require.True(t, strings.HasPrefix(game.Log[len(game.Log)-1], "[turn 5] "))
	require.Len(t, game.Memories, len(game.TurnQueue))
	for id, m := range game.Memories {
		require.Len(t, m.ShortTermBuffer, shortTermTurns, id)
		require.Contains(t, m.LongTermSummary, "Turns 1–2", id)
	}
	require.Contains(t, game.Characters["brynja"].Inventory, "a map to Ærøskøbing")
}

// The game is deterministic and its checkpoint holds all of it, so stopping
// and resuming must change nothing: the proof that no state is left out of
// GameState.
func TestResumedGameEqualsUninterruptedGame(t *testing.T) {
	straight, split := t.TempDir(), t.TempDir()

	_, err := play(t, "-dir", straight, "-turns", "5")
	require.NoError(t, err)
	for _, turns := range []string{"2", "0", "1", "2"} {
		_, err := play(t, "-dir", split, "-turns", turns)
		require.NoError(t, err)
	}

	require.Equal(t, loadTurn(t, straight, 5), loadTurn(t, split, 5))
}

func TestSecondPlayerOnSameSessionIsLocked(t *testing.T) {
	dir := t.TempDir()
	store, err := checkpoint.Open[GameState](filepath.Join(dir, session), checkpoint.WithLayout("turn", 3))
	require.NoError(t, err)
	defer store.Close()

	_, err = play(t, "-dir", dir, "-turns", "1")
	require.ErrorIs(t, err, checkpoint.ErrLocked)
	require.NoFileExists(t, turnFile(dir, 1))
}

func TestCancelledRunWritesNoTurn(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	var out bytes.Buffer
	err := run(ctx, []string{"-dir", dir}, &out)
	require.ErrorIs(t, err, context.Canceled)
	require.NoFileExists(t, turnFile(dir, 1))
}

func TestBadFlagsAreRejected(t *testing.T) {
	for _, args := range [][]string{
		{"-turns", "-1"},
		{"-turns", "many"},
		{"-no-such-flag"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			_, err := play(t, append([]string{"-dir", t.TempDir()}, args...)...)
			require.Error(t, err)
		})
	}
}
