package checkpoint_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"filippo.io/age"
	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/storage"
)

type copyState struct {
	Turn int    `json:"turn"`
	Log  string `json:"log"`
}

// saveCopySource makes a store in dir with n steps, a final checkpoint, an
// error checkpoint, a rolling file and a side file, and returns the names
// Copy copies (not the header index).
func saveCopySource(t *testing.T, dir string, n int, opts ...checkpoint.Option) []string {
	t.Helper()
	ctx := context.Background()
	st, err := checkpoint.Open[copyState](dir, append([]checkpoint.Option{checkpoint.NoSync(), checkpoint.WithLayout("turn", 3)}, opts...)...)
	require.NoError(t, err)
	for i := 1; i <= n; i++ {
		_, _, err := st.Tick(ctx, int64(i), copyState{Turn: i, Log: strings.Repeat("x", i*10)})
		require.NoError(t, err)
	}
	_, err = st.SaveError(ctx, int64(n+1), copyState{Turn: n + 1}, errors.New("boom"))
	require.NoError(t, err)
	_, err = st.SaveFinal(ctx, int64(n+2), copyState{Turn: n + 2})
	require.NoError(t, err)
	require.NoError(t, st.WriteJSON(ctx, "notes.json", map[string]string{"who": "me"}))
	require.NoError(t, st.Close())
	return copiedNames(t, dir)
}

// copiedNames returns the names in dir that a copy carries: no hidden
// file (lock, index, temporary files).
func copiedNames(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, n := range dirNames(t, dir) {
		if !strings.HasPrefix(n, ".") {
			out = append(out, n)
		}
	}
	return out
}

func dirBackend(t *testing.T, dir string) checkpoint.Backend {
	t.Helper()
	b, err := dirstore.Open(dir, dirstore.NoSync())
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	return b
}

// requireSameFiles fails unless dst holds each of names with the bytes
// src holds.
func requireSameFiles(t *testing.T, src, dst string, names []string) {
	t.Helper()
	for _, n := range names {
		want, err := os.ReadFile(filepath.Join(src, n))
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join(dst, n))
		require.NoError(t, err, n)
		require.True(t, bytes.Equal(want, got), "%s differs", n)
	}
}

func TestCopyStoreIsByteForByteAndOpensAsTheSource(t *testing.T) {
	t.Parallel()
	eachCompression(t, func(t *testing.T, comp []checkpoint.Option) {
		ctx := context.Background()
		src, dst := t.TempDir(), filepath.Join(t.TempDir(), "new")
		names := saveCopySource(t, src, 12, append(comp, checkpoint.WithRolling(), checkpoint.SaveEvery(5))...)
		require.True(t, slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "turn_last.json") }), names)
		require.Contains(t, names, "notes.json")

		var reports []checkpoint.CopyProgress
		res, err := checkpoint.Copy(ctx, dirBackend(t, dst), dirBackend(t, src), checkpoint.WithLayout("turn", 3),
			checkpoint.OnCopyProgress(func(p checkpoint.CopyProgress) { reports = append(reports, p) }))
		require.NoError(t, err)
		require.Equal(t, len(names), res.Copied)
		require.Zero(t, res.Present)
		require.Empty(t, res.Skipped)
		require.Empty(t, res.Failed)
		require.Equal(t, names, copiedNames(t, dst), "the header index and the lock are not copied")
		requireSameFiles(t, src, dst, names)

		// Progress: a first report of the total, then one per file, in
		// order, the last one complete.
		require.Len(t, reports, len(names)+1)
		require.Equal(t, checkpoint.CopyProgress{Total: len(names)}, reports[0])
		for i, p := range reports[1:] {
			require.Equal(t, i+1, p.Done)
			require.Equal(t, len(names), p.Total)
			require.NotEmpty(t, p.Location)
		}
		require.Equal(t, res.Bytes, reports[len(reports)-1].Bytes)

		a, b := openStore[copyState](t, src, checkpoint.WithLayout("turn", 3), checkpoint.ReadOnly()), openStore[copyState](t, dst, checkpoint.WithLayout("turn", 3), checkpoint.ReadOnly())
		wantInfos, err := a.List(ctx)
		require.NoError(t, err)
		gotInfos, err := b.List(ctx)
		require.NoError(t, err)
		require.Equal(t, steps(wantInfos), steps(gotInfos))
		want, _, err := a.Latest(ctx)
		require.NoError(t, err)
		got, _, err := b.Latest(ctx)
		require.NoError(t, err)
		require.Equal(t, want, got)
		var notes map[string]string
		require.NoError(t, b.ReadJSON(ctx, "notes.json", &notes))
		require.Equal(t, "me", notes["who"])
	})
}

func TestCopySkipsDamagedCheckpointsAndReportsThem(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, dst := t.TempDir(), t.TempDir()
	names := saveCopySource(t, src, 6)
	flip := filepath.Join(src, "turn_003.json")
	data, err := os.ReadFile(flip)
	require.NoError(t, err)
	i := bytes.Index(data, []byte(`"log":"xxx`))
	require.Positive(t, i)
	data[i+8] = 'y' // the state changes, its checksum not
	require.NoError(t, os.WriteFile(flip, data, 0o644))
	require.NoError(t, os.Truncate(filepath.Join(src, "turn_005.json"), 40))

	res, err := checkpoint.Copy(ctx, dirBackend(t, dst), dirBackend(t, src), checkpoint.WithLayout("turn", 3))
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.ErrorContains(t, err, "turn_003.json")
	require.ErrorContains(t, err, "turn_005.json")
	require.Len(t, res.Skipped, 2)
	require.Empty(t, res.Failed)
	require.Equal(t, len(names)-2, res.Copied)
	good := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == "turn_003.json" || n == "turn_005.json" })
	require.Equal(t, good, copiedNames(t, dst), "damaged checkpoints are never copied")
	requireSameFiles(t, src, dst, good)

	// A rerun skips them again and finds the rest there.
	res, err = checkpoint.Copy(ctx, dirBackend(t, dst), dirBackend(t, src), checkpoint.WithLayout("turn", 3))
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.Equal(t, len(good), res.Present)
	require.Zero(t, res.Copied)
}

func TestCopyRerunFindsItsCopiesAndNeverReplacesOtherBytes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, dst := t.TempDir(), t.TempDir()
	names := saveCopySource(t, src, 5, checkpoint.Gzip())
	_, err := checkpoint.Copy(ctx, dirBackend(t, dst), dirBackend(t, src), checkpoint.WithLayout("turn", 3))
	require.NoError(t, err)

	res, err := checkpoint.Copy(ctx, dirBackend(t, dst), dirBackend(t, src), checkpoint.WithLayout("turn", 3))
	require.NoError(t, err)
	require.Equal(t, len(names), res.Present)
	require.Zero(t, res.Copied)

	// Other bytes under a name at the destination (a good checkpoint,
	// but another one) are left as they are, and named; a missing file is
	// copied again.
	changed, err := os.ReadFile(filepath.Join(src, "turn_003.json.gz"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dst, "turn_002.json.gz"), changed, 0o644))
	require.NoError(t, os.Remove(filepath.Join(dst, "turn_004.json.gz")))

	res, err = checkpoint.Copy(ctx, dirBackend(t, dst), dirBackend(t, src), checkpoint.WithLayout("turn", 3))
	require.ErrorIs(t, err, checkpoint.ErrExists)
	require.ErrorContains(t, err, filepath.Join(src, "turn_002.json.gz"))
	require.ErrorContains(t, err, filepath.Join(dst, "turn_002.json.gz"))
	require.Len(t, res.Failed, 1)
	require.Equal(t, 1, res.Copied, "turn_004 copied again")
	require.Equal(t, len(names)-2, res.Present)
	requireUntouched(t, filepath.Join(dst, "turn_002.json.gz"), changed)
	requireSameFiles(t, src, dst, []string{"turn_004.json.gz"})
}

func TestCopyOfAnEncryptedStoreVerifiesWithItsKeyOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	id, err := age.GenerateX25519Identity()
	require.NoError(t, err)
	src := t.TempDir()
	names := saveCopySource(t, src, 4, checkpoint.Encrypt(id), checkpoint.Zstd())

	// Without the key nothing verifies: nothing is copied as good.
	dst := t.TempDir()
	res, err := checkpoint.Copy(ctx, dirBackend(t, dst), dirBackend(t, src), checkpoint.WithLayout("turn", 3))
	require.ErrorIs(t, err, checkpoint.ErrNoKey)
	require.Len(t, res.Skipped, len(names)-1) // all but the side file
	require.Equal(t, []string{"notes.json"}, copiedNames(t, dst))

	// With it, every file is copied as it is: still encrypted.
	dst = t.TempDir()
	res, err = checkpoint.Copy(ctx, dirBackend(t, dst), dirBackend(t, src), checkpoint.WithLayout("turn", 3), checkpoint.Encrypt(id))
	require.NoError(t, err)
	require.Equal(t, len(names), res.Copied)
	requireSameFiles(t, src, dst, names)
	b := openStore[copyState](t, dst, checkpoint.WithLayout("turn", 3), checkpoint.Encrypt(id), checkpoint.ReadOnly())
	got, _, err := b.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, 6, got.Turn)
}

// makeRoot makes a root of sessions in dir: sessions with checkpoints and
// metadata, one forked, one deleted, and returns its sessions.
func makeRoot(t *testing.T, dir string, opts ...checkpoint.Option) []checkpoint.Session {
	t.Helper()
	ctx := context.Background()
	opts = append([]checkpoint.Option{checkpoint.WithLayout("turn", 3)}, opts...)
	r := openSessions(t, dir, opts...)
	for i := range 3 {
		s, err := r.New(ctx, map[string]string{"n": fmt.Sprint(i)})
		require.NoError(t, err)
		st, err := checkpoint.OpenSessionStore[copyState](r, s.ID)
		require.NoError(t, err)
		for step := 1; step <= 3+i; step++ {
			_, err := st.Save(ctx, int64(step), copyState{Turn: step, Log: s.ID})
			require.NoError(t, err)
		}
		require.NoError(t, st.Close())
	}
	_, err := r.Fork(ctx, "002", 2, map[string]string{"forked": "yes"})
	require.NoError(t, err)
	gone, err := r.Create(ctx, "user:7/thread#1", nil)
	require.NoError(t, err)
	require.NoError(t, r.Delete(ctx, gone.ID))
	_, err = r.Create(ctx, "user:7/thread#2", map[string]string{"mapped": "yes"})
	require.NoError(t, err)
	list, err := r.List(ctx)
	require.NoError(t, err)
	return list
}

// sessionsOf lists the root in dir, without the fields that say where.
func sessionsOf(t *testing.T, dir string, opts ...checkpoint.Option) []checkpoint.Session {
	t.Helper()
	r, err := checkpoint.OpenSessions(dir, append([]checkpoint.Option{checkpoint.ReadOnly(), checkpoint.WithLayout("turn", 3)}, opts...)...)
	require.NoError(t, err)
	defer r.Close()
	list, err := r.List(context.Background())
	require.NoError(t, err)
	for i := range list {
		require.NoError(t, list[i].Err)
		list[i].Dir = ""
	}
	return list
}

func TestCopyOfARootOfSessionsListsAsTheSource(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "root")
	makeRoot(t, src)
	want := sessionsOf(t, src)
	require.Len(t, want, 5)

	res, err := checkpoint.Copy(ctx, dirBackend(t, dst), dirBackend(t, src), checkpoint.WithLayout("turn", 3))
	require.NoError(t, err)
	require.Equal(t, 5, res.Sessions)
	require.Equal(t, want, sessionsOf(t, dst))
	for _, s := range want {
		name := checkpoint.SessionName(s.ID)
		names := copiedNames(t, filepath.Join(src, name))
		require.Equal(t, names, copiedNames(t, filepath.Join(dst, name)))
		requireSameFiles(t, filepath.Join(src, name), filepath.Join(dst, name), names)
		require.NoFileExists(t, filepath.Join(dst, name, ".session.claim"))
	}
	require.NoDirExists(t, filepath.Join(dst, checkpoint.SessionName("user:7/thread#1")), "a deleted session is not copied")

	// The copy is a root like any: sessions open, and new ones number on.
	r := openSessions(t, dst, checkpoint.WithLayout("turn", 3))
	st, err := checkpoint.OpenSessionStore[copyState](r, "003")
	require.NoError(t, err)
	got, _, err := st.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, copyState{Turn: 5, Log: "003"}, got)
	require.NoError(t, st.Close())
	s, err := r.New(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, "005", s.ID)

	// A rerun finds everything there.
	res, err = checkpoint.Copy(ctx, dirBackend(t, dst), dirBackend(t, src), checkpoint.WithLayout("turn", 3))
	require.NoError(t, err)
	require.Zero(t, res.Copied)
	require.Equal(t, 5, res.Sessions)
}

func TestCopyOfASessionResumesUnseenAndNeverAdoptsAnotherClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, dst := t.TempDir(), t.TempDir()
	makeRoot(t, src)
	want := sessionsOf(t, src)

	// An interrupted copy: session 002 claimed by a copy, two of its
	// checkpoints there, no session.json. It is no session yet.
	part := filepath.Join(dst, "002")
	require.NoError(t, os.MkdirAll(part, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(part, ".session.claim"), []byte(`{"op":"copy","token":"dead","time":"2026-01-01T00:00:00Z"}`), 0o644))
	for _, n := range []string{"turn_001.json", "turn_002.json"} {
		data, err := os.ReadFile(filepath.Join(src, "002", n))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(part, n), data, 0o644))
	}
	require.Empty(t, sessionsOf(t, dst))
	// A fork's claim on 003 is another call's: never taken over.
	require.NoError(t, os.MkdirAll(filepath.Join(dst, "003"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dst, "003", ".session.claim"), []byte(`{"op":"fork","token":"live","time":"2026-01-01T00:00:00Z"}`), 0o644))

	res, err := checkpoint.Copy(ctx, dirBackend(t, dst), dirBackend(t, src), checkpoint.WithLayout("turn", 3))
	require.ErrorIs(t, err, checkpoint.ErrExists)
	require.ErrorContains(t, err, filepath.Join(dst, "003"))
	require.Len(t, res.Failed, 1)
	require.Equal(t, 2, res.Present, "what the interrupted copy made")
	got := sessionsOf(t, dst)
	require.Len(t, got, 4)
	for _, s := range want {
		if s.ID != "003" {
			require.Contains(t, got, s)
		}
	}
}

func TestCopyRefusesWhatWouldMixAStoreAndARoot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, root, empty := t.TempDir(), t.TempDir(), t.TempDir()
	saveCopySource(t, store, 2)
	makeRoot(t, root)

	_, err := checkpoint.Copy(ctx, dirBackend(t, root), dirBackend(t, store), checkpoint.WithLayout("turn", 3))
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	require.ErrorContains(t, err, "is a root of sessions")
	_, err = checkpoint.Copy(ctx, dirBackend(t, store), dirBackend(t, root), checkpoint.WithLayout("turn", 3))
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	require.ErrorContains(t, err, "holds checkpoints")
	_, err = checkpoint.Copy(ctx, dirBackend(t, t.TempDir()), dirBackend(t, empty), checkpoint.WithLayout("turn", 3))
	require.ErrorIs(t, err, checkpoint.ErrNotFound)
	_, err = checkpoint.Copy(ctx, dirBackend(t, t.TempDir()), dirBackend(t, store), checkpoint.CopyConcurrency(0))
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
	_, err = checkpoint.Copy(ctx, nil, dirBackend(t, store))
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
}

func TestCopyIntoAStoreAWriterHoldsFailsWithErrLocked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, dst := t.TempDir(), t.TempDir()
	saveCopySource(t, src, 2)
	w := openStore[copyState](t, dst, checkpoint.WithLayout("turn", 3))
	_, err := checkpoint.Copy(ctx, dirBackend(t, dst), dirBackend(t, src), checkpoint.WithLayout("turn", 3))
	require.ErrorIs(t, err, checkpoint.ErrLocked)
	require.Empty(t, copiedNames(t, dst))
	require.NoError(t, w.Close())
}

// failingWrites is a Backend whose Creates fail after writing some bytes,
// as a full disk or a lost connection would.
type failingWrites struct {
	checkpoint.Backend
}

var errDiskFull = errors.New("disk full")

func (f failingWrites) Create(ctx context.Context, name string, write func(io.Writer) error) (checkpoint.Object, error) {
	return f.Backend.Create(ctx, name, func(w io.Writer) error {
		return write(&limitedWriter{w: w, left: 100})
	})
}

func (f failingWrites) Unwrap() storage.Backend { return f.Backend }

type limitedWriter struct {
	w    io.Writer
	left int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if len(p) > l.left {
		n, _ := l.w.Write(p[:l.left])
		l.left = 0
		return n, errDiskFull
	}
	l.left -= len(p)
	return l.w.Write(p)
}

func TestCopyReportsAFailedWriteAsAFailureNotAsDamage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, dst := t.TempDir(), t.TempDir()
	names := saveCopySource(t, src, 3)
	var mu sync.Mutex
	res, err := checkpoint.Copy(ctx, failingWrites{dirBackend(t, dst)}, dirBackend(t, src), checkpoint.WithLayout("turn", 3), checkpoint.CopyConcurrency(1),
		checkpoint.OnCopyProgress(func(checkpoint.CopyProgress) { require.True(t, mu.TryLock()); mu.Unlock() }))
	require.ErrorIs(t, err, errDiskFull)
	require.NotErrorIs(t, err, checkpoint.ErrCorrupt)
	require.Empty(t, res.Skipped)
	require.NotEmpty(t, res.Failed)
	require.Equal(t, len(names), res.Copied+len(res.Failed))
	for _, n := range copiedNames(t, dst) {
		requireSameFiles(t, src, dst, []string{n})
	}
}

func TestCopyVerifiesBytePayloadsToTheirEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, dst := t.TempDir(), t.TempDir()
	st := openStore[copyState](t, src, checkpoint.Zstd())
	payload := bytes.Repeat([]byte("payload bytes "), 50_000)
	for step := int64(1); step <= 3; step++ {
		_, err := st.SaveFrom(ctx, step, func(w io.Writer) error {
			_, err := w.Write(payload)
			return err
		})
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())
	// A byte flipped near the end of step 2's payload: only a read to the
	// end sees it.
	name := filepath.Join(src, "step_00000002.json.zst")
	data, err := os.ReadFile(name)
	require.NoError(t, err)
	raw := decompress(t, data)
	i := bytes.LastIndex(raw, []byte("payload"))
	require.Positive(t, i)
	raw[i] = 'P'
	require.NoError(t, os.WriteFile(filepath.Join(src, "step_00000002.json"), raw, 0o644))
	require.NoError(t, os.Remove(name))

	res, err := checkpoint.Copy(ctx, dirBackend(t, dst), dirBackend(t, src))
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.Len(t, res.Skipped, 1)
	require.ErrorContains(t, res.Skipped[0], "step_00000002.json")
	require.ErrorContains(t, res.Skipped[0], "checksum")
	require.Equal(t, []string{"step_00000001.json.zst", "step_00000003.json.zst"}, copiedNames(t, dst))
	requireSameFiles(t, src, dst, copiedNames(t, dst))
}

func TestACreateOfASessionACopyIsMakingSaysSo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dst := t.TempDir()
	part := filepath.Join(dst, "042")
	require.NoError(t, os.MkdirAll(part, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(part, ".session.claim"), []byte(`{"op":"copy","token":"t","time":"2026-01-01T00:00:00Z"}`), 0o644))
	r := openSessions(t, dst)
	_, err := r.Create(ctx, "042", nil)
	require.ErrorIs(t, err, checkpoint.ErrExists)
	require.ErrorContains(t, err, "a copy (Copy, checkpoint cp) holds session ID")
	list, err := r.List(ctx)
	require.NoError(t, err)
	require.Empty(t, list, "a session being copied is not listed")
	removed, err := r.RemoveStaging(ctx)
	require.NoError(t, err)
	require.Empty(t, removed, "nor removed: a rerun of the copy completes it")
	require.FileExists(t, filepath.Join(part, ".session.claim"))
}
