//go:build !unix && !windows

package checkpoint

import (
	"os/exec"
	"testing"
)

func underWine() bool { return false }

// haveFIFOs says whether the system has FIFOs in a directory.
const haveFIFOs = false

// mkfifo skips t: this system has no FIFOs.
func mkfifo(t *testing.T, _ string) {
	t.Skip("this system has no FIFOs")
}

// runAs skips t: this system cannot run a process as another user.
func runAs(t *testing.T, _ *exec.Cmd, _, _ uint32) {
	t.Skip("this system cannot run a process as another user")
}
