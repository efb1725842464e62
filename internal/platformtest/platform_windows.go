package platformtest

import (
	"os/exec"
	"testing"

	"golang.org/x/sys/windows"
)

// UnderWine reports whether the process runs under Wine: Wine's ntdll
// exports wine_get_version, Windows' does not.
func UnderWine() bool {
	return windows.NewLazySystemDLL("ntdll.dll").NewProc("wine_get_version").Find() == nil
}

// HaveFIFOs says whether the system has FIFOs in a directory.
const HaveFIFOs = false

// Mkfifo skips t: Windows has no FIFOs in a directory.
func Mkfifo(t *testing.T, _ string) {
	SkipOnWindows(t, "Windows has no FIFOs in a directory")
}

// RunAs skips t: Windows has no uid and gid to run a process as.
func RunAs(t *testing.T, _ *exec.Cmd, _, _ uint32) {
	SkipOnWindows(t, "Windows has no uid and gid to run a process as")
}
