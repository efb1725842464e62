package checkpoint

import (
	"os/exec"
	"testing"

	"golang.org/x/sys/windows"
)

// underWine reports whether the process runs under Wine: Wine's ntdll
// exports wine_get_version, Windows' does not.
func underWine() bool {
	return windows.NewLazySystemDLL("ntdll.dll").NewProc("wine_get_version").Find() == nil
}

// haveFIFOs says whether the system has FIFOs in a directory.
const haveFIFOs = false

// mkfifo skips t: Windows has no FIFOs in a directory.
func mkfifo(t *testing.T, _ string) {
	skipOnWindows(t, "Windows has no FIFOs in a directory")
}

// runAs skips t: Windows has no uid and gid to run a process as.
func runAs(t *testing.T, _ *exec.Cmd, _, _ uint32) {
	skipOnWindows(t, "Windows has no uid and gid to run a process as")
}
