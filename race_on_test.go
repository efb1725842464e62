//go:build race

package checkpoint

// raceEnabled reports whether the race detector is on: it makes sync.Pool
// drop values at random, so tests of buffer reuse cannot run under it.
const raceEnabled = true
