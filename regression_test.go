package checkpoint

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// These tests each prove a failure found in review.

func TestLoadOfCheckpointWithHugeHeader(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	// An error message longer than List reads of a header: the library
	// truncates what it writes (see ErrorRecord.bounded), so this file
	// comes from elsewhere.
	rec := &ErrorRecord{Message: strings.Repeat("x", 2<<20), Step: 3, Time: time.Now()}
	file := envelopeBytes(header{Format: 1, Step: 3, Kind: KindError, Time: time.Now(), Error: rec}, []byte("3"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "step_00000003.error.json"), file, 0o644))

	r := openStore[int](t, dir, ReadOnly())
	list, err := r.List(ctx)
	require.NoError(t, err)
	require.Zero(t, list[0].Format, "the header was too large to list")
	v, _, err := r.Load(ctx, 3)
	require.NoError(t, err)
	require.Equal(t, 3, v)
	v, info, err := r.LoadInfo(ctx, list[0])
	require.NoError(t, err)
	require.Equal(t, 3, v)
	require.Equal(t, 1, info.Format)
}

func TestDamagedHeaderTimeDoesNotLeakIntoSaveTimes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, when := range map[string]string{
		"unencodable year": "9999-12-31T23:59:59.999999999Z",
		"flipped year bit": "6026-11-21T10:00:00Z",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			bad := `{"format":1,"step":5,"kind":"step","time":"` + when + `","state":1,"checksum":"sha256:` + strings.Repeat("0", 64) + "\"}\n"
			require.NoError(t, os.WriteFile(filepath.Join(dir, "step_00000005.json"), []byte(bad), 0o644))
			s := openStore[int](t, dir)
			_, err := s.Save(ctx, 4, 4)
			require.NoError(t, err)
			_, err = s.List(ctx)
			require.NoError(t, err)
			_, info, err := s.Latest(ctx) // skips the damaged step 5
			require.NoError(t, err)
			require.Equal(t, int64(4), info.Step)
			saved, err := s.Save(ctx, 5, 5) // the replayed step
			require.NoError(t, err)
			require.Less(t, saved.Time.Year(), 3000)
		})
	}
}

func TestObservedTimesBeyondEncodingAreIgnored(t *testing.T) {
	t.Parallel()
	s := openStore[int](t, t.TempDir())
	s.observe(timeMax)
	_, err := s.Save(context.Background(), 1, 1)
	require.NoError(t, err, "a verified file from a clock gone mad must not stop all saves")
}

// TestTransientHeaderErrorIsNotCached needs file permissions to bite, so as
// root it runs itself again as the user nobody.
func TestTransientHeaderErrorIsNotCached(t *testing.T) {
	t.Parallel()
	if os.Geteuid() == 0 {
		rerunAsNobody(t)
		return
	}
	ctx := context.Background()
	dir := t.TempDir()
	w := openStore[int](t, dir, Every(5), WithRolling())
	for step := int64(0); step <= 7; step++ {
		_, _, err := w.Tick(ctx, step, int(step))
		require.NoError(t, err)
	}
	r := openStore[int](t, dir, ReadOnly())
	rolling := filepath.Join(dir, "step_last.json")
	require.NoError(t, os.Chmod(rolling, 0))
	_, err := r.List(ctx)
	require.NoError(t, err)
	require.NoError(t, os.Chmod(rolling, 0o644)) // the trouble has passed
	v, _, err := r.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 7, v)
	v, _, err = r.Load(ctx, 7)
	require.NoError(t, err)
	require.Equal(t, 7, v)
}

// rerunAsNobody runs the calling test in a copy of the test binary as uid
// and gid 65534, and fails if it does not pass there.
func rerunAsNobody(t *testing.T) {
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

	cmd := exec.Command(bin, "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "HOME="+tmp, "GOCOVERDIR=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "as nobody:\n%s", out)
	require.Contains(t, string(out), "--- PASS: "+t.Name(), "as nobody:\n%s", out)
}
