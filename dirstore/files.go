package dirstore

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// mkdirDurable creates dir and any missing parents, and fsyncs the parent of
// each directory it created, so that the new directories survive a power cut
// with the checkpoints written into them.
func mkdirDurable(dir string) error {
	var created []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		created = append(created, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if len(created) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return err
	}
	for _, d := range created {
		if err := syncPath(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

// removeNames removes names from root, in order, and then syncs the
// directory once (unless o.noSync). A name that is already gone is not an
// error, and a removal that fails does not stop the others. It returns
// whether each name is gone.
func removeNames(root *os.Root, o fileIO, names []string) (gone []bool, err error) {
	var errs []error
	gone = make([]bool, len(names))
	for i, name := range names {
		err := removeFile(root, name)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		gone[i] = true
	}
	if err := o.syncDir(root); err != nil {
		errs = append(errs, err)
	}
	return gone, errors.Join(errs...)
}

// removeStaleTemps removes the temporary files a crashed save left behind and
// returns their names. Only regular files that have the shape of a
// temporary file (see splitTemp) and whose final name ours accepts are
// touched.
func removeStaleTemps(root *os.Root, ours func(final string, legacy bool) bool, o fileIO) ([]string, error) {
	names, err := readNames(root)
	if err != nil {
		return nil, err
	}
	var stale []string
	for _, name := range names {
		if final, marked, ok := splitTemp(name); !ok || !ours(final, !marked) {
			continue
		}
		if fi, err := root.Lstat(name); err == nil && fi.Mode().IsRegular() {
			stale = append(stale, name)
		}
	}
	if len(stale) == 0 {
		return nil, nil
	}
	_, err = removeNames(root, o, stale)
	return stale, err
}

// readDir reads the directory entries of root, for callers that need
// their types (a session directory, a staging directory).
func readDir(root *os.Root) ([]fs.DirEntry, error) {
	d, err := root.Open(".")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.ReadDir(-1)
}

// readNames returns the names in root's directory, in directory order. It
// stats nothing: entries of a directory opened in an os.Root are each
// stat'ed by ReadDir, which costs more than reading the names.
func readNames(root *os.Root) ([]string, error) {
	d, err := root.Open(".")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Readdirnames(-1)
}
