//go:build unix

package platformtest

import (
	"os/exec"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// UnderWine reports whether the process runs under Wine: never, on this
// system.
func UnderWine() bool { return false }

// HaveFIFOs says whether the system has FIFOs in a directory.
const HaveFIFOs = true

// Mkfifo makes a FIFO at path.
func Mkfifo(t *testing.T, path string) {
	require.NoError(t, unix.Mkfifo(path, 0o644))
}

// RunAs makes cmd run as uid and gid.
func RunAs(_ *testing.T, cmd *exec.Cmd, uid, gid uint32) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
}
