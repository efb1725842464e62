package checkpoint

import (
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint/dirstore"
)

// openCounter is a Backend wrapping the local directory that counts the
// Opens of each name and lists as the directory does (names only), so a
// store on it takes the local directory's fill path: a stat per name.
type openCounter struct {
	Backend
	mu    sync.Mutex
	opens map[string]int
}

func (c *openCounter) Open(ctx context.Context, name string) (io.ReadCloser, Object, error) {
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
		if name != indexName {
			n += k
		}
	}
	return n
}

// indexedStoreSteps is how many checkpoints the index tests save: enough
// for Close to write the index.
const indexedStoreSteps = indexMinWrite + 44

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
	_, err := os.Stat(filepath.Join(dir, indexName))
	require.NoError(t, err, "Close writes the index")
	return paths
}

// countingReader opens a ReadOnly store on dir through an openCounter.
func countingReader(t *testing.T, dir string) (*Store[int], *openCounter) {
	t.Helper()
	b, err := dirstore.Open(dir, dirstore.NoSync(), dirstore.ReadOnly())
	require.NoError(t, err)
	c := &openCounter{Backend: b, opens: make(map[string]int)}
	s, err := OpenBackend[int](c, ReadOnly(), NoSync())
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s, c
}

// listWithoutIndex lists dir as a store that has no index would: from a
// copy of the directory's checkpoint files without it.
func listWithoutIndex(t *testing.T, dir string) []Info {
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
	s := openStore[int](t, copyDir, ReadOnly())
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
	require.Equal(t, 1, c.opens[indexName])
	require.Equal(t, want, list)
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
	require.ErrorIs(t, err, ErrCorrupt, "loading step 9 reports its damage")
}

func TestFirstListIgnoresAGarbageTruncatedHugeOrForeignIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	saveIndexedStore(t, dir)
	good, err := os.ReadFile(filepath.Join(dir, indexName))
	require.NoError(t, err)
	want := listWithoutIndex(t, dir)

	// A foreign index: another directory's, of the same names, whose
	// headers (their save times) are not this directory's.
	foreignDir := t.TempDir()
	saveIndexedStore(t, foreignDir)
	foreign, err := os.ReadFile(filepath.Join(foreignDir, indexName))
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
				if e.Name() == indexName || e.Name()[0] == '.' {
					continue
				}
				require.NoError(t, os.Link(filepath.Join(dir, e.Name()), filepath.Join(caseDir, e.Name())))
			}
			path := filepath.Join(caseDir, indexName)
			require.NoError(t, os.WriteFile(path, tc.index, 0o644))
			if tc.huge {
				require.NoError(t, os.Truncate(path, indexMaxSize+1))
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

// A writer killed before Close never writes the index there: a full scan
// that read many headers writes it, so the next first List after a
// restart reads none of them.
func TestAFullScanThatReadManyHeadersWritesTheIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	saveIndexedStore(t, dir)
	require.NoError(t, os.Remove(filepath.Join(dir, indexName)))

	w := openStore[int](t, dir)
	_, err := w.List(ctx)
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(dir, indexName))
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
	temp := tempPrefix(indexName) + "123"
	require.NoError(t, os.WriteFile(filepath.Join(dir, temp), []byte("torn"), 0o644))
	s := openStore[int](t, dir, ReadOnly())
	left, err := s.Leftovers(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(dir, temp)}, left.Temps)
	require.Empty(t, left.Quarantined)
	layouts, err := DetectLayouts(dir)
	require.NoError(t, err)
	require.Len(t, layouts, 1)
}

// FuzzParseIndex feeds checkIndex and entries damaged indexes: they must
// return nil or entries, never panic, and decoding an entry must not panic
// either.
func FuzzParseIndex(f *testing.F) {
	dir := f.TempDir()
	s, err := Open[int](dir, NoSync())
	if err != nil {
		f.Fatal(err)
	}
	for step := int64(1); step <= 3; step++ {
		if _, err := s.Save(context.Background(), step, int(step)); err != nil {
			f.Fatal(err)
		}
	}
	s.writeIndex(context.Background())
	s.Close()
	good, err := os.ReadFile(filepath.Join(dir, indexName))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(indexMagic + "end 0 00000000\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fn, _ := layout{prefix: "step", digits: 8}.parse("step_00000001.json")
		every := func(name []byte) (string, bool) { return string(name), true }
		for _, x := range checkIndex(data).entries(every) {
			x.decode(fn)
		}
		// The same bytes as the body of an index whose checksum and count
		// hold, so that the lines themselves are parsed and decoded.
		if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
			body := append([]byte(indexMagic), data[:i+1]...)
			sealed := fmt.Appendf(body, "end %d %08x\n", bytes.Count(data[:i+1], []byte{'\n'}), crc32.Checksum(body, indexCRC))
			for _, x := range checkIndex(sealed).entries(every) {
				x.decode(fn)
			}
		}
	})
}

// On object storage the listing tells each object's Version: a reader's
// first List there makes one GET, of the index, rather than one per
// checkpoint.
func TestFirstListOnObjectStorageGetsOnlyTheIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	w, err := OpenBackend[int](newCountingBackend(t, dir), NoSync())
	require.NoError(t, err)
	for step := int64(1); step <= indexedStoreSteps; step++ {
		_, err := w.Save(ctx, step, int(step))
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	want := listWithoutIndex(t, dir)

	b := newCountingBackend(t, dir)
	r, err := OpenBackend[int](b, ReadOnly())
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

// hostileIndex returns a checksummed index of about size bytes made of
// tiny lines that name no file of the store, whose end line claims count
// lines (-1: as many as there are).
func hostileIndex(size int, count int64) []byte {
	data := []byte(indexMagic)
	lines := 0
	for len(data) < size {
		data = fmt.Appendf(data, "%x\t1\tv\t{}\n", lines)
		lines++
	}
	if count < 0 {
		count = int64(lines)
	}
	return fmt.Appendf(data, "end %d %08x\n", count, crc32.Checksum(data, indexCRC))
}

// firstListAlloc returns the bytes a fresh store's first List of dir,
// which holds steps checkpoints, allocates.
func firstListAlloc(t *testing.T, dir string, steps int) uint64 {
	t.Helper()
	s := openStore[int](t, dir, ReadOnly())
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
// index of a million tiny lines, or one whose end line claims billions of
// entries, costs about its bytes. Not parallel: it measures the process's
// allocations.
func TestFirstListAllocationIsBoundedByTheIndexSizeNotItsClaims(t *testing.T) {
	dir := t.TempDir()
	w := openStore[int](t, dir, NoSync())
	for step := int64(1); step <= 100; step++ { // past indexMinFill, under indexMinWrite
		_, err := w.Save(context.Background(), step, int(step))
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	_, err := os.Stat(filepath.Join(dir, indexName))
	require.ErrorIs(t, err, os.ErrNotExist, "the store is too small to write an index of its own")
	base := firstListAlloc(t, dir, 100)

	const size = 2 << 20
	for _, c := range []struct {
		what  string
		index []byte
	}{
		{"180,000 tiny entries", hostileIndex(size, -1)},
		{"an end line claiming 2^40 entries", hostileIndex(size, 1<<40)},
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, indexName), c.index, 0o644))
		got := firstListAlloc(t, dir, 100)
		limit := base + 2*uint64(len(c.index))
		require.LessOrEqual(t, got, limit, "%s: the first List allocated %d MiB for an index of %d MiB (%d KiB without it)", c.what, got>>20, len(c.index)>>20, base>>10)
	}
}

// An index entry whose header is longer than the writer ever puts in an
// index (indexMaxHeader) is taken as absent, before it is decoded: its
// file's header is read from the file. An entry for a real, unchanged
// checkpoint (its Version is the one the store's own index gives) with a
// meta of 390,000 tiny keys in 4 MiB would otherwise cost the first List
// about 70 MiB, which the header cache keeps. Not parallel: it measures
// the process's allocations.
func TestFirstListReadsAnIndexEntryLongerThanTheWriterWritesFromItsFile(t *testing.T) {
	dir := t.TempDir()
	saveIndexedStore(t, dir)
	want := listWithoutIndex(t, dir)
	base := firstListAlloc(t, dir, indexedStoreSteps)

	// The first entry's header gains a meta far over indexMaxHeader; the
	// index's checksum is made again.
	idx, err := os.ReadFile(filepath.Join(dir, indexName))
	require.NoError(t, err)
	body := idx[len(indexMagic) : bytes.LastIndexByte(idx[:len(idx)-1], '\n')+1]
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
	out := append([]byte(indexMagic), bytes.Join(lines, nil)...)
	out = fmt.Appendf(out, "end %d %08x\n", len(lines), crc32.Checksum(out, indexCRC))
	require.NoError(t, os.WriteFile(filepath.Join(dir, indexName), out, 0o644))

	got := firstListAlloc(t, dir, indexedStoreSteps)
	require.LessOrEqual(t, got, base+2*uint64(len(out)), "the first List allocated %d MiB for an index of %d MiB (%d KiB with the store's own)", got>>20, len(out)>>20, base>>10)

	s, c := countingReader(t, dir)
	list, err := s.List(context.Background())
	require.NoError(t, err)
	require.Equal(t, want, list, "the oversized entry's header was taken from the index")
	require.Equal(t, 1, c.checkpointOpens(), "only the oversized entry's file is read")
	require.Equal(t, 1, c.opens[string(parts[0])])
}
