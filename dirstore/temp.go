package dirstore

import (
	"math/rand/v2"
	"strconv"
	"strings"
)

// tempMarker sits between a file's name and the random digits in the names
// of its temporary files. It is what lets a store tell the temporary files
// of the directory's writes from a user's hidden files: only a name with
// the marker (or, in the older naming without it, a checkpoint's name
// followed by digits) is ever removed as a stale temporary file.
const tempMarker = ".ckpt-tmp-"

// tempPrefix returns the names of final's temporary files, less their random
// digits: a dot (which keeps them out of listings and out of every layout),
// final and tempMarker. Every write of the directory names its temporary
// files so (renameio, where it writes them, appends the digits; see
// createTemp).
func tempPrefix(final string) string { return "." + final + tempMarker }

// tempName returns a new temporary name for final, for a writer that
// creates its temporary file itself: tempPrefix(final) and random digits.
func tempName(final string) string {
	return tempPrefix(final) + strconv.FormatInt(rand.Int64(), 10)
}

// splitTemp returns the final name of the temporary file name, and whether
// it has the marker, if name has the shape of one: a dot, the final name,
// the marker or not, random digits.
func splitTemp(name string) (final string, marked, ok bool) {
	if len(name) < 2 || name[0] != '.' {
		return "", false, false
	}
	stem := strings.TrimRight(name[1:], "0123456789")
	if len(stem) == len(name)-1 {
		return "", false, false // no random suffix
	}
	if f, ok := strings.CutSuffix(stem, tempMarker); ok {
		return f, true, f != ""
	}
	return stem, false, true
}

// TempOf reports whether name is the name of a temporary file of the
// directory's writes, and if so returns the name the write was publishing
// (final) and whether name is of the older naming without tempMarker
// (legacy: a dot, the final name and random digits, which a user's hidden
// file may share). See storage.TempNamer.
func (d *dirBackend) TempOf(name string) (final string, legacy, ok bool) {
	final, marked, ok := splitTemp(name)
	return final, !marked, ok
}
