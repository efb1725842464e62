package dirstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/gocheckpoint/checkpoint/internal/testkit"
)

// lockedDir opens dir durably and takes its writer lock.
func lockedDir(t *testing.T, dir string, opts ...Option) (*dirBackend, func() error) {
	t.Helper()
	b, err := Open(dir, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	unlock, err := b.Lock(context.Background())
	require.NoError(t, err)
	d := b.(*dirBackend)
	d.spare.always.Store(true) // however cheap creating a file is here
	return d, unlock
}

func writeBytes(data []byte) func(io.Writer) error {
	return func(w io.Writer) error { _, err := w.Write(data); return err }
}

// inode returns the inode of the file name in dir.
func inode(t *testing.T, dir, name string) uint64 {
	t.Helper()
	fi, err := os.Lstat(filepath.Join(dir, name))
	require.NoError(t, err)
	return fi.Sys().(*syscall.Stat_t).Ino
}

// spareReady waits for a spare being made in d, and reports whether d
// has a spare.
func spareReady(d *dirBackend) bool {
	d.spare.mu.Lock()
	defer d.spare.mu.Unlock()
	for d.spare.making > 0 {
		d.spare.await()
	}
	return len(d.spare.fs) > 0
}

// theSpare returns d's one spare, once made.
func theSpare(t *testing.T, d *dirBackend) *fdTemp {
	t.Helper()
	spareReady(d)
	d.spare.mu.Lock()
	defer d.spare.mu.Unlock()
	require.Len(t, d.spare.fs, 1, "not one spare")
	return d.spare.fs[0].(*fdTemp)
}

// spareInode returns the inode of d's spare, once made; it fails if there
// is none.
func spareInode(t *testing.T, d *dirBackend) uint64 {
	t.Helper()
	spareReady(d)
	if d.spare.refused.Load() {
		t.Skip("this file system or system refuses unnamed files (O_TMPFILE) or linking them through /proc")
	}
	var st unix.Stat_t
	require.NoError(t, unix.Fstat(theSpare(t, d).fd, &st))
	require.Zero(t, st.Nlink, "the spare has a name")
	return st.Ino
}

// requireNoTemps checks that dir holds names and the lock file only.
func requireNoTemps(t *testing.T, dir string, names ...string) {
	t.Helper()
	want := append([]string{LockName}, names...)
	require.ElementsMatch(t, want, testkit.DirNames(t, dir))
}

// A durable write of a directory that holds its lock makes, while it
// waits for its fsync, the file the next write starts from: a file with no
// name, which no listing shows. The next write is published from that very
// file (its inode), whole, and makes the next spare. The lock's release
// closes the spare, and a write without the lock makes none.
func TestADurableWriteStartsFromTheSpareTheLastOneMade(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	d, unlock := lockedDir(t, dir)

	_, err := d.Create(ctx, "a", writeBytes([]byte("first")))
	require.NoError(t, err)
	ino := spareInode(t, d)
	requireNoTemps(t, dir, "a")

	second := bytes.Repeat([]byte("second "), 20<<10)
	_, err = d.Create(ctx, "b", writeBytes(second))
	require.NoError(t, err)
	require.Equal(t, ino, inode(t, dir, "b"), "b was not written to the spare")
	got, err := os.ReadFile(filepath.Join(dir, "b"))
	require.NoError(t, err)
	require.True(t, bytes.Equal(second, got))

	// A replacement takes the spare too.
	ino = spareInode(t, d)
	_, err = d.Replace(ctx, "a", "", writeBytes([]byte("again")))
	require.NoError(t, err)
	require.Equal(t, ino, inode(t, dir, "a"))
	requireNoTemps(t, dir, "a", "b")

	spareInode(t, d)
	old := theSpare(t, d)
	require.NoError(t, unlock())
	require.False(t, spareReady(d))
	require.Equal(t, -1, old.fd, "the lock's release left the spare open")

	_, err = d.Create(ctx, "c", writeBytes([]byte("unlocked")))
	require.NoError(t, err)
	require.False(t, spareReady(d), "a write without the lock made a spare")
	require.ElementsMatch(t, []string{LockName, "a", "b", "c"}, testkit.DirNames(t, dir))
}

// Close closes the spare; a directory opened with NoSync makes none (it
// has no fsync to make it beside).
func TestCloseFreesTheSpareAndNoSyncMakesNone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, _ := lockedDir(t, t.TempDir())
	_, err := d.Create(ctx, "a", writeBytes([]byte("x")))
	require.NoError(t, err)
	spareInode(t, d)
	old := theSpare(t, d)
	require.NoError(t, d.Close())
	require.Equal(t, -1, old.fd)
	require.False(t, spareReady(d))

	n, _ := lockedDir(t, t.TempDir(), NoSync())
	_, err = n.Create(ctx, "a", writeBytes([]byte("x")))
	require.NoError(t, err)
	require.False(t, spareReady(n), "NoSync made a spare")
}

// spareAfterA opens dir durably, takes its lock, writes the file "a"
// through the directory's fdOps and a fileIO with its spares, and returns
// them once the spare that write made is ready.
func spareAfterA(t *testing.T, dir string) (*dirBackend, fdOps, fileIO) {
	t.Helper()
	d, _ := lockedDir(t, dir)
	ops := d.ops(d.root.Load(), "a").(fdOps)
	o := d.io()
	o.spare = &d.spare
	_, err := writeFile(ops, "a", writeBytes([]byte("a")), false, o)
	require.NoError(t, err)
	spareInode(t, d)
	return d, ops, o
}

// namingFails are a directory's fdOps whose naming of a spare fails with
// err.
type namingFails struct {
	fdOps
	err error
}

func (n namingFails) nameSpare(tempFile, string) (string, error) { return "", n.err }

// A spare that cannot be named is closed and the write creates its file as
// it would without one, and succeeds. A refusal (no /proc, a sandbox)
// stops the directory making spares; a failure of the moment (a full disk)
// does not.
func TestASpareThatCannotBeNamedIsNotUsed(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		err     error
		refused bool
	}{
		{"refused", &os.LinkError{Op: "linkat", Err: unix.EPERM}, true},
		{"full disk", &os.LinkError{Op: "linkat", Err: unix.ENOSPC}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			d, ops, o := spareAfterA(t, dir)
			spare := theSpare(t, d)

			_, err := writeFile(namingFails{ops, c.err}, "b", writeBytes([]byte("bee")), false, o)
			require.NoError(t, err)
			require.Equal(t, -1, spare.fd, "the spare was not closed")
			got, err := os.ReadFile(filepath.Join(dir, "b"))
			require.NoError(t, err)
			require.Equal(t, "bee", string(got))
			requireNoTemps(t, dir, "a", "b")
			require.Equal(t, c.refused, d.spare.refused.Load())
			require.Equal(t, !c.refused, spareReady(d), "spares go on unless refused")
		})
	}
}

// fakeProc are a directory's fdOps that name a spare through proc, a
// directory that stands for /proc/self/fd where /proc is no procfs; with
// unchecked, without the check that proc is on a procfs (as if /proc had
// changed between that check and the link).
type fakeProc struct {
	fdOps
	proc      string
	unchecked bool
}

func (p fakeProc) nameSpare(f tempFile, name string) (string, error) {
	if p.unchecked {
		return p.nameSpareVia(p.proc, f, name)
	}
	return p.nameSpareAt(p.proc, f, name)
}

// Where /proc is a plain directory (a chroot without procfs), the path of
// the spare's descriptor may be another file, which linkat would link
// under the temporary name. The naming is refused before any link, as
// /proc is no procfs; should that check pass and the link reach another
// file, the naming checks that the name is the spare's and takes it back.
// Either way the directory stops making spares, the write still publishes
// its own bytes, and the other file is not linked into the store.
func TestASpareNamedThroughAFakeProcIsRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		unchecked bool
		want      error
	}{
		{"refused before any link", false, errNotProcfs},
		{"the link taken back", true, errNotTheSpare},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			d, ops, o := spareAfterA(t, dir)
			spare := theSpare(t, d)

			proc := filepath.Join(t.TempDir(), "fd")
			require.NoError(t, os.Mkdir(proc, 0o755))
			foreign := filepath.Join(proc, strconv.Itoa(spare.fd))
			require.NoError(t, os.WriteFile(foreign, []byte("foreign"), 0o644))

			// Which check refuses.
			fake := fakeProc{ops, proc + "/", c.unchecked}
			_, err := fake.nameSpare(spare, "b")
			require.ErrorIs(t, err, c.want)
			require.True(t, ops.refusal(err))
			requireNoTemps(t, dir, "a")

			_, err = writeFile(fake, "b", writeBytes([]byte("bee")), false, o)
			require.NoError(t, err)
			got, err := os.ReadFile(filepath.Join(dir, "b"))
			require.NoError(t, err)
			require.Equal(t, "bee", string(got))
			requireNoTemps(t, dir, "a", "b")
			fi, err := os.Stat(foreign)
			require.NoError(t, err)
			require.EqualValues(t, 1, fi.Sys().(*syscall.Stat_t).Nlink, "the other file was left linked")
			require.True(t, d.spare.refused.Load(), "spares go on through a /proc that is not procfs")
			require.False(t, spareReady(d))
		})
	}
}

// The real /proc/self/fd passes the check where /proc is a procfs.
func TestTheRealProcIsProcfs(t *testing.T) {
	t.Parallel()
	var st unix.Statfs_t
	if err := unix.Statfs("/proc/self/fd", &st); err != nil || st.Type != unix.PROC_SUPER_MAGIC {
		t.Skipf("/proc is not a procfs here (%v)", err)
	}
	dir := t.TempDir()
	d, ops, _ := spareAfterA(t, dir)
	spare := theSpare(t, d)
	tmp, err := ops.nameSpare(spare, "b")
	require.NoError(t, err)
	fi, err := os.Stat(filepath.Join(dir, tmp))
	require.NoError(t, err)
	var own unix.Stat_t
	require.NoError(t, unix.Fstat(spare.fd, &own))
	require.Equal(t, own.Ino, fi.Sys().(*syscall.Stat_t).Ino, "the name is not the spare's")
}

// slowCreate are a directory's fdOps whose creation of a write's file
// takes at least took: a file system where creating a file is dear.
type slowCreate struct {
	fdOps
	took time.Duration
}

func (c slowCreate) createTemp(name string) (tempFile, string, error) {
	time.Sleep(c.took) // the cost measured, not a synchronisation
	return c.fdOps.createTemp(name)
}

// A directory makes spares only where creating a file was dear: each
// creation of a file is timed, and a write starts a spare only while the
// moving average of those times is spareMin or more.
func TestSparesAreMadeWhereCreatingAFileIsDear(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d, _ := lockedDir(t, dir)
	d.spare.always.Store(false)
	root := d.root.Load()
	ops := d.ops(root, "a").(fdOps)

	o := d.io()
	o.spare = &d.spare
	_, err := writeFile(slowCreate{ops, spareMin}, "a", writeBytes([]byte("a")), false, o)
	require.NoError(t, err)
	spareInode(t, d) // made: the creation, timed, was dear
	requireNoTemps(t, dir, "a")

	d.spare.cost.Store(int64(spareMin / 10))
	d.spare.mu.Lock()
	for _, f := range d.spare.fs {
		f.Close()
	}
	d.spare.fs = nil
	d.spare.mu.Unlock()
	d.spare.fill(ops)
	_, making := d.spare.state()
	require.False(t, making, "a spare is made where creating a file is cheap")
}

// The cost of a creation is a moving average: one cheap creation among
// dear ones does not turn spares off, a run of them does, and the other
// way round.
func TestTheCostOfACreationIsAnAverage(t *testing.T) {
	t.Parallel()
	var s spareTemp
	s.created(2 * spareMin)
	require.True(t, s.worth())
	s.created(spareMin / 10)
	require.True(t, s.worth(), "one cheap creation turned spares off")
	for range 20 {
		s.created(spareMin / 10)
	}
	require.False(t, s.worth(), "cheap creations kept spares on")
	s.created(2 * spareMin)
	require.False(t, s.worth(), "one dear creation turned spares on")
	for range 20 {
		s.created(2 * spareMin)
	}
	require.True(t, s.worth())
}

// makeFails are a directory's fdOps whose spares cannot be made, with err.
type makeFails struct {
	fdOps
	err error
}

func (m makeFails) makeSpare() (tempFile, error) { return nil, m.err }

// A refusal of unnamed files (a file system without O_TMPFILE) stops the
// directory making spares, and every write creates its file itself, until
// the lock is taken again.
func TestARefusedSpareTurnsSparesOff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	d, unlock := lockedDir(t, dir)
	root := d.root.Load()
	ops := makeFails{d.ops(root, "a").(fdOps), &fs.PathError{Op: "openat O_TMPFILE", Path: dir, Err: unix.EOPNOTSUPP}}
	o := d.io()
	o.spare = &d.spare
	for _, name := range []string{"a", "b"} {
		_, err := writeFile(ops, name, writeBytes([]byte(name)), false, o)
		require.NoError(t, err)
		require.False(t, spareReady(d))
		require.True(t, d.spare.refused.Load())
	}
	requireNoTemps(t, dir, "a", "b")

	require.NoError(t, unlock())
	_, err := d.Lock(ctx)
	require.NoError(t, err)
	require.False(t, d.spare.refused.Load(), "a new lock kept the refusal")
	_, err = d.Create(ctx, "c", writeBytes([]byte("c")))
	require.NoError(t, err)
	spareInode(t, d)
}

// gatedMake are a directory's fdOps whose spares are made once gate is
// closed; made receives each.
type gatedMake struct {
	fdOps
	gate chan struct{}
	made chan madeSpare
}

// madeSpare is a spare of gatedMake, and its inode.
type madeSpare struct {
	f   *fdTemp
	ino uint64
}

func (g gatedMake) makeSpare() (tempFile, error) {
	<-g.gate
	f, err := g.fdOps.makeSpare()
	if err == nil {
		var st unix.Stat_t
		if err := unix.Fstat(f.(*fdTemp).fd, &st); err != nil {
			return nil, err
		}
		g.made <- madeSpare{f.(*fdTemp), st.Ino}
	}
	return f, err
}

// The lock's release while a spare is being made waits for it, and closes
// it: no descriptor outlives the lock.
func TestReleasingTheLockWhileASpareIsMadeClosesIt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d, unlock := lockedDir(t, dir)
	root := d.root.Load()
	g := gatedMake{d.ops(root, "a").(fdOps), make(chan struct{}), make(chan madeSpare, 1)}
	o := d.io()
	o.spare = &d.spare
	_, err := writeFile(g, "a", writeBytes([]byte("a")), false, o)
	require.NoError(t, err)
	_, making := d.spare.state()
	require.True(t, making, "no spare is being made")

	released := make(chan error, 1)
	go func() { released <- unlock() }()
	// The spare is made once the release has turned spares off.
	for {
		d.spare.mu.Lock()
		on := d.spare.on
		d.spare.mu.Unlock()
		if !on {
			break
		}
		runtime.Gosched()
	}
	close(g.gate)
	require.NoError(t, <-released)
	f := (<-g.made).f
	require.Equal(t, -1, f.fd, "the spare made after the lock's release is still open")
	require.False(t, spareReady(d))
	requireNoTemps(t, dir, "a")
}

// A directory makes as many spares as writes are under way at once (an
// Async batch writes its files together), at most maxSpares, and each
// write of the next batch takes one of them.
func TestSparesForWritesUnderWayTogether(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	d, _ := lockedDir(t, dir)
	ops := d.ops(d.root.Load(), "a").(fdOps)

	for _, c := range []struct{ writes, spares int }{{3, 3}, {maxSpares + 4, maxSpares}} {
		var ends []func()
		for range c.writes {
			ends = append(ends, d.spare.begin())
		}
		d.spare.fill(ops)
		for _, end := range ends {
			end()
		}
		spareReady(d)
		d.spare.mu.Lock()
		made := len(d.spare.fs)
		var inodes []uint64
		for _, f := range d.spare.fs {
			var st unix.Stat_t
			require.NoError(t, unix.Fstat(f.(*fdTemp).fd, &st))
			inodes = append(inodes, st.Ino)
		}
		d.spare.mu.Unlock()
		if d.spare.refused.Load() {
			t.Skip("this file system or system refuses unnamed files (O_TMPFILE)")
		}
		require.Equal(t, c.spares, made)

		// Writes at once take the spares (and make others).
		var wg sync.WaitGroup
		names := make([]string, c.spares)
		for i := range names {
			names[i] = fmt.Sprintf("f%d-%d", c.writes, i)
			wg.Go(func() {
				_, err := d.Create(ctx, names[i], writeBytes([]byte(names[i])))
				assert.NoError(t, err)
			})
		}
		wg.Wait()
		var got []uint64
		for _, name := range names {
			got = append(got, inode(t, dir, name))
			data, err := os.ReadFile(filepath.Join(dir, name))
			require.NoError(t, err)
			require.Equal(t, name, string(data))
		}
		require.ElementsMatch(t, inodes, got, "the writes did not take the spares")
		spareReady(d)
		d.spare.mu.Lock()
		fs := d.spare.fs
		d.spare.fs = nil // the next case counts its own
		d.spare.mu.Unlock()
		for _, f := range fs {
			f.Close()
		}
	}
}

// A write that finds no spare ready while one is being made waits for it,
// and takes it, rather than create its file itself.
func TestAWriteWaitsForTheSpareBeingMade(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d, _ := lockedDir(t, dir)
	g := gatedMake{d.ops(d.root.Load(), "a").(fdOps), make(chan struct{}), make(chan madeSpare, 1)}
	open := sync.OnceFunc(func() { close(g.gate) })
	t.Cleanup(open) // before the directory's Close, which waits for the spare
	d.spare.fill(g)
	o := d.io()
	o.spare = &d.spare
	wrote := make(chan error, 1)
	go func() {
		_, err := writeFile(g, "a", writeBytes([]byte("a")), false, o)
		wrote <- err
	}()
	// Open the gate once the write waits (await made the channel); a
	// write that does not wait ends first.
	var err error
	for waiting := false; !waiting; runtime.Gosched() {
		select {
		case err = <-wrote:
			require.NoError(t, err)
			require.Fail(t, "the write did not wait for the spare being made")
		default:
		}
		d.spare.mu.Lock()
		waiting = d.spare.made != nil
		d.spare.mu.Unlock()
	}
	open()
	require.NoError(t, <-wrote)
	require.Equal(t, (<-g.made).ino, inode(t, dir, "a"), "the write did not take the spare it waited for")
}

// The spares made are as many as the directory's writes under way at
// once, counted by the writes themselves.
func TestWritesUnderWayAreCounted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d, _ := lockedDir(t, dir)
	ops := d.ops(d.root.Load(), "a").(fdOps)
	o := d.io()
	o.spare = &d.spare
	const n = 3
	var begun sync.WaitGroup
	begun.Add(n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, err := writeFile(ops, fmt.Sprintf("w%d", i), func(w io.Writer) error {
				begun.Done()
				begun.Wait() // all three under way before any fsyncs
				_, err := w.Write([]byte("w"))
				return err
			}, false, o)
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	require.True(t, spareReady(d))
	d.spare.mu.Lock()
	made := len(d.spare.fs)
	d.spare.mu.Unlock()
	require.Equal(t, n, made)
}

// A file published from a spare has the modification time of its write,
// not of the spare's making, even when nothing was written into it: an
// empty object's ModTime is when it was created.
func TestAnEmptyFileFromASpareIsDatedByItsWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	d, _ := lockedDir(t, dir)
	_, err := d.Create(ctx, "a", writeBytes([]byte("first")))
	require.NoError(t, err)
	ino := spareInode(t, d)
	// The spare made a day ago, as far as its times tell.
	old := time.Now().Add(-24 * time.Hour)
	ts := []unix.Timespec{unix.NsecToTimespec(old.UnixNano()), unix.NsecToTimespec(old.UnixNano())}
	require.NoError(t, unix.UtimesNano(fmt.Sprintf("/proc/self/fd/%d", theSpare(t, d).fd), ts))

	before := time.Now().Add(-time.Second) // file systems with coarse times
	o, err := d.Create(ctx, "empty", writeBytes(nil))
	require.NoError(t, err)
	fi, err := os.Stat(filepath.Join(dir, "empty"))
	require.NoError(t, err)
	require.Zero(t, fi.Size())
	require.Equal(t, ino, inode(t, dir, "empty"), "not published from the spare")
	assert.True(t, fi.ModTime().After(before), "the file's modification time %v is the spare's, not its write's", fi.ModTime())
	assert.True(t, o.ModTime.After(before), "the object's ModTime %v is the spare's, not its write's", o.ModTime)
}
