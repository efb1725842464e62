package checkpoint

import "time"

// What the black-box tests of damage, limits, faults, concurrency, backends
// and save times need of the store's unexported names.

const (
	QuarantineSuffix = quarantineSuffix
	MaxMetaSize      = maxMetaSize
	MaxErrorMessage  = maxErrorMessage
	MaxErrorStack    = maxErrorStack
	MaxListed        = maxListed
	ParallelFill     = parallelFill
	IndexName        = indexName
	IndexMinWrite    = indexMinWrite
	ClaimName        = claimName
	RaceEnabled      = raceEnabled
)

var (
	WithClock    = withClock
	TimeMax      = timeMax
	TruncateText = truncateText
	TempName     = tempName
	TempPrefix   = tempPrefix
)

// IdleBufferCaps returns the capacities of the buffers and coders s keeps
// for its next calls.
func (s *Store[T]) IdleBufferCaps() []int { return s.codec.IdleBufferCaps() }

// Observe makes s take t as a save time seen in its storage.
func (s *Store[T]) Observe(t time.Time) { s.observe(t) }

// SaveTime returns the time s stamps on its next save of step (byStep: a
// synchronous save, which reads the step's newest time).
func (s *Store[T]) SaveTime(step int64, byStep bool) time.Time {
	t, _ := s.saveTime(step, byStep)
	return t
}

// Remote reports whether s takes the path of object storage (its backend
// does not describe itself as local).
func (s *Store[T]) Remote() bool { return s.remote() }

// ListedAtOpen reports whether s listed its backend when it opened.
func (s *Store[T]) ListedAtOpen() bool { return s.listed != nil }

// The directory's names, as export_test.go gives them to the internal
// tests.
const (
	TempMarker   = tempMarker
	FdTempBuffer = fdTempBuffer
)

// IsCheckpointName reports whether name is a checkpoint's in s's layout.
func (s *Store[T]) IsCheckpointName(name string) bool {
	_, ok := s.cfg.layout.parse(name)
	return ok
}
