package dirstore

import (
	"bufio"
	"context"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/gocheckpoint/checkpoint/storage"
)

// lockHolder returns the process that holds the flock on the file name in
// root, or 0 if it cannot tell. Linux lists every lock in /proc/locks with
// its process and the file's device and inode: one small read, done only
// after a lock was refused, so that ErrLocked can name who holds it.
func lockHolder(root *os.Root, name string) int {
	_, pid, _ := flockHolder(root, name)
	return pid
}

// LockState says whether a writer holds the lock of the directory, without
// taking it: from /proc/locks (see lockHolder and storage.LockProber).
func (d *dirBackend) LockState(ctx context.Context) (storage.LockState, int) {
	if ctx.Err() != nil {
		return storage.LockUnknown, 0
	}
	root, err := d.existing()
	if root == nil || err != nil {
		return storage.LockUnknown, 0
	}
	held, pid, known := flockHolder(root, LockName)
	switch {
	case !known:
		return storage.LockUnknown, 0
	case held:
		return storage.LockHeld, pid
	}
	// Not listed proves nothing: see LockNotSeen.
	return storage.LockNotSeen, 0
}

// flockHolder reports whether /proc/locks lists an exclusive flock on the
// file name in root, by which process (0 if its line names none), and
// whether it could read that at all. A file that does not exist is not
// locked: a writer creates it before locking it. Not listed is not proof
// of not held: the kernel leaves out the locks of processes outside the
// PID namespace of /proc, and a network file system's locks of other
// hosts are not there.
func flockHolder(root *os.Root, name string) (held bool, pid int, known bool) {
	fi, err := root.Stat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return false, 0, true
	}
	if err != nil {
		return false, 0, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false, 0, false
	}
	dev := uint64(st.Dev)
	major := (dev>>8)&0xfff | (dev>>32)&^0xfff
	minor := dev&0xff | (dev>>12)&^0xff
	want := strconv.FormatUint(major, 16) + ":" + strconv.FormatUint(minor, 16) + ":" + strconv.FormatUint(st.Ino, 10)
	f, err := os.Open("/proc/locks")
	if err != nil {
		return false, 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// 1: FLOCK  ADVISORY  WRITE 4242 fd:01:1048601 0 EOF
		// (a waiter's line has "->" after the number: it holds nothing)
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[1] != "FLOCK" || fields[3] != "WRITE" {
			continue
		}
		if !sameDevIno(fields[5], want) {
			continue
		}
		pid, err := strconv.Atoi(fields[4])
		if err != nil || pid < 0 {
			pid = 0
		}
		return true, pid, true
	}
	if sc.Err() != nil {
		return false, 0, false
	}
	return false, 0, true
}

// sameDevIno compares two "major:minor:inode" fields, major and minor in
// hex, ignoring the zero padding the kernel gives them.
func sameDevIno(a, b string) bool {
	pa, pb := strings.Split(a, ":"), strings.Split(b, ":")
	if len(pa) != 3 || len(pb) != 3 {
		return false
	}
	for i := range 2 {
		x, err1 := strconv.ParseUint(pa[i], 16, 64)
		y, err2 := strconv.ParseUint(pb[i], 16, 64)
		if err1 != nil || err2 != nil || x != y {
			return false
		}
	}
	return pa[2] == pb[2]
}
