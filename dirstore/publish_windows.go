//go:build windows

package dirstore

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// inUseWait bounds how long a rename or removal is retried while another
// program holds the file without delete sharing (a virus scanner, a search
// indexer, a backup tool, a reader that is not this library). Such holds
// last milliseconds; the Go toolchain's own robust rename waits up to 2s for
// the same reason. A save waits at most this long before it fails clearly.
const inUseWait = time.Second

// createTemp creates a new temporary file for name in root: tempName(name),
// created exclusively (it never opens a file that exists), with filePerm.
// It returns the open file and its name in root. renameio does not write
// files on Windows.
func createTemp(root *os.Root, name string) (*os.File, string, error) {
	var err error
	// The digits are random; a name that exists (a stale temporary file
	// with the same digits) is only ever skipped, never opened.
	for range 8 {
		tmp := tempName(name)
		var f *os.File
		f, err = root.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, filePerm)
		if err == nil {
			return f, tmp, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, "", err
		}
	}
	return nil, "", err
}

// publishNew gives the complete temporary file tmp the name name without
// ever replacing a file called name: that is fs.ErrExist. It makes a hard
// link where the volume has them (NTFS) and then tmp stays (moved is
// false) for the caller to remove. Where the volume has no hard links (FAT32
// and exFAT, such as SD cards and USB drives, and some network shares) it
// moves tmp to name with a rename that fails if name exists (moved is true).
func publishNew(root *os.Root, tmp, name string) (moved bool, err error) {
	err = retryInUse(func() error { return root.Link(tmp, name) })
	if err == nil || !noHardLinks(err) {
		return false, err
	}
	return true, retryInUse(func() error { return moveNoReplace(root, tmp, name) })
}

// noHardLinks reports whether err says the volume cannot make hard links.
func noHardLinks(err error) bool {
	return errors.Is(err, windows.ERROR_INVALID_FUNCTION) ||
		errors.Is(err, windows.ERROR_NOT_SUPPORTED) ||
		errors.Is(err, errors.ErrUnsupported)
}

// renameFile renames old to new in root, replacing new atomically, and
// retries for a short while if another program holds either file without
// delete sharing (see retryInUse).
func renameFile(root *os.Root, old, new string) error {
	return retryInUse(func() error { return root.Rename(old, new) })
}

// removeFile removes name from root, retrying for a short while if another
// program holds it without delete sharing (see retryInUse).
func removeFile(root *os.Root, name string) error {
	return retryInUse(func() error { return root.Remove(name) })
}

// moveNoReplace renames old to new in root's directory and fails with an
// error wrapping fs.ErrExist, changing nothing, if new exists. os.Root.Rename
// always replaces.
func moveNoReplace(root *os.Root, old, new string) error {
	p, err := windows.UTF16FromString(new)
	if err != nil {
		return &os.LinkError{Op: "rename", Old: old, New: new, Err: err}
	}
	var info fileRenameInformation
	if len(p) > len(info.FileName) {
		return &os.LinkError{Op: "rename", Old: old, New: new, Err: syscall.ENAMETOOLONG}
	}
	copy(info.FileName[:], p)
	info.FileNameLength = uint32((len(p) - 1) * 2)
	err = withHandleAt(root, old, windows.DELETE, windows.FILE_SYNCHRONOUS_IO_NONALERT, func(h, dir windows.Handle) error {
		info.ReplaceIfExists = 0
		info.RootDirectory = dir
		var iosb windows.IO_STATUS_BLOCK
		return windows.NtSetInformationFile(h, &iosb, (*byte)(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info)), windows.FileRenameInformation)
	})
	if err != nil {
		return &os.LinkError{Op: "rename", Old: old, New: new, Err: err}
	}
	return nil
}

// withHandleAt opens name, a plain name in root's directory, with access
// (and SYNCHRONIZE), full sharing and the extra open options, without
// following a link at name, and calls f with the file's handle and the
// directory's. Opening relative to the directory's handle keeps the
// operation inside root, as os.Root's own operations are. NT status errors
// come back as the Win32 errors the os package reports, so errors.Is with
// fs.ErrNotExist and fs.ErrExist works.
func withHandleAt(root *os.Root, name string, access, options uint32, f func(h, dir windows.Handle) error) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `\/:`) {
		return syscall.EINVAL
	}
	d, err := root.Open(".")
	if err != nil {
		return err
	}
	defer d.Close()
	dir := windows.Handle(d.Fd())
	objName, err := windows.NewNTUnicodeString(name)
	if err != nil {
		return err
	}
	attrs := windows.OBJECT_ATTRIBUTES{
		RootDirectory: dir,
		ObjectName:    objName,
		Attributes:    windows.OBJ_CASE_INSENSITIVE,
	}
	attrs.Length = uint32(unsafe.Sizeof(attrs))
	var h windows.Handle
	var iosb windows.IO_STATUS_BLOCK
	err = windows.NtCreateFile(&h, access|windows.SYNCHRONIZE, &attrs, &iosb, nil, 0,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE,
		windows.FILE_OPEN, windows.FILE_OPEN_REPARSE_POINT|windows.FILE_OPEN_FOR_BACKUP_INTENT|options, 0, 0)
	if err != nil {
		return win32Error(err)
	}
	defer windows.CloseHandle(h)
	return win32Error(f(h, dir))
}

// win32Error turns an NT status into the Win32 error it stands for.
func win32Error(err error) error {
	var st windows.NTStatus
	if errors.As(err, &st) {
		return st.Errno()
	}
	return err
}

// fileRenameInformation is FILE_RENAME_INFORMATION with room for a name
// of up to MAX_PATH characters; NtSetInformationFile reads FileNameLength
// bytes of it.
type fileRenameInformation struct {
	ReplaceIfExists uint32 // a BOOLEAN, padded as the C struct is
	RootDirectory   windows.Handle
	FileNameLength  uint32
	FileName        [windows.MAX_PATH]uint16
}

// retryInUse runs op, and runs it again for up to inUseWait while it fails
// because another program holds the file (see inUse). Windows refuses to
// rename or remove a file that another process opened without delete
// sharing; this library's readers share delete (see openForRead), others
// may not, and their hold is usually brief. After the wait the error says
// so and wraps op's error.
func retryInUse(op func() error) error {
	return retryInUseFor(inUseWait, op)
}

func retryInUseFor(limit time.Duration, op func() error) error {
	start := time.Now()
	pause := time.Millisecond
	for {
		err := op()
		if err == nil || !inUse(err) {
			return err
		}
		left := limit - time.Since(start)
		if left <= 0 {
			return fmt.Errorf("still in use by another program after retrying for %v: %w", limit, err)
		}
		// Random jitter keeps two retrying writers from meeting in step.
		time.Sleep(min(left, pause+rand.N(pause)))
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// inUse reports whether err is the error Windows gives for a file that
// another process holds: a sharing or lock violation, or access denied,
// which is also what a name whose deletion is still pending gives.
func inUse(err error) bool {
	return errors.Is(err, windows.ERROR_SHARING_VIOLATION) ||
		errors.Is(err, windows.ERROR_LOCK_VIOLATION) ||
		errors.Is(err, windows.ERROR_ACCESS_DENIED)
}

// syncDir does nothing: Windows has no directory fsync (a directory cannot
// be opened for the write access FlushFileBuffers needs). NTFS journals its
// metadata, so a published name is not torn by a crash, but a power cut
// soon after a save may lose the newest name: the save is then lost whole,
// never half-written (see the README's Platforms section).
func syncDir(*os.Root) error { return nil }

// syncPath does nothing, for the same reason as syncDir.
func syncPath(string) error { return nil }
