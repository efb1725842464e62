// Package format is the checkpoint file format: the envelope (a JSON
// header, the state's exact bytes, a checksum trailer), its compression
// (none, gzip, zstd), the buffered read and the streaming one, and the
// decoding of the state at a store's schema. It knows nothing of where a
// file is stored: the store hands it readers and writers.
//
// A checkpoint is one JSON object:
//
//	{"format":2,"step":7,"kind":"step","time":"...","state":<the state>,"checksum":"crc32c:<8 hex digits>"}\n
//
// Every error it returns for bad bytes wraps ErrCorrupt; one that proves
// the bytes damaged is marked so (see IsDamage).
package format
