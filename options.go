package checkpoint

import (
	"fmt"
	"github.com/gocheckpoint/checkpoint/internal/sealed"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// DefaultMaxReadSize is the read limit of a store opened without
// WithMaxReadSize: 1 GiB of decompressed checkpoint bytes.
const DefaultMaxReadSize = 1 << 30

// An Option configures a Store. Options are applied by Open, which validates
// them and returns an ErrInvalid error for a bad one.
type Option interface {
	apply(*config)
}

// A SaveOption configures one save.
type SaveOption interface {
	applySave(*saveConfig)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type saveOptionFunc func(*saveConfig)

func (f saveOptionFunc) applySave(c *saveConfig) { f(c) }

type config struct {
	layout   layout
	gzip     bool
	zstd     bool
	noSync   bool
	async    bool
	queue    int // Async's queue length
	readOnly bool
	waitLock time.Duration // WaitLock's bound; 0: refused at once
	every    int64
	rolling  bool
	retain   retention
	maxRead  int64
	hooks    Hooks
	schema   schema
	logger   *slog.Logger
	now      func() time.Time // a seam for tests; time.Now otherwise

	encrypt       *encryptKeys // Encrypt's keys; nil: plaintext
	readPlaintext bool
	sealKeys      *sealed.Keys // made from encrypt and readPlaintext by newConfig

	copyProgress       func(CopyProgress) // OnCopyProgress, for Copy
	copyConcurrency    int                // CopyConcurrency, for Copy
	copyConcurrencySet bool
}

func defaultConfig() config {
	return config{
		layout:  layout{prefix: "step", digits: 8},
		every:   1,
		maxRead: DefaultMaxReadSize,
		logger:  slog.New(slog.DiscardHandler),
		now:     time.Now,
	}
}

// newConfig applies opts to the default configuration and validates it.
func newConfig(opts []Option) (config, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if err := cfg.validate(); err != nil {
		return cfg, err
	}
	var err error
	if cfg.sealKeys, err = cfg.keys(); err != nil {
		return cfg, err
	}
	cfg.maxRead = min(cfg.maxRead, maxReadCeiling)
	return cfg, nil
}

func (c *config) validate() error {
	if err := c.layout.validate(); err != nil {
		return err
	}
	if c.every < 0 {
		return fmt.Errorf("%w: SaveEvery(%d): the interval must be 0 (never) or positive", ErrInvalid, c.every)
	}
	if err := c.retain.validate(); err != nil {
		return err
	}
	if c.maxRead <= 0 {
		return fmt.Errorf("%w: WithMaxReadSize(%d): the limit must be positive", ErrInvalid, c.maxRead)
	}
	if c.gzip && c.zstd {
		return fmt.Errorf("%w: Gzip and Zstd: choose one compression", ErrInvalid)
	}
	if c.waitLock < 0 {
		return fmt.Errorf("%w: WaitLock(%v): the wait must be 0 (none) or positive", ErrInvalid, c.waitLock)
	}
	if c.copyConcurrencySet && c.copyConcurrency < 1 {
		return fmt.Errorf("%w: CopyConcurrency(%d): want at least 1", ErrInvalid, c.copyConcurrency)
	}
	if c.async && c.queue < 1 {
		return fmt.Errorf("%w: Async(%d): the queue length must be at least 1", ErrInvalid, c.queue)
	}
	return c.schema.Validate()
}

// compression returns what new checkpoints are written with.
func (c *config) compression() compression {
	switch {
	case c.gzip:
		return compressGzip
	case c.zstd:
		return compressZstd
	}
	return compressNone
}

type saveConfig struct {
	meta    map[string]string
	metrics map[string]float64
}

// saveOptions applies opts to a save's configuration.
func saveOptions(opts []SaveOption) saveConfig {
	var sc saveConfig
	for _, o := range opts {
		if o != nil {
			o.applySave(&sc)
		}
	}
	return sc
}

// Gzip makes the store compress the checkpoints it writes with gzip
// (.json.gz, readable with zcat). A store reads plain, gzip and zstd
// checkpoints alike whatever its setting, so compression can be turned on,
// off or changed for an existing directory. Gzip and Zstd together are
// ErrInvalid.
func Gzip() Option {
	return optionFunc(func(c *config) { c.gzip = true })
}

// Zstd makes the store compress the checkpoints it writes with Zstandard
// (.json.zst, readable with zstdcat or zstd -dc): about gzip's ratio on
// JSON, and faster to decompress. Readers detect it like gzip, by its magic
// number. Gzip and Zstd together are ErrInvalid.
func Zstd() Option {
	return optionFunc(func(c *config) { c.zstd = true })
}

// NoSync makes the store skip every fsync: of checkpoint and side files and
// of the directory. It is for tests and throwaway runs, where a save should
// cost little more than the write. Without fsync, a published checkpoint is
// still whole for every process and survives the crash or kill -9 of the
// program (the link or rename that publishes it is atomic, and the kernel
// keeps the written bytes), but not an operating-system crash or a power cut:
// those may lose recent checkpoints, or leave one under its name with some
// of its bytes missing, which a load reports as ErrCorrupt (Latest then falls
// back to an older one). Where the documentation of a call says it syncs or
// writes durably, that is without NoSync; given to OpenSessions, NoSync also
// covers session.json and the root's directories. The default is to fsync.
func NoSync() Option {
	return optionFunc(func(c *config) { c.noSync = true })
}

// Async makes Save, and Tick, return as soon as the state is encoded: the
// caller may change the state at once, while a background goroutine writes,
// fsyncs and publishes the checkpoint. Queued saves are published in the
// order they were made (their names, save times, hooks and pruning follow
// that order), each exactly as a synchronous Save would publish it.
// At most queue encoded saves wait, so memory stays bounded: when the queue
// is full, Save waits for room, publishing the waiting saves itself if
// nothing else is publishing, or until its context ends (then nothing is
// queued).
//
// The saves found waiting are published together as one batch, a group
// commit: on a backend that is a storage.GroupCommitter (the local
// directory) the batch's files are written and synced concurrently, then
// one directory sync makes them all durable, instead of one sync per save;
// none of them is reported to Hooks.OnSave, or prunes older checkpoints,
// before it. A save of a batch that fails fails alone, with the error it
// would have alone; if the directory sync fails, every file of the batch
// is removed and each of its saves fails. Because the files of a batch are
// written at once, a crash in the middle of one may keep a later save of
// it and not an earlier one (each whole or absent), as a power cut before
// the directory sync may.
// queue must be at least 1; a ReadOnly store ignores Async.
//
// A failed background save is reported to Hooks.OnError and the logger when
// it fails. It is then returned by the next Flush or Close, whichever comes
// first, and also by the first Save or Tick after it failed, as an error
// that wraps ErrAsync and the failure (an *Error whose Op is "async save" or
// "async tick", naming the step and file), and whose text names the failed
// steps. A Save or Tick that returns an ErrAsync error has queued its own
// state all the same; any other error from Save means its state was not
// queued. So when Flush returns nil, every state whose Save returned nil or
// an ErrAsync error is published. Between two Flushes the first 64 failures
// are kept and later ones only counted (the error says how many), so that
// saving into a full disk without Flush does not exhaust memory. Errors that
// only the write can find, such as ErrExists for a step saved twice,
// therefore surface on a later call.
//
// Flush waits until every queued save is published; Close flushes. The
// other writes (SaveFinal, SaveError, SaveOnPanic, Delete, ClearError,
// Prune, Truncate, WriteJSON, RemoveLeftovers) first publish what is queued,
// then run as usual, so a store's writes take effect in the order they were
// made. Reads (Load, Latest, List, PruneDryRun, and Sessions.Fork of the
// session) see published checkpoints only: call Flush first to read what
// was just saved.
//
// A crash loses at most the queued saves and the batch being written (at
// most twice queue); every checkpoint already published stays whole, and a
// power cut leaves each file of a batch whole or absent. A program that exits (returns
// from main, calls os.Exit or log.Fatal) without Close loses the same: the
// saves still queued are never published, although each Save returned nil.
// A store dropped without Close keeps its goroutine and its writer lock for
// the life of the process. Close (or Flush) before exiting, on every path; a
// deferred Close does not run after os.Exit or log.Fatal.
//
// Hooks of a background save run once it is published, on the goroutine
// that published it (see Hooks).
func Async(queue int) Option {
	return optionFunc(func(c *config) { c.async, c.queue = true, queue })
}

// WithLayout sets how checkpoint files are named: prefix, an underscore and the
// step zero-padded to digits, so that names sort by step. WithLayout("turn", 3)
// names step 7 turn_007.json; a step wider than digits is written in full
// (turn_1234.json). The prefix is 1 to 64 characters of [A-Za-z0-9._-] and
// does not start with a dot; digits is 1 to 19. The default is ("step", 8).
// A store only recognises files named by its own layout.
func WithLayout(prefix string, digits int) Option {
	return optionFunc(func(c *config) { c.layout = layout{prefix: prefix, digits: digits} })
}

// ReadOnly opens the store for inspection: Open takes no lock, removes no
// stale temporary files and creates no directory, and every write returns
// ErrReadOnly. A read-only store can be opened beside a running writer.
func ReadOnly() Option {
	return optionFunc(func(c *config) { c.readOnly = true })
}

// WithMaxReadSize caps how many bytes a load reads from one checkpoint after
// decompression, and from a side file (ReadJSON); a larger checkpoint fails
// with ErrCorrupt (and is never moved aside as damaged: it may be good). The
// cap stops a damaged or hostile file (a gzip or zstd bomb) from exhausting
// memory: a read of any file costs at most about the cap and a few MiB. The
// default is DefaultMaxReadSize. n must be positive; a value above 1 TiB
// (on 32-bit platforms, above what a slice can hold less 1 MiB), such as
// math.MaxInt64 for "no limit", is clamped to it.
func WithMaxReadSize(n int64) Option {
	return optionFunc(func(c *config) { c.maxRead = n })
}

// WithLogger makes the store log what it does: "checkpoint created" and
// "checkpoint pruned" at Debug, "checkpoint restored" (a load) at Info,
// failed operations, skipped damaged checkpoints and removed stale temporary
// files at Warn. By default the store logs nothing. The store may log while
// it holds its locks, so the logger's handler must not call the store
// (hooks may: see Hooks).
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) {
		if l != nil {
			c.logger = l
		}
	})
}

// WithMeta attaches a label to the checkpoint being saved. Labels are stored
// in the envelope and returned in Info.Meta. The key must not be empty, and
// the labels of one save may take at most 64 KiB as a JSON object (else the
// save is ErrInvalid): they live in the header, which List reads for every
// file.
func WithMeta(key, value string) SaveOption {
	return saveOptionFunc(func(c *saveConfig) {
		if c.meta == nil {
			c.meta = make(map[string]string)
		}
		c.meta[key] = value
	})
}

// WithMetric records a metric of the checkpoint being saved, such as a
// validation loss: it is stored in the envelope's header and returned in
// Info.Metrics, so List (and KeepBest) read it without reading states. It
// applies to every save that takes SaveOptions (Save, Tick, SaveFinal,
// SaveError), whatever the kind. A save may record several metrics; given
// twice, a name keeps the last value.
//
// A name is 1 to MaxMetricName bytes of valid UTF-8; a save records at
// most MaxMetrics of them. The value must be finite: JSON, which the
// header is, has no NaN or infinity, and a metric that could not be
// written as a plain JSON number would not read back as itself (nor
// encode in Info's JSON). A bad name or a NaN or infinite value makes the
// save ErrInvalid, naming the metric, and nothing is written: a program
// whose loss may diverge should test it (math.IsNaN, math.IsInf) and leave
// the metric out, or record it as a label with WithMeta.
func WithMetric(name string, value float64) SaveOption {
	return saveOptionFunc(func(c *saveConfig) {
		if c.metrics == nil {
			c.metrics = make(map[string]float64)
		}
		c.metrics[name] = value
	})
}

// Limits of metrics (see WithMetric).
const (
	// MaxMetricName is the longest metric name, in bytes.
	MaxMetricName = 128
	// MaxMetrics is the most metrics one save records.
	MaxMetrics = 256
)

// checkMetricName returns an ErrInvalid error if name cannot name a
// metric: it must be 1 to MaxMetricName bytes of valid UTF-8, so that it
// reads back from JSON as itself.
func checkMetricName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: metric %q: the name is empty", ErrInvalid, name)
	case len(name) > MaxMetricName:
		return fmt.Errorf("%w: metric %q: the name has %d bytes, more than %d", ErrInvalid, name, len(name), MaxMetricName)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: metric %q: the name is not valid UTF-8", ErrInvalid, name)
	}
	return nil
}

// checkMetrics returns an ErrInvalid error naming the first bad metric
// (by name) of one save (see WithMetric).
func checkMetrics(metrics map[string]float64) error {
	if len(metrics) > MaxMetrics {
		return fmt.Errorf("%w: %d metrics, more than %d", ErrInvalid, len(metrics), MaxMetrics)
	}
	for _, name := range slices.Sorted(maps.Keys(metrics)) {
		if err := checkMetricName(name); err != nil {
			return err
		}
		if v := metrics[name]; math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: metric %q: the value %v is not finite (JSON has no NaN or infinity)", ErrInvalid, name, v)
		}
	}
	return nil
}

// maxMetaSize bounds the labels of one save, as a JSON object: see WithMeta
// and maxErrorMessage.
const maxMetaSize = 64 << 10

// withClock replaces the store's clock. Tests use it to control save times.
func withClock(now func() time.Time) Option {
	return optionFunc(func(c *config) { c.now = now })
}

// SaveEvery sets the interval of Tick (and Due): a step is due when it is a
// multiple of n, so SaveEvery(5) saves steps 0, 5, 10, ... The default is 1
// (every step); SaveEvery(0) makes Tick save nothing (SaveFinal and
// SaveError still save). It decides what is written; the Keep rules decide
// what is kept.
func SaveEvery(n int64) Option {
	return optionFunc(func(c *config) { c.every = n })
}

// WithRolling makes Tick write the steps that are not due to a single rolling
// file (prefix_last.json) that each such Tick replaces atomically, so a crash
// loses at most the step in progress while numbered checkpoints stay at the
// interval. The rolling file is the only file a store ever replaces. Latest
// and LatestClean consider it like any other checkpoint (Info.Kind is
// KindRolling), and retention never removes it.
func WithRolling() Option {
	return optionFunc(func(c *config) { c.rolling = true })
}

// KeepLast is a retention rule: it keeps the newest n checkpoints, ordered by
// step and, within a step, by save time. KeepLast(0), the default, sets no
// rule.
//
// Retention rules (KeepLast, KeepMultiplesOf, KeepWithin, KeepOnePer,
// KeepBest) combine: a checkpoint survives if any rule keeps it, but for a superseded
// error checkpoint, which goes whatever the rules. They apply to step
// checkpoints only, unless PruneKinds says otherwise; final checkpoints and
// the rolling file are always kept, and error checkpoints until a clean
// checkpoint saved after them supersedes them (see Store.SaveError). A
// checkpoint whose header cannot be read is neither counted nor removed.
// Whatever the rules (PruneKinds included), two checkpoints are never
// removed: the newest that loads (what Latest returns) and the newest that
// loads and is not an error checkpoint (what LatestClean returns). A store
// prunes after each numbered save (Save, a due Tick, SaveFinal, SaveError;
// not a rolling write), once the new checkpoint is durable, and on Prune;
// with no rule it removes nothing but superseded error checkpoints (also at a
// writer's Close), and a save that can supersede none of those left makes no
// pass.
func KeepLast(n int) Option {
	return optionFunc(func(c *config) { c.retain.last = n })
}

// KeepMultiplesOf is a retention rule: it keeps, forever, every checkpoint
// whose step is a multiple of k (step 0 included). k is a step, hence an
// int64 like every step, where KeepLast counts checkpoints with an int.
// KeepMultiplesOf(0) sets no rule. See KeepLast for how rules combine.
func KeepMultiplesOf(k int64) Option {
	return optionFunc(func(c *config) { c.retain.every = k })
}

// KeepWithin is a retention rule: it keeps every checkpoint saved less than d
// ago, by the save time in its header; a save time in the future (a clock
// that stepped back) counts as recent. KeepWithin(0) sets no rule. See
// KeepLast for how rules combine.
func KeepWithin(d time.Duration) Option {
	return optionFunc(func(c *config) { c.retain.within = d })
}

// KeepOnePer is a retention rule: it keeps one checkpoint per period of d,
// the newest saved in it (the highest step). Periods are counted in UTC from
// the zero time, so KeepOnePer(time.Hour) keeps the last checkpoint of each
// clock hour, KeepOnePer(24*time.Hour) the last of each UTC day and
// KeepOnePer(7*24*time.Hour) the last of each week, Monday to Sunday.
// KeepOnePer(0) sets no rule. See KeepLast for how rules combine.
func KeepOnePer(d time.Duration) Option {
	return optionFunc(func(c *config) { c.retain.per = d })
}

// KeepBest is a retention rule: it keeps the n checkpoints with the best
// value of metric (see WithMetric), the lowest with Minimize, the highest
// with Maximize; of equal values, the newest. A checkpoint without the
// metric never counts as one of the best (nor, were one written by hand,
// would a NaN or infinite value). Like the other rules it judges the
// checkpoints subject to the rules: step checkpoints, and the kinds of
// PruneKinds.
//
// Whatever the metrics, a store with a KeepBest rule also keeps the
// newest checkpoint and the newest that is not an error checkpoint (as
// every store does: see KeepLast), the newest final checkpoint (even with
// PruneKinds(KindFinal)), and the checkpoint this writer resumed from: the
// one that the last successful Latest, LatestClean, Load or LoadExact of
// this Store returned, for as long as the Store is open (a new Open
// resumes from nothing until it loads; a program that loads other
// checkpoints to look at them moves it: a ReadOnly store beside the writer
// does not). Two KeepBest rules, on different
// metrics or goals, both apply; see KeepLast for how rules combine. n must
// be at least 1, metric a valid metric name (see WithMetric) and goal
// Minimize or Maximize: else Open is ErrInvalid.
func KeepBest(n int, metric string, goal Goal) Option {
	return optionFunc(func(c *config) { c.retain.best = append(c.retain.best, bestRule{n: n, metric: metric, goal: goal}) })
}

// A Goal says which values of a metric are best (see KeepBest). The zero
// Goal is neither Minimize nor Maximize: KeepBest refuses it.
type Goal int

const (
	// Minimize: the lower, the better (a loss, an error rate).
	Minimize Goal = iota + 1
	// Maximize: the higher, the better (an accuracy, a reward).
	Maximize
)

// String returns "minimize" or "maximize".
func (g Goal) String() string {
	switch g {
	case Minimize:
		return "minimize"
	case Maximize:
		return "maximize"
	}
	return "Goal(" + strconv.Itoa(int(g)) + ")"
}

// PruneKinds subjects checkpoints of the given kinds, KindFinal or KindError,
// to the retention rules like step checkpoints: they count toward KeepLast
// and are removed when no rule keeps them. By default the rules never remove
// a final checkpoint, nor an error checkpoint that no clean checkpoint
// supersedes (see Store.SaveError). Any other kind is ErrInvalid: step
// checkpoints are always subject to the rules, and the rolling file is never
// pruned.
func PruneKinds(kinds ...Kind) Option {
	return optionFunc(func(c *config) { c.retain.kinds = append(c.retain.kinds, kinds...) })
}

// WithSchema sets the schema version of the store's state type T, and the
// migrations that bring states saved at older versions up to it. Bump the
// version whenever T's JSON changes (a field renamed, retyped, split or
// dropped) and add the Migration from the previous version.
//
// Every save records version in the envelope's header (Info.Schema); a
// file without one, from a store without WithSchema, is schema 0. A load
// (Load, LoadExact, Latest, LatestClean) applies the migrations from the
// file's schema up to version, in order and in memory, then decodes the
// result into T: files on disk are never rewritten. A state of a newer
// schema than version is ErrNewerSchema; one older than the first
// migration's From (a chain may start above 0 when a program drops its
// oldest files), or whose migration fails, returns invalid JSON or does
// not decode into T, is ErrMigration. Neither is damage: the file is never
// moved aside, retention counts it as a checkpoint that loads, and Latest
// stops there with that error instead of resuming from an older step,
// which would silently fork the history.
//
// Open refuses a broken chain with ErrInvalid: a negative version or From,
// a From at or above version, two migrations from one version, a gap, or a
// nil Migrate. Given to OpenSessions, WithSchema applies to every session
// and to the checks of Fork. The default is version 0 with no migrations.
func WithSchema(version int, migrations ...Migration) Option {
	return optionFunc(func(c *config) {
		c.schema.Version, c.schema.Migrations = version, slices.Clone(migrations)
	})
}

// StrictDecoding makes loads refuse a state with a field that T does not
// have (json.Decoder.DisallowUnknownFields) instead of dropping it: it
// catches a change of T's JSON that was not given a new schema version (see
// WithSchema), such as a renamed field that would otherwise load as its zero
// value. A state of the store's own schema that fails so is ErrCorrupt, like
// any state that does not decode into T; a migrated one is ErrMigration.
// The default is to ignore unknown fields, as encoding/json does.
func StrictDecoding() Option {
	return optionFunc(func(c *config) { c.schema.Strict = true })
}

// WithHooks installs hooks on the store.
func WithHooks(h Hooks) Option {
	return optionFunc(func(c *config) { c.hooks = h })
}
