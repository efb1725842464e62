package format

import (
	"errors"

	"github.com/gocheckpoint/checkpoint/storage"
)

// Sentinel errors. The store exports each under the same name
// (checkpoint.ErrCorrupt is ErrCorrupt), where their meaning is documented.
var (
	// ErrCorrupt: the bytes of a checkpoint cannot be trusted.
	ErrCorrupt = errors.New("corrupt checkpoint")
	// ErrInvalid: an argument was invalid (a state that cannot be
	// encoded, a schema chain with a gap).
	ErrInvalid = storage.ErrInvalid
	// ErrNewerSchema: the state has a newer schema than the store reads.
	ErrNewerSchema = errors.New("checkpoint has a newer schema")
	// ErrMigration: the state could not be brought to the store's schema.
	ErrMigration = errors.New("schema migration failed")
)
