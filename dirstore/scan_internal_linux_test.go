//go:build linux

package dirstore

import (
	"encoding/binary"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// dirent returns a linux_dirent64 record of name, padded to 8 bytes.
func dirent(ino uint64, name string) []byte {
	n := (direntName + len(name) + 1 + 7) &^ 7
	rec := make([]byte, n)
	binary.NativeEndian.PutUint64(rec, ino)
	binary.NativeEndian.PutUint16(rec[16:], uint16(n))
	copy(rec[direntName:], name)
	return rec
}

func TestEachDirentPassesNamesAndRefusesATornRecord(t *testing.T) {
	t.Parallel()
	var buf []byte
	for _, r := range []struct {
		ino  uint64
		name string
	}{{1, "."}, {1, ".."}, {2, "step_00000001.json"}, {0, "removed"}, {3, "a"}, {4, "exactly-sixteen!"}} {
		buf = append(buf, dirent(r.ino, r.name)...)
	}
	var got []string
	require.NoError(t, eachDirent(buf, func(name []byte) { got = append(got, string(name)) }))
	require.Equal(t, []string{"step_00000001.json", "a", "exactly-sixteen!"}, got)

	rec := dirent(2, "name")
	for _, torn := range [][]byte{rec[:10], rec[:len(rec)-1]} {
		require.ErrorIs(t, eachDirent(torn, func([]byte) {}), syscall.EINVAL)
	}
	short := dirent(2, "name")
	binary.NativeEndian.PutUint16(short[16:], 4)
	require.ErrorIs(t, eachDirent(short, func([]byte) {}), syscall.EINVAL)
}
