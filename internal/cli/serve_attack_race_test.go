//go:build race

package cli

// raceEnabled says whether the race detector is on: a test that moves
// tens of megabytes skips under it, where it is some ten times slower.
const raceEnabled = true
