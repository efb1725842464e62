package platformtest

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// RerunAsNobody runs the calling test in a copy of the test binary as uid
// and gid 65534 (file modes do not restrict root), and fails if it does not
// pass there. The caller returns after it when running as root.
func RerunAsNobody(t *testing.T) {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	// t.TempDir's parent is private to its creator: open the path to nobody.
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
	require.NoError(t, os.Chmod(dir, 0o777))
	bin := filepath.Join(dir, "test.bin")
	src, err := os.Open(exe)
	require.NoError(t, err)
	defer src.Close()
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, err)
	require.NoError(t, dst.Close())
	tmp := filepath.Join(dir, "tmp")
	require.NoError(t, os.Mkdir(tmp, 0o777))
	require.NoError(t, os.Chmod(tmp, 0o777))

	var out []byte
	for attempt := 1; ; attempt++ {
		cmd := exec.Command(bin, "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
		cmd.Dir = tmp
		cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "HOME="+tmp, "GOCOVERDIR=")
		RunAs(t, cmd, 65534, 65534)
		out, err = cmd.CombinedOutput()
		// A process that another test forked while the copy was open for
		// writing holds it open until it execs: exec fails with "text
		// file busy" meanwhile (golang.org/issue/22315).
		if err == nil || !strings.Contains(err.Error(), "text file busy") || attempt == 50 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, err, "as nobody:\n%s", out)
	require.Contains(t, string(out), "--- PASS: "+t.Name(), "as nobody:\n%s", out)
}
