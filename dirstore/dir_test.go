package dirstore

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// pathPrefix(dir) followed by a name is the path filepath.Join makes of
// them, whatever the form of dir (a trailing separator, ".", the root, a
// path to clean).
func TestPathPrefixJoinsLikeFilepath(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{"runs/001", "runs/001/", "./runs", ".", "/", "/tmp/x/../y", "a"} {
		require.Equal(t, filepath.Join(dir, "step_00000001.json"), pathPrefix(dir)+"step_00000001.json", dir)
	}
}
