package cli

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/ with writeFixtures")

// t0 is the clock of the fixtures: every save time is t0 plus some minutes.
var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

func minute(n int) time.Time { return t0.Add(time.Duration(n) * time.Minute) }

// The checked-in fixtures are written by writeFixtures, byte for byte as the
// README's on-disk format describes them, with fixed save times:
//
//	testdata/game      a store of layout turn/3: steps 1 and 2, step 3
//	                   gzipped, an error checkpoint of step 4 and the step
//	                   redone, a damaged step 5 (bad checksum), the rolling
//	                   file at step 6, the final step 7, a quarantined copy
//	                   of step 2, a temporary file and a side file
//	testdata/campaign  a root of sessions: 001, 002 forked from 001 at
//	                   step 1, 003 without its session.json, and a session
//	                   left half-made by a crash
//
// go test -run TestFixtures -update rewrites them.
func writeFixtures(t *testing.T, dir string) {
	t.Helper()
	game := filepath.Join(dir, "game")
	for _, f := range []struct {
		name   string
		step   int64
		kind   checkpoint.Kind
		min    int
		meta   map[string]string
		err    *checkpoint.ErrorRecord
		damage bool
	}{
		{name: "turn_001.json", step: 1, kind: checkpoint.KindStep, min: 1, meta: map[string]string{"dm": "ana"}},
		{name: "turn_002.json", step: 2, kind: checkpoint.KindStep, min: 2, meta: map[string]string{"dm": "ana", "note": "the bridge"}},
		{name: "turn_003.json.gz", step: 3, kind: checkpoint.KindStep, min: 3},
		{name: "turn_004.error.json", step: 4, kind: checkpoint.KindError, min: 4, err: &checkpoint.ErrorRecord{
			Message: "the dice rolled off the table", Types: []string{"*errors.errorString"}, Step: 4, Time: minute(4)}},
		{name: "turn_004.json", step: 4, kind: checkpoint.KindStep, min: 5},
		{name: "turn_005.json", step: 5, kind: checkpoint.KindStep, min: 6, damage: true},
		{name: "turn_last.json", step: 6, kind: checkpoint.KindRolling, min: 7},
		{name: "turn_007.final.json", step: 7, kind: checkpoint.KindFinal, min: 8},
	} {
		state := gameState(f.step)
		if f.kind == checkpoint.KindError {
			state = gameState(f.step - 1) // the turn as it stood when it failed
			state["turn"] = f.step
		}
		data := envelope(t, f.step, f.kind, minute(f.min), f.meta, f.err, state)
		if f.damage {
			data = bytes.Replace(data, []byte(`"hp":7`), []byte(`"hp":9`), 1) // a bit flip in the state
		}
		if strings.HasSuffix(f.name, ".gz") {
			data = gzipped(t, data)
		}
		writeFile(t, filepath.Join(game, f.name), data)
	}
	turn2 := envelope(t, 2, checkpoint.KindStep, minute(2), nil, nil, gameState(2))
	writeFile(t, filepath.Join(game, "turn_002.json.corrupt"), turn2[:len(turn2)/2])       // quarantined
	writeFile(t, filepath.Join(game, ".turn_006.json8675309"), turn2[:len(turn2)/3])       // a save cut short
	writeFile(t, filepath.Join(game, "result.json"), []byte("{\"winner\": \"brynja\"}\n")) // a side file

	root := filepath.Join(dir, "campaign")
	writeFile(t, filepath.Join(root, ".sessions.lock"), nil)
	sessionJSON := func(id string, created, updated time.Time, parent string, parentStep int64, meta map[string]string) []byte {
		m := map[string]any{"format": 1, "id": id, "created": created, "updated": updated}
		if parent != "" {
			m["parent"], m["parent_step"] = parent, parentStep
		}
		if meta != nil {
			m["meta"] = meta
		}
		b, err := json.MarshalIndent(m, "", "  ")
		require.NoError(t, err)
		return append(b, '\n')
	}
	writeFile(t, filepath.Join(root, "001", "session.json"), sessionJSON("001", minute(0), minute(10), "", 0, map[string]string{"players": "3"}))
	writeFile(t, filepath.Join(root, "001", "turn_001.json"), envelope(t, 1, checkpoint.KindStep, minute(1), nil, nil, gameState(1)))
	writeFile(t, filepath.Join(root, "001", "turn_002.json"), envelope(t, 2, checkpoint.KindStep, minute(2), nil, nil, gameState(2)))
	writeFile(t, filepath.Join(root, "002", "session.json"), sessionJSON("002", minute(20), minute(20), "001", 1, nil))
	writeFile(t, filepath.Join(root, "002", "turn_001.json"), envelope(t, 1, checkpoint.KindStep, minute(1), nil, nil, gameState(1)))
	alt := gameState(2)
	alt["scene"] = "the Salt Caves"
	writeFile(t, filepath.Join(root, "002", "turn_002.json"), envelope(t, 2, checkpoint.KindStep, minute(21), nil, nil, alt))
	writeFile(t, filepath.Join(root, "003", "turn_001.json"), envelope(t, 1, checkpoint.KindStep, minute(30), nil, nil, gameState(1)))
	writeFile(t, filepath.Join(root, ".staging-QX7PZ2", "turn_001.json"), []byte("{"))
}

// gameState is the state of the fixture game after turn n.
func gameState(n int64) map[string]any {
	scenes := []string{"the Lantern Road", "the Drowned Chapel", "the Clockwork Bridge", "the Salt Caves", "the Ash Orchard", "the Glass Tower", "the Long Night", "the Dawn"}
	inventory := []any{"sword", "torch"}
	if n >= 2 {
		inventory = append(inventory, "brass key")
	}
	if n >= 3 {
		inventory = append(inventory, "rope")
	}
	s := map[string]any{
		"turn":  n,
		"scene": scenes[n],
		"characters": map[string]any{
			"brynja": map[string]any{"hp": 12 - n, "xp": 10 * n, "inventory": inventory},
			"kael":   map[string]any{"hp": 8, "xp": 5 * n},
		},
	}
	if n%2 == 1 {
		s["whispers"] = []any{fmt.Sprintf("turn %d: the bells ring for someone still alive", n)}
	}
	return s
}

// envelope encodes a checkpoint as the README's on-disk format says: the
// header fields in order, the state, and a SHA-256 of every byte before the
// checksum field.
func envelope(t *testing.T, step int64, kind checkpoint.Kind, at time.Time, meta map[string]string, rec *checkpoint.ErrorRecord, state any) []byte {
	t.Helper()
	head, err := json.Marshal(struct {
		Format int                     `json:"format"`
		Step   int64                   `json:"step"`
		Kind   checkpoint.Kind         `json:"kind"`
		Time   time.Time               `json:"time"`
		Meta   map[string]string       `json:"meta,omitempty"`
		Error  *checkpoint.ErrorRecord `json:"error,omitempty"`
	}{1, step, kind, at, meta, rec})
	require.NoError(t, err)
	body, err := json.Marshal(state)
	require.NoError(t, err)
	data := append(head[:len(head)-1], `,"state":`...)
	data = append(data, body...)
	sum := sha256.Sum256(data)
	return append(data, `,"checksum":"sha256:`+hex.EncodeToString(sum[:])+"\"}\n"...)
}

// resum replaces the checksum of an envelope with the right one for its
// (edited) content.
func resum(data []byte) []byte {
	i := bytes.LastIndex(data, []byte(`,"checksum":"`))
	sum := sha256.Sum256(data[:i])
	return append(data[:i:i], `,"checksum":"sha256:`+hex.EncodeToString(sum[:])+"\"}\n"...)
}

func gzipped(t *testing.T, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, err := zw.Write(data)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return b.Bytes()
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, data, 0o644))
}

// TestFixturesAreCurrent checks that testdata/ is what writeFixtures
// writes (gzip files by their decompressed bytes, which do not depend on the
// compressor's version), and rewrites it with -update.
func TestFixturesAreCurrent(t *testing.T) {
	t.Parallel()
	if *update {
		for _, d := range []string{"game", "campaign"} {
			require.NoError(t, os.RemoveAll(filepath.Join("testdata", d)))
		}
		writeFixtures(t, "testdata")
	}
	want := t.TempDir()
	writeFixtures(t, want)
	for _, d := range []string{"game", "campaign"} {
		require.Equal(t, readTree(t, filepath.Join(want, d)), readTree(t, filepath.Join("testdata", d)), d)
	}
}

// readTree returns the files under dir by relative path, gzip files
// decompressed.
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := make(map[string]string)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.HasSuffix(path, ".gz") {
			zr, err := gzip.NewReader(bytes.NewReader(data))
			if err != nil {
				return err
			}
			if data, err = io.ReadAll(zr); err != nil {
				return err
			}
		}
		files[filepath.ToSlash(rel)] = string(data)
		return nil
	})
	require.NoError(t, err)
	return files
}

// copyFixture copies testdata/name to a temporary directory, for commands
// that change it.
func copyFixture(t *testing.T, name string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.CopyFS(dst, os.DirFS(filepath.Join("testdata", name))))
	return dst
}
