package s3store

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
)

// randomPayload writes n pseudo-random (incompressible) bytes of seed to w
// in 64 KiB writes, and returns their SHA-256.
func randomPayload(w io.Writer, n int64, seed uint64) ([]byte, error) {
	r := rand.New(rand.NewPCG(seed, seed))
	h := sha256.New()
	buf := make([]byte, 64<<10)
	for n > 0 {
		k := min(int64(len(buf)), n)
		for i := 0; i < int(k); i += 8 {
			v := r.Uint64()
			for j := 0; j < 8 && i+j < int(k); j++ {
				buf[i+j] = byte(v >> (8 * j))
			}
		}
		h.Write(buf[:k])
		if _, err := w.Write(buf[:k]); err != nil {
			return nil, err
		}
		n -= k
	}
	return h.Sum(nil), nil
}

// emptyDir fails the test if dir holds anything (a spool file left behind).
func emptyDir(t testing.TB, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, ents, "spool directory %s", dir)
}

// TestLargePayloadStreamsThroughSpool saves a byte payload larger than
// the spool's memory through SaveFrom, reads it back through OpenPayload,
// and finds the same bytes, one PUT for the checkpoint, and no spool file
// left.
func TestLargePayloadStreamsThroughSpool(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	dir := t.TempDir()
	b := f.backend("big", LeaseTTL(testTTL), SpoolDir(dir), spoolMemory(1<<20))
	s, err := checkpoint.OpenBackend[[]byte](b)
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	const size = 24<<20 + 12345
	var want []byte
	f.count.take()
	info, err := s.SaveFrom(ctx, 1, func(w io.Writer) error {
		var err error
		want, err = randomPayload(w, size, 1)
		return err
	})
	require.NoError(t, err)
	require.EqualValues(t, size, info.PayloadSize)
	require.Equal(t, 1, f.count.take()["PUT"], "one PutObject per checkpoint")
	emptyDir(t, dir)

	r, got, err := s.OpenPayload(ctx, 1)
	require.NoError(t, err)
	h := sha256.New()
	n, err := io.Copy(h, r)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	require.EqualValues(t, size, n)
	require.Equal(t, want, h.Sum(nil))
	require.EqualValues(t, 1, got.Step)
}

// TestSpoolErrorsPublishNothing: a write function that fails, a context
// cancelled during the write, a server that refuses the PUT's condition, a
// spool directory that is missing and a spool file that cannot be written
// (a full disk) each fail the Create with an error naming the object,
// publish nothing (or leave the object in place as it was), and leave no
// spool file behind, open or on disk.
func TestSpoolErrorsPublishNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	const size = 3 << 20 // past the spool memory of 64 KiB
	errWrite := errors.New("write failed")

	type result struct {
		dir   string
		files []*os.File // the spool files created
	}
	// A client that backs off briefly: versitygw resets the connection of
	// a large PUT it refuses, which the SDK retries.
	quick := f.clientThrough(http0())
	newBackend := func(t *testing.T, prefix string, create func(dir, pattern string) (*os.File, error)) (*Backend, *result) {
		res := &result{dir: t.TempDir()}
		var mu sync.Mutex
		if create == nil {
			create = os.CreateTemp
		}
		b, err := New(quick, f.bucket, prefix, SpoolDir(res.dir), spoolMemory(64<<10), spoolCreate(func(dir, pattern string) (*os.File, error) {
			fh, err := create(dir, pattern)
			if fh != nil {
				mu.Lock()
				res.files = append(res.files, fh)
				mu.Unlock()
			}
			return fh, err
		}))
		require.NoError(t, err)
		unlock, err := b.Lock(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { unlock(); b.Close() })
		return b, res
	}
	checkClean := func(t *testing.T, res *result) {
		t.Helper()
		emptyDir(t, res.dir)
		for _, fh := range res.files {
			_, err := fh.Stat()
			require.ErrorIs(t, err, os.ErrClosed, "spool file %s left open", fh.Name())
		}
	}
	notPublished := func(t *testing.T, b *Backend, name string) {
		t.Helper()
		_, err := b.Stat(ctx, name)
		require.ErrorIs(t, err, fs.ErrNotExist)
	}

	t.Run("write fails", func(t *testing.T) {
		t.Parallel()
		b, res := newBackend(t, "write", nil)
		_, err := b.Create(ctx, "a", func(w io.Writer) error {
			if _, err := randomPayload(w, size, 2); err != nil {
				return err
			}
			return errWrite
		})
		require.ErrorIs(t, err, errWrite)
		require.Contains(t, err.Error(), b.Locate("a"))
		require.Len(t, res.files, 1, "the payload was spooled to a file")
		notPublished(t, b, "a")
		checkClean(t, res)
	})

	t.Run("context cancelled", func(t *testing.T) {
		t.Parallel()
		b, res := newBackend(t, "cancel", nil)
		cctx, cancel := context.WithCancel(ctx)
		_, err := b.Create(cctx, "a", func(w io.Writer) error {
			_, err := randomPayload(w, size, 3)
			cancel()
			return err
		})
		require.ErrorIs(t, err, context.Canceled)
		notPublished(t, b, "a")
		checkClean(t, res)
	})

	t.Run("server refuses", func(t *testing.T) {
		t.Parallel()
		b, res := newBackend(t, "refuse", nil)
		old, err := b.Create(ctx, "a", func(w io.Writer) error { _, err := w.Write([]byte("old")); return err })
		require.NoError(t, err)
		_, err = b.Create(ctx, "a", func(w io.Writer) error { _, err := randomPayload(w, size, 4); return err })
		require.ErrorIs(t, err, checkpoint.ErrExists)
		_, err = b.Replace(ctx, "a", `"0123456789abcdef0123456789abcdef"`, func(w io.Writer) error { _, err := randomPayload(w, size, 5); return err })
		require.ErrorIs(t, err, checkpoint.ErrConflict)
		now, err := b.Stat(ctx, "a")
		require.NoError(t, err)
		require.Equal(t, old.Version, now.Version, "the existing object is untouched")
		require.Len(t, res.files, 2)
		checkClean(t, res)
	})

	t.Run("spool directory missing", func(t *testing.T) {
		t.Parallel()
		missing := filepath.Join(t.TempDir(), "gone")
		b := f.lockedBackend("missing", SpoolDir(missing), spoolMemory(64<<10))
		_, err := b.Create(ctx, "a", func(w io.Writer) error { _, err := randomPayload(w, size, 6); return err })
		require.ErrorIs(t, err, fs.ErrNotExist)
		require.Contains(t, err.Error(), missing)
		require.Contains(t, err.Error(), b.Locate("a"))
		notPublished(t, b, "a")
		// A small object never needs the directory.
		_, err = b.Create(ctx, "b", func(w io.Writer) error { _, err := w.Write([]byte("small")); return err })
		require.NoError(t, err)
	})

	t.Run("disk full", func(t *testing.T) {
		t.Parallel()
		// A spool file that takes some bytes and then refuses more, as a
		// full disk does.
		b, res := newBackend(t, "full", func(dir, pattern string) (*os.File, error) {
			fh, err := os.CreateTemp(dir, pattern)
			if err != nil {
				return nil, err
			}
			name := fh.Name()
			fh.Close()
			return os.OpenFile(name, os.O_RDONLY, 0) // writes fail
		})
		_, err := b.Create(ctx, "a", func(w io.Writer) error { _, err := randomPayload(w, size, 7); return err })
		require.Error(t, err)
		require.Contains(t, err.Error(), "spool to "+res.dir)
		require.Contains(t, err.Error(), b.Locate("a"))
		notPublished(t, b, "a")
		checkClean(t, res)
	})

	t.Run("rename spools", func(t *testing.T) {
		t.Parallel()
		b, res := newBackend(t, "rename", nil)
		var want []byte
		_, err := b.Create(ctx, "a", func(w io.Writer) error { var err error; want, err = randomPayload(w, size, 8); return err })
		require.NoError(t, err)
		require.NoError(t, b.Rename(ctx, "a", "b"))
		r, _, err := b.Open(ctx, "b")
		require.NoError(t, err)
		h := sha256.New()
		_, err = io.Copy(h, r)
		require.NoError(t, err)
		r.Close()
		require.Equal(t, want, h.Sum(nil))
		notPublished(t, b, "a")
		require.Len(t, res.files, 2, "the Create and the Rename spooled")
		checkClean(t, res)
	})
}

// TestSpoolDirRefusesEmpty: SpoolDir("") is a mistake, not the default.
func TestSpoolDirRefusesEmpty(t *testing.T) {
	t.Parallel()
	_, err := New(s3.New(s3.Options{Region: "us-east-1"}), "bucket", "p", SpoolDir(""))
	require.ErrorIs(t, err, checkpoint.ErrInvalid)
}

// heapOf saves a byte payload of size through SaveFrom on b and reads it
// back through OpenPayload, and returns the bytes allocated (TotalAlloc)
// by each, and the peak of HeapInuse above the start, sampled every
// millisecond. The process must do nothing else meanwhile.
func heapOf(t testing.TB, s *checkpoint.Store[[]byte], step int64, size int64) (saveAlloc, loadAlloc, peak uint64) {
	ctx := context.Background()
	runtime.GC()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	var peakMu sync.Mutex
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		var m runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				runtime.ReadMemStats(&m)
				peakMu.Lock()
				if m.HeapInuse > m0.HeapInuse && m.HeapInuse-m0.HeapInuse > peak {
					peak = m.HeapInuse - m0.HeapInuse
				}
				peakMu.Unlock()
			}
		}
	}()
	var want []byte
	_, err := s.SaveFrom(ctx, step, func(w io.Writer) error {
		var err error
		want, err = randomPayload(w, size, uint64(step))
		return err
	})
	require.NoError(t, err)
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	r, _, err := s.OpenPayload(ctx, step)
	require.NoError(t, err)
	h := sha256.New()
	n, err := io.Copy(h, r)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	var m2 runtime.MemStats
	runtime.ReadMemStats(&m2)
	close(stop)
	<-done
	require.Equal(t, size, n)
	require.Equal(t, want, h.Sum(nil))
	return m1.TotalAlloc - m0.TotalAlloc, m2.TotalAlloc - m1.TotalAlloc, peak
}

// TestPayloadHeapIndependentOfSize saves and loads byte payloads of 6 MiB
// and 30 MiB on S3 (both past the spool's memory) and finds that the
// larger allocates less than 4 MiB more than the smaller, on each way: the
// memory does not grow with the payload. Not parallel: it counts the
// process's allocations (parallel tests run after the serial ones).
func TestPayloadHeapIndependentOfSize(t *testing.T) {
	f := newFixture(t)
	b := f.backend("heap", LeaseTTL(testTTL), SpoolDir(t.TempDir()))
	s, err := checkpoint.OpenBackend[[]byte](b)
	require.NoError(t, err)
	defer s.Close()
	heapOf(t, s, 1, 1<<20) // warm up the client's connections and pools
	smallSave, smallLoad, smallPeak := heapOf(t, s, 2, 6<<20)
	bigSave, bigLoad, bigPeak := heapOf(t, s, 3, 30<<20)
	t.Logf("6 MiB: save %d B, load %d B, peak HeapInuse +%d B; 30 MiB: save %d B, load %d B, peak +%d B",
		smallSave, smallLoad, smallPeak, bigSave, bigLoad, bigPeak)
	const slack = 4 << 20
	require.Less(t, bigSave, smallSave+slack, "save allocation grows with the payload")
	require.Less(t, bigLoad, smallLoad+slack, "load allocation grows with the payload")
	require.Less(t, bigPeak, uint64(16<<20), "peak heap")
}

// BenchmarkPayloadHeapOnS3 saves and loads a byte payload of each size
// (64 MiB, 256 MiB, 1 GiB) through SaveFrom and OpenPayload, and reports
// the bytes allocated by each (save-B/op, load-B/op, from
// runtime.MemStats.TotalAlloc) and the peak HeapInuse above the start
// (peak-heap-B). It moves gigabytes, so it runs only when -bench names it:
//
//	cd s3store && go test -run '^$' -bench 'PayloadHeap/(64|256)MiB' -benchtime 1x -count 5
func BenchmarkPayloadHeapOnS3(b *testing.B) {
	if !strings.Contains(flag.Lookup("test.bench").Value.String(), "PayloadHeap") {
		b.Skip("moves gigabytes: run it by name (-bench PayloadHeap)")
	}
	for _, size := range []int64{64 << 20, 256 << 20, 1 << 30} {
		b.Run(fmt.Sprintf("%dMiB", size>>20), func(b *testing.B) {
			f := newFixture(b)
			be, err := New(f.client, f.bucket, "heap", SpoolDir(b.TempDir()))
			require.NoError(b, err)
			s, err := checkpoint.OpenBackend[[]byte](be, checkpoint.KeepLast(1))
			require.NoError(b, err)
			defer s.Close()
			heapOf(b, s, 1, 1<<20)
			var save, load, peak uint64
			b.ResetTimer()
			for i := range b.N {
				sa, la, p := heapOf(b, s, int64(i)+2, size)
				save += sa
				load += la
				peak = max(peak, p)
			}
			b.ReportMetric(float64(save)/float64(b.N), "save-B/op")
			b.ReportMetric(float64(load)/float64(b.N), "load-B/op")
			b.ReportMetric(float64(peak), "peak-heap-B")
			b.SetBytes(size)
		})
	}
}

// resetPuts fails every PutObject of a key ending in suffix without
// sending it, as a connection reset by the server does: the client never
// sees an HTTP answer.
type resetPuts struct {
	rt     http.RoundTripper
	suffix string
}

func (r resetPuts) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPut && strings.HasSuffix(req.URL.Path, r.suffix) {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.ECONNRESET)}
	}
	return r.rt.RoundTrip(req)
}

// TestConditionalPutResetIsTold: a conditional PUT that fails without an
// HTTP answer (a server such as versitygw resets the connection of a large
// PUT it refuses) is ErrExists or ErrConflict when the object under the
// name says the condition failed, and a plain error (no sentinel) when it
// held: a network failure is never taken for a refusal, nor the reverse.
func TestConditionalPutResetIsTold(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	good := f.lockedBackend("reset")
	old, err := good.Create(ctx, "taken", func(w io.Writer) error { _, err := w.Write([]byte("old")); return err })
	require.NoError(t, err)
	b, err := New(f.clientThrough(resetPuts{rt: http0(), suffix: "/reset/taken"}), f.bucket, "reset")
	require.NoError(t, err)
	defer b.Close()

	write := func(w io.Writer) error { _, err := w.Write([]byte("new")); return err }
	_, err = b.Create(ctx, "taken", write)
	require.ErrorIs(t, err, checkpoint.ErrExists)
	_, err = b.Replace(ctx, "taken", `"0123456789abcdef0123456789abcdef"`, write)
	require.ErrorIs(t, err, checkpoint.ErrConflict)
	// The condition held: the reset is a failure, not a refusal.
	_, err = b.Replace(ctx, "taken", old.Version, write)
	require.Error(t, err)
	require.NotErrorIs(t, err, checkpoint.ErrConflict)
	require.ErrorIs(t, err, syscall.ECONNRESET)
	now, err := good.Stat(ctx, "taken")
	require.NoError(t, err)
	require.Equal(t, old.Version, now.Version)

	b2, err := New(f.clientThrough(resetPuts{rt: http0(), suffix: "/reset/free"}), f.bucket, "reset")
	require.NoError(t, err)
	defer b2.Close()
	_, err = b2.Create(ctx, "free", write)
	require.Error(t, err)
	require.NotErrorIs(t, err, checkpoint.ErrExists)
	require.ErrorIs(t, err, syscall.ECONNRESET)
	_, err = good.Stat(ctx, "free")
	require.ErrorIs(t, err, fs.ErrNotExist)
}

// dropFirstPut reads half of the body of the first PUT whose path ends in
// suffix and fails it with a network error, without sending it on: the
// SDK sends it again, from the start of the spooled body.
type dropFirstPut struct {
	rt      http.RoundTripper
	suffix  string
	dropped atomic.Int32
}

func (d *dropFirstPut) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, d.suffix) && d.dropped.Add(1) == 1 {
		_, _ = io.CopyN(io.Discard, r.Body, r.ContentLength/2)
		r.Body.Close()
		return nil, &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.ECONNRESET)}
	}
	return d.rt.RoundTrip(r)
}

// TestSpooledPutsAreRetriedWhole: a spooled payload's PUT that fails half
// sent is sent again whole by the SDK (the file body is read again from
// its start), and one that landed but whose answer was lost is
// recognised as the writer's own by the MD5 the spool summed: either way
// SaveFrom succeeds and the payload reads back with its bytes.
func TestSpooledPutsAreRetriedWhole(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	const size = 3<<20 + 7
	drop := &dropFirstPut{rt: http0(), suffix: "/step_00000001.json"}
	lose := &landThenLose{rt: drop, suffix: "/step_00000002.json"}
	lose.n.Store(1)
	b, err := New(f.clientThrough(lose), f.bucket, "retry", LeaseTTL(testTTL), SpoolDir(t.TempDir()), spoolMemory(64<<10))
	require.NoError(t, err)
	s, err := checkpoint.OpenBackend[[]byte](b)
	require.NoError(t, err)
	defer s.Close()
	sums := map[int64][]byte{}
	for step := int64(1); step <= 2; step++ {
		_, err := s.SaveFrom(ctx, step, func(w io.Writer) error {
			var err error
			sums[step], err = randomPayload(w, size, uint64(step)+100)
			return err
		})
		require.NoError(t, err, "step %d", step)
	}
	require.EqualValues(t, 2, drop.dropped.Load(), "the first PUT was dropped and sent again")
	require.EqualValues(t, 1, lose.lost.Load(), "the second PUT's answer was lost")
	for step := int64(1); step <= 2; step++ {
		r, _, err := s.OpenPayload(ctx, step)
		require.NoError(t, err)
		h := sha256.New()
		_, err = io.Copy(h, r)
		r.Close()
		require.NoError(t, err)
		require.Equal(t, sums[step], h.Sum(nil), "step %d", step)
	}
}
