package names

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// MaxLegacyID is the length of the longest session ID that earlier
// releases took: 1 to MaxLegacyID bytes of [A-Za-z0-9._-], not starting
// with a dot (see Legacy).
const MaxLegacyID = 64

// maxReadable bounds the readable part of a mapped name.
const maxReadable = 32

// Legacy reports whether id is a session ID that earlier releases took, and
// stored under its own name: Plain and at most MaxLegacyID bytes.
func Legacy(id string) bool { return len(id) <= MaxLegacyID && Plain(id) }

// SessionName returns the name under which the session id is stored: a
// Legacy ID that every file system can hold as it is (not a Windows device
// name such as CON or nul.txt, not ending in a dot) is its own name, so
// that roots written by earlier releases open unchanged; any other ID is
// mapped (see Mapped).
func SessionName(id string) string {
	if Legacy(id) && Portable(id) {
		return id
	}
	return Mapped(id)
}

// Mapped returns the mapped name of id: a readable part (the ASCII letters
// and digits of id, lower-cased, other runs as "_", at most 32 bytes; "id"
// if none), a hyphen and the 64 lower-case hex digits of the SHA-256 of
// id. A mapped name is longer than MaxLegacyID, so it is never a Legacy
// ID, and uses only [a-z0-9_-], so that two differ in more than case and
// none is a device name, ends in a dot or space, needs quoting in a
// shell, or is more than 97 bytes. It is not reversible: the session's
// metadata records the ID, and a reader checks that it maps back here.
func Mapped(id string) string {
	sum := sha256.Sum256([]byte(id))
	return readable(id) + "-" + hex.EncodeToString(sum[:])
}

// IsMapped reports whether name has the shape of a mapped name (see
// Mapped); which ID it stands for only the session's metadata says.
func IsMapped(name string) bool {
	const h = 64
	if len(name) < h+2 || len(name) > maxReadable+1+h || name[len(name)-h-1] != '-' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case i >= len(name)-h:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return false
			}
		case i == len(name)-h-1:
		case !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_'):
			return false
		}
	}
	return true
}

// IsSessionName reports whether name may be the stored name of a session:
// a Legacy ID or a mapped name. Nothing else a root holds (hidden objects,
// the staging directories of earlier releases) is.
func IsSessionName(name string) bool { return Legacy(name) || IsMapped(name) }

// readable returns the readable part of a mapped name of id.
func readable(id string) string {
	var b strings.Builder
	gap := false
	for i := 0; i < len(id) && b.Len() < maxReadable; i++ {
		c := id[i]
		switch {
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		case 'a' <= c && c <= 'z' || '0' <= c && c <= '9':
		default:
			gap = true
			continue
		}
		if gap && b.Len() > 0 && b.Len() < maxReadable-1 {
			b.WriteByte('_')
		}
		gap = false
		b.WriteByte(c)
	}
	if b.Len() == 0 {
		return "id"
	}
	return b.String()
}

// Portable reports whether the plain name s can be a file name on every
// file system as it is: Windows takes a name ending in a dot for the name
// without it, and a device name (CON, PRN, AUX, NUL, COM0 to COM9, LPT0 to
// LPT9, in any case, alone or before a dot) for the device.
func Portable(s string) bool {
	if strings.HasSuffix(s, ".") {
		return false
	}
	base, _, _ := strings.Cut(s, ".")
	switch strings.ToUpper(base) {
	case "CON", "PRN", "AUX", "NUL":
		return false
	}
	if len(base) == 4 {
		p := strings.ToUpper(base[:3])
		if (p == "COM" || p == "LPT") && '0' <= base[3] && base[3] <= '9' {
			return false
		}
	}
	return true
}
