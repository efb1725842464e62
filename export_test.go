package checkpoint

import (
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/internal/format"
	"github.com/gocheckpoint/checkpoint/internal/names"
)

// What the tests know of the directory's names (package dirstore): its
// lock file, the marker of its temporary files, and the size of its write
// buffer on Linux, around which the kill tests pick checkpoint sizes.
const (
	lockName     = dirstore.LockName
	tempMarker   = ".ckpt-tmp-"
	fdTempBuffer = 64 << 10
)

// tempPrefix is the name of final's temporary files less their random
// digits, as the directory names them.
func tempPrefix(final string) string { return "." + final + tempMarker }

// tempName is a temporary name for final, as the directory names one.
func tempName(final string) string {
	return tempPrefix(final) + strconv.FormatInt(rand.Int64(), 10)
}

// openDirWith opens dir as Open does, with the ReadOnly and NoSync among
// opts.
func openDirWith(dir string, opts ...Option) (Backend, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	return openDir(dir, cfg)
}

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

// StepBound is stepBound of name in the layout (prefix, digits), of name
// as a string and as bytes: Latest's scan passes over a name by it.
func StepBound(prefix string, digits int, name string) (fromString int64, okString bool, fromBytes int64, okBytes bool) {
	l := layout{prefix: prefix, digits: digits}
	fromString, okString = stepBound(l, name)
	fromBytes, okBytes = stepBound(l, []byte(name))
	return fromString, okString, fromBytes, okBytes
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

// What the black-box tests of retention, the header index, policies,
// async saves and clocks need of the store's internals.

// The header index: its name, its first line, the checksum table of its
// end line, the size past which it is not read and the number of
// checkpoints from which a store writes it.
const (
	IndexName     = indexName
	IndexMagic    = indexMagic
	IndexMaxSize  = indexMaxSize
	IndexMinWrite = indexMinWrite
)

// IndexCRC is the table of the index's checksum.
var IndexCRC = indexCRC

// MaxAsyncFailures is how many failed background saves a store keeps in
// full; it counts the others.
const MaxAsyncFailures = maxFailures

// TempPrefix is the name of final's temporary files less their random
// digits, as the directory names them.
func TempPrefix(final string) string { return tempPrefix(final) }

// What the black-box tests of sessions know of the engine's internals: how
// long a temporary file of session.json may be taken for a live SetMeta's,
// the longest session ID, and the directory's name for a temporary file
// (and WithClock, in export_b_test.go).
const (
	StaleSessionTemp = staleSessionTemp
	MaxSessionIDLen  = maxSessionIDLen
	MaxNumberedIDLen = names.MaxLegacyID
)

// SessionName is the name under which the session id is stored.
func SessionName(id string) string { return names.SessionName(id) }

// TempName is a temporary name for final, as the directory names one.
func TempName(final string) string { return tempName(final) }

// What the black-box tests of damage, limits, faults, concurrency, backends
// and save times need of the store's unexported names.

const (
	MaxMetaSize     = maxMetaSize
	MaxErrorMessage = maxErrorMessage
	MaxErrorStack   = maxErrorStack
	MaxListed       = maxListed
	ParallelFill    = parallelFill
	ClaimName       = claimName
)

var (
	TimeMax      = timeMax
	TruncateText = truncateText
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
