package checkpoint

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint/internal/platformtest"
)

// Attack: the first List of a store (its header index read while the names
// are read) must describe every file as it is now, whatever the index says:
// stale, truncated, foreign, and files rewritten in place (same inode) with
// their size and modification time restored.

const attackIndexN = 300

func attackIndexStore(t *testing.T, dir string) {
	t.Helper()
	ctx := context.Background()
	s, err := Open[int](dir, WithLayout("c", 4), NoSync())
	require.NoError(t, err)
	for step := int64(1); step <= attackIndexN; step++ {
		_, err := s.Save(ctx, step, int(step), WithMeta("who", "aaaa"))
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	_, err = os.Stat(filepath.Join(dir, indexName))
	require.NoError(t, err, "Close wrote the index")
}

// truth lists dir with no index at all.
func attackTruth(t *testing.T, dir string) []Info {
	t.Helper()
	tmp := t.TempDir()
	for _, n := range dirNames(t, dir) {
		if n == indexName || n == lockName {
			continue
		}
		require.NoError(t, os.Link(filepath.Join(dir, n), filepath.Join(tmp, n)))
	}
	return attackFirstList(t, tmp)
}

func attackFirstList(t *testing.T, dir string) []Info {
	t.Helper()
	s, err := Open[int](dir, WithLayout("c", 4), ReadOnly())
	require.NoError(t, err)
	defer s.Close()
	list, err := s.List(context.Background())
	require.NoError(t, err)
	for i := range list {
		list[i].Location = filepath.Base(list[i].Location)
		list[i].Path = list[i].Location
	}
	return list
}

func TestAttackFirstListAfterInPlaceRewrites(t *testing.T) {
	skipUnlessLinux(t)
	t.Parallel()
	dir := t.TempDir()
	attackIndexStore(t, dir)

	// Same size, same inode, same modification time: only the header's
	// meta differs (the checksum covers the state alone).
	p20 := filepath.Join(dir, "c_0020.json")
	b, err := os.ReadFile(p20)
	require.NoError(t, err)
	platformtest.RewriteInPlace(t, p20, bytes.Replace(b, []byte(`"aaaa"`), []byte(`"bbbb"`), 1))
	// Another step's file of the same size copied over it.
	b31, err := os.ReadFile(filepath.Join(dir, "c_0031.json"))
	require.NoError(t, err)
	b30, err := os.ReadFile(filepath.Join(dir, "c_0030.json"))
	require.NoError(t, err)
	if len(b31) == len(b30) {
		platformtest.RewriteInPlace(t, filepath.Join(dir, "c_0030.json"), b31)
	}
	// Truncated in place.
	p40 := filepath.Join(dir, "c_0040.json")
	fi, err := os.Stat(p40)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(p40, 10))
	require.NoError(t, os.Chtimes(p40, fi.ModTime(), fi.ModTime()))
	// Removed, and another file made at its name.
	p50 := filepath.Join(dir, "c_0050.json")
	b, err = os.ReadFile(p50)
	require.NoError(t, err)
	require.NoError(t, os.Remove(p50))
	require.NoError(t, os.WriteFile(p50, bytes.Replace(b, []byte(`"aaaa"`), []byte(`"cccc"`), 1), 0o644))

	got := attackFirstList(t, dir)
	want := attackTruth(t, dir)
	require.Equal(t, want, got)
	for _, i := range got {
		switch i.Name() {
		case "c_0020.json":
			require.Equal(t, "bbbb", i.Meta["who"])
		case "c_0040.json":
			require.Equal(t, int64(10), i.Size)
		case "c_0050.json":
			require.Equal(t, "cccc", i.Meta["who"])
		}
	}
}

func TestAttackFirstListWithBadIndexes(t *testing.T) {
	skipUnlessLinux(t)
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	attackIndexStore(t, dir)
	good, err := os.ReadFile(filepath.Join(dir, indexName))
	require.NoError(t, err)

	// Stale: the store moved on (deleted, resaved with other meta, new
	// steps) and the old index was put back.
	s, err := Open[int](dir, WithLayout("c", 4), NoSync())
	require.NoError(t, err)
	for step := int64(1); step <= 20; step++ {
		require.NoError(t, s.Delete(ctx, step))
	}
	for step := int64(1); step <= 10; step++ {
		_, err := s.Save(ctx, step, int(step)+1, WithMeta("who", "zzzz"))
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	require.NoError(t, os.WriteFile(filepath.Join(dir, indexName), good, 0o644))
	require.Equal(t, attackTruth(t, dir), attackFirstList(t, dir), "stale index")

	// Truncated at several points.
	for _, cut := range []int{0, 1, len(indexMagic), len(good) / 2, len(good) - 1} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, indexName), good[:cut], 0o644))
		require.Equal(t, attackTruth(t, dir), attackFirstList(t, dir), "index cut at %d", cut)
	}

	// Foreign: another store's index (other inodes, same names).
	other := t.TempDir()
	attackIndexStore(t, other)
	foreign, err := os.ReadFile(filepath.Join(other, indexName))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, indexName), foreign, 0o644))
	require.Equal(t, attackTruth(t, dir), attackFirstList(t, dir), "foreign index")

	// Not a regular file.
	require.NoError(t, os.Remove(filepath.Join(dir, indexName)))
	require.NoError(t, os.Mkdir(filepath.Join(dir, indexName), 0o755))
	require.Equal(t, attackTruth(t, dir), attackFirstList(t, dir), "index is a directory")
	require.NoError(t, os.Remove(filepath.Join(dir, indexName)))
}

// Files rewritten in place in the same instant as they were saved, many
// times: the header cache and index key on the inode change time.
func TestAttackInPlaceRewriteRightAfterSave(t *testing.T) {
	skipUnlessLinux(t)
	t.Parallel()
	ctx := context.Background()
	for _, d := range []string{t.TempDir(), "/dev/shm"} {
		dir, err := os.MkdirTemp(d, "attack")
		require.NoError(t, err)
		defer os.RemoveAll(dir)
		s, err := Open[int](dir, WithLayout("c", 4), NoSync())
		require.NoError(t, err)
		for step := int64(1); step <= 100; step++ {
			info, err := s.Save(ctx, step, int(step), WithMeta("who", "aaaa"))
			require.NoError(t, err)
			_, err = s.List(ctx) // cached now
			require.NoError(t, err)
			b, err := os.ReadFile(info.Path)
			require.NoError(t, err)
			platformtest.RewriteInPlace(t, info.Path, bytes.Replace(b, []byte(`"aaaa"`), []byte(`"bbbb"`), 1))
			list, err := s.List(ctx)
			require.NoError(t, err)
			for _, i := range list {
				if i.Step == step {
					require.Equal(t, "bbbb", i.Meta["who"], "%s: step %d rewritten in place within %v is listed stale", d, step, time.Duration(0))
				}
			}
		}
		require.NoError(t, s.Close())
	}
}
