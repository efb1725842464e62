package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
)

// visibleFiles returns the names in dir that are not hidden (no lock, no
// index, no temporary file), and the bytes of each.
func visibleFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, n := range names(t, dir) {
		if strings.HasPrefix(n, ".") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, n))
		require.NoError(t, err)
		out[n] = data
	}
	return out
}

func TestCpCopiesAStoreByteForByteAndARerunFindsItThere(t *testing.T) {
	t.Parallel()
	src, dst := filepath.Join(t.TempDir(), "src"), filepath.Join(t.TempDir(), "a", "dst")
	saveSteps(t, src, 5, checkpoint.Gzip())

	r := runCLI(t, "cp", src, dst)
	require.Equal(t, 0, r.code, r.stderr)
	require.Empty(t, r.stderr, "no progress for five files, and no terminal")
	require.Regexp(t, `^copied 5 files \(\d+ B\) from \S+src to \S+dst, 0 already there; 0 skipped, 0 failed\n$`, r.stdout)
	require.Equal(t, visibleFiles(t, src), visibleFiles(t, dst))

	r = runCLI(t, "cp", src, dst, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var rep cpReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	require.Equal(t, cpReport{Src: src, Dst: dst, Layout: "step/8", OK: true, Present: 5, Skipped: []fileResult{}, Failed: []string{}}, rep)

	r = runCLI(t, "verify", dst)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
}

func TestCpSkipsDamagedCheckpointsAndExitsOne(t *testing.T) {
	t.Parallel()
	src, dst := filepath.Join(t.TempDir(), "src"), t.TempDir()
	saveSteps(t, src, 4)
	require.NoError(t, os.Truncate(filepath.Join(src, "step_00000002.json"), 30))

	r := runCLI(t, "cp", src, dst)
	require.Equal(t, exitFound, r.code, r.stderr)
	require.Regexp(t, `(?m)^SKIPPED \(damaged\)  \S+step_00000002\.json  corrupt checkpoint: `, r.stdout)
	require.Contains(t, r.stdout, "copied 3 files")
	require.Contains(t, r.stdout, "1 skipped, 0 failed")
	require.NoFileExists(t, filepath.Join(dst, "step_00000002.json"))

	r = runCLI(t, "cp", src, dst, "--json")
	require.Equal(t, exitFound, r.code, r.stderr)
	var rep cpReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	require.False(t, rep.OK)
	require.Equal(t, 3, rep.Present)
	require.Len(t, rep.Skipped, 1)
	require.Equal(t, fileResult{Path: filepath.Join(src, "step_00000002.json"), Kind: "checkpoint", Problem: "damaged", Error: rep.Skipped[0].Error}, rep.Skipped[0])
	require.NotContains(t, rep.Skipped[0].Error, src, "the path is apart")
}

func TestCpOfARootOfSessionsListsAsTheSource(t *testing.T) {
	t.Parallel()
	dst := filepath.Join(t.TempDir(), "campaign")
	r := runCLI(t, "cp", "testdata/campaign", dst)
	// Session 003 has no session.json: damaged, skipped.
	require.Equal(t, exitFound, r.code, r.stderr)
	require.Contains(t, r.stdout, "2 sessions whole; 1 skipped, 0 failed\n")
	require.Regexp(t, `(?m)^SKIPPED \(damaged\)  testdata/campaign/003  corrupt checkpoint: missing session.json$`, filepath.ToSlash(r.stdout))

	want := runCLI(t, "ls", "testdata/campaign")
	got := runCLI(t, "ls", dst)
	require.Equal(t, 0, got.code, got.stderr)
	wantLines := strings.Split(want.stdout, "\n")
	var kept []string
	for _, l := range wantLines {
		if !strings.HasPrefix(l, "003") {
			kept = append(kept, l)
		}
	}
	require.Equal(t, strings.Join(kept, "\n"), got.stdout)
	for _, id := range []string{"001", "002"} {
		require.Equal(t, visibleFiles(t, filepath.Join("testdata/campaign", id)), visibleFiles(t, filepath.Join(dst, id)))
	}
	require.NoDirExists(t, filepath.Join(dst, "003"))
}

func TestCpOfAnEncryptedStoreNeedsItsIdentity(t *testing.T) {
	t.Parallel()
	k := newKey(t)
	src := encryptedStore(t, k)

	dst := t.TempDir()
	r := runCLI(t, "cp", src, dst)
	require.Equal(t, exitFound, r.code, r.stderr)
	require.Contains(t, r.stdout, "SKIPPED (no_key)")
	require.Contains(t, r.stdout, "copied 0 files")
	require.Contains(t, r.stderr, "--identity")

	dst = t.TempDir()
	r = runCLI(t, "cp", "--identity", k.file, src, dst)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, visibleFiles(t, src), visibleFiles(t, dst))
	r = runCLI(t, "verify", "--identity", k.file, dst)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
}

func TestCpIntoAStoreAWriterHoldsExitsFour(t *testing.T) {
	t.Parallel()
	src, dst := filepath.Join(t.TempDir(), "src"), t.TempDir()
	saveSteps(t, src, 2)
	w, err := checkpoint.Open[map[string]int](dst)
	require.NoError(t, err)
	defer w.Close()
	r := runCLI(t, "cp", src, dst)
	require.Equal(t, exitLocked, r.code, r.stderr)
	require.Contains(t, r.stderr, "is open by a running writer")
}

func TestCpUsage(t *testing.T) {
	t.Parallel()
	src := filepath.Join(t.TempDir(), "src")
	saveSteps(t, src, 1)
	for _, args := range [][]string{{"cp", src}, {"cp", src, t.TempDir(), "x"}, {"cp", "-j", "0", src, t.TempDir()}, {"cp", src, "s3://b/p"}} {
		r := runCLI(t, args...)
		require.Equal(t, exitUsage, r.code, "%q: %s", args, r.stderr)
	}
	r := runCLI(t, "cp", t.TempDir(), t.TempDir())
	require.Equal(t, exitFailed, r.code)
	require.Contains(t, r.stderr, "nothing to copy")
}

// fakeClock is a meter's clock that a test moves on.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestProgressBarIsRedrawnInPlaceAtMostTenTimesASecondAndErased(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	m := &meter{w: &out, what: "checkpoint cp", unit: "files", tty: true, now: clock.now}
	draws := 0
	for i := 1; i <= 1000; i++ {
		clock.t = clock.t.Add(2 * time.Millisecond) // two seconds in all
		before := out.Len()
		m.set(i, 1000, int64(i)*1000)
		if out.Len() > before {
			draws++
		}
	}
	require.LessOrEqual(t, draws, 2*barRate+2, "at most ~10 redraws a second, and the last")
	require.GreaterOrEqual(t, draws, 2*barRate)
	s := out.String()
	require.NotContains(t, s, "\n", "a bar is redrawn in place")
	last := s[strings.LastIndex(s, "\r"):]
	require.Contains(t, last, "[========================] 1000/1000 files (100%), 976.6 KiB, 501 files/s")
	m.stop()
	m.set(5, 10, 0) // after stop: nothing
	tail := out.String()[len(s):]
	require.Equal(t, "\r"+strings.Repeat(" ", len(last))+"\r", tail, "the bar is erased")
}

func TestProgressLinesWithoutATerminalComeEachTenthOfALongRun(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	m := &meter{w: &out, what: "checkpoint cp", unit: "files", lines: true, now: clock.now}
	for i := 1; i <= 250; i++ {
		m.set(i, 250, -1)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Len(t, lines, 10)
	require.Equal(t, "checkpoint cp: 25/250 files (10%)", lines[0])
	require.Equal(t, "checkpoint cp: 250/250 files (100%)", lines[9])

	out.Reset()
	m = &meter{w: &out, what: "checkpoint cp", unit: "files", lines: true, now: clock.now}
	for i := 1; i <= 99; i++ {
		m.set(i, 99, -1)
	}
	require.Empty(t, out.String(), "a short run prints no progress")

	var c cli
	c.stderr = &out
	require.Nil(t, c.newMeter("files", true, true), "-q")
	require.Nil(t, c.newMeter("files", false, false), "no terminal, no lines")
	var nilMeter *meter
	nilMeter.set(1, 2, 3)
	nilMeter.stop()
}

func TestCpOfARootLeavesTheSessionAWriterHoldsAndCopiesTheOthers(t *testing.T) {
	t.Parallel()
	dst := filepath.Join(t.TempDir(), "campaign")
	r := runCLI(t, "cp", "testdata/campaign", dst)
	require.Equal(t, exitFound, r.code, r.stderr) // 003 is damaged
	require.NoError(t, os.RemoveAll(filepath.Join(dst, "002")))
	w, err := checkpoint.Open[map[string]int](filepath.Join(dst, "002"), checkpoint.WithLayout("turn", 3))
	require.NoError(t, err)
	defer w.Close()

	r = runCLI(t, "cp", "testdata/campaign", dst)
	require.Equal(t, exitLocked, r.code, r.stderr) // as gc: the session a writer holds is left, the others copied
	require.Contains(t, r.stderr, "a writer holds the lock of a session")
	require.Contains(t, r.stderr, filepath.Join(dst, "002"))
	require.Contains(t, r.stdout, "1 sessions whole; 1 skipped, 1 failed")
}
