//go:build unix

package cli

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestIdentityFileThatIsANamedPipeIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	fifo := filepath.Join(tmp, "key.fifo")
	require.NoError(t, unix.Mkfifo(fifo, 0o600))
	store := filepath.Join(tmp, "store")
	saveSteps(t, store, 1)
	done := make(chan result, 1)
	go func() { done <- runCLI(t, "ls", store, "--identity", fifo) }()
	select {
	case r := <-done:
		require.Equal(t, exitUsage, r.code, r.stderr)
		require.Contains(t, r.stderr, "--identity "+fifo+": not a regular file")
	case <-time.After(time.Minute): // a bound on a failure, not a synchronisation
		t.Fatal("ls waited on the named pipe given as an identity file")
	}
}
