package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/gocheckpoint/checkpoint/internal/benchkit"
)

// World is the benchmark's state (see benchkit.World).
type World = benchkit.World

// newWorld returns a World whose JSON encoding is about size bytes.
func newWorld(size int) World { return benchkit.NewWorld(size) }

func encodedSize(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return len(b)
}

// sizeName formats a byte count: 10 KB, 1.5 MB.
func sizeName(n int) string {
	switch {
	case n >= 1<<20:
		return trimZero(fmt.Sprintf("%.1f MB", float64(n)/(1<<20)))
	case n >= 1<<10:
		return trimZero(fmt.Sprintf("%.1f KB", float64(n)/(1<<10)))
	}
	return fmt.Sprintf("%d B", n)
}

func trimZero(s string) string { return strings.Replace(s, ".0 ", " ", 1) }
