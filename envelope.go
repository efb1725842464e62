package checkpoint

import "github.com/gocheckpoint/checkpoint/internal/format"

// The file format (envelope, checksum, compression, streaming, schema
// decoding) is package internal/format. These names are the store's for
// the format's.
type (
	header      = format.Header
	codec       = format.Codec
	compression = format.Compression
	schema      = format.Schema
)

const (
	formatVersion  = format.Version
	compressNone   = format.CompressNone
	compressGzip   = format.CompressGzip
	compressZstd   = format.CompressZstd
	maxHeaderSize  = format.MaxHeaderSize
	maxReadCeiling = format.MaxReadCeiling
)

var (
	compressions   = format.Compressions
	newCodec       = format.NewCodec
	damaged        = format.Damaged
	isDamage       = format.IsDamage
	readLimited    = format.ReadLimited
	unmarshal      = format.Unmarshal
	isNull         = format.IsNull
	nilable        = format.Nilable
	errFormat      = format.ErrFormat
	errTooLarge    = format.ErrTooLarge
	errUnsupported = format.ErrUnsupported
)

// A Migration upgrades a state saved at schema version From to version
// From+1 (see WithSchema). Migrate gets the state's JSON as that version
// wrote it and returns the JSON of the next version; it may keep neither
// slice after it returns. It runs in memory when a checkpoint is loaded:
// the file itself is never rewritten. An error it returns fails the load
// with ErrMigration, wrapping that error; so does a panic (recovered), or
// output that is not valid JSON or is null. A state saved as null (a nil
// state) is nil at every schema: no migration runs on it.
//
// Migrate runs inside the load that called it: it must not call the store
// (Close waits for that load to end, and a write waits for the lock a
// prune's check holds), nor must the state type's UnmarshalJSON.
type Migration = format.Migration
