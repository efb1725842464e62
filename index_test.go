package checkpoint_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/internal/platformtest"
)

// openCounter is a Backend wrapping the local directory that counts the
// Opens of each name and lists as the directory does (names only), so a
// store on it takes the local directory's fill path: a stat per name.
type openCounter struct {
	checkpoint.Backend
	mu    sync.Mutex
	opens map[string]int
}

func (c *openCounter) Open(ctx context.Context, name string) (io.ReadCloser, checkpoint.Object, error) {
	c.mu.Lock()
	c.opens[name]++
	c.mu.Unlock()
	return c.Backend.Open(ctx, name)
}

// checkpointOpens returns how many times a checkpoint file (anything but
// the index) was opened.
func (c *openCounter) checkpointOpens() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for name, k := range c.opens {
		if name != checkpoint.IndexName {
			n += k
		}
	}
	return n
}

// indexedStoreSteps is how many checkpoints the index tests save: enough
// for Close to write the index.
const indexedStoreSteps = checkpoint.IndexMinWrite + 44

// saveIndexedStore saves indexedStoreSteps checkpoints in dir and closes
// the store, which writes the index. It returns the checkpoints' paths by
// step.
func saveIndexedStore(t *testing.T, dir string) map[int64]string {
	t.Helper()
	ctx := context.Background()
	w := openStore[int](t, dir)
	paths := make(map[int64]string)
	for step := int64(1); step <= indexedStoreSteps; step++ {
		info, err := w.Save(ctx, step, int(step))
		require.NoError(t, err)
		paths[step] = info.Path
	}
	require.NoError(t, w.Close())
	_, err := os.Stat(filepath.Join(dir, checkpoint.IndexName))
	require.NoError(t, err, "Close writes the index")
	return paths
}

// countingReader opens a ReadOnly store on dir through an openCounter.
func countingReader(t *testing.T, dir string) (*checkpoint.Store[int], *openCounter) {
	t.Helper()
	b, err := dirstore.Open(dir, dirstore.NoSync(), dirstore.ReadOnly())
	require.NoError(t, err)
	c := &openCounter{Backend: b, opens: make(map[string]int)}
	s, err := checkpoint.OpenBackend[int](c, checkpoint.ReadOnly(), checkpoint.NoSync())
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s, c
}

// listWithoutIndex lists dir as a store that has no index would: from a
// copy of the directory's checkpoint files without it.
func listWithoutIndex(t *testing.T, dir string) []checkpoint.Info {
	t.Helper()
	copyDir := t.TempDir()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		if e.Name()[0] == '.' {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(copyDir, e.Name()), b, 0o644))
		// A damaged file is listed with its modification time.
		fi, err := e.Info()
		require.NoError(t, err)
		require.NoError(t, os.Chtimes(filepath.Join(copyDir, e.Name()), fi.ModTime(), fi.ModTime()))
	}
	s := openStore[int](t, copyDir, checkpoint.ReadOnly())
	list, err := s.List(context.Background())
	require.NoError(t, err)
	for i := range list {
		list[i].Location = filepath.Join(dir, list[i].Name())
		list[i].Path = list[i].Location
	}
	return list
}

func TestFirstListAfterReopenOpensNoCheckpointWhenTheIndexIsCurrent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	saveIndexedStore(t, dir)
	want := listWithoutIndex(t, dir)

	s, c := countingReader(t, dir)
	list, err := s.List(context.Background())
	require.NoError(t, err)
	require.Zero(t, c.checkpointOpens(), "every header came from the index")
	require.Equal(t, 1, c.opens[checkpoint.IndexName])
	require.Equal(t, want, list)
}

// On object storage the listing tells each object's Version: a reader's
// first List there makes one GET, of the index, rather than one per
// checkpoint.
func TestFirstListOnObjectStorageGetsOnlyTheIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	w, err := checkpoint.OpenBackend[int](newCountingBackend(t, dir), checkpoint.NoSync())
	require.NoError(t, err)
	for step := int64(1); step <= indexedStoreSteps; step++ {
		_, err := w.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	want := listWithoutIndex(t, dir)

	b := newCountingBackend(t, dir)
	r, err := checkpoint.OpenBackend[int](b, checkpoint.ReadOnly())
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	b.reset()
	list, err := r.List(ctx)
	require.NoError(t, err)
	require.Equal(t, want, list)
	calls := b.reset()
	require.Equal(t, 1, calls["Open"], "%v", calls)
	require.Zero(t, calls["Stat"], "%v", calls)
}

// A writer killed before Close never writes the index there: a full scan
// that read many headers writes it, so the next first List after a
// restart reads none of them.
func TestAFullScanThatReadManyHeadersWritesTheIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	saveIndexedStore(t, dir)
	require.NoError(t, os.Remove(filepath.Join(dir, checkpoint.IndexName)))

	w := openStore[int](t, dir)
	_, err := w.List(ctx)
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(dir, checkpoint.IndexName))
	require.NoError(t, err, "the List wrote the index before any Close")

	s, c := countingReader(t, dir)
	_, err = s.List(ctx)
	require.NoError(t, err)
	require.Zero(t, c.checkpointOpens())
}

// The index is no checkpoint and no leftover; its temporary file, left by
// a writer killed while writing it, is one.
func TestTheIndexIsNoLeftoverButItsTemporaryFileIs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	saveIndexedStore(t, dir)
	temp := checkpoint.TempPrefix(checkpoint.IndexName) + "123"
	require.NoError(t, os.WriteFile(filepath.Join(dir, temp), []byte("torn"), 0o644))
	s := openStore[int](t, dir, checkpoint.ReadOnly())
	left, err := s.Leftovers(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(dir, temp)}, left.Temps)
	require.Empty(t, left.Quarantined)
	layouts, err := checkpoint.DetectLayouts(dir)
	require.NoError(t, err)
	require.Len(t, layouts, 1)
}

func TestFirstListRereadsCheckpointsChangedRemovedOrDamagedSinceTheIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	paths := saveIndexedStore(t, dir)
	name := func(step int64) string { return paths[step] }

	// Step 5 is replaced by another store's step 5, saved later: its
	// header (its time) is not the one the index holds.
	other := t.TempDir()
	o := openStore[int](t, other)
	replacement, err := o.Save(ctx, 5, 500)
	require.NoError(t, err)
	require.NoError(t, o.Close())
	b, err := os.ReadFile(replacement.Path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(name(5)+".new", b, 0o644))
	require.NoError(t, os.Rename(name(5)+".new", name(5)))
	// Step 7 is gone, step 9's header is damaged in place.
	require.NoError(t, os.Remove(name(7)))
	f, err := os.OpenFile(name(9), os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("#"), 2)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	want := listWithoutIndex(t, dir)
	s, c := countingReader(t, dir)
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, want, list)
	require.Len(t, list, indexedStoreSteps-1, "step 7 is not listed")
	require.True(t, replacement.Time.Equal(list[4].Time), "step 5's header is read again: %v", list[4])
	require.Equal(t, int64(9), list[7].Step)
	require.Zero(t, list[7].Format, "step 9 is listed as damaged")
	require.Equal(t, 2, c.checkpointOpens(), "only the changed files are read")
	_, _, err = s.Load(ctx, 9)
	require.ErrorIs(t, err, checkpoint.ErrCorrupt, "loading step 9 reports its damage")
}

// metaStoreSteps is how many checkpoints saveMetaStore saves.
const metaStoreSteps = 300

// saveMetaStore saves metaStoreSteps checkpoints in dir, in the layout
// c_0001.json, each with the meta who=aaaa, and closes the store, which
// writes the index.
func saveMetaStore(t *testing.T, dir string) {
	t.Helper()
	ctx := context.Background()
	s, err := checkpoint.Open[int](dir, checkpoint.WithLayout("c", 4), checkpoint.NoSync())
	require.NoError(t, err)
	for step := int64(1); step <= metaStoreSteps; step++ {
		_, err := s.Save(ctx, step, int(step), checkpoint.WithMeta("who", "aaaa"))
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	_, err = os.Stat(filepath.Join(dir, checkpoint.IndexName))
	require.NoError(t, err, "Close wrote the index")
}

// firstListWithoutIndex lists dir as firstListOf does, from links to its
// checkpoint files in a directory with no index at all.
func firstListWithoutIndex(t *testing.T, dir string) []checkpoint.Info {
	t.Helper()
	tmp := t.TempDir()
	for _, n := range dirNames(t, dir) {
		if n == checkpoint.IndexName || n == dirstore.LockName {
			continue
		}
		require.NoError(t, os.Link(filepath.Join(dir, n), filepath.Join(tmp, n)))
	}
	return firstListOf(t, tmp)
}

// firstListOf is the first List of a fresh reader of dir (in
// saveMetaStore's layout), each Info's location made its base name.
func firstListOf(t *testing.T, dir string) []checkpoint.Info {
	t.Helper()
	s, err := checkpoint.Open[int](dir, checkpoint.WithLayout("c", 4), checkpoint.ReadOnly())
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

// The first List of a store, which reads the header index with the names,
// describes every file as it is now, whatever the index says of it: files
// rewritten in place (same inode) with their size and modification time
// restored, truncated in place, or removed and made again at their name.
func TestFirstListDescribesFilesRewrittenInPlaceAsTheyAreNow(t *testing.T) {
	skipUnlessLinux(t)
	t.Parallel()
	dir := t.TempDir()
	saveMetaStore(t, dir)

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

	got := firstListOf(t, dir)
	want := firstListWithoutIndex(t, dir)
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

// A List sees a file rewritten in place in the instant it was saved and
// cached, on a disk and on tmpfs: the header cache and the index key on the
// inode change time.
func TestListSeesAFileRewrittenInPlaceInTheInstantOfItsSave(t *testing.T) {
	skipUnlessLinux(t)
	t.Parallel()
	ctx := context.Background()
	for _, d := range []string{t.TempDir(), "/dev/shm"} {
		dir, err := os.MkdirTemp(d, "rewrite")
		require.NoError(t, err)
		defer os.RemoveAll(dir)
		s, err := checkpoint.Open[int](dir, checkpoint.WithLayout("c", 4), checkpoint.NoSync())
		require.NoError(t, err)
		for step := int64(1); step <= 100; step++ {
			info, err := s.Save(ctx, step, int(step), checkpoint.WithMeta("who", "aaaa"))
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

func TestFirstListIgnoresAGarbageTruncatedHugeOrForeignIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	saveIndexedStore(t, dir)
	good, err := os.ReadFile(filepath.Join(dir, checkpoint.IndexName))
	require.NoError(t, err)
	want := listWithoutIndex(t, dir)

	// A foreign index: another directory's, of the same names, whose
	// headers (their save times) are not this directory's.
	foreignDir := t.TempDir()
	saveIndexedStore(t, foreignDir)
	foreign, err := os.ReadFile(filepath.Join(foreignDir, checkpoint.IndexName))
	require.NoError(t, err)
	// An entry that lies about its header, its checksum made right.
	lying := bytes.Replace(good, []byte(`"step":3,`), []byte(`"step":4,`), 1)
	require.NotEqual(t, good, lying)

	for _, tc := range []struct {
		name  string
		index []byte
		huge  bool
	}{
		{"garbage", []byte("\x00\x01not an index at all\n"), false},
		{"empty", nil, false},
		{"truncated", good[:len(good)/2], false},
		{"without its end line", good[:bytes.LastIndexByte(good[:len(good)-1], '\n')+1], false},
		{"with a wrong checksum", lying, false},
		{"foreign", foreign, false},
		{"huge", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Each case has its own copy of the directory: the cases
			// run one after another on the shared one otherwise.
			caseDir := t.TempDir()
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			for _, e := range entries {
				if e.Name() == checkpoint.IndexName || e.Name()[0] == '.' {
					continue
				}
				require.NoError(t, os.Link(filepath.Join(dir, e.Name()), filepath.Join(caseDir, e.Name())))
			}
			path := filepath.Join(caseDir, checkpoint.IndexName)
			require.NoError(t, os.WriteFile(path, tc.index, 0o644))
			if tc.huge {
				require.NoError(t, os.Truncate(path, checkpoint.IndexMaxSize+1))
			}
			s, c := countingReader(t, caseDir)
			list, err := s.List(ctx)
			require.NoError(t, err)
			for i := range list {
				list[i].Location = filepath.Join(dir, list[i].Name())
				list[i].Path = list[i].Location
			}
			require.Equal(t, want, list)
			require.Equal(t, indexedStoreSteps, c.checkpointOpens(), "every header is read from its file")
		})
	}
}

// The first List describes every file as it is now past an index that is
// stale (the store moved on and the old index was put back), cut at any
// point, another store's, or not a regular file.
func TestFirstListIgnoresAStaleCutForeignOrNonRegularIndex(t *testing.T) {
	skipUnlessLinux(t)
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	saveMetaStore(t, dir)
	good, err := os.ReadFile(filepath.Join(dir, checkpoint.IndexName))
	require.NoError(t, err)

	// Stale: the store moved on (deleted, resaved with other meta, new
	// steps) and the old index was put back.
	s, err := checkpoint.Open[int](dir, checkpoint.WithLayout("c", 4), checkpoint.NoSync())
	require.NoError(t, err)
	for step := int64(1); step <= 20; step++ {
		require.NoError(t, s.Delete(ctx, step))
	}
	for step := int64(1); step <= 10; step++ {
		_, err := s.Save(ctx, step, int(step)+1, checkpoint.WithMeta("who", "zzzz"))
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	require.NoError(t, os.WriteFile(filepath.Join(dir, checkpoint.IndexName), good, 0o644))
	require.Equal(t, firstListWithoutIndex(t, dir), firstListOf(t, dir), "stale index")

	// Truncated at several points.
	for _, cut := range []int{0, 1, len(checkpoint.IndexMagic), len(good) / 2, len(good) - 1} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, checkpoint.IndexName), good[:cut], 0o644))
		require.Equal(t, firstListWithoutIndex(t, dir), firstListOf(t, dir), "index cut at %d", cut)
	}

	// Foreign: another store's index (other inodes, same names).
	other := t.TempDir()
	saveMetaStore(t, other)
	foreign, err := os.ReadFile(filepath.Join(other, checkpoint.IndexName))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, checkpoint.IndexName), foreign, 0o644))
	require.Equal(t, firstListWithoutIndex(t, dir), firstListOf(t, dir), "foreign index")

	// Not a regular file.
	require.NoError(t, os.Remove(filepath.Join(dir, checkpoint.IndexName)))
	require.NoError(t, os.Mkdir(filepath.Join(dir, checkpoint.IndexName), 0o755))
	require.Equal(t, firstListWithoutIndex(t, dir), firstListOf(t, dir), "index is a directory")
	require.NoError(t, os.Remove(filepath.Join(dir, checkpoint.IndexName)))
}

// hostileIndex returns a checksummed index of about size bytes made of
// tiny lines that name no file of the store, whose end line claims count
// lines (-1: as many as there are).
func hostileIndex(size int, count int64) []byte {
	data := []byte(checkpoint.IndexMagic)
	lines := 0
	for len(data) < size {
		data = fmt.Appendf(data, "%x\t1\tv\t{}\n", lines)
		lines++
	}
	if count < 0 {
		count = int64(lines)
	}
	return fmt.Appendf(data, "end %d %08x\n", count, crc32.Checksum(data, checkpoint.IndexCRC))
}

// firstListAlloc returns the bytes a fresh store's first List of dir,
// which holds steps checkpoints, allocates.
func firstListAlloc(t *testing.T, dir string, steps int) uint64 {
	t.Helper()
	s := openStore[int](t, dir, checkpoint.ReadOnly())
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	list, err := s.List(context.Background())
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	require.Len(t, list, steps)
	return after.TotalAlloc - before.TotalAlloc
}

// What an index costs the first List is bounded by the index's own size
// and the directory's contents, not by what the index claims: a checksummed
// index of tiny lines, or one whose end line claims more entries than it
// holds, costs the first List at most twice its bytes more than no index.
// Not parallel: it measures the process's allocations.
func TestFirstListAllocationIsBoundedByTheIndexSizeNotItsClaims(t *testing.T) {
	dir := t.TempDir()
	w := openStore[int](t, dir, checkpoint.NoSync())
	for step := int64(1); step <= 100; step++ { // past indexMinFill, under checkpoint.IndexMinWrite
		_, err := w.Save(context.Background(), step, int(step))
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	_, err := os.Stat(filepath.Join(dir, checkpoint.IndexName))
	require.ErrorIs(t, err, os.ErrNotExist, "the store is too small to write an index of its own")
	base := firstListAlloc(t, dir, 100)

	const size = 2 << 20
	for _, c := range []struct {
		what  string
		index []byte
	}{
		{"tiny entries filling it", hostileIndex(size, -1)},
		{"an end line claiming 2^40 entries", hostileIndex(size, 1<<40)},
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, checkpoint.IndexName), c.index, 0o644))
		got := firstListAlloc(t, dir, 100)
		limit := base + 2*uint64(len(c.index))
		require.LessOrEqual(t, got, limit, "%s: the first List allocated %d MiB for an index of %d MiB (%d KiB without it)", c.what, got>>20, len(c.index)>>20, base>>10)
	}
}

// An index entry whose header is longer than the writer ever puts in an
// index (indexMaxHeader) is taken as absent, before it is decoded: its
// file's header is read from the file, even for an entry of a real,
// unchanged checkpoint (its Version is the one the store's own index
// gives), and the first List costs at most twice the index's bytes more
// than with the store's own index. Not parallel: it measures the process's
// allocations.
func TestFirstListReadsAnIndexEntryLongerThanTheWriterWritesFromItsFile(t *testing.T) {
	dir := t.TempDir()
	saveIndexedStore(t, dir)
	want := listWithoutIndex(t, dir)
	base := firstListAlloc(t, dir, indexedStoreSteps)

	// The first entry's header gains a meta far over indexMaxHeader; the
	// index's checksum is made again.
	idx, err := os.ReadFile(filepath.Join(dir, checkpoint.IndexName))
	require.NoError(t, err)
	body := idx[len(checkpoint.IndexMagic) : bytes.LastIndexByte(idx[:len(idx)-1], '\n')+1]
	lines := bytes.SplitAfter(body, []byte{'\n'})
	lines = lines[:len(lines)-1] // the empty one after the last newline
	parts := bytes.SplitN(lines[0], []byte{'\t'}, 4)
	h := bytes.TrimSuffix(parts[3], []byte("}\n"))
	h = append(bytes.Clone(h), `,"meta":{`...)
	for i := 0; len(h) < 4<<20; i++ {
		if i > 0 {
			h = append(h, ',')
		}
		h = fmt.Appendf(h, `"%x":""`, i)
	}
	h = append(h, "}}\n"...)
	lines[0] = bytes.Join([][]byte{parts[0], parts[1], parts[2], h}, []byte{'\t'})
	out := append([]byte(checkpoint.IndexMagic), bytes.Join(lines, nil)...)
	out = fmt.Appendf(out, "end %d %08x\n", len(lines), crc32.Checksum(out, checkpoint.IndexCRC))
	require.NoError(t, os.WriteFile(filepath.Join(dir, checkpoint.IndexName), out, 0o644))

	got := firstListAlloc(t, dir, indexedStoreSteps)
	require.LessOrEqual(t, got, base+2*uint64(len(out)), "the first List allocated %d MiB for an index of %d MiB (%d KiB with the store's own)", got>>20, len(out)>>20, base>>10)

	s, c := countingReader(t, dir)
	list, err := s.List(context.Background())
	require.NoError(t, err)
	require.Equal(t, want, list, "the oversized entry's header was taken from the index")
	require.Equal(t, 1, c.checkpointOpens(), "only the oversized entry's file is read")
	require.Equal(t, 1, c.opens[string(parts[0])])
}

// redateInIndex rewrites the store's header index in dir, as any program
// can (its checksum is no signature), so that the header it holds for the
// file name says it was saved at when: the file itself is untouched, and
// so is its Version, which is all that ties the index to it.
func redateInIndex(t *testing.T, dir, name string, when time.Time) {
	t.Helper()
	path := filepath.Join(dir, checkpoint.IndexName)
	idx, err := os.ReadFile(path)
	require.NoError(t, err)
	end := bytes.LastIndexByte(idx[:len(idx)-1], '\n') + 1             // the end line
	saveTime := regexp.MustCompile(`("kind":"[a-z]+","time":)"[^"]*"`) // the header's, not an error record's
	out := []byte(checkpoint.IndexMagic)
	found := false
	for _, l := range bytes.SplitAfter(idx[len(checkpoint.IndexMagic):end], []byte{'\n'}) {
		if bytes.HasPrefix(l, []byte(name+"\t")) {
			l = saveTime.ReplaceAll(l, fmt.Appendf(nil, `${1}%q`, when.Format(time.RFC3339Nano)))
			found = true
		}
		out = append(out, l...)
	}
	require.True(t, found, "the index holds %s", name)
	n := bytes.Count(out[len(checkpoint.IndexMagic):], []byte{'\n'})
	out = fmt.Appendf(out, "end %d %08x\n", n, crc32.Checksum(out, checkpoint.IndexCRC))
	require.NoError(t, os.WriteFile(path, out, 0o644))
}

// indexedStore saves steps 1 to indexMinWrite+20 in a fresh directory,
// then does more (may be nil), and closes the store: its Close writes the
// header index that a later store's first scan reads.
func indexedStore(t *testing.T, more func(s *checkpoint.Store[int]) checkpoint.Info) (dir string, last checkpoint.Info) {
	t.Helper()
	ctx := context.Background()
	dir = t.TempDir()
	w := openStore[int](t, dir)
	for step := int64(1); step <= checkpoint.IndexMinWrite+20; step++ {
		var err error
		last, err = w.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	if more != nil {
		last = more(w)
	}
	require.NoError(t, w.Close())
	_, err := os.Stat(filepath.Join(dir, checkpoint.IndexName))
	require.NoError(t, err, "the store wrote its index")
	return dir, last
}

// Whether a clean checkpoint was saved after an error checkpoint is judged
// on the save times in their files, never on those of the header index: an
// index (hand-edited, or written by a buggy program) that dates the newest
// checkpoint, an error one, before the clean checkpoint of its step does
// not make a writer's Prune remove the failure that Latest is to redo.
func TestSupersessionIsJudgedOnTheFilesSaveTimesNotTheIndexs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, errInfo := indexedStore(t, func(w *checkpoint.Store[int]) checkpoint.Info {
		info, err := w.SaveError(ctx, checkpoint.IndexMinWrite+20, -1, errors.New("step failed after its save"))
		require.NoError(t, err)
		return info
	})
	redateInIndex(t, dir, errInfo.Name(), time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))

	s := openStore[int](t, dir)
	removed, err := s.Prune(ctx)
	require.NoError(t, err)
	require.Empty(t, removed)
	_, err = os.Stat(errInfo.Path)
	require.NoError(t, err, "the newest checkpoint, an error one, stays")
	_, latest, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, checkpoint.KindError, latest.Kind, "Latest redoes the failed step")
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.True(t, list[len(list)-1].Time.Equal(errInfo.Time), "the cache holds the file's save time, not the index's: %v", list[len(list)-1])
}

// The retention rules, like supersession, remove a checkpoint only on
// headers read from the files: an index that dates the newest checkpoint
// (a final one, saved after the step checkpoint of its step) before the
// other does not make KeepLast(1) remove it as the older one.
func TestRetentionKeepsTheNewestCheckpointWhateverTheIndexSaysOfItsSaveTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, final := indexedStore(t, func(w *checkpoint.Store[int]) checkpoint.Info {
		info, err := w.SaveFinal(ctx, checkpoint.IndexMinWrite+20, -1)
		require.NoError(t, err)
		return info
	})
	redateInIndex(t, dir, final.Name(), time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))

	s := openStore[int](t, dir, checkpoint.KeepLast(1), checkpoint.PruneKinds(checkpoint.KindFinal))
	removed, err := s.Prune(ctx)
	require.NoError(t, err)
	require.Len(t, removed, checkpoint.IndexMinWrite+20, "every step checkpoint")
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{fmt.Sprintf("%df", checkpoint.IndexMinWrite+20)}, kindsOf(list))
	v, _, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, -1, v, "the final state, saved last")
}

// Reading headers from the files (not the index) before a removal costs a
// save after Open one header read per checkpoint it removes, never one per
// checkpoint that protects: on object storage each is a request.
func TestRetentionReadsOneHeaderPerRemovalAfterOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, _ := indexedStore(t, nil)
	b := newCountingBackend(t, dir)
	s, err := checkpoint.OpenBackend[int](b, checkpoint.NoSync(), checkpoint.KeepLast(20))
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	_, err = s.Save(ctx, checkpoint.IndexMinWrite+21, 0)
	require.NoError(t, err)
	calls := b.reset()
	require.Equal(t, 1+checkpoint.IndexMinWrite+1, calls["Open"], "the index, and each of the checkpoints removed: %v", calls)
	for step := int64(checkpoint.IndexMinWrite + 22); step < checkpoint.IndexMinWrite+30; step++ {
		_, err := s.Save(ctx, step, 0)
		require.NoError(t, err)
		require.Equal(t, map[string]int{"Create": 1, "Open": 1, "Remove": 1}, b.reset())
	}
}

// Prune decides on headers read from the files, never on the index's
// lines alone: with an index it reads each victim's header again; with
// none it reads each header once, in the listing's fill, and no more
// (besides the newest checkpoint, which the safety net loads whole).
func TestPruneReadsAgainOnlyWhatTheIndexSaid(t *testing.T) {
	t.Parallel()
	const keep = 10
	victims := indexedStoreSteps - keep
	for _, tc := range []struct {
		name     string
		index    bool
		min, max int // Opens of checkpoints
	}{
		{"with an index", true, victims, victims + keep + 1},
		{"without one", false, indexedStoreSteps, indexedStoreSteps + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dir := t.TempDir()
			saveIndexedStore(t, dir)
			if !tc.index {
				require.NoError(t, os.Remove(filepath.Join(dir, checkpoint.IndexName)))
			}
			b := newCountingBackend(t, dir)
			c := &openCounter{Backend: b, opens: make(map[string]int)}
			s, err := checkpoint.OpenBackend[int](c, checkpoint.NoSync(), checkpoint.KeepLast(keep))
			require.NoError(t, err)
			t.Cleanup(func() { s.Close() })
			removed, err := s.Prune(ctx)
			require.NoError(t, err)
			require.Len(t, removed, victims)
			n := c.checkpointOpens()
			require.GreaterOrEqual(t, n, tc.min)
			require.LessOrEqual(t, n, tc.max)
		})
	}
}

// A writer that never reads the index (it saves without listing) keeps the
// index's lines of the checkpoints it did not read when its Close writes
// the index again: the next first List reads none of their files, on a
// directory and on object storage.
func TestCloseKeepsTheIndexLinesOfCheckpointsItDidNotRead(t *testing.T) {
	t.Parallel()
	const total = indexedStoreSteps + checkpoint.IndexMinWrite
	resume := func(t *testing.T, b checkpoint.Backend) {
		ctx := context.Background()
		w, err := checkpoint.OpenBackend[int](b, checkpoint.NoSync())
		require.NoError(t, err)
		for step := int64(indexedStoreSteps + 1); step <= total; step++ {
			_, err := w.Save(ctx, step, int(step))
			require.NoError(t, err)
		}
		require.NoError(t, w.Close())
	}
	t.Run("directory", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		saveIndexedStore(t, dir)
		b, err := dirstore.Open(dir, dirstore.NoSync())
		require.NoError(t, err)
		resume(t, b)
		s, c := countingReader(t, dir)
		list, err := s.List(context.Background())
		require.NoError(t, err)
		require.Len(t, list, total)
		require.Zero(t, c.checkpointOpens(), "the first List read headers the index had described")
	})
	t.Run("object storage", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		saveIndexedStore(t, dir)
		resume(t, newCountingBackend(t, dir))
		b := newCountingBackend(t, dir)
		r, err := checkpoint.OpenBackend[int](b, checkpoint.ReadOnly())
		require.NoError(t, err)
		t.Cleanup(func() { r.Close() })
		b.reset()
		list, err := r.List(context.Background())
		require.NoError(t, err)
		require.Len(t, list, total)
		calls := b.reset()
		require.Equal(t, 1, calls["Open"], "the index's GET alone: %v", calls)
	})
}
