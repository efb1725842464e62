package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/stretchr/testify/require"
)

// The fixture campaign's sessions were last active on 2026-11-21, days
// before any run of these tests: --idle 24h finds them idle, and
// --idle 100000h (eleven years) none.

func TestSessionsLsShowsActivityPinsAndDamage(t *testing.T) {
	t.Parallel()
	dir := copyFixture(t, "campaign")
	pin(t, dir, "002")
	r := runCLI(t, "sessions", "ls", dir)
	require.Equal(t, 0, r.code, r.stderr)
	require.Empty(t, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 4, r.stdout)
	require.Regexp(t, `^SESSION +CHECKPOINTS +LAST STEP +LAST ACTIVE +NOTE$`, lines[0])
	require.Regexp(t, `^002 +2 +2 +\S+ \(.+\) +pinned: kept for the record$`, lines[1], "SetMeta made it the most recently active")
	require.Regexp(t, `^003 +1 +1 +2026-11-21T10:30:00Z \(1h31m ago\) +damaged: corrupt checkpoint: missing session.json$`, lines[2])
	require.Regexp(t, `^001 +2 +2 +2026-11-21T10:10:00Z \(1h51m ago\)$`, lines[3])

	r = runCLI(t, "sessions", "ls", dir, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `"id": "001"`)

	r = runCLI(t, "sessions", "ls", t.TempDir())
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "no sessions in ")
}

func TestSessionsRmRemovesSessionsAndDryRunNothing(t *testing.T) {
	t.Parallel()
	dir := copyFixture(t, "campaign")
	before := readTree(t, dir)
	r := runCLI(t, "sessions", "rm", dir, "001", "003", "--dry-run")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, dedent(`
		would remove 001 (2 checkpoints, last active 2026-11-21T10:10:00Z (1h51m ago))
		would remove 003 (1 checkpoints, last active 2026-11-21T10:30:00Z (1h31m ago); damaged: corrupt checkpoint: missing session.json)
		dry run: would remove 2 of 2 sessions, unless a writer holds them; nothing was removed
	`), r.stdout)
	require.Equal(t, before, readTree(t, dir), "a dry run writes nothing")

	r = runCLI(t, "sessions", "rm", dir, "001", "003")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "removed 001\nremoved 003\n", r.stdout)
	require.NoDirExists(t, filepath.Join(dir, "001"))
	require.NoDirExists(t, filepath.Join(dir, "003"), "a damaged session is removed when named")
	require.FileExists(t, filepath.Join(dir, "002", "turn_002.json"))

	r = runCLI(t, "sessions", "rm", dir, "001", "002")
	require.Equal(t, exitFailed, r.code)
	require.Equal(t, "removed 002\n", r.stdout, "a missing session does not stop the others")
	require.Contains(t, r.stderr, `delete session `+filepath.Join(dir, "001")+`: checkpoint not found: no session "001"`)

	r = runCLI(t, "sessions", "rm", dir, "")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "session ID")
}

func TestSessionsRmOfASessionAWriterHoldsIsLocked(t *testing.T) {
	t.Parallel()
	dir := copyFixture(t, "campaign")
	root, err := checkpoint.OpenSessions(dir, checkpoint.WithLayout("turn", 3))
	require.NoError(t, err)
	defer root.Close()
	st, err := checkpoint.OpenSessionStore[int](root, "001")
	require.NoError(t, err)
	defer st.Close()
	before := readTree(t, filepath.Join(dir, "001"))

	r := runCLI(t, "sessions", "rm", dir, "001", "002")
	require.Equal(t, exitLocked, r.code, r.stderr)
	require.Equal(t, "removed 002\n", r.stdout)
	require.Contains(t, r.stderr, filepath.Join(dir, "001")+" is open by a running writer")
	require.Equal(t, before, readTree(t, filepath.Join(dir, "001")), "the held session is whole")

	r = runCLI(t, "sessions", "prune", dir, "--idle", "24h")
	require.Equal(t, 0, r.code, r.stderr)
	require.DirExists(t, filepath.Join(dir, "001"), "prune skips a session a writer holds")
}

func TestSessionsPruneRemovesIdleSessionsButPinnedAndDamaged(t *testing.T) {
	t.Parallel()
	dir := copyFixture(t, "campaign")
	pin(t, dir, "002")
	before := readTree(t, dir)
	r := runCLI(t, "sessions", "prune", dir, "--idle", "24h", "--dry-run")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, dedent(`
		would remove 001 (2 checkpoints, last active 2026-11-21T10:10:00Z (1h51m ago))
		dry run: would remove 1 sessions inactive for longer than 24h0m0s, unless a writer holds them; nothing was removed
	`), r.stdout)
	require.Equal(t, before, readTree(t, dir), "a dry run writes nothing")

	r = runCLI(t, "sessions", "prune", dir, "--idle", "100000h")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "removed 0 sessions")
	require.Equal(t, before, readTree(t, dir))

	r = runCLI(t, "sessions", "prune", "--idle", "1d", dir)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "removed 001\nremoved 1 sessions inactive for longer than 24h0m0s from "+dir+" (pinned, damaged and running ones stay)\n", r.stdout)
	require.NoDirExists(t, filepath.Join(dir, "001"))
	require.DirExists(t, filepath.Join(dir, "002"), "pinned")
	require.DirExists(t, filepath.Join(dir, "003"), "damaged: it cannot be dated")
}

func TestSessionsUsageErrors(t *testing.T) {
	t.Parallel()
	root := copyFixture(t, "campaign")
	store := copyFixture(t, "game")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sessions"}, "missing ls, rm or prune"},
		{[]string{"sessions", "rename", root}, `unknown sessions command "rename"`},
		{[]string{"sessions", "ls"}, "missing ROOT"},
		{[]string{"sessions", "rm", root}, "missing ID"},
		{[]string{"sessions", "prune", root}, "missing --idle"},
		{[]string{"sessions", "prune", root, "--idle", "-3h"}, "want a positive duration"},
		{[]string{"sessions", "ls", root, "--idle", "3h"}, "--idle is for prune"},
		{[]string{"sessions", "ls", root, "--dry-run"}, "--dry-run is for rm and prune"},
		{[]string{"sessions", "ls", store}, "is a store, not a root of sessions"},
	} {
		r := runCLI(t, tc.args...)
		require.Equal(t, exitUsage, r.code, "%q: %s", tc.args, r.stderr)
		require.Contains(t, r.stderr, tc.want, "%q", tc.args)
	}
}

// A root at a remote location is changed through the remote's Backend, as
// s3store/cmd/checkpoint does on S3.
func TestSessionsRmAndPruneOnARemoteRoot(t *testing.T) {
	t.Parallel()
	dir := copyFixture(t, "campaign")
	parent := filepath.Dir(dir)
	remote := Remote{Scheme: "test", Open: func(ctx context.Context, loc string) (checkpoint.Backend, error) {
		name := strings.TrimSuffix(strings.TrimPrefix(loc, "test://"), "/")
		return dirstore.Open(filepath.Join(parent, filepath.FromSlash(name)))
	}}
	run := func(args ...string) result {
		var stdout, stderr bytes.Buffer
		code := runAt(testNow, args, &stdout, &stderr, []Remote{remote})
		return result{stdout.String(), stderr.String(), code}
	}
	r := run("sessions", "rm", "test://campaign", "002")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "removed 002\n", r.stdout)
	_, err := os.Stat(filepath.Join(dir, "002", "session.json"))
	require.ErrorIs(t, err, os.ErrNotExist)
	r = run("sessions", "prune", "test://campaign", "--idle", "24h")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "removed 001\n")
	r = run("sessions", "ls", "test://campaign")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "003 ")
	require.NotContains(t, r.stdout, "001 ")
}

// pin pins the session id of the root dir.
func pin(t *testing.T, dir, id string) {
	t.Helper()
	root, err := checkpoint.OpenSessions(dir, checkpoint.WithLayout("turn", 3))
	require.NoError(t, err)
	defer root.Close()
	require.NoError(t, root.SetMeta(context.Background(), id, map[string]string{checkpoint.PinMeta: "kept for the record"}))
}

// sessions ls shows the metrics of each session's last checkpoint in a
// METRICS column when one records a metric; --json gives them exactly.
func TestSessionsLsShowsTheLastCheckpointsMetrics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	root, err := checkpoint.OpenSessions(dir, checkpoint.NoSync())
	require.NoError(t, err)
	for _, id := range []string{"run-a", "run b"} {
		_, err := root.Create(ctx, id, nil)
		require.NoError(t, err)
		s, err := checkpoint.OpenSessionStore[int](root, id)
		require.NoError(t, err)
		_, err = s.Save(ctx, 1, 1, checkpoint.WithMetric("loss", 0.5))
		require.NoError(t, err)
		if id == "run-a" {
			_, err = s.Save(ctx, 2, 2, checkpoint.WithMetric("loss", 0.125))
			require.NoError(t, err)
		}
		require.NoError(t, s.Close())
	}
	require.NoError(t, root.Close())

	r := runCLI(t, "sessions", "ls", dir)
	require.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 3, r.stdout)
	require.Regexp(t, `^SESSION +CHECKPOINTS +LAST STEP +LAST ACTIVE +METRICS +NOTE$`, lines[0])
	require.Regexp(t, `^"run b" +1 +1 +.+ +loss=0\.5\s*$`, lines[1])
	require.Regexp(t, `^run-a +2 +2 +.+ +loss=0\.125\s*$`, lines[2])

	r = runCLI(t, "sessions", "ls", dir, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var out []struct {
		ID          string             `json:"id"`
		LastMetrics map[string]float64 `json:"last_metrics"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
	require.Len(t, out, 2)
	got := map[string]map[string]float64{out[0].ID: out[0].LastMetrics, out[1].ID: out[1].LastMetrics}
	require.Equal(t, map[string]map[string]float64{"run-a": {"loss": 0.125}, "run b": {"loss": 0.5}}, got)
}

// sessions rm of a session a writer holds names where the session is
// stored, on one line, whatever its ID (a path, a newline).
func TestSessionsRmOfAHeldAnyStringIDNamesItsDirectoryOnOneLine(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"user:42/thread#7", "a\ncheckpoint sessions: removed 001", "../../etc"} {
		dir := t.TempDir()
		root, err := checkpoint.OpenSessions(dir, checkpoint.WithLayout("turn", 3))
		require.NoError(t, err)
		s, err := root.Create(context.Background(), id, nil)
		require.NoError(t, err)
		st, err := checkpoint.OpenSessionStore[int](root, id)
		require.NoError(t, err)

		r := runCLI(t, "sessions", "rm", dir, id)
		require.Equal(t, exitLocked, r.code, r.stderr)
		require.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)
		require.Contains(t, r.stderr, s.Dir+" is open by a running writer", "names the session's directory")
		require.NoError(t, st.Close())
		require.NoError(t, root.Close())
	}
}

// sessions rm --dry-run of a damaged session listed by its stored name
// says it would remove it, and removes nothing.
func TestSessionsRmDryRunOfADamagedSessionByItsStoredName(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	root, err := checkpoint.OpenSessions(dir, checkpoint.WithLayout("turn", 3))
	require.NoError(t, err)
	s, err := root.Create(context.Background(), "user:8", nil)
	require.NoError(t, err)
	st, err := checkpoint.OpenSessionStore[int](root, "user:8")
	require.NoError(t, err)
	_, err = st.Save(context.Background(), 1, 1)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.NoError(t, root.Close())
	require.NoError(t, os.Remove(filepath.Join(s.Dir, "session.json")))
	name := filepath.Base(s.Dir)

	r := runCLI(t, "sessions", "rm", "--dry-run", dir, name)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "would remove "+name)
	require.DirExists(t, s.Dir)
}

// sessions rm takes a damaged session of an any-string ID, which
// sessions ls lists by its stored name "(user_7-<hash>)" since its
// session.json is gone and its ID unknown: the name ls shows removes it.
func TestSessionsRmRemovesADamagedSessionListedByItsDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	root, err := checkpoint.OpenSessions(dir, checkpoint.WithLayout("turn", 3))
	require.NoError(t, err)
	s, err := root.Create(context.Background(), "user:7", nil)
	require.NoError(t, err)
	st, err := checkpoint.OpenSessionStore[int](root, "user:7")
	require.NoError(t, err)
	_, err = st.Save(context.Background(), 1, 1)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.NoError(t, root.Close())
	require.NoError(t, os.Remove(filepath.Join(s.Dir, "session.json")))
	name := filepath.Base(s.Dir)

	r := runCLI(t, "sessions", "ls", dir)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "("+name+")", "listed by its directory's name")

	r = runCLI(t, "sessions", "rm", dir, name)
	require.Equal(t, 0, r.code, "the damaged session the listing shows can be removed: %s", r.stderr)
	require.NoDirExists(t, s.Dir)
}
