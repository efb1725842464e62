package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/stretchr/testify/require"
)

// evil is what a hostile file or directory name can hold: an OSC sequence
// that retitles the terminal, a CSI sequence in its 7-bit (ESC [) and 8-bit
// (U+009B) forms, a right-to-left override and DEL.
const evil = "\x1b]0;pwned\x07\x1b[31m\u009b2J\u202e\x7f"

// requireNoControls fails if out holds a character that drives a
// terminal; line breaks are the command's own.
func requireNoControls(t *testing.T, what, out string) {
	t.Helper()
	i := strings.IndexFunc(out, func(r rune) bool { return r != '\n' && unsafeRune(r) })
	require.Less(t, i, 0, "%s prints a raw control character at byte %d: %q", what, i, out)
}

func TestPrintableEscapesWhatDrivesATerminal(t *testing.T) {
	t.Parallel()
	require.Equal(t, `\x1b]0;pwned\a\x1b[31m\u009b2J\u202e\x7f`, printable(evil))
	require.Equal(t, `a\nb\tc \xff`, printable("a\nb\tc \xff"))
	for _, ok := range []string{"Ærøskøbing", "🐺 shield", "👨‍👩‍👧 family (zero-width joiners)", "plain"} {
		require.Equal(t, ok, printable(ok), "printable text is left alone")
	}
	require.Equal(t, "line \\x1b1\nline 2", printableLines("line \x1b1\nline 2"))
}

func TestSafeJSONKeepsTheValue(t *testing.T) {
	t.Parallel()
	in, err := json.MarshalIndent(map[string]any{evil: []string{evil, "Zoë 🐺", `quote " and \ backslash`}}, "", "  ")
	require.NoError(t, err)
	out := safeJSON(in)
	requireNoControls(t, "safeJSON", string(out))
	var back, want any
	require.NoError(t, json.Unmarshal(out, &back))
	require.NoError(t, json.Unmarshal(in, &want))
	require.Equal(t, want, back, "the same JSON value, for jq")
	require.Contains(t, string(out), `\u009b2J`)
	require.Equal(t, `"\ufffd"`, string(safeJSON([]byte("\"\xff\""))), "an invalid byte, as encoding/json reads it")
	require.Equal(t, `"\ud83d\ude00"`, string(appendU(nil, '😀'))[:0]+`"`+string(appendU(nil, '😀'))+`"`)
}

// hostileStore writes a store whose directory name, error record, meta and
// state hold evil, and returns its directory.
func hostileStore(t *testing.T) string {
	t.Helper()
	skipControlNames(t)
	dir := filepath.Join(t.TempDir(), "run"+evil)
	rec := &checkpoint.ErrorRecord{Message: "boom " + evil, Types: []string{"*main." + evil}, Step: 2, Time: minute(2),
		Panic: true, Stack: "goroutine 1 [running]:\nmain.play" + evil + "()\n\t/src/main.go:7"}
	writeFile(t, filepath.Join(dir, "step_00000001.json"), envelope(t, 1, checkpoint.KindStep, minute(1), map[string]string{"who": evil}, nil,
		map[string]any{"name": "ana", "note": "ok"}))
	writeFile(t, filepath.Join(dir, "step_00000002.error.json"), envelope(t, 2, checkpoint.KindError, minute(2), nil, rec,
		map[string]any{"name": evil, evil: "key", "note": "ok\u2028"}))
	writeFile(t, filepath.Join(dir, "step_00000003.json"), []byte(evil)) // damaged
	return dir
}

func TestShowQuotesControlCharactersFromDisk(t *testing.T) {
	t.Parallel()
	dir := hostileStore(t)
	r := runCLI(t, "show", dir, "2")
	require.Equal(t, 0, r.code, r.stderr)
	requireNoControls(t, "show", r.stdout)
	require.Contains(t, r.stdout, `error:      boom \x1b]0;pwned\a\x1b[31m\u009b2J\u202e\x7f`+"\n")
	require.Contains(t, r.stdout, `  types:    *main.\x1b]0;pwned\a`)
	require.Contains(t, r.stdout, `    main.play\x1b]0;pwned\a`)
	require.Contains(t, r.stdout, `"name": "\u001b]0;pwned\u0007\u001b[31m\u009b2J\u202e\u007f"`)

	r = runCLI(t, "show", dir, "2", "--state")
	require.Equal(t, 0, r.code, r.stderr)
	requireNoControls(t, "show --state", r.stdout)
	var state map[string]string
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &state))
	require.Equal(t, evil, state["name"], "jq reads the same state")

	// The latest checkpoint is damaged: a note names it, and a failed load
	// is an error that names the directory.
	r = runCLI(t, "show", dir, "latest")
	require.Equal(t, 0, r.code, r.stderr)
	requireNoControls(t, "show latest (stderr)", r.stderr)
	require.Contains(t, r.stderr, "note: skipped ")
	r = runCLI(t, "show", dir, "3")
	require.Equal(t, exitFailed, r.code)
	requireNoControls(t, "show of a damaged file (stderr)", r.stderr)
	require.Contains(t, r.stderr, `run\x1b]0;pwned\a`)
}

func TestLsQuotesControlCharactersFromDisk(t *testing.T) {
	t.Parallel()
	// A store one level down, in a directory with a hostile name: the hint.
	parent := filepath.Dir(hostileStore(t))
	r := runCLI(t, "ls", parent)
	require.Equal(t, 0, r.code, r.stderr)
	requireNoControls(t, "ls hint", r.stdout+r.stderr)
	require.Contains(t, r.stderr, `these subdirectories hold checkpoints: `+filepath.Join(parent, `run\x1b]0;pwned\a`))

	r = runCLI(t, "ls", filepath.Join(parent, "run"+evil))
	require.Equal(t, 0, r.code, r.stderr)
	requireNoControls(t, "ls", r.stdout)
	r = runCLI(t, "ls", "--json", filepath.Join(parent, "run"+evil))
	require.Equal(t, 0, r.code, r.stderr)
	requireNoControls(t, "ls --json", r.stdout)

	// A session whose session.json names a hostile parent.
	root := t.TempDir()
	quoted, err := json.Marshal(evil)
	require.NoError(t, err)
	writeFile(t, filepath.Join(root, "001", "session.json"), fmt.Appendf(nil,
		`{"format":1,"id":"001","created":"2026-11-21T10:00:00Z","updated":"2026-11-21T10:00:00Z","parent":%s,"parent_step":1,"meta":{"k":%s}}`,
		quoted, quoted))
	writeFile(t, filepath.Join(root, "001", "step_00000001.json"), envelope(t, 1, checkpoint.KindStep, minute(1), nil, nil, gameState(1)))
	r = runCLI(t, "ls", root)
	require.Equal(t, 0, r.code, r.stderr)
	requireNoControls(t, "ls of sessions", r.stdout)
	require.Contains(t, r.stdout, `"\x1b]0;pwned\a\x1b[31m\u009b2J\u202e\x7f"@1`, "an ID with control characters is quoted")
	r = runCLI(t, "ls", "--json", root)
	require.Equal(t, 0, r.code, r.stderr)
	requireNoControls(t, "ls --json of sessions", r.stdout)
	var list []sessionJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
	require.Equal(t, evil, list[0].Parent, "the JSON holds the same value")
}

func TestGCQuotesControlCharactersFromDisk(t *testing.T) {
	t.Parallel()
	root := copyFixture(t, "campaign")
	skipControlNames(t)
	require.NoError(t, os.Mkdir(filepath.Join(root, ".staging-"+evil), 0o755))
	for _, args := range [][]string{{"gc", "--dry-run", root}, {"gc", root}} {
		r := runCLI(t, args...)
		require.Equal(t, 0, r.code, r.stderr)
		requireNoControls(t, strings.Join(args[:len(args)-1], " "), r.stdout+r.stderr)
		require.Contains(t, r.stdout, filepath.Join(root, `.staging-\x1b]0;pwned\a\x1b[31m\u009b2J\u202e\x7f`)+" (session left half-made by a crash)")
	}
	require.NoDirExists(t, filepath.Join(root, ".staging-"+evil))
}

func TestDiffQuotesControlCharactersFromDisk(t *testing.T) {
	t.Parallel()
	dir := hostileStore(t)
	r := runCLI(t, "diff", dir, "1", "2")
	require.Equal(t, exitFound, r.code, r.stderr)
	requireNoControls(t, "diff", r.stdout)
	require.Contains(t, r.stdout, `~ .name: "ana" -> "\u001b]0;pwned\u0007\u001b[31m\u009b2J\u202e\u007f"`)
	require.Contains(t, r.stdout, `+ .["\u001b]0;pwned\u0007\u001b[31m\u009b2J\u202e\u007f"]: "key"`)
	require.Contains(t, r.stdout, `~ .note: "ok" -> "ok\u2028"`)
	require.Contains(t, r.stdout, `--- step 1 (step) `+filepath.Join(filepath.Dir(dir), `run\x1b]0;pwned\a`))
}

func TestVerifyQuotesControlCharactersFromDisk(t *testing.T) {
	t.Parallel()
	dir := hostileStore(t)
	for _, args := range [][]string{{"verify", dir}, {"verify", "--json", dir}} {
		r := runCLI(t, args...)
		require.Equal(t, exitFound, r.code, r.stderr)
		requireNoControls(t, strings.Join(args[:len(args)-1], " "), r.stdout+r.stderr)
	}
}

// skipControlNames skips a test that makes files and directories whose
// names hold control characters: Windows refuses such names, so the hostile
// names these tests print cannot exist there.
func skipControlNames(t *testing.T) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("Windows file names cannot hold control characters")
	}
}
