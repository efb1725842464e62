//go:build !linux

package main

import "time"

// creationScaling measures nothing: only Linux makes unnamed files, which
// the measurement creates (see creation_linux.go).
func creationScaling(string, int, int, int) (one, many time.Duration, busy float64, why string) {
	return 0, 0, 0, "only Linux makes unnamed files"
}
