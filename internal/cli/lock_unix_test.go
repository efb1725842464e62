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
	// A process of an earlier release holds the root's lock while it
	// creates a session. This release takes no lock on the root (its
	// sessions appear whole by their own protocol): gc removes what the
	// earlier protocol left, and such a process fails its creation with
	// an error, never with half a session.
	f, err := os.OpenFile(filepath.Join(dir, ".sessions.lock"), os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX))

	r := runCLI(t, "gc", dir)
	require.Equal(t, 0, r.code, r.stderr)
	require.NoDirExists(t, filepath.Join(dir, ".staging-QX7PZ2"))
	require.NoFileExists(t, filepath.Join(dir, ".sessions.lock"))
	require.Contains(t, r.stdout, "removed "+filepath.Join(dir, "001", "turn_001.json.corrupt")+" (damaged checkpoint moved aside)\n",
		"the sessions' stores are cleaned all the same")
	require.Contains(t, r.stdout, filepath.Join(dir, ".staging-QX7PZ2"))
}
