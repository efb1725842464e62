//go:build !unix

package checkpoint

import "time"

// processCPU cannot tell the process's CPU time here: benchmarks report
// wall time only.
func processCPU() (time.Duration, bool) { return 0, false }
