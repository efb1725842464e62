package checkpoint_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/internal/platformtest"
	"github.com/gocheckpoint/checkpoint/internal/testkit"
)

// What the black-box tests of this package share. The tests that need the
// store's internals are in package checkpoint and have their own
// (checkpoint_test.go, platform_test.go); what both need that does not
// depend on the store is in package testkit.

type gameState = testkit.GameState

var (
	sampleState      = testkit.SampleState
	skipOnWindows    = platformtest.SkipOnWindows
	skipUnderWine    = platformtest.SkipUnderWine
	skipUnlessLinux  = platformtest.SkipUnlessLinux
	canSymlink       = platformtest.CanSymlink
	requireSymlinks  = platformtest.RequireSymlinks
	mkfifo           = platformtest.Mkfifo
	passChangeTimeOf = platformtest.PassChangeTimeOf
)

const haveFIFOs = platformtest.HaveFIFOs

// openStore opens a store with NoSync: most tests are about what a store
// does, not about what reaches the disk, and fsyncs would make the suite
// several times slower. The tests of durability (fault points, disk full,
// kills) use openDurableStore or Open.
func openStore[T any](t *testing.T, dir string, opts ...checkpoint.Option) *checkpoint.Store[T] {
	t.Helper()
	return openDurableStore[T](t, dir, append([]checkpoint.Option{checkpoint.NoSync()}, opts...)...)
}

// openDurableStore opens a store that fsyncs, as a program's would, and
// closes it when t ends.
func openDurableStore[T any](t *testing.T, dir string, opts ...checkpoint.Option) *checkpoint.Store[T] {
	t.Helper()
	s, err := checkpoint.Open[T](dir, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// dirNames returns the names in dir, sorted.
func dirNames(t *testing.T, dir string) []string { return testkit.DirNames(t, dir) }
