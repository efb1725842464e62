package checkpoint

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// lockHolder returns the process that holds the flock on the file name in
// root, or 0 if it cannot tell. Linux lists every lock in /proc/locks with
// its process and the file's device and inode: one small read, done only
// after a lock was refused, so that ErrLocked can name who holds it.
func lockHolder(root *os.Root, name string) int {
	fi, err := root.Stat(name)
	if err != nil {
		return 0
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0
	}
	dev := uint64(st.Dev)
	major := (dev>>8)&0xfff | (dev>>32)&^0xfff
	minor := dev&0xff | (dev>>12)&^0xff
	want := strconv.FormatUint(major, 16) + ":" + strconv.FormatUint(minor, 16) + ":" + strconv.FormatUint(st.Ino, 10)
	f, err := os.Open("/proc/locks")
	if err != nil {
		return 0
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
		if pid, err := strconv.Atoi(fields[4]); err == nil && pid > 0 {
			return pid
		}
	}
	return 0
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
