package checkpoint

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"
)

// filePerm is the permission of new checkpoint and side files, before umask.
const filePerm = 0o644

// dirPerm is the permission of new directories, before umask.
const dirPerm = 0o755

// writeTo streams a file's contents.
type writeTo func(w io.Writer) error

// fileIO says how files are written and removed: durably (fsync) or not
// (NoSync), and, in tests, at which point an operation fails.
type fileIO struct {
	noSync bool
	// fault, if set, is asked before each point of a write or removal
	// ("create", "write", "sync", "close", "publish", "dirsync", "remove",
	// and "take back" for a new session whose root sync failed)
	// and an error it returns is that operation's failure: a seam for the
	// fault-injection tests, never set outside them.
	fault func(point, name string) error
}

// syncDir fsyncs root's directory unless noSync, failing where the seam says.
func (o fileIO) syncDir(root *os.Root) error {
	if o.noSync {
		return nil
	}
	if err := o.at("dirsync", ""); err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	return syncDir(root)
}

// at returns the injected failure of the operation at point on name, if any.
func (o fileIO) at(point, name string) error {
	if o.fault == nil {
		return nil
	}
	return o.fault(point, name)
}

// createFile writes a new file called name in root, atomically and durably,
// and never replaces an existing file: if name exists it returns an error
// wrapping ErrExists and leaves that file untouched. It returns the number of
// bytes written.
//
// The bytes go to a temporary file in the same directory (named
// tempPrefix(name) + random digits), are flushed and fsynced, and the file is
// closed; only then is it hard-linked to name, which fails instead of
// replacing. The temporary name is removed and the directory fsynced, so that
// the new name and the removal survive a power cut together. A crash at any
// instant leaves no file called name or a complete one, and at worst a
// temporary file that the next writer's Open removes.
//
// With o.noSync (NoSync) both fsyncs are skipped: the publication is still
// atomic for every process, and survives the writer's crash, but not an
// operating-system crash or a power cut.
func createFile(root *os.Root, name string, write writeTo, o fileIO) (int64, error) {
	return writeFile(root, name, write, false, o)
}

// replaceFile writes name in root like createFile but replaces an existing
// file atomically (rename over it): a reader sees the old file or the new
// one. Only the rolling checkpoint and side files are written this way.
func replaceFile(root *os.Root, name string, write writeTo, o fileIO) (int64, error) {
	return writeFile(root, name, write, true, o)
}

func writeFile(root *os.Root, name string, write writeTo, replace bool, o fileIO) (n int64, err error) {
	if err := o.at("create", name); err != nil {
		return 0, fmt.Errorf("create temporary file: %w", err)
	}
	// renameio names the temporary file "." + the base of the path it is
	// given + random digits: given name+tempMarker, that is tempPrefix(name)
	// and digits. The path is used for nothing else: the file is published
	// below, not by renameio.
	pf, err := renameio.NewPendingFile(name+tempMarker, renameio.WithRoot(root), renameio.WithPermissions(filePerm))
	if err != nil {
		return 0, fmt.Errorf("create temporary file: %w", err)
	}
	published := false
	defer func() {
		if !published {
			// Closes the file if still open and removes the temporary
			// name; a close error after a failure adds nothing.
			if cerr := pf.Cleanup(); cerr != nil && !errors.Is(cerr, os.ErrClosed) {
				err = errors.Join(err, fmt.Errorf("remove temporary file: %w", cerr))
			}
		}
	}()
	// The writer buffers what needs buffering (a compressor's output); a
	// plain state goes to the file in one write, without a copy.
	cw := &countingWriter{w: pf}
	if err := o.at("write", name); err != nil {
		return 0, fmt.Errorf("write temporary file: %w", err)
	}
	if err := write(cw); err != nil {
		return 0, fmt.Errorf("write temporary file: %w", err)
	}
	if !o.noSync {
		if err := o.at("sync", name); err != nil {
			return 0, fmt.Errorf("sync temporary file: %w", err)
		}
		if err := pf.Sync(); err != nil {
			return 0, fmt.Errorf("sync temporary file: %w", err)
		}
	}
	if err := o.at("close", name); err != nil {
		return 0, fmt.Errorf("close temporary file: %w", err)
	}
	if err := pf.File.Close(); err != nil {
		return 0, fmt.Errorf("close temporary file: %w", err)
	}
	if err := o.at("publish", name); err != nil {
		return 0, fmt.Errorf("publish: %w", err)
	}
	tmp := filepath.Base(pf.Name())
	if replace {
		// Rename over name: a reader sees the old file or the new one.
		if err := root.Rename(tmp, name); err != nil {
			return 0, fmt.Errorf("publish: %w", err)
		}
		published = true
	} else {
		if err := root.Link(tmp, name); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return 0, ErrExists
			}
			return 0, fmt.Errorf("publish: %w", err)
		}
		published = true
		// The checkpoint is whole under its name. Should the temporary
		// name fail to go, the next Open removes it; failing the save
		// here would report a checkpoint that exists as not saved.
		_ = root.Remove(tmp)
	}
	if o.noSync {
		return cw.n, nil
	}
	err = o.at("dirsync", name)
	if err == nil {
		err = syncDir(root)
	}
	if err != nil {
		// The save failed, so it must not look done: a new name whose
		// directory entry may not be durable is taken back. A replaced
		// file cannot be restored; the failure is reported either way.
		if !replace {
			if rerr := root.Remove(name); rerr != nil {
				err = errors.Join(err, fmt.Errorf("take back %s: %w", name, rerr))
			}
		}
		return 0, fmt.Errorf("sync directory: %w", err)
	}
	return cw.n, nil
}

// syncDir fsyncs the directory of root, making entries created, renamed or
// removed in it durable. renameio does not do this; without it a power cut
// can lose a published name.
func syncDir(root *os.Root) error {
	d, err := root.Open(".")
	if err != nil {
		return fmt.Errorf("open directory for sync: %w", err)
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return fmt.Errorf("sync directory: %w", err)
	}
	return d.Close()
}

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

func syncPath(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return d.Close()
}

// removeNames removes names from root, in order, and then syncs the
// directory once (unless o.noSync). A name that is already gone is not an
// error, and a removal that fails does not stop the others. It returns
// whether each name is gone.
func removeNames(root *os.Root, o fileIO, names []string) (gone []bool, err error) {
	var errs []error
	gone = make([]bool, len(names))
	for i, name := range names {
		err := o.at("remove", name)
		if err == nil {
			err = root.Remove(name)
		}
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
// returns their names. Only regular files whose names l.isTemp recognises
// are touched.
func removeStaleTemps(root *os.Root, l layout, o fileIO) ([]string, error) {
	names, err := readNames(root)
	if err != nil {
		return nil, err
	}
	var stale []string
	for _, name := range names {
		if !l.isTemp(name) {
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

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
