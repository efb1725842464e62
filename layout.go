package checkpoint

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/gocheckpoint/checkpoint/internal/names"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/internal/format"
	"github.com/gocheckpoint/checkpoint/storage"
)

const (
	extPlain = format.ExtPlain
	extGzip  = format.ExtGzip
	extZstd  = format.ExtZstd
	// rollingStem replaces the step in the rolling file's name.
	rollingStem = "last"
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
	if !names.Plain(l.prefix) || len(l.prefix) > 64 {
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
	return append(b, n.comp.Ext()...)
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

// isTemp reports whether name is a temporary object of b's writes (see
// storage.TempOf) that a save of this store left behind: one of a
// checkpoint name of this layout, of a side file or of the index. One of
// the legacy naming (a checkpoint's name followed by digits alone, without
// the marker) counts for a checkpoint only, since a
// user may keep a file named so after a side file (.notes.json2).
func (l layout) isTemp(b Backend, name string) bool {
	final, legacy, ok := storage.TempOf(b, name)
	return ok && l.ownsTemp(final, legacy)
}

// ownsTemp reports whether a temporary file of final is one a save of this
// store writes: that of a checkpoint name of this layout, marked or legacy
// (see isTemp), or, marked, that of a side file or of the index.
func (l layout) ownsTemp(final string, legacy bool) bool {
	if _, ok := l.parse(final); ok {
		return true
	}
	// session.json's temporaries belong to Sessions, whose SetMeta removes
	// the stale ones: a store's Open could race with a SetMeta.
	return !legacy && (l.sideName(final) == nil || final == indexName)
}

// sideName checks the name of a side file: a plain name of [A-Za-z0-9._-]
// ending in .json, not starting with a dot, not a checkpoint name.
func (l layout) sideName(name string) error {
	if !names.Plain(name) || len(name) > maxNameLen || !strings.HasSuffix(name, extPlain) {
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

// A Layout is a file naming scheme found in a directory by DetectLayouts:
// the arguments of the WithLayout that names those files, and how many files
// follow it.
type Layout struct {
	Prefix string // as given to WithLayout
	Digits int    // as given to WithLayout
	// Files counts the directory's files that the layout names: checkpoints,
	// temporary files of saves and quarantined checkpoints.
	Files int
}

// String returns the layout as "prefix/digits", such as "turn/3".
func (l Layout) String() string { return l.Prefix + "/" + strconv.Itoa(l.Digits) }

// Option returns WithLayout(l.Prefix, l.Digits): the option that opens a
// store of the files DetectLayouts found.
func (l Layout) Option() Option { return WithLayout(l.Prefix, l.Digits) }

// DetectLayouts returns the layouts of the files in dir, the one that names
// the most files first (ties in prefix order), so that a tool can open a
// store without being told its layout: open it with
// DetectLayouts(dir)[0].Option().
//
// Every regular file whose name is a checkpoint name of some layout counts,
// as do the temporary files of saves and quarantined checkpoints
// (name.corrupt). A name's prefix is everything before its last underscore;
// its digits are known exactly when the step has a leading zero, and
// otherwise are at most the step's width. Of the digit counts that name the
// most files of one prefix, DetectLayouts picks 8 (the default) if it is one
// of them, else the largest, since each of them reads the same files. Files
// of one prefix that no single digit count names (turn_007.json beside
// turn_0008.json) make more than one layout.
//
// A directory with no such file returns no layout and no error; a missing
// directory is ErrNotFound. Only names are read, never a file's contents, so
// a side file named like a checkpoint (notes_2024.json) is counted too.
func DetectLayouts(dir string) ([]Layout, error) {
	b, err := dirstore.Open(dir, dirstore.ReadOnly(), dirstore.NoSync())
	if err != nil {
		return nil, opError("detect layouts", dir, dirOpenCause(err, dir))
	}
	defer b.Close()
	found, err := DetectBackendLayouts(context.Background(), b)
	if err != nil {
		return nil, opError("detect layouts", dir, err)
	}
	return found, nil
}

// DetectBackendLayouts is DetectLayouts on the objects of b, a store's
// storage such as an S3 prefix (module s3store): it lists b once and reads
// no object. Where the listing does not say what an object is (a local
// directory's, see Backend.List), it stats those named like checkpoints,
// so that only regular objects count. A listing's error is returned as b
// gives it.
func DetectBackendLayouts(ctx context.Context, b Backend) ([]Layout, error) {
	objs, err := b.List(ctx)
	if err != nil {
		return nil, err
	}
	known := objs[:0]
	for _, o := range objs {
		if _, _, _, ok := layoutEvidence(b, o.Name); ok && o.Version == "" {
			if o, err = b.Stat(ctx, o.Name); errors.Is(err, fs.ErrNotExist) {
				continue // removed since the listing
			} else if err != nil {
				return nil, err
			}
		}
		known = append(known, o)
	}
	return layoutsOf(b, known), nil
}

func layoutsOf(b Backend, objs []Object) []Layout {
	var out []Layout
	for _, f := range detectLayouts(b, objs, false) {
		out = append(out, f.Layout)
	}
	return out
}

// detectedLayout is a layout DetectLayouts found, with the names of the
// files it names.
type detectedLayout struct {
	Layout
	names []string
}

// detectLayouts is DetectLayouts on a backend's objects: those known not to
// be regular files are no evidence, nor, with checkpointsOnly, temporary
// and quarantined files.
func detectLayouts(b Backend, objs []Object, checkpointsOnly bool) []detectedLayout {
	type span struct { // the digit counts that name a file
		lo, hi int
		name   string
	}
	byPrefix := make(map[string][]span)
	for _, o := range objs {
		if o.Version != "" && !o.Mode.IsRegular() { // unknown types are evidence
			continue
		}
		name := o.Name
		if checkpointsOnly {
			if _, ok := quarantinedStem(name); ok || strings.HasPrefix(name, ".") {
				continue
			}
		}
		if prefix, lo, hi, ok := layoutEvidence(b, name); ok {
			byPrefix[prefix] = append(byPrefix[prefix], span{lo, hi, name})
		}
	}
	var out []detectedLayout
	for prefix, spans := range byPrefix {
		for len(spans) > 0 {
			best, bestN := 0, 0
			for digits := 1; digits <= 19; digits++ {
				n := 0
				for _, s := range spans {
					if s.lo <= digits && digits <= s.hi {
						n++
					}
				}
				if n > bestN || n == bestN && n > 0 && best != 8 {
					best, bestN = digits, n
				}
			}
			d := detectedLayout{Layout: Layout{Prefix: prefix, Digits: best, Files: bestN}}
			spans = slices.DeleteFunc(spans, func(s span) bool {
				named := s.lo <= best && best <= s.hi
				if named {
					d.names = append(d.names, s.name)
				}
				return named
			})
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b detectedLayout) int {
		return cmp.Or(cmp.Compare(b.Files, a.Files), strings.Compare(a.Prefix, b.Prefix), cmp.Compare(a.Digits, b.Digits))
	})
	return out
}

// layoutEvidence returns the prefix of the layouts that would name the
// object name of b, a checkpoint, a temporary object of a save (see
// storage.TempOf) or a quarantined checkpoint, and the range of digit
// counts among them.
func layoutEvidence(b Backend, name string) (prefix string, lo, hi int, ok bool) {
	if name == "" {
		return "", 0, 0, false
	}
	if name[0] == '.' {
		// A temporary object of the backend's, or nothing.
		final, _, ok := storage.TempOf(b, name)
		if !ok {
			return "", 0, 0, false
		}
		name = final
	} else if stem, ok := quarantinedStem(name); ok {
		name = stem
	}
	i := strings.LastIndexByte(name, '_')
	if i < 0 {
		return "", 0, 0, false
	}
	prefix, rest := name[:i], name[i+1:]
	num, _, _ := strings.Cut(rest, ".")
	lo, hi = 1, 19
	if num != rollingStem {
		if num == "" || strings.Trim(num, "0123456789") != "" || len(num) > 19 {
			return "", 0, 0, false
		}
		if num[0] == '0' {
			lo, hi = len(num), len(num)
		} else {
			hi = len(num)
		}
	}
	l := layout{prefix: prefix, digits: lo}
	if l.validate() != nil {
		return "", 0, 0, false
	}
	if _, ok := l.parse(name); !ok {
		return "", 0, 0, false
	}
	return prefix, lo, hi, true
}

// quarantinedStem returns the name of the checkpoint that the quarantined
// file name (name.corrupt, name.corrupt-2, ...) was, and whether name has
// that shape.
func quarantinedStem(name string) (string, bool) {
	i := strings.LastIndex(name, quarantineSuffix)
	if i <= 0 {
		return "", false
	}
	if n := name[i+len(quarantineSuffix):]; n != "" {
		k, err := strconv.Atoi(strings.TrimPrefix(n, "-"))
		if err != nil || k < 2 || "-"+strconv.Itoa(k) != n {
			return "", false
		}
	}
	return name[:i], true
}
