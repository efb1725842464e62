//go:build !unix && !windows

package platformtest

import (
	"os/exec"
	"testing"
)

// UnderWine reports whether the process runs under Wine: never, on this
// system.
func UnderWine() bool { return false }

// HaveFIFOs says whether the system has FIFOs in a directory.
const HaveFIFOs = false

// Mkfifo skips t: this system has no FIFOs.
func Mkfifo(t *testing.T, _ string) {
	t.Skip("this system has no FIFOs")
}

// RunAs skips t: this system cannot run a process as another user.
func RunAs(t *testing.T, _ *exec.Cmd, _, _ uint32) {
	t.Skip("this system cannot run a process as another user")
}
