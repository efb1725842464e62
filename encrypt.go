package checkpoint

import (
	"fmt"

	"filippo.io/age"

	"github.com/gocheckpoint/checkpoint/internal/sealed"
)

// Encrypt makes the store encrypt and authenticate every file it writes
// (checkpoints, the rolling file, side files, the header index, a
// session's session.json) to current, with age (filippo.io/age: X25519,
// and ChaCha20-Poly1305 in authenticated chunks of 64 KiB), and read only
// files that current or one of older opens and that authenticate. Give it
// to Open, OpenBackend or OpenSessions (where it applies to every session).
//
// Inside the encryption is everything a file holds: the header, metadata,
// metrics, error record and state. Outside are the file's name (so its
// step and kind) and size, and a key line naming the key the file is
// encrypted to by its key ID (see KeyID), which tells a file no identity
// given opens from a damaged one.
//
// An encrypting store fails closed:
//   - it never writes a plaintext file;
//   - a file that fails authentication (a flipped byte, a truncation, a
//     file whose header inside disagrees with its name, such as one copied
//     or renamed to another step's name) is damage: ErrCorrupt, moved aside
//     by a save that finds it in its way, and Latest falls back past it;
//   - a file encrypted to a key none of the identities opens is ErrNoKey,
//     and a file that is not encrypted ErrPlaintext: neither is damage,
//     neither is ever moved aside, and Latest stops at either (with the
//     error naming the key, or the file) rather than resume from an older
//     step, as it does at a newer schema.
//
// Older identities are for key rotation: a store written to current reads
// the checkpoints encrypted to an older key, and Reencrypt (the command
// checkpoint rekey) rewrites a store's files to the current key. It does
// not catch what it cannot see: a deleted newest checkpoint rolls a run
// back to the one before; a store, or a file (the rolling file), replaced
// by an older copy of itself, or a file copied from another store of the
// same key under the same name, loads as it was; and age authenticates a
// file to its key, not its writer, so that whoever holds current's public
// key (age1...; no file holds it) can write a file that loads: keep it as
// secret as the identity where writers must be told apart.
func Encrypt(current *age.X25519Identity, older ...*age.X25519Identity) Option {
	return optionFunc(func(c *config) {
		c.encrypt = &encryptKeys{current: current, older: older}
	})
}

// ReadPlaintext lets an encrypting store (see Encrypt) read files that are
// not encrypted, as it reads encrypted ones: a migration option, to read a
// plaintext store once and re-encrypt it (Reencrypt; the command
// checkpoint rekey --plaintext). It never makes the store write a
// plaintext file. Without Encrypt it is ErrInvalid.
func ReadPlaintext() Option {
	return optionFunc(func(c *config) { c.readPlaintext = true })
}

// KeyID returns the ID of the key of r that an encrypted file's key line
// and an ErrNoKey error name: the first 8 bytes, in hex, of the SHA-256 of
// r's age1... string.
func KeyID(r *age.X25519Recipient) string { return sealed.KeyID(r) }

// encryptKeys are Encrypt's arguments.
type encryptKeys struct {
	current *age.X25519Identity
	older   []*age.X25519Identity
}

// keys returns the sealed.Keys of c's Encrypt and ReadPlaintext, nil
// without Encrypt.
func (c *config) keys() (*sealed.Keys, error) {
	if c.encrypt == nil {
		if c.readPlaintext {
			return nil, fmt.Errorf("%w: ReadPlaintext without Encrypt", ErrInvalid)
		}
		return nil, nil
	}
	k, err := sealed.NewKeys(c.encrypt.current, c.encrypt.older, c.readPlaintext)
	if err != nil {
		return nil, fmt.Errorf("%w: Encrypt: %w", ErrInvalid, err)
	}
	return k, nil
}

// seal returns b sealed with c's keys, or b itself without Encrypt.
func (c *config) seal(b Backend) Backend {
	if c.sealKeys == nil {
		return b
	}
	return sealed.Wrap(b, c.sealKeys)
}
