package checkpoint

import (
	"bufio"
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

// writeTo streams a file's contents.
type writeTo func(w io.Writer) error

// createFile writes a new file called name in root, atomically and durably,
// and never replaces an existing file: if name exists it returns an error
// wrapping ErrExists and leaves that file untouched. It returns the number of
// bytes written.
//
// The bytes go to a temporary file in the same directory (renameio names it
// "." + name + random digits), are flushed and fsynced, and the file is
// closed; only then is it hard-linked to name, which fails instead of
// replacing, and the temporary name removed. Last the directory is fsynced, so
// that both the new name and the removal survive a power cut. A crash at any
// instant leaves no file called name or a complete one; a leftover temporary
// file is removed by the next writer's Open.
func createFile(root *os.Root, name string, write writeTo) (int64, error) {
	return writeFile(root, name, write, false)
}

// replaceFile writes name in root like createFile but replaces an existing
// file atomically (rename over it): a reader sees the old file or the new
// one. Only the rolling checkpoint and side files are written this way.
func replaceFile(root *os.Root, name string, write writeTo) (int64, error) {
	return writeFile(root, name, write, true)
}

func writeFile(root *os.Root, name string, write writeTo, replace bool) (n int64, err error) {
	pf, err := renameio.NewPendingFile(name, renameio.WithRoot(root), renameio.WithPermissions(filePerm))
	if err != nil {
		return 0, fmt.Errorf("create temporary file: %w", err)
	}
	defer func() {
		// A no-op once published; otherwise the temporary file goes.
		if cerr := cleanup(pf); cerr != nil && err == nil {
			err = fmt.Errorf("remove temporary file: %w", cerr)
		}
	}()
	cw := &countingWriter{w: pf}
	bw := bufio.NewWriterSize(cw, 64<<10)
	if err := write(bw); err != nil {
		return 0, err
	}
	if err := bw.Flush(); err != nil {
		return 0, fmt.Errorf("write temporary file: %w", err)
	}
	publish := publishLink
	if replace {
		publish = publishRename
	}
	if err := publish(root, pf, name); err != nil {
		return 0, err
	}
	if err := syncDir(root); err != nil {
		// The save failed, so it must not look done: a new name whose
		// directory entry may not be durable is taken back. A replaced
		// file cannot be restored; its caller reports the failure.
		if !replace {
			root.Remove(name)
		}
		return 0, err
	}
	return cw.n, nil
}

// publishLink syncs and closes the temporary file, then links it to name.
func publishLink(root *os.Root, pf *renameio.PendingFile, name string) error {
	if err := pf.Sync(); err != nil {
		return fmt.Errorf("sync temporary file: %w", err)
	}
	if err := pf.File.Close(); err != nil {
		return fmt.Errorf("close temporary file: %w", err)
	}
	if err := root.Link(filepath.Base(pf.Name()), name); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return ErrExists
		}
		return fmt.Errorf("publish: %w", err)
	}
	// The checkpoint is complete under its name; the temporary link is
	// removed by cleanup, and the directory sync makes both durable.
	return nil
}

// publishRename syncs, closes and renames the temporary file over name.
func publishRename(_ *os.Root, pf *renameio.PendingFile, _ string) error {
	if err := pf.CloseAtomicallyReplace(); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	return nil
}

// cleanup removes pf's temporary file unless it was renamed into place.
func cleanup(pf *renameio.PendingFile) error {
	err := pf.Cleanup()
	if errors.Is(err, os.ErrClosed) {
		// publishLink closed the file itself; the removal succeeded.
		return nil
	}
	return err
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

// removeFiles removes names from root and then syncs the directory once.
// A name that is already gone is not an error.
func removeFiles(root *os.Root, names ...string) error {
	var errs []error
	for _, name := range names {
		if err := root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := syncDir(root); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// removeStaleTemps removes the temporary files a crashed save left behind and
// returns their names. Only names that isTemp recognises are touched.
func removeStaleTemps(root *os.Root) ([]string, error) {
	entries, err := readDir(root)
	if err != nil {
		return nil, err
	}
	var stale []string
	for _, e := range entries {
		if e.Type().IsRegular() && isTemp(e.Name()) {
			stale = append(stale, e.Name())
		}
	}
	if len(stale) == 0 {
		return nil, nil
	}
	return stale, removeFiles(root, stale...)
}

func readDir(root *os.Root) ([]fs.DirEntry, error) {
	d, err := root.Open(".")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.ReadDir(-1)
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
