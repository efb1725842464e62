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

// mustPlay is play for a run that must succeed.
func mustPlay(t *testing.T, args ...string) string {
	t.Helper()
	out, err := play(t, args...)
	require.NoError(t, err, out)
	return out
}

func turnFile(dir, id string, turn int) string {
	return filepath.Join(dir, id, fmt.Sprintf("turn_%03d.json", turn))
}

// readTurns returns the bytes of every turn file of session id.
func readTurns(t *testing.T, dir, id string) map[string][]byte {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, id, "turn_*"))
	require.NoError(t, err)
	files := make(map[string][]byte)
	for _, name := range names {
		data, err := os.ReadFile(name)
		require.NoError(t, err)
		files[filepath.Base(name)] = data
	}
	return files
}

// requireUnchanged checks that session id holds exactly the turn files
// before, byte for byte.
func requireUnchanged(t *testing.T, before map[string][]byte, dir, id string) {
	t.Helper()
	after := readTurns(t, dir, id)
	require.Len(t, after, len(before), "session %s gained or lost a turn file", id)
	for name, data := range before {
		require.True(t, bytes.Equal(data, after[name]), "%s/%s changed", id, name)
	}
}

func openCampaign(t *testing.T, dir string) *checkpoint.Sessions {
	t.Helper()
	campaign, err := checkpoint.OpenSessions(dir, append(campaignOptions(), checkpoint.ReadOnly())...)
	require.NoError(t, err)
	t.Cleanup(func() { campaign.Close() })
	return campaign
}

func loadTurn(t *testing.T, dir, id string, turn int64) GameState {
	t.Helper()
	store, err := checkpoint.OpenSessionStore[GameState](openCampaign(t, dir), id)
	require.NoError(t, err)
	defer store.Close()
	game, info, err := store.Load(context.Background(), turn)
	require.NoError(t, err)
	require.Equal(t, checkpoint.KindStep, info.Kind)
	return game
}

func listSessions(t *testing.T, dir string) []checkpoint.Session {
	t.Helper()
	list, err := openCampaign(t, dir).List(context.Background())
	require.NoError(t, err)
	return list
}

func sessionIDs(list []checkpoint.Session) []string {
	var ids []string
	for _, s := range list {
		ids = append(ids, s.ID)
	}
	return ids
}

func TestFirstRunCreatesCampaignAndSessionOne(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "campaigns") // does not exist yet

	out := mustPlay(t, "-dir", dir, "-turns", "3")
	require.Contains(t, out, "starting a fresh game in session 001")
	require.NotContains(t, out, "resuming")
	for turn := 1; turn <= 3; turn++ {
		require.Contains(t, out, "saved "+turnFile(dir, "001", turn))
	}
	require.NoFileExists(t, turnFile(dir, "001", 4))
	require.FileExists(t, filepath.Join(dir, "001", "session.json"))
	require.Equal(t, "001", loadTurn(t, dir, "001", 3).Session)

	list := listSessions(t, dir)
	require.Len(t, list, 1)
	require.NoError(t, list[0].Err)
	require.Equal(t, map[string]string{"turn": "3", "scene": "Mossgate Market"}, list[0].Meta)
	require.Equal(t, int64(3), list[0].LastStep)
	require.Contains(t, out, "  001  turn 3 (Mossgate Market), 3 checkpoints\n")
	require.Contains(t, out, "run again to play turn 4 onwards")
}

func TestSecondRunResumesAndLeavesOldTurnsUntouched(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mustPlay(t, "-dir", dir, "-turns", "3")
	before := readTurns(t, dir, "001")
	require.Len(t, before, 3)

	out := mustPlay(t, "-dir", dir, "-turns", "2")
	require.Contains(t, out, "resuming session 001 from turn 3 (saved ")
	require.NotContains(t, out, "fresh game")
	require.Contains(t, out, "── turn 4 ")
	require.NotContains(t, out, "── turn 3 ", "a saved turn was played again")
	require.FileExists(t, turnFile(dir, "001", 5))
	require.NoFileExists(t, turnFile(dir, "001", 6))
	for name, data := range before {
		after, err := os.ReadFile(filepath.Join(dir, "001", name))
		require.NoError(t, err)
		require.True(t, bytes.Equal(data, after), "%s changed", name)
	}
	require.Equal(t, []string{"001"}, sessionIDs(listSessions(t, dir)), "resuming made no new session")
	require.Contains(t, out, "  001  turn 5 (the Clockwork Bridge), 5 checkpoints\n")

	game := loadTurn(t, dir, "001", 5)
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
	t.Parallel()
	straight, split := t.TempDir(), t.TempDir()

	mustPlay(t, "-dir", straight, "-turns", "5")
	for _, turns := range []string{"2", "0", "1", "2"} {
		mustPlay(t, "-dir", split, "-turns", turns)
	}

	require.Equal(t, loadTurn(t, straight, "001", 5), loadTurn(t, split, "001", 5))
}

func TestNewStartsAnotherSessionAndBecomesTheOneResumed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mustPlay(t, "-dir", dir, "-turns", "3")
	first := readTurns(t, dir, "001")

	out := mustPlay(t, "-dir", dir, "-new", "-turns", "2")
	require.Contains(t, out, "starting a fresh game in session 002")
	require.NotContains(t, out, "resuming")
	requireUnchanged(t, first, dir, "001")
	fresh := loadTurn(t, dir, "002", 1)
	require.Equal(t, "002", fresh.Session)
	fresh.Session = "001"
	require.Equal(t, loadTurn(t, dir, "001", 1), fresh, "a new session starts the same game afresh")
	require.Contains(t, out, "  002  turn 2 (the Drowned Chapel), 2 checkpoints\n  001  turn 3 (Mossgate Market), 3 checkpoints\n")

	out = mustPlay(t, "-dir", dir, "-turns", "1")
	require.Contains(t, out, "resuming session 002 from turn 2")
	require.FileExists(t, turnFile(dir, "002", 3))
	requireUnchanged(t, first, dir, "001")
}

func TestSessionFlagPlaysThatSession(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mustPlay(t, "-dir", dir, "-turns", "3")
	mustPlay(t, "-dir", dir, "-new", "-turns", "2")
	second := readTurns(t, dir, "002")

	out := mustPlay(t, "-dir", dir, "-session", "001", "-turns", "1")
	require.Contains(t, out, "resuming session 001 from turn 3")
	require.Contains(t, out, "── turn 4 ")
	require.FileExists(t, turnFile(dir, "001", 4))
	requireUnchanged(t, second, dir, "002")
	require.Equal(t, []string{"001", "002"}, sessionIDs(listSessions(t, dir)), "the session played is the most recent")

	out = mustPlay(t, "-dir", dir, "-turns", "1")
	require.Contains(t, out, "resuming session 001 from turn 4")
}

func TestRestoreForksAndLeavesLaterTurnsUntouched(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mustPlay(t, "-dir", dir, "-turns", "5")
	original := readTurns(t, dir, "001")

	out := mustPlay(t, "-dir", dir, "-restore", "3", "-turns", "2")
	require.Contains(t, out, "forked session 001 at turn 3 into session 002")
	require.Contains(t, out, "resuming session 002 from turn 3")
	require.Contains(t, out, "── turn 4 ")
	require.NotContains(t, out, "── turn 3 ")
	requireUnchanged(t, original, dir, "001")

	// The fork holds turns 1-3 as they were and plays turn 4 from the
	// restored turn 3: the game is deterministic, so its turn 4 is the
	// original's turn 4, in session 002.
	forked := readTurns(t, dir, "002")
	require.Len(t, forked, 5)
	for turn := 1; turn <= 3; turn++ {
		name := fmt.Sprintf("turn_%03d.json", turn)
		require.True(t, bytes.Equal(original[name], forked[name]), "%s differs from the original", name)
	}
	replayed := loadTurn(t, dir, "002", 4)
	require.Equal(t, "002", replayed.Session)
	replayed.Session = "001"
	require.Equal(t, loadTurn(t, dir, "001", 4), replayed)

	list := listSessions(t, dir)
	require.Equal(t, []string{"002", "001"}, sessionIDs(list))
	require.Equal(t, "001", list[0].Parent)
	require.Equal(t, int64(3), list[0].ParentStep)
	require.Equal(t, "5", list[0].Meta["turn"])
	require.Contains(t, out, "  002  turn 5 (the Clockwork Bridge), 5 checkpoints, forked from 001 at turn 3\n")
	require.Contains(t, out, "  001  turn 5 (the Clockwork Bridge), 5 checkpoints\n")

	// Without -session, -restore forks the most recent session: now 002.
	out = mustPlay(t, "-dir", dir, "-restore", "4", "-turns", "0")
	require.Contains(t, out, "forked session 002 at turn 4 into session 003")
	// -session picks the session to fork.
	out = mustPlay(t, "-dir", dir, "-restore", "1", "-session", "001", "-turns", "1")
	require.Contains(t, out, "forked session 001 at turn 1 into session 004")
	require.FileExists(t, turnFile(dir, "004", 2))
	require.NoFileExists(t, turnFile(dir, "004", 3))
	requireUnchanged(t, original, dir, "001")
	require.Len(t, readTurns(t, dir, "002"), 5)
}

// A damaged most recent session never stops play: the run says what is
// wrong, leaves the session's files alone and starts a new session.
func TestDamagedLatestSessionStartsNewSession(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		listed bool // whether List, which reads no state, sees the damage
		damage func(t *testing.T, sessionDir string)
	}{
		{"garbled session.json", true, func(t *testing.T, sessionDir string) {
			require.NoError(t, os.WriteFile(filepath.Join(sessionDir, "session.json"), []byte(`{"format":1,"id":`), 0o644))
		}},
		{"missing session.json", true, func(t *testing.T, sessionDir string) {
			require.NoError(t, os.Remove(filepath.Join(sessionDir, "session.json")))
		}},
		{"every turn corrupt", false, func(t *testing.T, sessionDir string) {
			for turn := 1; turn <= 2; turn++ {
				name := filepath.Join(sessionDir, fmt.Sprintf("turn_%03d.json", turn))
				data, err := os.ReadFile(name)
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(name, data[:len(data)/2], 0o644))
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			mustPlay(t, "-dir", dir, "-turns", "2")
			tc.damage(t, filepath.Join(dir, "001"))
			damaged := readTurns(t, dir, "001")

			out := mustPlay(t, "-dir", dir, "-turns", "1")
			require.Contains(t, out, "session 001 is damaged; leaving it as it is and starting a new session:\n  checkpoint: ")
			require.Contains(t, out, "starting a fresh game in session 002")
			if tc.listed {
				require.Contains(t, out, "  001  damaged: ")
			}
			require.FileExists(t, turnFile(dir, "002", 1))
			requireUnchanged(t, damaged, dir, "001")

			out = mustPlay(t, "-dir", dir, "-turns", "1")
			require.Contains(t, out, "resuming session 002 from turn 1")
			require.NotContains(t, out, "is damaged;")

			// Asked for by name, a damaged session is an error.
			_, err := play(t, "-dir", dir, "-session", "001")
			require.ErrorIs(t, err, checkpoint.ErrCorrupt)
			require.ErrorContains(t, err, "-session 001: ")
			requireUnchanged(t, damaged, dir, "001")
		})
	}
}

func TestBadFlagsAreRejected(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		is   error  // the sentinel the error wraps, if any
		says string // part of the message
	}{
		{[]string{"-turns", "-1"}, nil, "-turns -1: want 0 or more"},
		{[]string{"-turns", "many"}, nil, "invalid value"},
		{[]string{"-no-such-flag"}, nil, "not defined"},
		{[]string{"extra"}, nil, `unexpected argument "extra"`},
		{[]string{"-restore", "0"}, nil, "-restore 0: want a turn, 1 or more"},
		{[]string{"-restore", "9"}, checkpoint.ErrNotFound, "-restore 9: session 001 has no checkpoint of turn 9 (its last is turn 3)"},
		{[]string{"-restore", "2", "-session", "007"}, checkpoint.ErrNotFound, `no session "007"`},
		{[]string{"-session", "007"}, checkpoint.ErrNotFound, `-session 007: `},
		{[]string{"-session", "../001"}, checkpoint.ErrNotFound, `no session "../001"`}, // an ID, never a path to session 001
		{[]string{"-new", "-session", "001"}, nil, "cannot be combined"},
		{[]string{"-new", "-restore", "2"}, nil, "cannot be combined"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			dir := t.TempDir()
			mustPlay(t, "-dir", dir, "-turns", "3")
			before := readTurns(t, dir, "001")

			_, err := play(t, append([]string{"-dir", dir}, tc.args...)...)
			require.ErrorContains(t, err, tc.says)
			if tc.is != nil {
				require.ErrorIs(t, err, tc.is)
			}
			require.Equal(t, []string{"001"}, sessionIDs(listSessions(t, dir)), "a rejected run made a session")
			requireUnchanged(t, before, dir, "001")
		})
	}
}

func TestRestoreInEmptyCampaignIsAnError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := play(t, "-dir", dir, "-restore", "1")
	require.ErrorContains(t, err, "holds no session to restore")
	require.Empty(t, listSessions(t, dir))
}

func TestSecondPlayerOnSameSessionIsLocked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mustPlay(t, "-dir", dir, "-turns", "1")
	campaign, err := checkpoint.OpenSessions(dir, checkpoint.WithLayout("turn", 3))
	require.NoError(t, err)
	defer campaign.Close()
	store, err := checkpoint.OpenSessionStore[GameState](campaign, "001")
	require.NoError(t, err)
	defer store.Close()

	_, err = play(t, "-dir", dir, "-turns", "1")
	require.ErrorIs(t, err, checkpoint.ErrLocked)
	require.NoFileExists(t, turnFile(dir, "001", 2))
	require.Equal(t, []string{"001"}, sessionIDs(listSessions(t, dir)))
}

func TestCancelledRunWritesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	var out bytes.Buffer
	err := run(ctx, []string{"-dir", dir}, &out)
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, listSessions(t, dir))
}

func TestResumingPastADamagedTurnSaysSo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mustPlay(t, "-dir", dir, "-turns", "3")
	name := turnFile(dir, "001", 3)
	data, err := os.ReadFile(name)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(name, data[:len(data)/2], 0o644))

	out := mustPlay(t, "-dir", dir, "-turns", "1")
	require.Contains(t, out, "warning: checkpoint: latest step 3 "+name+": corrupt checkpoint")
	require.Contains(t, out, "resuming session 001 from turn 2")
}
