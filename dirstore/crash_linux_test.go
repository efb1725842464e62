package dirstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/internal/format"
	"github.com/gocheckpoint/checkpoint/internal/killtest"
	"github.com/gocheckpoint/checkpoint/internal/testkit"
)

// Kill -9 at random instants of saves made through the
// descriptor-based writer (fdOps), with states on both sides of its 64 KiB
// buffer, in each compression, with KeepLast, the rolling file and a side
// file; and the same with renameat2 refused by a seccomp filter, so that
// every publish takes the linkat fallback.

// noRenameat2Env makes a child refuse renameat2 with this errno
// ("ENOSYS" or "EINVAL"), as FUSE, NFS or 9p do for RENAME_NOREPLACE.
const noRenameat2Env = "CHECKPOINT_TEST_NO_RENAMEAT2"

// noRenameat2 installs a seccomp filter on every thread of the process that
// fails renameat2 with errno.
func noRenameat2(errno unix.Errno) error {
	const archX8664 = 0xc000003e
	if unix.SYS_RENAMEAT2 != 316 {
		return errors.New("only amd64")
	}
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 4}, // arch
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: archX8664, Jt: 0, Jf: 3},
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // nr
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: unix.SYS_RENAMEAT2, Jt: 0, Jf: 1},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | uint32(errno)},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		return e
	}
	return nil
}

func errnoNamed(name string) unix.Errno {
	switch name {
	case "EINVAL":
		return unix.EINVAL
	case "EPERM":
		return unix.EPERM
	}
	return unix.ENOSYS
}

// maybeNoRenameat2 applies noRenameat2Env to this process, if set.
func maybeNoRenameat2() error {
	if v := os.Getenv(noRenameat2Env); v != "" {
		return noRenameat2(errnoNamed(v))
	}
	return nil
}

// killState's size is chosen per step: tiny, just under, at and just over
// the writer's 64 KiB buffer, and several times it.
type killState struct {
	Step int64  `json:"step"`
	Pad  string `json:"pad"`
}

func killStateOf(step int64) killState {
	sizes := []int{10, dirstore.FdTempBuffer - 200, dirstore.FdTempBuffer - 60, dirstore.FdTempBuffer + 1, 3 * dirstore.FdTempBuffer, 700 << 10}
	n := sizes[int(step)%len(sizes)]
	return killState{Step: step, Pad: testkit.RandomText(step, n)}
}

func killOptions(comp string) []checkpoint.Option {
	opts := []checkpoint.Option{checkpoint.WithLayout("k", 6), checkpoint.SaveEvery(2), checkpoint.WithRolling(), checkpoint.KeepLast(3)}
	switch comp {
	case "gzip":
		opts = append(opts, checkpoint.Gzip())
	case "zstd":
		opts = append(opts, checkpoint.Zstd())
	}
	return opts
}

// bufferSaverRole saves in the directory Args[0], compressed as Args[1],
// acknowledging each step returned without error; Args[2], if not empty,
// is the errno ("ENOSYS", "EINVAL") with which it refuses renameat2.
var bufferSaverRole = killtest.Register("buffer-saver", func(c *killtest.Child) int {
	dir, comp, noRename2, fail := c.Args[0], c.Args[1], c.Args[2], c.Fail
	if noRename2 != "" {
		if err := noRenameat2(errnoNamed(noRename2)); err != nil {
			fail(9, err)
		}
	}
	ctx := context.Background()
	s, err := checkpoint.Open[killState](dir, killOptions(comp)...)
	if err != nil {
		fail(2, err)
	}
	next := resumeStep(ctx, s, fail)
	for ; ; next++ {
		if _, _, err := s.Tick(ctx, next, killStateOf(next)); err != nil {
			fail(4, err)
		}
		if next%3 == 0 {
			if err := s.WriteJSON(ctx, "side.json", killStateOf(next)); err != nil {
				fail(6, err)
			}
		}
		c.Ack(next)
	}
})

// TestKill9DuringSavesAroundTheWriteBufferLosesNothing kills, at random
// instants, saves of states on both sides of the descriptor-based writer's
// 64 KiB buffer, in each compression, and proves after every kill that no
// checkpoint or side file is torn, that every listed checkpoint loads, that
// no temporary file outlives a reopen and that no acknowledged step is lost.
func TestKill9DuringSavesAroundTheWriteBufferLosesNothing(t *testing.T) {
	t.Parallel()
	killSavesAroundTheBuffer(t, "", 6)
}

// TestKill9DuringSavesWithoutRenameat2LosesNothing does the same with
// renameat2 refused (EINVAL, as a file system without RENAME_NOREPLACE
// answers): every publish of a numbered checkpoint is a linkat and an
// unlink.
func TestKill9DuringSavesWithoutRenameat2LosesNothing(t *testing.T) {
	t.Parallel()
	if err := probeSeccomp(t); err != nil {
		t.Skipf("cannot install a seccomp filter here: %v", err)
	}
	// ENOSYS and EPERM take the same path (EPERM:
	// TestSavesWorkWithRenameat2RefusedByEPERM).
	killSavesAroundTheBuffer(t, "EINVAL", 6)
}

// probeSeccomp checks in a throwaway child that the filter installs and
// renameat2 then fails.
func probeSeccomp(t *testing.T) error {
	seccompProbe.Do(func() { seccompProbe.err = runSeccompProbe(t) })
	return seccompProbe.err
}

// seccompProbe runs the probe once per test process.
var seccompProbe struct {
	sync.Once
	err error
}

func runSeccompProbe(t *testing.T) error {
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run=^TestSeccompProbeChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), noRenameat2Env+"=ENOSYS", "CHECKPOINT_TEST_SECCOMP_PROBE_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestSeccompProbeChild") {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}

// TestSeccompProbeChild is the probe's child: with the filter installed,
// renameat2 fails with ENOSYS.
func TestSeccompProbeChild(t *testing.T) {
	dir := os.Getenv("CHECKPOINT_TEST_SECCOMP_PROBE_DIR")
	if dir == "" {
		t.Skip("a child")
	}
	require.NoError(t, maybeNoRenameat2())
	require.NoError(t, os.WriteFile(dir+"/a", nil, 0o644))
	err := unix.Renameat2(unix.AT_FDCWD, dir+"/a", unix.AT_FDCWD, dir+"/b", unix.RENAME_NOREPLACE)
	require.ErrorIs(t, err, unix.ENOSYS)
}

// killSavesAroundTheBuffer kills bufferSaverRole kills times at random
// instants, a third of them in each compression, renameat2 refused with
// the errno noRename2 names (none if empty), and checks the directory
// after each kill.
func killSavesAroundTheBuffer(t *testing.T, noRename2 string, kills int) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	kills = killtest.Kills(t, kills)
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 99))
	ctx := context.Background()
	for _, comp := range []string{"plain", "gzip", "zstd"} {
		dir := t.TempDir()
		lastAck := int64(0)
		midWrite := 0
		for kill := 0; kill < kills/3; kill++ {
			p := bufferSaverRole.Start(t, dir, comp, noRename2)
			want := 1 + rng.IntN(12)
			for _, step := range p.AwaitAcks(t, want) {
				n, err := strconv.ParseInt(step, 10, 64)
				require.NoError(t, err)
				lastAck = max(lastAck, n)
			}
			p.Kill(t)
			for _, step := range p.Acks()[want:] {
				n, _ := strconv.ParseInt(step, 10, 64)
				lastAck = max(lastAck, n)
			}
			require.Empty(t, p.Stderr(), "%s kill %d: the child failed before it was killed", comp, kill)
			require.Positive(t, lastAck, "%s kill %d: the child acknowledged nothing", comp, kill)

			for _, name := range dirNames(t, dir) {
				if strings.Contains(name, tempMarker) {
					midWrite++
					break
				}
			}
			s, err := checkpoint.Open[killState](dir, killOptions(comp)...)
			require.NoError(t, err, "%s kill %d", comp, kill)
			for _, name := range dirNames(t, dir) {
				require.False(t, strings.Contains(name, tempMarker), "%s kill %d: temporary file %s survived a reopen", comp, kill, name)
			}
			// Every name with a checkpoint's shape is whole.
			for _, name := range dirNames(t, dir) {
				if !strings.HasPrefix(name, "k_") { // the layout's
					continue
				}
				f, err := os.Open(dir + "/" + name)
				require.NoError(t, err)
				var step int64
				err = format.NewCodec(format.CompressNone, checkpoint.DefaultMaxReadSize).Read(f, -1, func(h format.Header, _ []byte) error {
					step = h.Step
					return nil
				})
				f.Close()
				require.NoError(t, err, "%s kill %d: %s is torn", comp, kill, name)
				require.NotZero(t, step)
			}
			list, err := s.List(ctx)
			require.NoError(t, err)
			for _, info := range list {
				got, _, err := s.LoadExact(ctx, info)
				require.NoError(t, err, "%s kill %d: listed %s does not load", comp, kill, info.Location)
				require.Equal(t, killStateOf(info.Step), got)
			}
			got, info, err := s.Latest(ctx)
			require.NoError(t, err)
			require.GreaterOrEqual(t, info.Step, lastAck, "%s kill %d: acknowledged step lost", comp, kill)
			require.Equal(t, killStateOf(info.Step), got)
			var side killState
			if err := s.ReadJSON(ctx, "side.json", &side); !errors.Is(err, checkpoint.ErrNotFound) {
				require.NoError(t, err, "%s kill %d: side file", comp, kill)
				require.Equal(t, killStateOf(side.Step), side)
			}
			require.NoError(t, s.Close())
		}
		t.Logf("%s rename2=%q: %d kills, %d mid-write, last ack %d", comp, noRename2, kills/3, midWrite, lastAck)
	}
}

// Saves (numbered, rolling, a side file, a taken step) work where a
// sandbox's seccomp policy refuses renameat2 with EPERM (the default
// action of older Docker, Podman and systemd SystemCallFilter= profiles):
// each publish of a numbered checkpoint falls back to link(2).
func TestSavesWorkWithRenameat2RefusedByEPERM(t *testing.T) {
	t.Parallel()
	if err := probeSeccomp(t); err != nil {
		t.Skipf("cannot install a seccomp filter here: %v", err)
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	for _, errno := range []string{"EPERM"} { // EINVAL and ENOSYS: TestKill9DuringSavesWithoutRenameat2LosesNothing
		cmd := exec.Command(exe, "-test.run=^TestSavesUnderARenameat2FilterChild$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), noRenameat2Env+"="+errno, "CHECKPOINT_TEST_RENAMEAT2_FILTER_DIR="+t.TempDir())
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "renameat2 refused with %s:\n%s", errno, out)
		require.Contains(t, string(out), "--- PASS: TestSavesUnderARenameat2FilterChild", "renameat2 refused with %s:\n%s", errno, out)
	}
}

// TestSavesUnderARenameat2FilterChild is the child of
// TestSavesWorkWithRenameat2RefusedByEPERM: saves (numbered, rolling, a
// side file, a taken step) with renameat2 refused.
func TestSavesUnderARenameat2FilterChild(t *testing.T) {
	dir := os.Getenv("CHECKPOINT_TEST_RENAMEAT2_FILTER_DIR")
	if dir == "" {
		t.Skip("a child of TestSavesWorkWithRenameat2RefusedByEPERM")
	}
	require.NoError(t, maybeNoRenameat2())
	ctx := context.Background()
	s, err := checkpoint.Open[int](dir, checkpoint.WithLayout("c", 3), checkpoint.WithRolling(), checkpoint.SaveEvery(2), checkpoint.KeepLast(2))
	require.NoError(t, err)
	for step := int64(1); step <= 6; step++ {
		_, _, err := s.Tick(ctx, step, int(step))
		require.NoError(t, err, "tick %d", step)
	}
	_, err = s.Save(ctx, 6, 66)
	require.ErrorIs(t, err, checkpoint.ErrExists)
	require.NoError(t, s.WriteJSON(ctx, "side.json", 1))
	got, info, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(6), info.Step)
	require.Equal(t, 6, got)
	for _, n := range dirNames(t, dir) {
		require.NotContains(t, n, tempMarker)
	}
	require.NoError(t, s.Close())
}

// resumeStep returns the step a killed child resumes at: the one after
// Latest's, or 1 in an empty store. Any other error of Latest fails it.
func resumeStep[T any](ctx context.Context, s *checkpoint.Store[T], fail func(code int, err error)) int64 {
	_, info, err := s.Latest(ctx)
	if errors.Is(err, checkpoint.ErrNotFound) {
		return 1
	}
	if err != nil {
		fail(3, err)
	}
	return info.Step + 1
}
