package checkpoint

import (
	"fmt"
	"log/slog"
	"time"
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
	readOnly bool
	every    int64
	rolling  bool
	retain   retention
	maxRead  int64
	hooks    Hooks
	logger   *slog.Logger
	now      func() time.Time // a seam for tests; time.Now otherwise
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
	return cfg, cfg.validate()
}

func (c *config) validate() error {
	if err := c.layout.validate(); err != nil {
		return err
	}
	if c.every < 0 {
		return fmt.Errorf("%w: Every(%d): the interval must be 0 (never) or positive", ErrInvalid, c.every)
	}
	if err := c.retain.validate(); err != nil {
		return err
	}
	if c.maxRead <= 0 {
		return fmt.Errorf("%w: WithMaxReadSize(%d): the limit must be positive", ErrInvalid, c.maxRead)
	}
	return nil
}

type saveConfig struct {
	meta map[string]string
}

// Gzip makes the store compress the checkpoints it writes (.json.gz). A store
// reads plain and compressed checkpoints alike whatever this setting, so it
// can be turned on or off for an existing directory.
func Gzip() Option {
	return optionFunc(func(c *config) { c.gzip = true })
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
// decompression; a larger checkpoint fails with ErrCorrupt. The cap stops a
// damaged or hostile file (a gzip bomb) from exhausting memory. The default is
// DefaultMaxReadSize.
func WithMaxReadSize(n int64) Option {
	return optionFunc(func(c *config) { c.maxRead = n })
}

// WithLogger makes the store log what it does: "checkpoint created" and
// "checkpoint pruned" at Debug, "checkpoint restored" (a load) at Info,
// failed operations, skipped damaged checkpoints and removed stale temporary
// files at Warn. By default the store logs nothing.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) {
		if l != nil {
			c.logger = l
		}
	})
}

// WithMeta attaches a label to the checkpoint being saved. Labels are stored
// in the envelope and returned in Info.Meta. The key must not be empty.
func WithMeta(key, value string) SaveOption {
	return saveOptionFunc(func(c *saveConfig) {
		if c.meta == nil {
			c.meta = make(map[string]string)
		}
		c.meta[key] = value
	})
}

// withClock replaces the store's clock. Tests use it to control save times.
func withClock(now func() time.Time) Option {
	return optionFunc(func(c *config) { c.now = now })
}
