package format

import (
	"bytes"
	"errors"
	"fmt"
)

// Sentinel errors of encryption (package sealed writes and reads encrypted
// files; this package recognises one it is given unopened).
var (
	// ErrNoKey: a file is encrypted to a key that none of the identities
	// given opens, or none was given. It is not damage.
	ErrNoKey = errors.New("encrypted to a key not given")
	// ErrPlaintext: an encrypting store found a file that is not
	// encrypted. It is not damage.
	ErrPlaintext = errors.New("not encrypted")
)

// SealedMagic begins every encrypted file: its key line is SealedMagic,
// the key's ID (SealedKeyIDLen hex digits) and a newline.
const (
	SealedMagic    = "checkpoint-age-v1 "
	SealedKeyIDLen = 16
)

// SealedLen is how many first bytes of a file Sealed needs.
const SealedLen = len(SealedMagic) + SealedKeyIDLen

// Sealed returns an error wrapping ErrNoKey if first, the first bytes of a
// file read as plaintext (at least SealedLen of them, or the whole file),
// are those of an encrypted file; nil otherwise. Read without its key, an
// encrypted file is neither a checkpoint nor damage.
func Sealed(first []byte) error {
	rest, ok := bytes.CutPrefix(first, []byte(SealedMagic))
	if !ok {
		return nil
	}
	id := rest[:min(len(rest), SealedKeyIDLen)]
	return fmt.Errorf("%w: the file is encrypted to key %s: open the store with Encrypt and that key's identity", ErrNoKey, id)
}
