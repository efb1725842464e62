package checkpoint

import "github.com/gocheckpoint/checkpoint/internal/format"

// What the black-box tests of saving, loading, listing, the layout and the
// lifecycle need to see of the store's internals.

// WithClock makes a store read its save times from now.
var WithClock = withClock

// QuarantineSuffix ends the name a damaged checkpoint is moved aside to.
const QuarantineSuffix = quarantineSuffix

// The names of an earlier release's protocol of Sessions: its lock file
// and the prefix of its staging directories.
const (
	SessionsLockName = sessionsLockName
	StagingPrefix    = stagingPrefix
)

// RaceEnabled reports whether the race detector is on.
const RaceEnabled = raceEnabled

// IsClosing reports whether Close has begun on s.
func IsClosing[T any](s *Store[T]) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// CachedHeaders returns how many headers s holds in its header cache.
func CachedHeaders[T any](s *Store[T]) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.headers)
}

// CodecOf returns the codec s reads and writes its files with.
func CodecOf[T any](s *Store[T]) *format.Codec { return s.codec }

// FileName is what a checkpoint's file name says in a layout.
type FileName struct {
	Step    int64 // 0 for the rolling file
	Kind    Kind
	Attempt int // error checkpoints: 1 for .error, n for .error-n
	Comp    format.Compression
}

// ParseName parses name as a checkpoint's file name of the layout (prefix,
// digits).
func ParseName(prefix string, digits int, name string) (FileName, bool) {
	n, ok := layout{prefix: prefix, digits: digits}.parse(name)
	return FileName{Step: n.step, Kind: n.kind, Attempt: n.attempt, Comp: n.comp}, ok
}

// FormatName is the file name of n in the layout (prefix, digits).
func FormatName(prefix string, digits int, n FileName) string {
	return layout{prefix: prefix, digits: digits}.format(fileName{step: n.Step, kind: n.Kind, attempt: n.Attempt, comp: n.Comp})
}

// ValidLayout reports whether WithLayout accepts (prefix, digits).
func ValidLayout(prefix string, digits int) bool {
	return layout{prefix: prefix, digits: digits}.validate() == nil
}

// IsTemp reports whether a store of the layout (prefix, digits) on b takes
// name for a temporary file of its own.
func IsTemp(prefix string, digits int, b Backend, name string) bool {
	return layout{prefix: prefix, digits: digits}.isTemp(b, name)
}
