package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/stretchr/testify/require"
)

// dirRemote is a Remote of scheme "test": test://NAME is the directory
// root/NAME, opened with dirstore.Open, so that the commands' remote
// path (OpenBackend, layout detection by listing) is proven without an S3
// server; s3store/cmd/checkpoint runs them against one. A session's
// location is its Dir, which a directory's backend gives as a path.
func dirRemote(root string, opened *atomic.Int32) Remote {
	return Remote{Scheme: "test", Open: func(ctx context.Context, loc string) (checkpoint.Backend, error) {
		opened.Add(1)
		dir := loc
		if name, ok := strings.CutPrefix(loc, "test://"); ok {
			dir = filepath.Join(root, filepath.FromSlash(strings.TrimSuffix(name, "/")))
		}
		return dirstore.Open(dir, dirstore.ReadOnly())
	}}
}

// fixtureRemote copies the fixture name and returns a dirRemote on its
// parent: test://name is the copy.
func fixtureRemote(t *testing.T, name string) (root string, remote Remote, opened *atomic.Int32) {
	root = filepath.Dir(copyFixture(t, name))
	opened = new(atomic.Int32)
	return root, dirRemote(root, opened), opened
}

func runRemote(t *testing.T, r Remote, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := runAt(testNow, args, &stdout, &stderr, []Remote{r})
	return result{stdout.String(), stderr.String(), code}
}

func TestRemoteLocationIsReadThroughTheRemotesBackend(t *testing.T) {
	t.Parallel()
	root, remote, opened := fixtureRemote(t, "game")

	// ls finds the layout (turn/3) by listing the backend.
	local := runCLI(t, "ls", "testdata/game")
	r := runRemote(t, remote, "ls", "test://game")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, local.stdout, r.stdout)
	require.NotZero(t, opened.Load(), "the remote's Open was not called")

	r = runRemote(t, remote, "ls", "--json", "test://game")
	require.Equal(t, 0, r.code, r.stderr)
	var infos []checkpoint.Info
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &infos))
	require.Len(t, infos, 8)

	r = runRemote(t, remote, "show", "test://game", "latest", "--state")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, runCLI(t, "show", "testdata/game", "latest", "--state").stdout, r.stdout)

	r = runRemote(t, remote, "diff", "test://game", "1", "2")
	require.Equal(t, exitFound, r.code, r.stderr)
	require.Contains(t, r.stdout, "~ .characters.brynja.hp: 11 -> 10\n")

	// The fixture's step 5 is damaged: verify finds it through the backend.
	r = runRemote(t, remote, "verify", "test://game")
	require.Equal(t, exitFound, r.code, r.stderr)
	require.Contains(t, r.stdout, "turn_005.json")
	require.Contains(t, r.stdout, "checksum mismatch")

	// A missing file named with --file is named as the store names it.
	r = runRemote(t, remote, "show", "test://game", "--file", "turn_099.json")
	require.Equal(t, exitFailed, r.code)
	require.Contains(t, r.stderr, filepath.Join(root, "game", "turn_099.json"))
}

func TestRemoteLocationWithoutCheckpointsNamesThePrefixesThatHoldThem(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	game := copyFixture(t, "game")
	require.NoError(t, os.CopyFS(filepath.Join(root, "runs", "game"), os.DirFS(game)))
	var opened atomic.Int32
	r := runRemote(t, dirRemote(root, &opened), "verify", "test://runs")
	require.Equal(t, exitFailed, r.code, r.stderr)
	require.Contains(t, r.stderr, "no checkpoints in test://runs (layout step/8)")
	require.Contains(t, r.stderr, "these prefixes hold checkpoints: test://runs/game")
}

func TestRemoteLocationWithoutItsSchemeSaysWhatToInstall(t *testing.T) {
	t.Parallel()
	missing := Remote{Scheme: "s3", Missing: "go install example.com/checkpoint-s3@latest"}
	for _, cmd := range []string{"ls", "verify", "gc"} {
		r := runRemote(t, missing, cmd, "s3://bucket/runs/1")
		require.Equal(t, exitUsage, r.code, cmd)
		require.Contains(t, r.stderr, "s3://bucket/runs/1: this checkpoint command reads local directories only; for s3:// locations install the one with s3 support: go install example.com/checkpoint-s3@latest", cmd)
	}
	r := runCLI(t, "show", "gs://bucket/runs/1", "latest")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, `gs://bucket/runs/1: unknown location scheme "gs": give a directory`)
}

func TestSchemeOf(t *testing.T) {
	t.Parallel()
	for loc, want := range map[string]string{
		"s3://b/p": "s3", "S3://b": "s3", "test+x://a": "test+x", "dir": "", "./a:b": "", `C:\runs`: "", "://x": "", "1s://x": "", "a/b://c": "",
	} {
		require.Equal(t, want, schemeOf(loc), loc)
	}
}

func TestRemoteRootOfSessionsIsListedAndVerified(t *testing.T) {
	t.Parallel()
	root, remote, _ := fixtureRemote(t, "campaign")

	// Sessions are one protocol on every Backend: the remote root lists
	// what the local one does, 003 (checkpoints, no session.json) as a
	// damaged session on both.
	local := runCLI(t, "ls", "testdata/campaign")
	r := runRemote(t, remote, "ls", "test://campaign")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, local.stdout, "(damaged: corrupt checkpoint: missing session.json)")
	require.Equal(t, local.stdout, r.stdout)

	r = runRemote(t, remote, "verify", "-v", "test://campaign")
	require.Equal(t, exitFound, r.code, r.stderr)
	require.Contains(t, r.stdout, "corrupt checkpoint: missing session.json")
	for _, f := range []string{"002/session.json", "002/turn_002.json", "001/session.json", "001/turn_001.json"} {
		require.Contains(t, r.stdout, "ok   "+filepath.Join(root, "campaign", filepath.FromSlash(f))+"\n") // aligned with "BAD  "
	}
	require.Contains(t, r.stdout, "8 files checked in test://campaign (layout turn/3): 7 ok, 1 bad\n", "as in the local directory (TestVerifySessions)")

	r = runRemote(t, remote, "show", "test://campaign", "latest")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "test://campaign is a root of sessions; give one session's directory (checkpoint show test://campaign/ID ...")

	r = runRemote(t, remote, "gc", "test://campaign")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "test://campaign is a root of sessions in object storage, which gc does not clean as a whole yet; give one session (checkpoint gc test://campaign/ID)")
}
