//go:build !unix

package platformtest

import "time"

// ProcessCPU cannot tell the process's CPU time here: benchmarks report
// wall time only.
func ProcessCPU() (time.Duration, bool) { return 0, false }
