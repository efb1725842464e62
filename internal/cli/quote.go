package cli

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Everything the command prints that comes from disk (file and directory
// names, error records, states, session metadata, the text of errors that
// quote them) may hold control characters: an ESC or CSI (U+009B) sequence
// would drive the user's terminal. Such characters are printed escaped.

// unsafeRune reports whether r must not reach a terminal as it is: a
// control character (C0, DEL, C1), a line or paragraph separator, a
// bidirectional override (which can make text read other than it is), or
// anything else that is neither graphic nor a harmless format character
// (such as the zero-width joiner of an emoji sequence).
func unsafeRune(r rune) bool {
	switch {
	case r == ' ':
		return false
	case unicode.Is(unicode.Cc, r), r == '\u2028', r == '\u2029':
		return true
	case r == '\u061c', r == '\u200e', r == '\u200f', '\u202a' <= r && r <= '\u202e', '\u2066' <= r && r <= '\u2069':
		return true // bidirectional controls
	case unicode.Is(unicode.Cf, r):
		return false
	}
	return !unicode.IsGraphic(r)
}

// printable returns s with every unsafe character written as a Go escape
// (\x1b, \u009b, \n, \t), so that it prints as one line of plain text.
func printable(s string) string {
	if !strings.ContainsFunc(s, unsafeRune) && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\x`)
			b.WriteString(strconv.FormatUint(uint64(s[i])>>4, 16))
			b.WriteString(strconv.FormatUint(uint64(s[i])&0xf, 16))
		case unsafeRune(r):
			q := strconv.QuoteRuneToASCII(r) // '\x1b', '\u009b'
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// printableLines is printable for text of several lines: each line is made
// printable and the line breaks are kept.
func printableLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = printable(l)
	}
	return strings.Join(lines, "\n")
}

// safeJSON returns the JSON text b with every unsafe character inside its
// strings written as a \u escape: the same JSON value, for jq as for the
// eye. (encoding/json escapes C0 controls itself, but not DEL, C1
// controls such as U+009B, or bidirectional overrides.) An invalid byte
// becomes \ufffd, as encoding/json would decode it.
func safeJSON(b []byte) []byte {
	clean := true
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if unsafeRune(r) && r != '\n' || r == utf8.RuneError && size == 1 {
			clean = false
			break
		}
		i += size
	}
	if clean {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	inString, escaped := false, false
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case !inString:
			inString = r == '"'
		case escaped:
			escaped = false
		case r == '\\':
			escaped = true
		case r == '"':
			inString = false
		case unsafeRune(r), r == utf8.RuneError && size == 1:
			out = appendU(out, r) // an invalid byte decodes as U+FFFD
			i += size
			continue
		}
		out = append(out, b[i:i+size]...)
		i += size
	}
	return out
}

// appendU appends r as a JSON \u escape (a surrogate pair above U+FFFF).
func appendU(b []byte, r rune) []byte {
	if r > 0xffff {
		r -= 0x10000
		b = appendU(b, 0xd800+(r>>10))
		return appendU(b, 0xdc00+(r&0x3ff))
	}
	const hex = "0123456789abcdef"
	return append(b, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
}
