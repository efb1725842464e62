// Package checkpoint makes long-running programs crash-proof by saving a
// self-contained snapshot of their state once per step and bringing them back
// to the last good step after a crash, a kill -9 or an error.
//
// A [Store] owns one directory (or, with [OpenBackend], any [Backend], such
// as an S3 prefix). Each save publishes one file atomically and durably,
// never replacing an existing checkpoint, so a reader sees either the old
// set of checkpoints or the new set, never a torn file (dirstore.Open says
// how a directory keeps that promise). A checkpoint is JSON (optionally gzip- or
// zstd-compressed) holding a small envelope around the application's state,
// with a CRC-32C checksum that every load verifies (SHA-256 in files of
// format 1, which load forever). With [Async], saves are encoded at once
// and published in the background, in order.
//
// A typical turn loop:
//
//	store, err := checkpoint.Open[Game]("campaigns/001", checkpoint.WithLayout("turn", 3))
//	if err != nil { ... }
//	defer store.Close()
//
//	game, info, err := store.Latest(ctx)
//	switch {
//	case errors.Is(err, checkpoint.ErrNotFound):
//		game = NewGame() // fresh start
//	case err != nil:
//		return err
//	default:
//		log.Printf("resuming from turn %d (%s)", info.Step, info.Kind)
//	}
//	turn := info.Step + 1
//	if info.Kind == checkpoint.KindError {
//		turn = info.Step // the turn that failed is played again
//	}
//	for ; !game.Over(); turn++ {
//		if err := game.Play(turn); err != nil {
//			store.SaveError(ctx, turn, game, err) // the turn as it stood, and why
//			return err
//		}
//		if _, _, err := store.Tick(ctx, turn, game); err != nil { ... }
//	}
//
// A checkpoint of a failed turn holds the game as it was when the turn
// failed (partial work included), so the loop above plays that turn again
// from it; examples/onerror finishes the step from its partial output. Once
// the turn is redone and saved, that clean checkpoint supersedes the error
// checkpoint: Latest no longer resumes from it, and the store removes it
// (see [Store.SaveError]), wherever a kill interrupts the loop.
//
// Retention rules ([KeepLast], [KeepMultiplesOf], [KeepWithin], [KeepOnePer],
// and [KeepBest] by a metric recorded with [WithMetric]) keep a store small without ever removing its newest good checkpoint (nor the
// newest good one that is not an error checkpoint), and
// [Store.Truncate] rewrites history after a restore. [Sessions] holds many
// stores under one root directory: numbered sessions, resuming the most
// recently active one ([ResumeLatestSession]) and forking one at a step
// ([Sessions.Fork]). [WithSchema] versions the state type: a load migrates
// a state saved by an earlier release in memory, and refuses one saved by a
// newer release.
//
// A host that hands over bytes instead of a Go type (a raft snapshot, gob
// a framework encoded) saves them with [Store.SaveFrom], streamed from an
// [io.Writer] and stored as they are, and reads them back with
// [Store.OpenPayload] or [Store.LatestPayload], an [io.ReadCloser] that
// verifies the checksum as it streams: a byte payload has every promise of
// a state's checkpoint, in a memory independent of its size.
//
// Every exported method is safe for concurrent use by multiple goroutines.
// Errors name the operation, the step and the file, and wrap one of the
// package's sentinel errors ([ErrNotFound], [ErrCorrupt], ...) so that
// [errors.Is] can tell them apart.
//
// # Reading the code
//
// One [Store.Save] reads top to bottom in five files: save.go (the step's
// checks, its encoding, its publication and its report), the bytes in
// internal/format/codec.go, the publish protocol of a directory in
// dirstore/publish.go (the system calls it makes are in that package's
// platform files), the retention pass after it in prune.go, and store.go,
// which holds the gate every call passes and what a call leaves behind (the
// header cache, the newest save time). It calls out for the name of its
// step (layout.go) and, where retention needs one, a listing (entries.go).
//
// One [Store.Latest] reads in five too: load.go (newest first, falling
// back past damage), entries.go (the listing and its header cache),
// internal/format/stream.go (the streamed decode of one file), the
// directory's read path in dirstore/dir.go, and store.go; it calls out to
// layout.go to parse names.
package checkpoint

import (
	"path/filepath"
	"time"

	"github.com/gocheckpoint/checkpoint/internal/format"
)

// Kind says why a checkpoint was written. It is part of the file name and of
// the envelope, so it is known without decoding the state.
type Kind = format.Kind

const (
	// KindStep is a checkpoint written by Save or by a due Tick.
	KindStep = format.KindStep
	// KindFinal is the checkpoint of a run's last step, written by SaveFinal.
	KindFinal = format.KindFinal
	// KindError holds the state as it was when a step failed, with an
	// ErrorRecord saying what went wrong. It is written by SaveError and
	// SaveOnPanic.
	KindError = format.KindError
	// KindRolling is the single rolling file that WithRolling keeps for steps
	// that are not due. It is the only checkpoint a store ever replaces.
	KindRolling = format.KindRolling
)

// Info describes one checkpoint file. Everything in it comes from the file
// name and the envelope's header; the state is not decoded to produce it.
type Info struct {
	// Step is the step the checkpoint was saved for.
	Step int64 `json:"step"`
	// Kind says which save wrote it.
	Kind Kind `json:"kind"`
	// Time is when the checkpoint was saved, as recorded in its envelope.
	Time time.Time `json:"time"`
	// Location is where the checkpoint is: for a directory, the file's path
	// (the store's directory joined with its name); on object storage, the
	// object's URL (s3://bucket/prefix/name). Name gives the name alone.
	Location string `json:"location"`
	// Path holds what Location holds.
	//
	// Deprecated: use Location; Path is a URL, not a path, on object
	// storage. It is still set, and written to JSON as "path".
	Path string `json:"path"`
	// Size is the file's size in bytes on disk (compressed, if it is); in
	// an encrypted store (see Encrypt), the size of the bytes inside the
	// encryption.
	Size int64 `json:"size"`
	// Compression names the compression: "gzip", "zstd", or "" for a plain
	// file.
	Compression string `json:"compression,omitempty"`
	// Format is the envelope's format version.
	Format int `json:"format"`
	// Schema is the schema version of the state in the file, as it was
	// saved (see WithSchema); 0 for a file saved without one. A load
	// migrates the state to the store's schema but reports the file's.
	Schema int `json:"schema"`
	// Meta holds the labels given with WithMeta.
	Meta map[string]string `json:"meta,omitempty"`
	// Metrics holds the metrics given with WithMetric (see KeepBest),
	// read from the checkpoint's header like every field above: List
	// returns them without reading states.
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// Error is set on KindError checkpoints: what went wrong.
	Error *ErrorRecord `json:"error,omitempty"`
	// Payload says what the checkpoint holds, as its header tells:
	// PayloadJSON (a state: Save, Load) or PayloadBytes (opaque bytes:
	// SaveFrom, OpenPayload); "" when the header could not be read
	// (Format 0).
	Payload Payload `json:"payload,omitempty"`
	// PayloadSize is the size in bytes of a byte payload, before
	// compression, where it is known without reading the payload: set by
	// SaveFrom and AppendFrom, and by OpenPayload and LatestPayload for a
	// plain file; -1 otherwise (List, or a compressed file: its size shows
	// only at its end). 0 for a JSON state.
	PayloadSize int64 `json:"payload_size,omitempty"`
}

// Name returns the checkpoint's file name within its store's directory.
func (i Info) Name() string {
	if i.Location == "" {
		return filepath.Base(i.Path) // an Info made by a host before Location
	}
	return filepath.Base(i.Location)
}

// ErrorRecord is stored in the envelope of an error checkpoint so that a
// resumed run can show what went wrong: its message (cut past 32 KiB), the
// dynamic types of the errors in its chain, the step that failed, when, and
// for a panic, the goroutine's stack (cut past 64 KiB). Its fields are
// documented on the type it names.
type ErrorRecord = format.ErrorRecord
