package checkpoint

import (
	"fmt"
	"strconv"
	"strings"
)

const (
	extPlain = ".json"
	extGzip  = ".json.gz"
	extZstd  = ".json.zst"
	// rollingStem replaces the step in the rolling file's name.
	rollingStem = "last"
	// lockName is the writer's lock file. The leading dot keeps it out of
	// every listing.
	lockName = ".checkpoint.lock"
	// maxNameLen bounds side-file names, well under every file system's limit.
	maxNameLen = 200
)

// layout names checkpoint files: prefix_<step>[.kind].json[.gz|.zst].
type layout struct {
	prefix string
	digits int
}

// fileName is everything a checkpoint's name says about it.
type fileName struct {
	step    int64 // unknown (0) for the rolling file: read it from the header
	kind    Kind
	attempt int // error checkpoints: 1 for .error, n for .error-n
	comp    compression
}

func (l layout) validate() error {
	if !validChars(l.prefix) || len(l.prefix) > 64 {
		return fmt.Errorf("%w: layout prefix %q: want 1 to 64 characters of [A-Za-z0-9._-], not starting with a dot", ErrInvalid, l.prefix)
	}
	if l.digits < 1 || l.digits > 19 {
		return fmt.Errorf("%w: layout digits %d: want 1 to 19", ErrInvalid, l.digits)
	}
	return nil
}

// format returns the file name of n.
func (l layout) format(n fileName) string {
	return string(l.appendName(make([]byte, 0, len(l.prefix)+l.digits+24), n))
}

// appendName appends the file name of n to b.
func (l layout) appendName(b []byte, n fileName) []byte {
	b = append(b, l.prefix...)
	b = append(b, '_')
	if n.kind == KindRolling {
		b = append(b, rollingStem...)
	} else {
		s := strconv.FormatInt(n.step, 10)
		for i := len(s); i < l.digits; i++ {
			b = append(b, '0')
		}
		b = append(b, s...)
		switch n.kind {
		case KindFinal:
			b = append(b, ".final"...)
		case KindError:
			b = append(b, ".error"...)
			if n.attempt > 1 {
				b = append(b, '-')
				b = strconv.AppendInt(b, int64(n.attempt), 10)
			}
		}
	}
	return append(b, n.comp.ext()...)
}

// parse reports whether name is a checkpoint name of this layout and what it
// says. A name is accepted only if format gives it back exactly, so padding,
// signs and leading zeros can never make two names for one checkpoint.
func (l layout) parse(name string) (fileName, bool) {
	var n fileName
	if len(name) <= len(l.prefix) || name[len(l.prefix)] != '_' || name[:len(l.prefix)] != l.prefix {
		return n, false
	}
	rest := name[len(l.prefix)+1:]
	if r, ok := strings.CutSuffix(rest, extGzip); ok {
		rest, n.comp = r, compressGzip
	} else if r, ok := strings.CutSuffix(rest, extZstd); ok {
		rest, n.comp = r, compressZstd
	} else if r, ok := strings.CutSuffix(rest, extPlain); ok {
		rest = r
	} else {
		return n, false
	}
	if rest == rollingStem {
		n.kind = KindRolling
		return n, true
	}
	num, suffix, _ := strings.Cut(rest, ".")
	if num == "" || strings.Trim(num, "0123456789") != "" {
		return n, false
	}
	step, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return n, false
	}
	n.step = step
	switch {
	case suffix == "":
		n.kind = KindStep
	case suffix == "final":
		n.kind = KindFinal
	case suffix == "error":
		n.kind, n.attempt = KindError, 1
	case strings.HasPrefix(suffix, "error-"):
		a, err := strconv.Atoi(suffix[len("error-"):])
		if err != nil || a < 2 {
			return n, false
		}
		n.kind, n.attempt = KindError, a
	default:
		return n, false
	}
	// Compare without allocating: List and Latest parse every name in
	// the directory.
	var buf [128]byte
	return n, string(l.appendName(buf[:0], n)) == name
}

// isTemp reports whether name is a temporary file that a save of this store
// left behind: a dot, the name of a checkpoint of this layout or of a side
// file, and the random digits renameio appends.
func (l layout) isTemp(name string) bool {
	if len(name) < 2 || name[0] != '.' {
		return false
	}
	stem := strings.TrimRight(name[1:], "0123456789")
	if len(stem) == len(name)-1 {
		return false // no random suffix
	}
	if _, ok := l.parse(stem); ok {
		return true
	}
	// session.json's temporaries belong to Sessions, which removes them
	// under its own lock: a store's Open could race with a SetMeta.
	return l.sideName(stem) == nil
}

// sideName checks the name of a side file: a plain name of [A-Za-z0-9._-]
// ending in .json, not starting with a dot, not a checkpoint name.
func (l layout) sideName(name string) error {
	if !validChars(name) || len(name) > maxNameLen || !strings.HasSuffix(name, extPlain) {
		return fmt.Errorf("%w: side file name %q: want up to %d characters of [A-Za-z0-9._-] ending in .json, not starting with a dot", ErrInvalid, name, maxNameLen)
	}
	if _, ok := l.parse(name); ok {
		return fmt.Errorf("%w: side file name %q is a checkpoint name", ErrInvalid, name)
	}
	if name == sessionFile {
		return fmt.Errorf("%w: side file name %q is reserved for the metadata of a session (see Sessions)", ErrInvalid, name)
	}
	return nil
}

// validChars reports whether s is non-empty, uses only [A-Za-z0-9._-] and
// does not start with a dot: a plain file name that cannot climb out of a
// directory or hide.
func validChars(s string) bool {
	if s == "" || s[0] == '.' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
