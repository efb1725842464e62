package checkpoint

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Attack: hostile entries at the temporary-name pattern before Open, and at
// the final name in the instant between the temporary file's close and its
// publication (the "publish" fault point, which returns nil: nothing is
// failed, something is only put in the way).

func TestAttackHostileTempNamesBeforeOpen(t *testing.T) {
	skipUnlessLinux(t)
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "precious")
	require.NoError(t, os.WriteFile(outside, []byte("keep me"), 0o644))

	s := openStore[int](t, dir, WithLayout("c", 3))
	_, err := s.Save(ctx, 1, 1)
	require.NoError(t, err)
	require.NoError(t, s.Close())

	link := filepath.Join(dir, tempPrefix("c_002.json")+"111")
	require.NoError(t, os.Symlink(outside, link))
	linkIn := filepath.Join(dir, tempPrefix("c_003.json")+"222")
	require.NoError(t, os.Symlink(filepath.Join(dir, "c_001.json"), linkIn))
	fifo := filepath.Join(dir, tempPrefix("c_004.json")+"333")
	mkfifo(t, fifo)
	sub := filepath.Join(dir, tempPrefix("c_005.json")+"444")
	require.NoError(t, os.Mkdir(sub, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(sub, "x"), []byte("x"), 0o644))
	stale := filepath.Join(dir, tempPrefix("c_006.json")+"555")
	require.NoError(t, os.WriteFile(stale, []byte("half"), 0o644))

	s = openStore[int](t, dir, WithLayout("c", 3))
	b, err := os.ReadFile(outside)
	require.NoError(t, err)
	require.Equal(t, "keep me", string(b))
	_, err = os.Stat(stale)
	require.ErrorIs(t, err, os.ErrNotExist, "a stale regular temporary file is removed")
	for _, p := range []string{link, linkIn, fifo, sub} {
		_, err := os.Lstat(p)
		require.NoError(t, err, "%s is not a regular file: left alone", p)
	}
	got, _, err := s.Load(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, 1, got)
	for step := int64(2); step <= 6; step++ {
		_, err := s.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 6)
}

// The documented blind spot: a file of a step in another compression put
// into the directory of a running writer after its first full scan. Nothing
// may be replaced or lost; this records what List, Load and Latest say.
func TestAttackOtherCompressionAfterOpen(t *testing.T) {
	skipUnlessLinux(t)
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	w := openStore[int](t, dir, WithLayout("c", 3), KeepLast(3))
	_, err := w.Save(ctx, 1, 1)
	require.NoError(t, err)

	other := openStore[int](t, t.TempDir(), WithLayout("c", 3), Gzip())
	info, err := other.Save(ctx, 2, 2000)
	require.NoError(t, err)
	theirs, err := os.ReadFile(info.Path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "c_002.json.gz"), theirs, 0o644))

	_, err = w.Save(ctx, 2, 2)
	t.Logf("save of step 2 beside a dropped-in c_002.json.gz: %v", err)
	got, linfo, err := w.Load(ctx, 2)
	t.Logf("Load(2) = %d from %s (%v)", got, filepath.Base(linfo.Path), err)
	got, linfo, err = w.Latest(ctx)
	t.Logf("Latest = %d from %s (%v)", got, filepath.Base(linfo.Path), err)
	list, err := w.List(ctx)
	require.NoError(t, err)
	for _, i := range list {
		t.Logf("listed %s step %d", filepath.Base(i.Path), i.Step)
	}
	for step := int64(3); step <= 6; step++ {
		_, err := w.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	// Nothing replaced: the dropped-in file is byte-identical or was
	// removed by retention as an old step (never rewritten).
	if b, err := os.ReadFile(filepath.Join(dir, "c_002.json.gz")); err == nil {
		require.Equal(t, theirs, b)
		t.Logf("c_002.json.gz survived retention after step 6 (KeepLast 3)")
	} else {
		t.Logf("c_002.json.gz removed by retention: %v", err)
	}
	t.Logf("names after step 6: %v", checkpointNames(t, dir))
	removed, err := w.Prune(ctx)
	require.NoError(t, err)
	t.Logf("a full Prune removed %d more; names: %v", len(removed), checkpointNames(t, dir))
}
