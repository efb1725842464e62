package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/storage"
	"github.com/stretchr/testify/require"
)

// runPruneOnTTY runs checkpoint prune args as run does, with stderr taken
// for a terminal: the progress bar is drawn on it.
func runPruneOnTTY(t *testing.T, remotes []Remote, args ...string) result {
	t.Helper()
	return runPruneOnTTYWith(t, remotes, nil, args...)
}

// runPruneOnTTYWith is runPruneOnTTY with the identity files ids
// (--identity).
func runPruneOnTTYWith(t *testing.T, remotes []Remote, ids identityFlag, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	fs := flag.NewFlagSet("prune", flag.ContinueOnError)
	do := pruneCommand.flags(fs)
	require.NoError(t, fs.Parse(args))
	c := &cli{stdout: &stdout, stderr: &stderr, stderrTTY: true, cmd: "prune", now: testNow, remotes: remotes, identityFiles: ids, getenv: func(string) string { return "" }}
	code := exitOK
	if err := do(context.Background(), c, fs.Args()); err != nil {
		t.Fatalf("prune %q: %v (stderr %q)", args, err, stderr.String())
	}
	return result{stdout.String(), stderr.String(), code}
}

// requireBarDrawnAndErased checks that stderr holds only a bar, drawn in
// place (no line), with each of wants in one of its redraws, and erased
// at the end.
func requireBarDrawnAndErased(t *testing.T, stderr string, wants ...string) {
	t.Helper()
	require.NotContains(t, stderr, "\n", "a bar is redrawn in place; nothing else is printed on stderr")
	require.True(t, strings.HasPrefix(stderr, "\rcheckpoint prune ["), "%q", stderr)
	for _, want := range wants {
		require.True(t, strings.Contains(stderr, want), "%q not in %q", want, stderr)
	}
	// The last draw is erased: spaces over it, the cursor back at the
	// start of the line.
	body := strings.TrimSuffix(stderr, "\r")
	i := strings.LastIndex(body, "\r")
	require.Greater(t, i, 0)
	erase := body[i+1:]
	require.Equal(t, strings.Repeat(" ", len(erase)), erase, "the bar is erased")
	j := strings.LastIndex(body[:i], "\r")
	require.Equal(t, len(erase), len(body[j:i]), "as long as the bar drawn last")
}

// saveMany saves n step checkpoints and an error checkpoint in st.
func saveMany(t *testing.T, st *checkpoint.Store[map[string]int], n int) {
	t.Helper()
	ctx := context.Background()
	for i := 1; i <= n; i++ {
		_, err := st.Save(ctx, int64(i), map[string]int{"step": i})
		require.NoError(t, err)
	}
	_, err := st.SaveError(ctx, int64(n+1), map[string]int{"step": n + 1}, errors.New("diverged"))
	require.NoError(t, err)
	require.NoError(t, st.Close())
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, d := range des {
		out = append(out, d.Name())
	}
	return out
}

func TestPruneOnATerminalDrawsAndErasesABarAndPrintsTheSame(t *testing.T) {
	t.Parallel()
	src := filepath.Join(t.TempDir(), "run")
	st, err := checkpoint.Open[map[string]int](src, checkpoint.NoSync())
	require.NoError(t, err)
	saveMany(t, st, 600) // over 512: the store reads the headers on every processor
	require.FileExists(t, filepath.Join(src, ".checkpoint.index"), "a store of this size has a header index, which the fixture should exercise")

	for _, dry := range []bool{true, false} {
		plain, tty := filepath.Join(t.TempDir(), "plain"), filepath.Join(t.TempDir(), "tty")
		require.NoError(t, os.CopyFS(plain, os.DirFS(src)))
		require.NoError(t, os.CopyFS(tty, os.DirFS(src)))
		args := []string{"--keep-last", "10"}
		if dry {
			args = append(args, "--dry-run")
		}
		want := runCLI(t, append([]string{"prune", plain}, args...)...)
		require.Equal(t, exitOK, want.code, want.stderr)
		require.Empty(t, want.stderr, "no terminal: no progress")
		got := runPruneOnTTY(t, nil, append(args, tty)...)
		require.True(t, strings.ReplaceAll(want.stdout, plain, tty) == got.stdout, "stdout is the same with the bar:\n%s\n%s", want.stdout, got.stdout)
		require.Equal(t, dirNames(t, plain), dirNames(t, tty), "the same files are left, the header index included")
		bar := []string{"[========================] 601/601 checkpoints read (100%)"}
		if !dry {
			bar = append(bar, "] 0/590 checkpoints removed (0%)", "[========================] 590/590 checkpoints removed (100%)")
		}
		requireBarDrawnAndErased(t, got.stderr, bar...)
	}
}

func TestPruneOnATerminalInObjectStorageDrawsAndErasesABar(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := backendtest.NewMem() // object storage: List tells Versions, each read is a request
	b, err := src.Open()
	require.NoError(t, err)
	st, err := checkpoint.OpenBackend[map[string]int](b)
	require.NoError(t, err)
	saveMany(t, st, 600) // over 512: the store reads the headers on every processor

	listNames := func(m *backendtest.Mem) []string {
		b, err := m.Open()
		require.NoError(t, err)
		defer b.Close()
		objs, err := b.List(ctx)
		require.NoError(t, err)
		var out []string
		for _, o := range objs {
			out = append(out, o.Name)
		}
		slices.Sort(out)
		return out
	}
	require.Contains(t, listNames(src), ".checkpoint.index")
	// twin copies src with Copy, which leaves the header index out; with
	// withIndex, a writer's List then writes one, of the copy's Versions.
	twin := func(withIndex bool) (*backendtest.Mem, Remote) {
		m := backendtest.NewMem()
		dst, err := m.Open()
		require.NoError(t, err)
		from, err := src.Open()
		require.NoError(t, err)
		_, err = checkpoint.Copy(ctx, dst, from)
		require.NoError(t, err)
		require.NotContains(t, listNames(m), ".checkpoint.index")
		if withIndex {
			b, err := m.Open()
			require.NoError(t, err)
			w, err := checkpoint.OpenBackend[map[string]int](b)
			require.NoError(t, err)
			_, err = w.List(ctx)
			require.NoError(t, err)
			require.NoError(t, w.Close())
			require.Contains(t, listNames(m), ".checkpoint.index")
		}
		require.NoError(t, dst.Close())
		require.NoError(t, from.Close())
		return m, Remote{Scheme: "s3", Open: func(context.Context, string) (checkpoint.Backend, error) { return m.Open() }}
	}
	for _, withIndex := range []bool{false, true} {
		plainMem, plain := twin(withIndex)
		ttyMem, tty := twin(withIndex)
		want := runRemote(t, plain, "prune", "s3://b/run", "--keep-last", "10")
		require.Equal(t, exitOK, want.code, want.stderr)
		require.Empty(t, want.stderr)
		got := runPruneOnTTY(t, []Remote{tty}, "--keep-last", "10", "s3://b/run")
		require.True(t, want.stdout == got.stdout, "stdout is the same with the bar:\n%s\n%s", want.stdout, got.stdout)
		// The size is left out: a header's time has fewer digits where
		// the clock is coarser (Windows), so the files' sum differs.
		require.Regexp(t, `\nremoved 590 of 601 checkpoints \([0-9.]+ KiB\) from s3://b/run; kept 11\n$`, got.stdout)
		require.Equal(t, listNames(plainMem), listNames(ttyMem))
		// The store lists three times (the writer's Open, List, Prune's
		// scan). The Open's listing reads nothing, and shows no bar; nor,
		// with the index, does List's: the listing's Versions confirm the
		// index's headers. Prune's scan then reads the victims' headers
		// again from their files (and the newest checkpoint whole).
		bars := 2
		read := "[========================] 601/601 checkpoints read (100%)" // without the index, List reads every header
		if withIndex {
			bars, read = 1, "] 0/601 checkpoints read (0%)"
			require.NotContains(t, got.stderr, "checkpoints read (100%)", "%q", got.stderr)
		}
		require.Equal(t, bars, strings.Count(got.stderr, "checkpoints read (0%)"), "%q", got.stderr)
		requireBarDrawnAndErased(t, got.stderr, read, "[========================] 590/590 checkpoints removed (100%)")
	}
}

// The watched backend is the backend it watches to a store: the same
// Traits, and the same optional operations.
func TestPruneProgressWatchesWithoutChangingTheBackend(t *testing.T) {
	t.Parallel()
	dir, err := dirstore.Open(t.TempDir())
	require.NoError(t, err)
	defer dir.Close()
	mem, err := backendtest.NewMem().Open()
	require.NoError(t, err)
	defer mem.Close()
	p := &pruneProgress{c: &cli{stderr: new(bytes.Buffer), stderrTTY: true, cmd: "prune"}, checkpoint: func(string) bool { return true }}
	for _, b := range []storage.Backend{dir, mem} {
		w := p.watch(b)
		require.Equal(t, storage.TraitsOf(b), storage.TraitsOf(w))
		_, ok := storage.As[storage.TempCleaner](b)
		_, wok := storage.As[storage.TempCleaner](w)
		require.Equal(t, ok, wok, "TempCleaner")
		_, ok = storage.As[storage.TempNamer](b)
		_, wok = storage.As[storage.TempNamer](w)
		require.Equal(t, ok, wok, "TempNamer")
		_, ok = storage.As[storage.LockProber](b)
		_, wok = storage.As[storage.LockProber](w)
		require.Equal(t, ok, wok, "LockProber")
		_, ok = b.(storage.Unsynced)
		_, wok = w.(storage.Unsynced)
		require.Equal(t, ok, wok, "Unsynced, which a store takes from the outermost backend only")
		require.Equal(t, b.Locate(""), w.Locate(""))
	}
	var nilProgress *pruneProgress
	require.Equal(t, storage.Backend(dir), nilProgress.watch(dir), "no terminal: the backend as it is")
	nilProgress.stop()
}

// isCheckpointName counts the names a store lists as its checkpoints, and
// none of the other files a store's directory holds.
func TestIsCheckpointNameAgreesWithTheStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := checkpoint.Open[int](dir, checkpoint.WithLayout("turn", 3), checkpoint.WithRolling(), checkpoint.SaveEvery(10), checkpoint.NoSync())
	require.NoError(t, err)
	_, err = st.Save(ctx, 1, 1)
	require.NoError(t, err)
	_, _, err = st.Tick(ctx, 2, 2) // the rolling file
	require.NoError(t, err)
	_, err = st.SaveFinal(ctx, 1234, 4)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	// Error checkpoints saved last, so that no clean one supersedes them.
	gz, err := checkpoint.Open[int](dir, checkpoint.WithLayout("turn", 3), checkpoint.Gzip(), checkpoint.NoSync())
	require.NoError(t, err)
	_, err = gz.Save(ctx, 5, 5)
	require.NoError(t, err)
	_, err = gz.SaveError(ctx, 3, 3, errors.New("x"))
	require.NoError(t, err)
	_, err = gz.SaveError(ctx, 3, 3, errors.New("x")) // .error-2
	require.NoError(t, err)
	require.NoError(t, gz.Close())
	for _, other := range []string{"notes.json", "turn_notes.json", "turn_004.json.corrupt", ".turn_006.json.ckpt-tmp-123", "turn_007.error-1.json", "turn_007.error-02.json", "turn_007.json.bz2", "step_001.json", "turn_-01.json"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, other), []byte("{}"), 0o644))
	}
	r, err := checkpoint.Open[int](dir, checkpoint.WithLayout("turn", 3), checkpoint.ReadOnly())
	require.NoError(t, err)
	defer r.Close()
	infos, err := r.List(ctx)
	require.NoError(t, err)
	var want []string
	for _, info := range infos {
		want = append(want, info.Name())
	}
	slices.Sort(want)
	var got []string
	for _, n := range dirNames(t, dir) {
		if isCheckpointName(checkpoint.Layout{Prefix: "turn", Digits: 3}, n) {
			got = append(got, n)
		}
	}
	require.Len(t, want, 6, "%q", want) // 1, last, 1234 final, 5 gzip, 3 error and error-2
	require.Equal(t, want, got)
}

// An encrypted store is read through the sealing wrapper, which the store
// puts around the watched backend: the bar counts its reads all the same,
// and the store's files read with the key as without the bar.
func TestPruneOnATerminalOfAnEncryptedStore(t *testing.T) {
	t.Parallel()
	k := newKey(t)
	src := filepath.Join(t.TempDir(), "store")
	saveSteps(t, src, 300, checkpoint.Encrypt(k.id))
	plain, tty := filepath.Join(t.TempDir(), "plain"), filepath.Join(t.TempDir(), "tty")
	require.NoError(t, os.CopyFS(plain, os.DirFS(src)))
	require.NoError(t, os.CopyFS(tty, os.DirFS(src)))
	want := runCLI(t, "prune", plain, "--keep-last", "5", "--identity", k.file)
	require.Equal(t, exitOK, want.code, want.stderr)
	got := runPruneOnTTYWith(t, nil, identityFlag{k.file}, "--keep-last", "5", tty)
	require.True(t, strings.ReplaceAll(want.stdout, plain, tty) == got.stdout, "stdout is the same with the bar:\n%s\n%s", want.stdout, got.stdout)
	require.Contains(t, got.stdout, "removed 295 of 300 checkpoints")
	require.Equal(t, dirNames(t, plain), dirNames(t, tty))
	requireBarDrawnAndErased(t, got.stderr, "[========================] 300/300 checkpoints read (100%)", "[========================] 295/295 checkpoints removed (100%)")
	r := runCLI(t, "verify", tty, "--identity", k.file)
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, "5 files checked")
}

// removeCalls records the number of names of each Remove it passes on.
type removeCalls struct {
	storage.Backend
	calls []int
}

func (r *removeCalls) Unwrap() storage.Backend { return r.Backend }

func (r *removeCalls) Remove(ctx context.Context, names ...string) ([]bool, error) {
	r.calls = append(r.calls, len(names))
	return r.Backend.Remove(ctx, names...)
}

// On object storage a Remove of many names reaches the backend in calls
// of as many as one request deletes, so that the bar moves after each;
// every name is removed and reported gone, in order, as by one call.
func TestPruneProgressRemovesInBatchesOnObjectStorageOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem, err := backendtest.NewMem().Open()
	require.NoError(t, err)
	defer mem.Close()
	var names []string
	for i := range 2490 {
		name := "x" + strconv.Itoa(i)
		names = append(names, name)
		_, err := mem.Create(ctx, name, func(w io.Writer) error { _, err := io.WriteString(w, name); return err })
		require.NoError(t, err)
	}
	var stderr bytes.Buffer
	p := &pruneProgress{c: &cli{stderr: &stderr, stderrTTY: true, cmd: "prune"}, checkpoint: func(string) bool { return true }}
	rec := &removeCalls{Backend: mem}
	gone, err := p.watch(rec).Remove(ctx, append(names, "missing")...)
	require.NoError(t, err)
	require.Equal(t, []int{1000, 1000, 491}, rec.calls)
	require.Len(t, gone, 2491)
	require.NotContains(t, gone, false, "every name is gone, the missing one included")
	left, err := mem.List(ctx)
	require.NoError(t, err)
	require.Empty(t, left)
	p.stop()
	require.Contains(t, stderr.String(), "] 0/2491 checkpoints removed (0%)")

	dir, err := dirstore.Open(t.TempDir())
	require.NoError(t, err)
	defer dir.Close()
	rec = &removeCalls{Backend: dir}
	_, err = p.watch(rec).Remove(ctx, names...)
	require.NoError(t, err)
	require.Equal(t, []int{2490}, rec.calls, "a local directory's Remove, one call: one directory sync")
}
