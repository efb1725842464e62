//go:build unix

package cli

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestGCWhileASessionIsBeingMade(t *testing.T) {
	t.Parallel()
	dir := copyFixture(t, "campaign")
	writeFile(t, filepath.Join(dir, "001", "turn_001.json.corrupt"), []byte("{"))
	// Another process holds the root's lock while it creates a session.
	f, err := os.OpenFile(filepath.Join(dir, ".sessions.lock"), os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX))

	r := runCLI(t, "gc", dir)
	require.Equal(t, exitLocked, r.code, r.stderr)
	require.Equal(t, "checkpoint gc: "+dir+": a session is being created or forked right now (checkpoint: remove staging "+dir+
		": lock .sessions.lock: store is locked by another writer); try again\n", r.stderr)
	require.DirExists(t, filepath.Join(dir, ".staging-QX7PZ2"), "it may be the session being made")
	require.Equal(t, "removed "+filepath.Join(dir, "001", "turn_001.json.corrupt")+" (damaged checkpoint moved aside)\nremoved 1 file\n", r.stdout,
		"the sessions' stores are cleaned all the same")
}
