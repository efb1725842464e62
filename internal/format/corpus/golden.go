package corpus

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/gocheckpoint/checkpoint/internal/format"
)

// The golden checkpoints: internal/format/testdata/vN holds the files this
// package wrote when format version N was current. They must load forever:
// never regenerate or edit them. A new format version gets a new directory
// beside them, and GoldenFormats grows.

// GoldenAgent is a part of GoldenState.
type GoldenAgent struct {
	Name   string   `json:"name"`
	Memory []string `json:"memory"`
	HP     int      `json:"hp"`
}

// GoldenState is the state type of the golden checkpoints.
type GoldenState struct {
	Turn   int64                  `json:"turn"`
	Agents map[string]GoldenAgent `json:"agents"`
	Log    []string               `json:"log"`
	Seen   time.Time              `json:"seen"`
}

// GoldenStateAt returns the state the golden checkpoint of turn holds.
func GoldenStateAt(turn int64) GoldenState {
	return GoldenState{
		Turn: turn,
		Agents: map[string]GoldenAgent{
			"dm":     {Name: "Maître du jeu", Memory: []string{"la crypte", "龍"}, HP: 0},
			"thorin": {Name: "Thorin", Memory: []string{}, HP: 12},
		},
		Log:  []string{"DM: You enter the crypt.", "Thorin: I light a torch 🔥"},
		Seen: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC),
	}
}

// GoldenTime is the save time of every golden checkpoint.
var GoldenTime = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// A GoldenFile is one golden checkpoint, as each format version's
// directory holds it.
type GoldenFile struct {
	Name string
	Step int64
	Kind format.Kind
	Comp format.Compression
	Meta map[string]string
	Err  *format.ErrorRecord
}

// Header returns the header the file was written with in format.
func (g GoldenFile) Header(version int) format.Header {
	return format.Header{Format: version, Step: g.Step, Kind: g.Kind, Time: GoldenTime, Meta: g.Meta, Error: g.Err}
}

// GoldenFiles are the golden checkpoints of every format version: the same
// names, steps and states in each version's directory.
var GoldenFiles = []GoldenFile{
	{Name: "turn_006.json.zst", Step: 6, Kind: format.KindStep, Comp: format.CompressZstd, Meta: map[string]string{"codec": "zstd"}},
	{Name: "turn_007.json", Step: 7, Kind: format.KindStep, Meta: map[string]string{"player": "ana", "scene": "crypt"}},
	{Name: "turn_008.json.gz", Step: 8, Kind: format.KindStep, Comp: format.CompressGzip},
	{Name: "turn_009.error.json", Step: 9, Kind: format.KindError, Err: &format.ErrorRecord{
		Message: "generate reply: context deadline exceeded", Types: []string{"*fmt.wrapError", "context.deadlineExceededError"},
		Step: 9, Time: GoldenTime,
	}},
	{Name: "turn_010.final.json", Step: 10, Kind: format.KindFinal},
	{Name: "turn_last.json", Step: 11, Kind: format.KindRolling},
}

// GoldenFormats are the format versions of the golden checkpoints: each
// has a directory.
var GoldenFormats = []int{1, 2}

// GoldenDir returns the directory of the golden checkpoints of format, in
// internal/format/testdata, relative to the directory formatDir names
// (internal/format, from the test's own package).
func GoldenDir(formatDir string, format int) string {
	return filepath.Join(formatDir, "testdata", fmt.Sprintf("v%d", format))
}
