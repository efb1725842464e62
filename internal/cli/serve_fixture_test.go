package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/stretchr/testify/require"
)

// The fixtures of the browser tests of checkpoint serve.
//
// writeServeRoot writes a root of sessions with everything a page must
// draw or refuse:
//
//	long        3,000 checkpoints: steps 1-2998, the rolling file at 2999
//	            and the final checkpoint of 3000 (serveState), each with
//	            a "score" metric
//	broken      steps 1-6 and a panic's error checkpoint of step 7; step 3's
//	            state has flipped bytes (its header reads, its checksum
//	            fails) and step 4's header is unreadable
//	<script>…   the session whose ID is xssSessionID, its session meta and its
//	            checkpoints' meta and states holding xssValue
//	orphan      checkpoints without a session.json: a damaged session
const (
	longSession   = "long"
	brokenSession = "broken"
	orphanSession = "orphan"
	longSteps     = 3000 // the checkpoints of long: 2998 steps, the rolling file, the final
	xssSessionID  = `<script>window.__xss=1</script>`
	xssValue      = `<img src=x onerror="window.__xss=2">`
	xssStateKey   = `<img src=x onerror="window.__xss=3">`
	secretValue   = "behind the waterfall"
	panicMessage  = "runtime error: index out of range [7] with length 3"
	damagedFile   = "step_00000003.json" // flipped bytes in its state
	headlessFile  = "step_00000004.json" // an unreadable header
	errorFile     = "step_00000007.error.json"
)

// serveState is the state of the fixtures' sessions: small, nested, and
// different from one step to the next in a known way (see serveStateAt).
type serveState struct {
	Turn    int64          `json:"turn"`
	Players []servePlayer  `json:"players"`
	World   map[string]any `json:"world"`
	Loot    string         `json:"loot,omitempty"`
	History []int64        `json:"history,omitempty"`
	Note    string         `json:"note,omitempty"`
}

type servePlayer struct {
	Name      string   `json:"name"`
	HP        int64    `json:"hp"`
	Inventory []string `json:"inventory"`
}

// serveStateAt is the state of step: between an odd step and the even
// step after it, .turn and .players[0].hp change and .loot is added (and
// removed from an even step to the odd step after it); the final state
// (longSteps) holds a .history of 1,200 numbers, more than a page of
// children.
func serveStateAt(step int64) serveState {
	s := serveState{
		Turn: step,
		Players: []servePlayer{
			{Name: "ana", HP: 20 - step%7, Inventory: []string{"rope", "torch"}},
			{Name: "bo", HP: 15, Inventory: []string{"lute"}},
		},
		World: map[string]any{"map": map[string]any{"regions": map[string]any{
			"north": map[string]any{"secret_door": secretValue},
			"south": map[string]any{"inn": "the Drowned Chapel"},
		}}},
	}
	if step%2 == 0 {
		s.Loot = "gold"
	}
	if step == longSteps {
		for i := range int64(1200) {
			s.History = append(s.History, i)
		}
	}
	return s
}

// writeServeRoot writes the root of sessions described above into dir and
// returns the stored name of the session xssSessionID, which is its key in the
// server's API and the page's routes.
func writeServeRoot(t *testing.T, dir string) (xssStored string) {
	t.Helper()
	ctx := context.Background()
	root, err := checkpoint.OpenSessions(dir, checkpoint.NoSync())
	require.NoError(t, err)
	defer root.Close()

	// long: the rolling file is written by a Tick that is not due.
	_, err = root.Create(ctx, longSession, map[string]string{"owner": "ana"})
	require.NoError(t, err)
	long, err := checkpoint.OpenSessionStore[serveState](root, longSession,
		checkpoint.NoSync(), checkpoint.WithRolling(), checkpoint.SaveEvery(1<<40))
	require.NoError(t, err)
	for step := int64(1); step <= longSteps-2; step++ {
		_, err := long.Save(ctx, step, serveStateAt(step), checkpoint.WithMetric("score", float64(step%97)))
		require.NoError(t, err)
	}
	info, saved, err := long.Tick(ctx, longSteps-1, serveStateAt(longSteps-1), checkpoint.WithMetric("score", 1))
	require.NoError(t, err)
	require.True(t, saved)
	require.Equal(t, checkpoint.KindRolling, info.Kind)
	_, err = long.SaveFinal(ctx, longSteps, serveStateAt(longSteps), checkpoint.WithMeta("outcome", "won"), checkpoint.WithMetric("score", 96))
	require.NoError(t, err)
	require.NoError(t, long.Close())

	// broken: six steps, then a panic at step 7 recorded by SaveOnPanic.
	_, err = root.Create(ctx, brokenSession, nil)
	require.NoError(t, err)
	broken, err := checkpoint.OpenSessionStore[serveState](root, brokenSession, checkpoint.NoSync())
	require.NoError(t, err)
	for step := int64(1); step <= 6; step++ {
		_, err := broken.Save(ctx, step, serveStateAt(step))
		require.NoError(t, err)
	}
	func() {
		defer func() { require.Equal(t, panicMessage, recover()) }()
		defer broken.SaveOnPanic(ctx, func() (int64, serveState) { return 7, serveStateAt(7) })
		panic(panicMessage)
	}()
	require.NoError(t, broken.Close())
	brokenDir := filepath.Join(dir, brokenSession)
	flipBytes(t, filepath.Join(brokenDir, damagedFile), []byte(secretValue))
	writeFile(t, filepath.Join(brokenDir, headlessFile), []byte("{\"format\":1,\"step\":4,\"kind\":\x00\x01 not a header"))

	// The session whose ID, meta and state are markup.
	xss, err := root.Create(ctx, xssSessionID, map[string]string{"note": xssValue})
	require.NoError(t, err)
	require.NotEqual(t, xssSessionID, filepath.Base(xss.Dir), "the ID is stored under a mapped name")
	xssStore, err := checkpoint.OpenSessionStore[map[string]string](root, xssSessionID, checkpoint.NoSync())
	require.NoError(t, err)
	for step := int64(1); step <= 2; step++ {
		_, err := xssStore.Save(ctx, step, map[string]string{"note": xssValue, xssStateKey: "a key of markup"},
			checkpoint.WithMeta("note", xssValue))
		require.NoError(t, err)
	}
	require.NoError(t, xssStore.Close())

	// orphan: a checkpoint copied by hand into a directory without a
	// session.json.
	data, err := os.ReadFile(filepath.Join(dir, longSession, "step_00000001.json"))
	require.NoError(t, err)
	writeFile(t, filepath.Join(dir, orphanSession, "step_00000001.json"), data)
	return filepath.Base(xss.Dir)
}

// flipBytes changes the first occurrence of part in the file at path, byte
// for byte, so that the file keeps its length and its header but fails its
// checksum.
func flipBytes(t *testing.T, path string, part []byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	i := bytes.Index(data, part)
	require.GreaterOrEqual(t, i, 0, "%s holds %q", path, part)
	for j := range part {
		data[i+j] ^= 0x01
	}
	require.NoError(t, os.WriteFile(path, data, 0o644))
}

// writeSmallRoot writes a root of sessions holding one session, id, of
// steps 1 to n: the fixture of the tests that write (fork, live saves).
func writeSmallRoot(t *testing.T, dir, id string, n int64) {
	t.Helper()
	ctx := context.Background()
	root, err := checkpoint.OpenSessions(dir, checkpoint.NoSync())
	require.NoError(t, err)
	defer root.Close()
	_, err = root.Create(ctx, id, nil)
	require.NoError(t, err)
	s, err := checkpoint.OpenSessionStore[serveState](root, id, checkpoint.NoSync())
	require.NoError(t, err)
	for step := int64(1); step <= n; step++ {
		_, err := s.Save(ctx, step, serveStateAt(step))
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
}

// buildGameloop builds the gameloop example into dir and returns the path
// of the executable.
func buildGameloop(t *testing.T, dir string) string {
	t.Helper()
	exe := filepath.Join(dir, "gameloop")
	if runtime.GOOS == "windows" {
		exe += ".exe"
	}
	cmd := exec.Command("go", "build", "-o", exe, "./examples/gameloop")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build ./examples/gameloop:\n%s", out)
	return exe
}

// runGameloop runs the gameloop executable exe with args, which must
// succeed.
func runGameloop(t *testing.T, exe string, args ...string) {
	t.Helper()
	out, err := exec.Command(exe, args...).CombinedOutput()
	require.NoError(t, err, "gameloop %v:\n%s", args, out)
}

// payloadSize is the size of the byte payloads of writeServeStore.
const payloadSize = 4096

// writeServeStore writes a store (no sessions) into dir: steps 1 and 2
// gzipped JSON states, step 3 a byte payload of payloadSize bytes as it is
// and step 4 the same payload gzipped.
func writeServeStore(t *testing.T, dir string) {
	t.Helper()
	ctx := context.Background()
	payload := func(w io.Writer) error {
		_, err := w.Write(bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, payloadSize/4))
		return err
	}
	s, err := checkpoint.Open[serveState](dir, checkpoint.NoSync(), checkpoint.Gzip())
	require.NoError(t, err)
	for step := int64(1); step <= 2; step++ {
		_, err := s.Save(ctx, step, serveStateAt(step))
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	s, err = checkpoint.Open[serveState](dir, checkpoint.NoSync())
	require.NoError(t, err)
	_, err = s.SaveFrom(ctx, 3, payload)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	s, err = checkpoint.Open[serveState](dir, checkpoint.NoSync(), checkpoint.Gzip())
	require.NoError(t, err)
	_, err = s.SaveFrom(ctx, 4, payload)
	require.NoError(t, err)
	require.NoError(t, s.Close())
}
