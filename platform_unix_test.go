//go:build unix

package checkpoint

import (
	"os/exec"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func underWine() bool { return false }

// haveFIFOs says whether the system has FIFOs in a directory.
const haveFIFOs = true

// mkfifo makes a FIFO at path.
func mkfifo(t *testing.T, path string) {
	require.NoError(t, unix.Mkfifo(path, 0o644))
}

// runAs makes cmd run as uid and gid.
func runAs(_ *testing.T, cmd *exec.Cmd, uid, gid uint32) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
}
