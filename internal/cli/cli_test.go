package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	ckptnames "github.com/gocheckpoint/checkpoint/internal/names"
	"github.com/stretchr/testify/require"
)

// result is what one run of the command printed and returned.
type result struct {
	stdout, stderr string
	code           int
}

// testNow is when the tests run the command, for the ages it prints: two
// hours after the fixtures' first save.
var testNow = time.Date(2026, 11, 21, 12, 1, 0, 0, time.UTC)

// cli runs the command line in-process.
func runCLI(t *testing.T, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := runAt(testNow, args, &stdout, &stderr, nil)
	return result{stdout.String(), stderr.String(), code}
}

// osPaths writes the paths in want, an expected output that spells them
// with slashes, as the command prints them on this system. The command
// prints a directory as it was given and the path of a file in it joined
// with the system's separator: on Windows, the slashes of a path below a
// testdata/ directory or below a temporary directory (a drive letter)
// become backslashes.
func osPaths(want string) string {
	return osPathsSep(want, `\`)
}

// osPathsRe is osPaths for a regular expression.
func osPathsRe(want string) string {
	return osPathsSep(want, `\\`)
}

func osPathsSep(want, sep string) string {
	if filepath.Separator == '/' {
		return want
	}
	return pathWord.ReplaceAllStringFunc(want, func(p string) string {
		if strings.HasPrefix(p, "testdata/") && strings.Count(p, "/") < 2 {
			return p // a directory, printed as given
		}
		return strings.ReplaceAll(p, "/", sep)
	})
}

var pathWord = regexp.MustCompile(`(?:testdata/|[A-Za-z]:\\)[^\s()"]*`)

// dedent strips the leading newline and the tabs that indent an expected
// output in the test's source.
func dedent(s string) string {
	s = strings.TrimPrefix(s, "\n")
	var b strings.Builder
	for line := range strings.Lines(s) {
		b.WriteString(strings.TrimLeft(line, "\t"))
	}
	return b.String()
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func TestLsStore(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "ls", "testdata/game")
	require.Equal(t, 0, r.code, r.stderr)
	require.Empty(t, r.stderr)
	require.Equal(t, dedent(`
		STEP  KIND     TIME                              SIZE   COMPRESSED  FILE                 META
		1     step     2026-11-21T10:01:00Z (2h ago)     376 B  no          turn_001.json        dm=ana
		2     step     2026-11-21T10:02:00Z (1h59m ago)  349 B  no          turn_002.json        dm=ana note="the bridge"
		3     step     2026-11-21T10:03:00Z (1h58m ago)  290 B  gzip        turn_003.json.gz
		4     error    2026-11-21T10:04:00Z (1h57m ago)  495 B  no          turn_004.error.json
		4     step     2026-11-21T10:05:00Z (1h56m ago)  310 B  no          turn_004.json
		5     step     2026-11-21T10:06:00Z (1h55m ago)  372 B  no          turn_005.json
		6     rolling  2026-11-21T10:07:00Z (1h54m ago)  312 B  no          turn_last.json
		7     final    2026-11-21T10:08:00Z (1h53m ago)  366 B  no          turn_007.final.json
	`), r.stdout)

	// --bytes prints exact sizes.
	r = runCLI(t, "ls", "--bytes", "testdata/game")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "\n3     step     2026-11-21T10:03:00Z (1h58m ago)  290   gzip        turn_003.json.gz\n")
}

func TestHumanSizesAndAges(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 4299: "4.2 KiB", 1 << 20: "1.0 MiB", 3 << 30: "3.0 GiB"} {
		require.Equal(t, want, size(n, false), n)
		require.Equal(t, strconv.FormatInt(n, 10), size(n, true), n)
	}
	for d, want := range map[time.Duration]string{
		0: "just now", 45 * time.Second: "45s ago", 12*time.Minute + 5*time.Second: "12m5s ago", 3 * time.Hour: "3h ago",
		26*time.Hour + 30*time.Minute: "1d2h ago", -5 * time.Minute: "in 5m",
	} {
		require.Equal(t, want, age(d), d)
	}
}

func TestLsJSON(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "ls", "--json", "testdata/game")
	require.Equal(t, 0, r.code, r.stderr)
	var infos []checkpoint.Info
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &infos))
	require.Len(t, infos, 8)
	want := checkpoint.Info{Step: 3, Kind: checkpoint.KindStep, Time: minute(3), Location: filepath.Join("testdata", "game", "turn_003.json.gz"),
		Size: 290, Compression: "gzip", Format: 1, Payload: checkpoint.PayloadJSON}
	//lint:ignore SA1019 the JSON keeps "path" for the tools that read it
	want.Path = want.Location
	require.Equal(t, want, infos[2])
	require.Equal(t, "the dice rolled off the table", infos[3].Error.Message)
	require.Equal(t, map[string]string{"dm": "ana", "note": "the bridge"}, infos[1].Meta)

	r = runCLI(t, "ls", t.TempDir(), "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "[]\n", r.stdout)
}

func TestLsUnreadableHeader(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "step_00000001.json"), envelope(t, 1, checkpoint.KindStep, minute(1), nil, nil, gameState(1)))
	writeFile(t, filepath.Join(dir, "step_00000002.json"), nil) // empty: a disk that lied
	r := runCLI(t, "ls", dir)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, dedent(`
		STEP  KIND  TIME                           SIZE   COMPRESSED  FILE                META
		1     step  2026-11-21T10:01:00Z (2h ago)  356 B  no          step_00000001.json
		2     step  -                              0 B    no          step_00000002.json  (unreadable header: see checkpoint verify)
	`), r.stdout)
}

func TestLsSessions(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "ls", "testdata/campaign")
	require.Equal(t, 0, r.code, r.stderr)
	require.Empty(t, r.stderr)
	require.Equal(t, dedent(`
		SESSION  CHECKPOINTS  LAST STEP  LAST SAVED                        CREATED                           PARENT  META
		003      1            1          2026-11-21T10:30:00Z (1h31m ago)  -                                 -       (damaged: corrupt checkpoint: missing session.json)
		002      2            2          2026-11-21T10:21:00Z (1h40m ago)  2026-11-21T10:20:00Z (1h41m ago)  001@1
		001      2            2          2026-11-21T10:02:00Z (1h59m ago)  2026-11-21T10:00:00Z (2h1m ago)   -       players=3
	`), r.stdout)

	r = runCLI(t, "ls", "testdata/campaign", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var list []sessionJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
	require.Len(t, list, 3)
	require.Equal(t, "003", list[0].ID)
	require.Contains(t, list[0].Error, "missing session.json")
	require.Nil(t, list[0].Created)
	require.Equal(t, "001", list[1].Parent)
	require.Equal(t, int64(1), *list[1].ParentStep)
	require.Equal(t, minute(10), list[2].Active)
	require.Equal(t, int64(2), *list[2].LastStep)
}

func TestLsOfSessionsMadeByTheLibrary(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	root, err := checkpoint.OpenSessions(dir, checkpoint.WithLayout("turn", 3))
	require.NoError(t, err)
	defer root.Close()
	for range 2 {
		s, err := root.New(ctx, map[string]string{"player": "ana"})
		require.NoError(t, err)
		st, err := checkpoint.OpenSessionStore[int](root, s.ID)
		require.NoError(t, err)
		_, err = st.Save(ctx, 1, 1)
		require.NoError(t, err)
		require.NoError(t, st.Close())
	}
	r := runCLI(t, "ls", dir)
	require.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 3)
	require.Regexp(t, `^002 +1 +1 +\S+ \(.+\) +\S+ \(.+\) +- +player=ana$`, lines[1], "the most recently active first; the layout was inferred")
	require.Regexp(t, `^001 `, lines[2])
}

// TestLsShowsSessionIDsAsGiven lists sessions whose IDs no file system
// takes as names: ls shows each ID as given, quoted where it would not
// stay one column, never its stored name; --json gives the IDs exactly;
// verify and gc find the sessions under their stored names.
func TestLsShowsSessionIDsAsGiven(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	root, err := checkpoint.OpenSessions(dir, checkpoint.WithLayout("turn", 3))
	require.NoError(t, err)
	defer root.Close()
	ids := []string{"user:42/thread#7", "a b", "tab\there", "Ünïcode", "CON", "run-7"}
	for _, id := range ids {
		_, err := root.Create(ctx, id, nil)
		require.NoError(t, err)
		st, err := checkpoint.OpenSessionStore[int](root, id)
		require.NoError(t, err)
		_, err = st.Save(ctx, 1, 1)
		require.NoError(t, err)
		require.NoError(t, st.Close())
	}
	f, err := root.Fork(ctx, "a b", 1, nil)
	require.NoError(t, err)

	r := runCLI(t, "ls", dir)
	require.Equal(t, 0, r.code, r.stderr)
	requireNoControls(t, "ls of sessions", r.stdout)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, len(ids)+2)
	var first []string
	for _, l := range lines[1:] {
		first = append(first, strings.Fields(l)[0])
	}
	require.ElementsMatch(t, []string{"user:42/thread#7", `"a`, `"tab\there"`, "Ünïcode", "CON", "run-7", f.ID}, first)
	require.Contains(t, r.stdout, `"a b"@1`, "the fork's parent, quoted")
	require.NotContains(t, r.stdout, "user_42_thread_7-", "no stored name is shown")

	r = runCLI(t, "ls", "--json", dir)
	require.Equal(t, 0, r.code, r.stderr)
	var list []sessionJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
	var got []string
	for _, s := range list {
		got = append(got, s.ID)
	}
	require.ElementsMatch(t, append(ids, f.ID), got)

	r = runCLI(t, "verify", dir)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)

	// A mapped session that lost its session.json has no ID to show: ls
	// shows where it is.
	lost := filepath.Join(dir, ckptnames.SessionName("Ünïcode"))
	require.NoError(t, os.Remove(filepath.Join(lost, "session.json")))
	r = runCLI(t, "ls", dir)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^\(`+filepath.Base(lost)+`\) +1 .*damaged`, r.stdout)
}

func TestLsEmptyAndMissingDirectories(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	writeFile(t, filepath.Join(parent, "run1", "step_00000001.json"), envelope(t, 1, checkpoint.KindStep, minute(1), nil, nil, gameState(1)))
	r := runCLI(t, "ls", parent)
	require.Equal(t, 0, r.code)
	require.Equal(t, "no checkpoints in "+parent+" (layout step/8)\n", r.stdout)
	require.Contains(t, r.stderr, "these subdirectories hold checkpoints: "+filepath.Join(parent, "run1"))

	missing := filepath.Join(parent, "nope")
	r = runCLI(t, "ls", missing)
	require.Equal(t, exitFailed, r.code)
	require.Empty(t, r.stdout)
	require.Equal(t, "checkpoint: ls "+missing+": checkpoint not found: no such directory\n", r.stderr)
	require.NoDirExists(t, missing)

	r = runCLI(t, "ls", filepath.Join("testdata", "game", "result.json"))
	require.Equal(t, exitFailed, r.code)
	require.Contains(t, r.stderr, "result.json: not a directory")
}

func TestLsAboveStoresPointsAtTheDirectoriesThatHoldCheckpoints(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	file := func(path ...string) string { return filepath.Join(append([]string{parent}, path...)...) }
	step := envelope(t, 1, checkpoint.KindStep, minute(1), nil, nil, gameState(1))
	writeFile(t, file("runs", "2026", "run1", "step_00000001.json"), step) // three levels down
	writeFile(t, file("campaign", ".sessions.lock"), nil)                  // a root of sessions
	writeFile(t, file("campaign", "001", "step_00000001.json"), step)
	writeFile(t, file("a", "b", "c", "too-deep", "step_00000001.json"), step)
	writeFile(t, file(".hidden", "step_00000001.json"), step)
	if err := os.Symlink(file("runs", "2026", "run1"), file("link")); err != nil {
		t.Logf("no symbolic link: %v", err)
	}
	r := runCLI(t, "ls", parent)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "no checkpoints in "+parent+" (layout step/8)\n", r.stdout)
	require.Equal(t, "checkpoint ls: note: these subdirectories hold checkpoints: "+
		file("campaign")+" (sessions), "+file("runs", "2026", "run1")+"\n", r.stderr,
		"shallowest first, a root of sessions once, no link followed, nothing hidden or deeper than three levels")

	// One level above a store, as before.
	r = runCLI(t, "ls", file("runs", "2026"))
	require.Equal(t, "checkpoint ls: note: these subdirectories hold checkpoints: "+file("runs", "2026", "run1")+"\n", r.stderr)
}

func TestStoresBelowReadsABoundedNumberOfEntries(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i := range 10 {
		writeFile(t, filepath.Join(dir, fmt.Sprintf("f%02d", i)), nil)
	}
	budget := 4
	dirents, complete := readDirBounded(dir, &budget)
	require.Len(t, dirents, 4)
	require.False(t, complete)
	require.Zero(t, budget)
	budget = 100
	dirents, complete = readDirBounded(dir, &budget)
	require.Len(t, dirents, 10)
	require.True(t, complete)
	require.Equal(t, "f00", dirents[0].Name(), "sorted")
}

// TestStoresBelowReadsEachDirectoryOnceWithinItsBudget: the hint reads
// each directory once, and every entry it reads counts toward its budget.
// dir/a/b/c/step_00000001.json is 4 entries in 4 directories: a budget of
// 5 (the 4, and room left to see the last directory's end) finds the store
// three levels down; reading a directory twice, or once more to look for
// checkpoints, would not fit.
func TestStoresBelowReadsEachDirectoryOnceWithinItsBudget(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	store := filepath.Join(dir, "a", "b", "c")
	writeFile(t, filepath.Join(store, "step_00000001.json"), envelope(t, 1, checkpoint.KindStep, minute(1), nil, nil, gameState(1)))
	require.Equal(t, []string{store}, storesBelow(dir, 5))
	require.Equal(t, []string{"..."}, storesBelow(dir, 4), "one entry fewer: it stops, and says so")

	root := filepath.Join(dir, "a", "b", "r")
	writeFile(t, filepath.Join(root, ".sessions.lock"), nil)
	require.Equal(t, []string{store, root + " (sessions)"}, storesBelow(dir, 7), "a root of sessions, told as sessionDirs tells it")
}

func TestVerifyOfDirectoryWithoutCheckpointsFailsWithTheHintOfLs(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	writeFile(t, filepath.Join(parent, "run1", "step_00000001.json"), envelope(t, 1, checkpoint.KindStep, minute(1), nil, nil, gameState(1)))
	for _, args := range [][]string{{"verify", parent}, {"verify", "--json", parent}} {
		r := runCLI(t, args...)
		require.Equal(t, exitFailed, r.code, "nothing checked is no proof: %s", r.stdout)
		require.Equal(t, "checkpoint verify: no checkpoints in "+parent+" (layout step/8): nothing to verify\n"+
			"checkpoint verify: note: these subdirectories hold checkpoints: "+filepath.Join(parent, "run1")+"\n", r.stderr)
		require.NotContains(t, r.stdout, "0 ok")
	}
	r := runCLI(t, "verify", "--json", parent)
	var report verifyReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &report))
	require.False(t, report.OK)

	// An empty root of sessions too.
	root := t.TempDir()
	writeFile(t, filepath.Join(root, ".sessions.lock"), nil)
	r = runCLI(t, "verify", root)
	require.Equal(t, exitFailed, r.code)
	require.Equal(t, "checkpoint verify: no sessions in "+root+": nothing to verify\n", r.stderr)
}

func TestShow(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "show", "testdata/game", "4")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, osPaths(dedent(`
		file:       testdata/game/turn_004.json
		format:     1
		step:       4
		kind:       step
		time:       2026-11-21T10:05:00Z (1h56m ago)
		size:       310 B (310 bytes)
		compressed: no
		checksum:   ok (sha256 verified)
		state:
		{
		  "characters": {
		    "brynja": {
		      "hp": 8,
		      "inventory": [
		        "sword",
		        "torch",
		        "brass key",
		        "rope"
		      ],
		      "xp": 40
		    },
		    "kael": {
		      "hp": 8,
		      "xp": 20
		    }
		  },
		  "scene": "the Ash Orchard",
		  "turn": 4
		}
	`)), r.stdout, "the step's checkpoint saved last, as Load picks it")
}

func TestShowKindFileAndLatest(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "show", "--kind", "error", "testdata/game", "4")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, osPaths(dedent(`
		file:       testdata/game/turn_004.error.json
		format:     1
		step:       4
		kind:       error
		time:       2026-11-21T10:04:00Z (1h57m ago)
		size:       495 B (495 bytes)
		compressed: no
		checksum:   ok (sha256 verified)
		error:      the dice rolled off the table
		  types:    *errors.errorString
		  step:     4
		  time:     2026-11-21T10:04:00Z
		state:
	`)))

	r = runCLI(t, "show", "testdata/game", "--file", "turn_003.json.gz")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "compressed: gzip\n")
	require.Contains(t, r.stdout, `"scene": "the Salt Caves"`)

	r = runCLI(t, "show", "testdata/game", "2")
	require.Contains(t, r.stdout, "meta:       dm=ana note=\"the bridge\"\n")

	r = runCLI(t, "show", "testdata/game", "latest")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, osPaths("file:       testdata/game/turn_007.final.json\n"))
	require.Empty(t, r.stderr)

	r = runCLI(t, "show", "testdata/game", "6")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "kind:       rolling\n", "the rolling file holds step 6")

	// The newest step checkpoint is damaged: latest --kind step passes
	// over it, and says so.
	r = runCLI(t, "show", "testdata/game", "latest", "--kind", "step", "--state")
	require.Equal(t, 0, r.code, r.stderr)
	var state map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &state), "--state prints the state alone")
	require.Equal(t, 4.0, state["turn"])
	require.Contains(t, r.stderr, osPaths("note: skipped testdata/game/turn_005.json: corrupt checkpoint: checksum mismatch"))
}

func TestShowLatestSkipsDamagedNewest(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "step_00000001.json"), envelope(t, 1, checkpoint.KindStep, minute(1), nil, nil, gameState(1)))
	writeFile(t, filepath.Join(dir, "step_00000002.json"), []byte(`{"format":1,"step":2`))
	r := runCLI(t, "show", dir, "latest", "--state")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `"turn": 1`)
	require.Contains(t, r.stderr, "note: skipped "+filepath.Join(dir, "step_00000002.json")+": corrupt checkpoint")
}

func TestShowFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"show", "testdata/game", "5"}, exitFailed,
			"checkpoint: load step 5 testdata/game/turn_005.json: corrupt checkpoint: checksum mismatch: file says sha256:"},
		{[]string{"show", "testdata/game", "9"}, exitFailed, "checkpoint: load step 9 testdata/game: checkpoint not found; the nearest kept step is 7 (below; none above)\n"},
		{[]string{"show", "testdata/game", "3", "--kind", "final"}, exitFailed, "checkpoint: show step 3 testdata/game: checkpoint not found: no final checkpoint\n"},
		{[]string{"show", "testdata/game", "--file", "turn_009.json"}, exitFailed,
			"checkpoint: show testdata/game/turn_009.json: checkpoint not found: no checkpoint file of that name (layout turn/3)\n"},
		{[]string{"show", "testdata/game", "latest", "--kind", "error", "--file", "turn_004.json"}, exitUsage, "checkpoint show: --kind and --file exclude each other\n"},
		{[]string{"show", "testdata/game", "4", "--kind", "bogus"}, exitUsage, `checkpoint show: --kind "bogus": want step, final, error or rolling`},
		{[]string{"show", "testdata/game", "3", "--file", "turn_004.json"}, exitUsage, "checkpoint show: turn_004.json holds step 4, not 3\n"},
		{[]string{"show", "testdata/game", "-1"}, exitUsage, `checkpoint show: step "-1": want a step number (0 or more) or latest`},
		{[]string{"show", "--state", "testdata/game", "-1"}, exitUsage, `checkpoint show: step "-1": want a step number (0 or more) or latest`},
		{[]string{"show", "testdata/game", "--", "-1"}, exitUsage, `checkpoint show: step "-1": want a step number (0 or more) or latest`},
		{[]string{"show", "testdata/game", "four"}, exitUsage, `checkpoint show: step "four": want a step number (0 or more) or latest`},
		{[]string{"show", "testdata/game"}, exitUsage, "checkpoint show: missing STEP\n"},
		{[]string{"show"}, exitUsage, "checkpoint show: missing DIR and STEP\n"},
		{[]string{"show", "--file", "turn_001.json"}, exitUsage, "checkpoint show: missing DIR\n"},
		{[]string{"show", "testdata/campaign", "1"}, exitUsage, "checkpoint show: testdata/campaign is a root of sessions; give one session's directory"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := runCLI(t, tt.args...)
			require.Equal(t, tt.code, r.code, r.stderr)
			require.Empty(t, r.stdout)
			if tt.code == exitUsage {
				require.Contains(t, r.stderr, "Usage: checkpoint show DIR STEP|latest")
			}
			want := osPaths(tt.stderr)
			require.True(t, strings.HasPrefix(r.stderr, want) || strings.Contains(r.stderr, want), "stderr: %s", r.stderr)
		})
	}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "verify", "testdata/game")
	require.Equal(t, exitFound, r.code, r.stderr)
	require.Regexp(t, osPathsRe(`^BAD   testdata/game/turn_005.json +corrupt checkpoint: checksum mismatch: file says sha256:[0-9a-f]{64}, content is sha256:[0-9a-f]{64}
note  testdata/game/.turn_006.json8675309  temporary file of a save: in progress, or left by a crash \(checkpoint gc removes it\)
note  testdata/game/turn_002.json.corrupt  damaged checkpoint moved aside by a save \(checkpoint gc removes it\)
8 files checked in testdata/game \(layout turn/3\): 7 ok, 1 bad
$`), r.stdout)

	r = runCLI(t, "verify", "-v", "testdata/game")
	require.Equal(t, exitFound, r.code)
	require.Contains(t, r.stdout, osPaths("\nok    testdata/game/turn_003.json.gz\n"))
	require.Len(t, regexp.MustCompile(`(?m)^ok `).FindAllString(r.stdout, -1), 7)

	r = runCLI(t, "verify", "testdata/game", "--json")
	require.Equal(t, exitFound, r.code)
	var rep verifyReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	require.False(t, rep.OK)
	require.Equal(t, 8, rep.Checked)
	require.Equal(t, 1, rep.Bad)
	require.Equal(t, "turn/3", rep.Layout)
	require.Len(t, rep.Files, 8)
	bad := rep.Files[5]
	require.Equal(t, filepath.FromSlash("testdata/game/turn_005.json"), bad.Path)
	require.False(t, bad.OK)
	require.Equal(t, int64(5), *bad.Step)
	require.Contains(t, bad.Error, "checksum mismatch")
	require.Equal(t, []fileNote{
		{Path: filepath.FromSlash("testdata/game/.turn_006.json8675309"), Note: noteTemp},
		{Path: filepath.FromSlash("testdata/game/turn_002.json.corrupt"), Note: noteQuarantined},
	}, rep.Notes)
}

func TestVerifyGoodStoreMadeByTheLibrary(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := checkpoint.Open[map[string]int](dir, checkpoint.Gzip(), checkpoint.WithRolling(), checkpoint.SaveEvery(2))
	require.NoError(t, err)
	for step := int64(1); step <= 5; step++ {
		_, _, err := st.Tick(ctx, step, map[string]int{"step": int(step)})
		require.NoError(t, err)
	}
	_, err = st.SaveError(ctx, 5, map[string]int{"step": 5}, os.ErrDeadlineExceeded)
	require.NoError(t, err)
	require.NoError(t, st.Close())

	r := runCLI(t, "verify", dir)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	require.Equal(t, "4 files checked in "+dir+" (layout step/8): 4 ok, 0 bad\n", r.stdout)

	r = runCLI(t, "verify", dir, "--json")
	require.Equal(t, 0, r.code)
	var rep verifyReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	require.True(t, rep.OK)
	require.Empty(t, rep.Notes)
}

// TestVerifyAndShowReadBothFormats runs verify and show on the package's
// golden files of format 1 (SHA-256) and format 2 (CRC-32C): the tool
// checks every format a store loads, and names the checksum it verified.
func TestVerifyAndShowReadBothFormats(t *testing.T) {
	for format, sum := range map[int]string{1: "sha256", 2: "crc32c"} {
		dir := filepath.Join("..", "format", "testdata", fmt.Sprintf("v%d", format))
		r := runCLI(t, "verify", dir)
		require.Equal(t, 0, r.code, r.stdout+r.stderr)
		require.Contains(t, r.stdout, ": 6 ok, 0 bad\n")

		r = runCLI(t, "show", dir, "7")
		require.Equal(t, 0, r.code, r.stdout+r.stderr)
		require.Contains(t, r.stdout, fmt.Sprintf("format:     %d\n", format))
		require.Contains(t, r.stdout, "checksum:   ok ("+sum+" verified)\n")
	}
}

func TestVerifyEveryKindOfDamage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := envelope(t, 1, checkpoint.KindStep, minute(1), nil, nil, gameState(1))
	writeFile(t, filepath.Join(dir, "step_00000001.json"), good)
	writeFile(t, filepath.Join(dir, "step_00000002.json"), nil)
	writeFile(t, filepath.Join(dir, "step_00000003.json"), good[:len(good)-20])
	writeFile(t, filepath.Join(dir, "step_00000004.json"), envelope(t, 1, checkpoint.KindStep, minute(4), nil, nil, gameState(1))) // says step 1
	v4 := resum(bytes.Replace(envelope(t, 5, checkpoint.KindStep, minute(5), nil, nil, gameState(1)), []byte(`{"format":1`), []byte(`{"format":4`), 1))
	writeFile(t, filepath.Join(dir, "step_00000005.json"), v4)
	writeFile(t, filepath.Join(dir, "step_00000006.json.gz"), []byte{0x1f, 0x8b, 1, 2, 3})

	r := runCLI(t, "verify", dir, "--json")
	require.Equal(t, exitFound, r.code, r.stderr)
	var rep verifyReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	require.Equal(t, 6, rep.Checked)
	require.Equal(t, 5, rep.Bad)
	reasons := map[string]string{}
	for _, f := range rep.Files {
		reasons[filepath.Base(f.Path)] = f.Error
	}
	require.Empty(t, reasons["step_00000001.json"])
	require.Contains(t, reasons["step_00000002.json"], "empty file")
	require.Contains(t, reasons["step_00000003.json"], "no checksum trailer")
	require.Contains(t, reasons["step_00000004.json"], "header says step 1")
	require.Contains(t, reasons["step_00000005.json"], "unsupported format version 4")
	require.Contains(t, reasons["step_00000006.json.gz"], "gzip")
}

func TestVerifySessions(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "verify", "testdata/campaign", "-v")
	require.Equal(t, exitFound, r.code, r.stderr)
	require.Equal(t, osPaths(dedent(`
		BAD  testdata/campaign/003/session.json   corrupt checkpoint: missing session.json
		ok   testdata/campaign/003/turn_001.json
		ok   testdata/campaign/002/session.json
		ok   testdata/campaign/002/turn_001.json
		ok   testdata/campaign/002/turn_002.json
		ok   testdata/campaign/001/session.json
		ok   testdata/campaign/001/turn_001.json
		ok   testdata/campaign/001/turn_002.json
		8 files checked in testdata/campaign (layout turn/3): 7 ok, 1 bad
	`)), r.stdout)

	r = runCLI(t, "verify", "testdata/campaign", "--json")
	var rep verifyReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	require.Equal(t, fileResult{Path: filepath.FromSlash("testdata/campaign/003/session.json"), Session: "003", Kind: "session", Problem: "damaged", Error: "corrupt checkpoint: missing session.json"}, rep.Files[0])
	require.Equal(t, "002", rep.Files[3].Session)
}

func TestDiff(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "diff", "testdata/game", "1", "2")
	require.Equal(t, exitFound, r.code, r.stderr)
	require.Equal(t, osPaths(dedent(`
		--- step 1 (step) testdata/game/turn_001.json
		+++ step 2 (step) testdata/game/turn_002.json
		~ .characters.brynja.hp: 11 -> 10
		+ .characters.brynja.inventory[2]: "brass key"
		~ .characters.brynja.xp: 10 -> 20
		~ .characters.kael.xp: 5 -> 10
		~ .scene: "the Drowned Chapel" -> "the Clockwork Bridge"
		~ .turn: 1 -> 2
		- .whispers: ["turn 1: the bells ring for someone still alive"]
	`)), r.stdout)

	r = runCLI(t, "diff", "testdata/game", "2", "latest")
	require.Equal(t, exitFound, r.code, r.stderr)
	require.Contains(t, r.stdout, osPaths("+++ step 7 (final) testdata/game/turn_007.final.json\n"))

	r = runCLI(t, "diff", "testdata/game", "4", "5")
	require.Equal(t, exitFailed, r.code)
	require.Contains(t, r.stderr, osPaths("checkpoint: load step 5 testdata/game/turn_005.json: corrupt checkpoint: checksum mismatch"))

	r = runCLI(t, "diff", "testdata/game", "4")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "checkpoint diff: missing B\n")
}

func TestDiffOfEqualStatesSaysTheyAreEqual(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "diff", "testdata/game", "4", "4")
	require.Equal(t, 0, r.code, r.stderr)
	require.Empty(t, r.stderr)
	require.Equal(t, osPaths("equal: step 4 (step) testdata/game/turn_004.json and step 4 (step) testdata/game/turn_004.json hold the same state\n"), r.stdout)
}

func TestShowOfAMissingStepNamesTheNearestKeptSteps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := checkpoint.Open[map[string]int](dir, checkpoint.NoSync(), checkpoint.KeepMultiplesOf(4), checkpoint.KeepLast(1))
	require.NoError(t, err)
	for step := int64(17); step <= 25; step++ {
		_, err := st.Save(ctx, step, map[string]int{"step": int(step)})
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())
	for _, tc := range []struct{ step, want string }{
		{"21", "the nearest kept steps are 20 (below) and 24 (above)"},
		{"3", "the nearest kept step is 20 (above; none below)"},
		{"26", "the nearest kept step is 25 (below; none above)"},
	} {
		r := runCLI(t, "show", dir, tc.step)
		require.Equal(t, exitFailed, r.code, r.stderr)
		require.Empty(t, r.stdout)
		require.Equal(t, "checkpoint: load step "+tc.step+" "+dir+": checkpoint not found; "+tc.want+"\n", r.stderr)
	}
	r := runCLI(t, "diff", dir, "20", "21")
	require.Equal(t, exitFailed, r.code, r.stderr)
	require.Contains(t, r.stderr, "checkpoint not found; the nearest kept steps are 20 (below) and 24 (above)\n")
}

func TestDiffStates(t *testing.T) {
	t.Parallel()
	decode := func(s string) any {
		v, err := decodeJSON(json.RawMessage(s))
		require.NoError(t, err)
		return v
	}
	tests := []struct {
		name string
		a, b string
		want []string
	}{
		{"equal", `{"a":[1,{"b":null}]}`, `{"a":[1,{"b":null}]}`, nil},
		{"number precision", `{"n":9007199254740993}`, `{"n":9007199254740992}`, []string{"~ .n: 9007199254740993 -> 9007199254740992"}},
		{"type change", `{"a":{"b":1}}`, `{"a":"b"}`, []string{`~ .a: {"b":1} -> "b"`}},
		{"null", `{"a":null}`, `{"a":1}`, []string{"~ .a: null -> 1"}},
		{"odd keys", `{"hit points":1,"x.y":2,"é":3}`, `{"hit points":2,"x.y":3,"é":4}`,
			[]string{`~ .["hit points"]: 1 -> 2`, `~ .["x.y"]: 2 -> 3`, `~ .["é"]: 3 -> 4`}},
		{"insert in the middle", `["a","c"]`, `["a","b","c"]`, []string{`+ .[1]: "b"`}},
		{"remove and change", `[{"id":1},{"id":2,"v":1}]`, `[{"id":2,"v":2}]`,
			[]string{`- .[0]: {"id":1}`, `~ .[1->0].v: 1 -> 2`}},
		{"whole state", `[1]`, `{"a":1}`, []string{`~ .: [1] -> {"a":1}`}},
		{"html is not escaped", `{"a":"<b>"}`, `{"a":"&"}`, []string{`~ .a: "<b>" -> "&"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lines, exact := diffStates(decode(tt.a), decode(tt.b))
			require.True(t, exact)
			require.Equal(t, tt.want, lines)
		})
	}
	long := `"` + strings.Repeat("é", 100) + `"`
	got, _ := diffStates(decode(`{"a":1}`), decode(`{"a":1,"b":`+long+`}`))
	require.Len(t, got, 1)
	require.True(t, strings.HasPrefix(got[0], `+ .b: "éé`))
	require.True(t, strings.HasSuffix(got[0], "é... (202 bytes)"), got[0])
}

func TestPruneDryRunThenPrune(t *testing.T) {
	t.Parallel()
	dir := copyFixture(t, "game")
	before := names(t, dir)
	r := runCLI(t, "prune", dir, "--keep-last", "2", "--dry-run")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, dedent(`
		would remove:
		  STEP  KIND   TIME                              SIZE   FILE
		  1     step   2026-11-21T10:01:00Z (2h ago)     376 B  turn_001.json
		  2     step   2026-11-21T10:02:00Z (1h59m ago)  349 B  turn_002.json
		  3     step   2026-11-21T10:03:00Z (1h58m ago)  290 B  turn_003.json.gz
		  4     error  2026-11-21T10:04:00Z (1h57m ago)  495 B  turn_004.error.json
		dry run: would remove 4 of 8 checkpoints (1.5 KiB) and keep 4; nothing was removed
	`), r.stdout)
	require.Equal(t, before, names(t, dir), "a dry run changes nothing, not even a lock file")

	r = runCLI(t, "prune", "--keep-last=2", dir, "--bytes")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, dedent(`
		removed:
		  STEP  KIND   TIME                              SIZE  FILE
		  1     step   2026-11-21T10:01:00Z (2h ago)     376   turn_001.json
		  2     step   2026-11-21T10:02:00Z (1h59m ago)  349   turn_002.json
		  3     step   2026-11-21T10:03:00Z (1h58m ago)  290   turn_003.json.gz
		  4     error  2026-11-21T10:04:00Z (1h57m ago)  495   turn_004.error.json
		removed 4 of 8 checkpoints (1510 bytes) from `+dir+`; kept 4
	`), r.stdout)
	require.NoFileExists(t, filepath.Join(dir, "turn_001.json"))
	require.NoFileExists(t, filepath.Join(dir, "turn_004.error.json"), "step 4, saved after it, superseded the error checkpoint")

	r = runCLI(t, "prune", dir, "--keep-last", "2")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "nothing to prune in "+dir+": the rules keep all 4 checkpoints (layout turn/3)\n", r.stdout)
}

func TestPruneRules(t *testing.T) {
	t.Parallel()
	dir := copyFixture(t, "game")
	r := runCLI(t, "prune", dir, "--keep-every", "2", "--dry-run")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `would remove:
  STEP +KIND +TIME +SIZE +FILE
  1 .* turn_001.json
  3 .* turn_003.json.gz
  4 +error .* turn_004.error.json
  5 .* turn_005.json
dry run: would remove 4 of 8 checkpoints`, r.stdout)

	// All in one UTC day: the newest of the day is the final checkpoint,
	// once final and error checkpoints are subject to the rules.
	r = runCLI(t, "prune", dir, "--keep-one-per", "1d", "--prune-kinds", "final,error", "--dry-run")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "turn_004.error.json")
	require.NotContains(t, r.stdout, "turn_007.final.json")
	require.Contains(t, r.stdout, "dry run: would remove 6 of 8 checkpoints")

	// --keep-within counts from now.
	dir = t.TempDir()
	now := time.Now().UTC()
	for i, age := range []time.Duration{3 * time.Hour, 2 * time.Hour, time.Hour, 10 * time.Minute} {
		step := int64(i + 1)
		writeFile(t, filepath.Join(dir, fmt.Sprintf("step_%08d.json", step)), envelope(t, step, checkpoint.KindStep, now.Add(-age), nil, nil, gameState(step)))
	}
	r = runCLI(t, "prune", dir, "--keep-within", "90m")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "removed 2 of 4 checkpoints")
	require.ElementsMatch(t, []string{".checkpoint.lock", "step_00000003.json", "step_00000004.json"}, names(t, dir))
}

func TestPruneUsage(t *testing.T) {
	t.Parallel()
	dir := copyFixture(t, "game")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"prune", dir}, "checkpoint prune: no retention rule: give --keep-last, --keep-every, --keep-within or --keep-one-per"},
		{[]string{"prune", dir, "--prune-kinds", "error"}, "no retention rule"},
		{[]string{"prune", dir, "--keep-last", "-1"}, "--keep-last -1: want a positive count"},
		{[]string{"prune", dir, "--keep-every", "-2"}, "--keep-every -2: want a positive interval"},
		{[]string{"prune", dir, "--keep-within", "soon"}, `--keep-within "soon": want a positive duration such as 90m, 36h or 7d`},
		{[]string{"prune", dir, "--keep-one-per", "-1d"}, `--keep-one-per "-1d"`},
		{[]string{"prune", dir, "--keep-last", "2", "--prune-kinds", "rolling"}, `--prune-kinds "rolling": want final, error or final,error`},
		{[]string{"prune", dir, "--keep-last", "two"}, `invalid value "two" for flag -keep-last`},
		{[]string{"prune", "testdata/campaign", "--keep-last", "1"}, "testdata/campaign is a root of sessions; give one session's directory (checkpoint prune testdata/campaign/ID ...;"},
	} {
		r := runCLI(t, tt.args...)
		require.Equal(t, exitUsage, r.code, "%v: %s", tt.args, r.stderr)
		require.Contains(t, r.stderr, osPaths(tt.want))
		require.Contains(t, r.stderr, "Usage: checkpoint prune DIR --keep-last N ...")
		require.Contains(t, r.stderr, "-keep-within DURATION")
	}
	require.NoFileExists(t, filepath.Join(dir, ".checkpoint.lock"), "nothing was opened")
}

func TestParseDuration(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{"90m": 90 * time.Minute, "36h": 36 * time.Hour, "7d": 7 * 24 * time.Hour, "1h30m": 90 * time.Minute} {
		got, err := parseDuration("--x", in)
		require.NoError(t, err)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "0", "0d", "d", "1.5d", "-1h", "7days", "999999999999d"} {
		_, err := parseDuration("--x", in)
		require.Error(t, err, in)
	}
}

func TestGC(t *testing.T) {
	t.Parallel()
	dir := copyFixture(t, "game")
	r := runCLI(t, "gc", dir, "--dry-run")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, osPaths(dedent(`
		would remove `+dir+`/.turn_006.json8675309 (`+dryRunTemp(false)+`)
		would remove `+dir+`/turn_002.json.corrupt (damaged checkpoint moved aside)
		would remove `+dir+`/turn_004.error.json (error checkpoint superseded by a clean checkpoint saved after it)
		dry run: would remove 3 files; nothing was removed
	`)), r.stdout)
	require.FileExists(t, filepath.Join(dir, "turn_002.json.corrupt"))
	require.FileExists(t, filepath.Join(dir, "turn_004.error.json"))

	r = runCLI(t, "gc", dir)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, osPaths(dedent(`
		removed `+dir+`/.turn_006.json8675309 (temporary file of an interrupted save)
		removed `+dir+`/turn_002.json.corrupt (damaged checkpoint moved aside)
		removed `+dir+`/turn_004.error.json (error checkpoint superseded by a clean checkpoint saved after it)
		removed 3 files
	`)), r.stdout)
	require.ElementsMatch(t, []string{".checkpoint.lock", "result.json", "turn_001.json", "turn_002.json", "turn_003.json.gz",
		"turn_004.json", "turn_005.json", "turn_007.final.json", "turn_last.json"}, names(t, dir),
		"checkpoints, damaged or not, and side files stay; a superseded error checkpoint goes, as a writer's Close would remove it")

	r = runCLI(t, "gc", dir)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "nothing to remove in "+dir+" (layout turn/3)\n", r.stdout)
}

// dryRunTemp is what gc --dry-run says of a temporary file when a writer
// of this process holds the store's lock (live) or none does, where the
// system tells (Linux): even then, it does not claim that no writer holds
// it, since /proc/locks shows no writer of another PID namespace or host.
func dryRunTemp(live bool) string {
	switch {
	case runtime.GOOS != "linux":
		return "temporary file of an interrupted save, or of a save in progress if a writer is running"
	case live:
		return "temporary file of a save in progress: a live writer holds the lock (this process); gc without --dry-run leaves the store alone while it runs"
	}
	return "temporary file of an interrupted save, unless a writer this system cannot see (in another container, or on another host) holds the lock"
}

func TestGCDryRunBesideALiveWriterSaysItsTempFileIsASaveInProgress(t *testing.T) {
	t.Parallel()
	dir := copyFixture(t, "game")
	require.NoError(t, os.Remove(filepath.Join(dir, "turn_002.json.corrupt")))
	require.NoError(t, os.Remove(filepath.Join(dir, "turn_004.error.json"))) // superseded: the writer's Close would remove it
	w, err := checkpoint.Open[json.RawMessage](dir, checkpoint.WithLayout("turn", 3))
	require.NoError(t, err)
	temp := filepath.Join(dir, ".turn_008.json.ckpt-tmp-42")
	writeFile(t, temp, []byte("{")) // the writer's save in progress
	r := runCLI(t, "gc", dir, "--dry-run")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "would remove "+temp+" ("+dryRunTemp(true)+")\ndry run: would remove 1 file; nothing was removed\n", r.stdout)

	require.NoError(t, w.Close())
	r = runCLI(t, "gc", dir, "--dry-run")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "would remove "+temp+" ("+dryRunTemp(false)+")\ndry run: would remove 1 file; nothing was removed\n", r.stdout,
		"with no writer seen, an interrupted save left it, unless a writer the system cannot show holds the lock")
}

func TestGCSessions(t *testing.T) {
	t.Parallel()
	dir := copyFixture(t, "campaign")
	writeFile(t, filepath.Join(dir, "001", ".turn_003.json123"), []byte("{"))
	writeFile(t, filepath.Join(dir, "002", "turn_002.json.corrupt-2"), []byte("{"))
	r := runCLI(t, "gc", dir)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, osPaths(dedent(`
		removed `+dir+`/.staging-QX7PZ2 (session left half-made by a crash)
		removed `+dir+`/001/.turn_003.json123 (temporary file of an interrupted save)
		removed `+dir+`/002/turn_002.json.corrupt-2 (damaged checkpoint moved aside)
		removed 3 files
	`)), r.stdout)
	require.NoDirExists(t, filepath.Join(dir, ".staging-QX7PZ2"))
	require.NoFileExists(t, filepath.Join(dir, "001", ".turn_003.json123"))
	require.FileExists(t, filepath.Join(dir, "001", "turn_001.json"))
}

// byThisProcess is what the lock error says of its holder, a Store of the
// test's own process, where the system tells.
func byThisProcess() string {
	if runtime.GOOS == "linux" {
		return " (by this process: close the other Store first)"
	}
	return ""
}

func TestWriterLockHeld(t *testing.T) {
	t.Parallel()
	dir := copyFixture(t, "game")
	w, err := checkpoint.Open[json.RawMessage](dir, checkpoint.WithLayout("turn", 3))
	require.NoError(t, err)
	defer w.Close()
	writeFile(t, filepath.Join(dir, ".turn_008.json42"), []byte("{")) // the writer's save in progress
	before := names(t, dir)

	for _, args := range [][]string{{"gc", dir}, {"prune", dir, "--keep-last", "1"}} {
		r := runCLI(t, args...)
		require.Equal(t, exitLocked, r.code, r.stderr)
		require.Empty(t, r.stdout)
		require.Equal(t, "checkpoint "+args[0]+": "+dir+" is open by a running writer (store is locked by another writer"+byThisProcess()+"); stop it or try again (ls, show, verify, diff and --dry-run work beside it)\n", r.stderr)
	}
	require.Equal(t, before, names(t, dir), "nothing removed")

	// Read-only commands work beside the writer.
	for _, args := range [][]string{{"ls", dir}, {"show", dir, "latest"}, {"diff", dir, "1", "2"}, {"prune", dir, "--keep-last", "1", "--dry-run"}, {"gc", dir, "--dry-run"}} {
		r := runCLI(t, args...)
		require.Contains(t, []int{0, exitFound}, r.code, "%v: %s", args, r.stderr)
	}
	r := runCLI(t, "verify", dir)
	require.Equal(t, exitFound, r.code, r.stderr)
	require.Regexp(t, "\nnote +"+regexp.QuoteMeta(filepath.Join(dir, ".turn_008.json42"))+" +temporary file of a save: in progress", r.stdout)
	require.Equal(t, before, names(t, dir))
}

func TestGCSessionLockedByWriterGoesOnWithTheOthers(t *testing.T) {
	t.Parallel()
	dir := copyFixture(t, "campaign")
	writeFile(t, filepath.Join(dir, "001", "turn_001.json.corrupt"), []byte("{"))
	writeFile(t, filepath.Join(dir, "002", "turn_001.json.corrupt"), []byte("{"))
	w, err := checkpoint.Open[json.RawMessage](filepath.Join(dir, "002"), checkpoint.WithLayout("turn", 3))
	require.NoError(t, err)
	defer w.Close()

	r := runCLI(t, "gc", dir)
	require.Equal(t, exitLocked, r.code, r.stderr)
	require.Contains(t, r.stdout, "removed "+filepath.Join(dir, "001", "turn_001.json.corrupt"))
	require.Contains(t, r.stderr, filepath.Join(dir, "002")+" is open by a running writer")
	require.FileExists(t, filepath.Join(dir, "002", "turn_001.json.corrupt"))
}

func TestReadOnlyCommandsWriteNothing(t *testing.T) {
	t.Parallel()
	dir := copyFixture(t, "game")
	root := copyFixture(t, "campaign")
	before, beforeRoot := readTree(t, dir), readTree(t, root)
	for _, args := range [][]string{
		{"ls", dir}, {"ls", root}, {"verify", dir}, {"verify", root}, {"show", dir, "4"}, {"diff", dir, "1", "4"},
		{"prune", dir, "--keep-last", "1", "--dry-run"}, {"gc", dir, "--dry-run"}, {"gc", root, "--dry-run"},
	} {
		runCLI(t, args...)
	}
	require.Equal(t, before, readTree(t, dir))
	require.Equal(t, beforeRoot, readTree(t, root))
}

func TestLayouts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for step := int64(1); step <= 3; step++ {
		writeFile(t, filepath.Join(dir, "turn_00"+string(rune('0'+step))+".json"), envelope(t, step, checkpoint.KindStep, minute(int(step)), nil, nil, gameState(step)))
	}
	writeFile(t, filepath.Join(dir, "step_00000009.json"), envelope(t, 9, checkpoint.KindStep, minute(9), nil, nil, gameState(1)))

	r := runCLI(t, "ls", dir)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "checkpoint ls: note: found files of layout step/8 (1 file) in "+dir+" too; using turn/3 (3 files); choose with --layout\n", r.stderr)
	require.Contains(t, r.stdout, "turn_003.json")

	for _, layout := range []string{"step/8", "step"} {
		r = runCLI(t, "ls", dir, "--layout", layout)
		require.Equal(t, 0, r.code, r.stderr)
		require.Empty(t, r.stderr)
		require.Contains(t, r.stdout, "step_00000009.json")
		require.NotContains(t, r.stdout, "turn_")
	}
	r = runCLI(t, "ls", dir, "--layout", "run")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "no checkpoints in "+dir+" (layout run/8)\n", r.stdout)

	// A tie is not guessed.
	writeFile(t, filepath.Join(dir, "step_00000010.json"), envelope(t, 10, checkpoint.KindStep, minute(10), nil, nil, gameState(1)))
	writeFile(t, filepath.Join(dir, "step_00000011.json"), envelope(t, 11, checkpoint.KindStep, minute(11), nil, nil, gameState(1)))
	r = runCLI(t, "gc", dir)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "checkpoint gc: found as many files of layout step/8 as of turn/3 in "+dir+"; choose one with --layout\n")

	for _, bad := range []string{"turn/0", "turn/20", "turn/x", "/3", ".turn/3", "a/b/3"} {
		r = runCLI(t, "ls", dir, "--layout", bad)
		require.Equal(t, exitUsage, r.code, bad)
		require.Contains(t, r.stderr, "Usage: checkpoint ls DIR")
	}
}

func TestUsageAndHelp(t *testing.T) {
	t.Parallel()
	r := runCLI(t)
	require.Equal(t, exitUsage, r.code)
	require.Empty(t, r.stdout)
	require.Contains(t, r.stderr, "checkpoint verify DIR")
	require.Contains(t, r.stderr, "Exit codes: 0 ok; 1 verify found a bad checkpoint")

	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		r = runCLI(t, args...)
		require.Equal(t, 0, r.code)
		require.Contains(t, r.stdout, "checkpoint prune  DIR --keep-last N ...")
	}

	r = runCLI(t, "help", "diff")
	require.Equal(t, 0, r.code)
	require.Equal(t, dedent(`
		Usage: checkpoint diff DIR A B

		Print the paths at which the states of steps A and B differ.

		Flags (before or after the arguments):
		  --identity FILE
		    	an age identity FILE that reads encrypted stores (repeatable: the first key is the one written to); without it, the files listed in CHECKPOINT_IDENTITY
		  --layout LAYOUT
		    	the store's file LAYOUT: PREFIX/DIGITS (turn/3) or PREFIX; inferred from the file names if not set
	`), r.stdout)

	r = runCLI(t, "show", "-h")
	require.Equal(t, 0, r.code)
	require.Contains(t, r.stdout, "\n  --kind KIND\n")

	// Flags are written as the README writes them: --json, and -v.
	r = runCLI(t, "help", "verify")
	require.Equal(t, 0, r.code)
	require.Contains(t, r.stdout, "\n  --json\n")
	require.Contains(t, r.stdout, "\n  -v\n")
	require.NotContains(t, r.stdout, "\n  -json")
	r = runCLI(t, "help", "prune")
	require.Contains(t, r.stdout, "\n  --keep-last N\n")

	r = runCLI(t, "help", "bogus")
	require.Equal(t, exitUsage, r.code)
	r = runCLI(t, "bogus")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "checkpoint: unknown command \"bogus\"\n")

	r = runCLI(t, "ls", "testdata/game", "--bogus")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "checkpoint ls: flag provided but not defined: -bogus\nUsage: checkpoint ls DIR")

	r = runCLI(t, "ls", "testdata/game", "testdata/campaign")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, `too many arguments: ["testdata/campaign"]`)
}

func TestFlagsBeforeAndAfterArguments(t *testing.T) {
	t.Parallel()
	want := runCLI(t, "show", "testdata/game", "4", "--kind", "error", "--state")
	require.Equal(t, 0, want.code, want.stderr)
	for _, args := range [][]string{
		{"show", "--kind", "error", "--state", "testdata/game", "4"},
		{"show", "testdata/game", "-kind=error", "4", "-state"},
		{"show", "--state", "testdata/game", "--kind", "error", "--", "4"},
	} {
		r := runCLI(t, args...)
		require.Equal(t, want, r, "%v", args)
	}
}

func TestParseInterleaved(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "ls", "--", "--json")
	require.Equal(t, exitFailed, r.code, "after --, --json is a directory name")
	require.Contains(t, r.stderr, "checkpoint: ls --json: checkpoint not found: no such directory")
}

func TestShowPanicCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := checkpoint.Open[map[string]int](dir, checkpoint.WithLayout("beat", 4))
	require.NoError(t, err)
	func() {
		defer func() { _ = recover() }()
		defer st.SaveOnPanic(ctx, func() (int64, map[string]int) { return 12, map[string]int{"beats": 12} })
		panic("heart skipped a beat")
	}()
	require.NoError(t, st.Close())

	r := runCLI(t, "show", dir, "latest")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "file:       "+filepath.Join(dir, "beat_0012.error.json")+"\n")
	require.Contains(t, r.stdout, "error:      heart skipped a beat\n")
	require.Contains(t, r.stdout, "  panic:    yes\n  stack:\n    goroutine ")
	require.Contains(t, r.stdout, "state:\n{\n  \"beats\": 12\n}\n")
}

func TestSessionsLayoutIsTheRootsMostCommon(t *testing.T) {
	t.Parallel()
	dir := copyFixture(t, "campaign")
	writeFile(t, filepath.Join(dir, "004", "session.json"), []byte(`{"format":1,"id":"004","created":"2026-11-21T11:00:00Z","updated":"2026-11-21T11:00:00Z"}`))
	writeFile(t, filepath.Join(dir, "004", "step_00000001.json"), envelope(t, 1, checkpoint.KindStep, minute(61), nil, nil, gameState(1)))
	r := runCLI(t, "ls", dir)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "checkpoint ls: note: found files of layout step/8 (1 file) in the sessions of "+dir+" too; using turn/3 (5 files); choose with --layout\n", r.stderr)
	require.Regexp(t, `(?m)^004 +0 +- +- +2026-11-21T11:00:00Z`, r.stdout)

	r = runCLI(t, "ls", dir, "--layout", "step/8")
	require.Regexp(t, `(?m)^004 +1 +1 +2026-11-21T11:01:00Z`, r.stdout)
}

func TestWritingCommandsLeaveADirectoryWithoutCheckpointsAlone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "notes.txt"), []byte("hello"))
	writeFile(t, filepath.Join(dir, ".settings.json.ckpt-tmp-123"), []byte("{")) // the shape of a side file's temp
	r := runCLI(t, "gc", dir)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "nothing to remove in "+dir+": no checkpoint files (give --layout if they have another name)\n", r.stdout)
	r = runCLI(t, "prune", dir, "--keep-last", "1")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "nothing to prune in "+dir+": no checkpoint files (give --layout if they have another name)\n", r.stdout)
	require.ElementsMatch(t, []string{"notes.txt", ".settings.json.ckpt-tmp-123"}, names(t, dir))

	// Told the layout, gc opens the store, whose Open removes the temp.
	r = runCLI(t, "gc", dir, "--layout", "step/8")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "removed "+filepath.Join(dir, ".settings.json.ckpt-tmp-123")+" (temporary file of an interrupted save)\nremoved 1 file\n", r.stdout)
}

// ls shows a METRICS column when a checkpoint records a metric (WithMetric),
// each value as it reads back, "-" where a checkpoint has none; --json
// gives them exactly.
func TestLsShowsMetrics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := checkpoint.Open[int](dir, checkpoint.NoSync())
	require.NoError(t, err)
	_, err = s.Save(ctx, 1, 1, checkpoint.WithMetric("loss", 0.25), checkpoint.WithMetric("acc", 0.9))
	require.NoError(t, err)
	_, err = s.Save(ctx, 2, 2)
	require.NoError(t, err)
	_, err = s.Save(ctx, 3, 3, checkpoint.WithMetric("loss", 1e-7))
	require.NoError(t, err)
	require.NoError(t, s.Close())

	r := runCLI(t, "ls", dir)
	require.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 4)
	require.Contains(t, lines[0], "FILE                METRICS")
	require.Regexp(t, `step_0+1\.json +acc=0\.9 loss=0\.25\s*$`, lines[1])
	require.Regexp(t, `step_0+2\.json +-\s*$`, lines[2])
	require.Regexp(t, `step_0+3\.json +loss=1e-07\s*$`, lines[3])

	r = runCLI(t, "ls", "--json", dir)
	require.Equal(t, 0, r.code, r.stderr)
	var infos []checkpoint.Info
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &infos))
	require.Equal(t, map[string]float64{"acc": 0.9, "loss": 0.25}, infos[0].Metrics)
	require.Nil(t, infos[1].Metrics)

	// A store without metrics has no such column.
	r = runCLI(t, "ls", "testdata/game")
	require.NotContains(t, r.stdout, "METRICS")
}
