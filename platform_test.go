package checkpoint

import (
	"github.com/gocheckpoint/checkpoint/internal/platformtest"
)

// What the tests need to know of the platform (see package platformtest).
var (
	skipOnWindows    = platformtest.SkipOnWindows
	skipUnderWine    = platformtest.SkipUnderWine
	canSymlink       = platformtest.CanSymlink
	requireSymlinks  = platformtest.RequireSymlinks
	mkfifo           = platformtest.Mkfifo
	runAs            = platformtest.RunAs
	processCPU       = platformtest.ProcessCPU
	passChangeTimeOf = platformtest.PassChangeTimeOf
)

const haveFIFOs = platformtest.HaveFIFOs

// skipUnlessLinux skips t elsewhere than on Linux (the attack tests were
// written against Linux's file systems and are proven there only).
var skipUnlessLinux = platformtest.SkipUnlessLinux
