package checkpoint

import (
	"math/rand/v2"
	"strconv"

	"github.com/gocheckpoint/checkpoint/dirstore"
)

// What the tests know of the directory's names (package dirstore): its
// lock file, the marker of its temporary files, and the size of its write
// buffer on Linux, around which the kill tests pick checkpoint sizes.
const (
	lockName     = dirstore.LockName
	tempMarker   = ".ckpt-tmp-"
	fdTempBuffer = 64 << 10
)

// tempPrefix is the name of final's temporary files less their random
// digits, as the directory names them.
func tempPrefix(final string) string { return "." + final + tempMarker }

// tempName is a temporary name for final, as the directory names one.
func tempName(final string) string {
	return tempPrefix(final) + strconv.FormatInt(rand.Int64(), 10)
}

// openDirWith opens dir as Open does, with the ReadOnly and NoSync among
// opts.
func openDirWith(dir string, opts ...Option) (Backend, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	return openDir(dir, cfg)
}
