//go:build !race

package backendtest_test

// raceEnabled reports whether the race detector is on: it makes the
// X25519 of encryption some ten times slower.
const raceEnabled = false
