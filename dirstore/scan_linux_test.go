//go:build linux

package dirstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/internal/listing"
	"github.com/gocheckpoint/checkpoint/storage"
)

// scanned returns the names b's ScanNames passes, sorted, and its error.
func scanned(ctx context.Context, t *testing.T, b storage.Backend) ([]string, error) {
	t.Helper()
	sc, ok := b.(listing.Scanner)
	require.True(t, ok, "the directory backend scans its names on Linux")
	var got []string
	err := sc.ScanNames(ctx, func(name []byte) { got = append(got, string(name)) })
	slices.Sort(got)
	return got, err
}

// listed returns the names of b's List, sorted.
func listed(t *testing.T, b storage.Backend) []string {
	t.Helper()
	objs, err := b.List(context.Background())
	require.NoError(t, err)
	var names []string
	for _, o := range objs {
		names = append(names, o.Name)
	}
	slices.Sort(names)
	return names
}

func TestScanNamesPassesWhatListReturns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// More names than one read of the entries holds, of every length a
	// name may have, and every kind of entry List returns.
	var want []string
	for i := 0; i < 3000; i++ {
		name := fmt.Sprintf("step_%08d.json", i)
		if i%7 == 0 {
			// 1 to 255 bytes, unique by the digits it ends with.
			digits := fmt.Sprint(i)
			name = strings.Repeat("x", max(0, 1+i%255-len(digits))) + digits
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), nil, 0o644))
		want = append(want, name)
	}
	for _, name := range []string{"a b", "ünï", "tab\there", ".hidden", "..."} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), nil, 0o644))
		want = append(want, name)
	}
	require.NoError(t, os.Mkdir(filepath.Join(dir, "session"), 0o755))
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(dir, "step_99999999.json")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644))
	want = append(want, "session", "step_99999999.json", "pipe")
	// A removed name is passed no more.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gone"), nil, 0o644))
	require.NoError(t, os.Remove(filepath.Join(dir, "gone")))
	slices.Sort(want)

	b, err := dirstore.Open(dir, dirstore.ReadOnly())
	require.NoError(t, err)
	defer b.Close()
	got, err := scanned(context.Background(), t, b)
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Equal(t, listed(t, b), got)
}

func TestScanNamesOfAnEmptyOrUnwrittenDirectoryPassesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	b, err := dirstore.Open(dir)
	require.NoError(t, err)
	defer b.Close()
	got, err := scanned(ctx, t, b)
	require.NoError(t, err)
	require.Empty(t, got)
	// A child store whose directory its first write has not made yet.
	child, err := b.Sub(ctx, "later", false)
	require.NoError(t, err)
	got, err = scanned(ctx, t, child)
	require.NoError(t, err)
	require.Empty(t, got)
}

func TestScanNamesFailsAsListDoes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "step_00000001.json"), nil, 0o644))
	b, err := dirstore.Open(dir)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = scanned(ctx, t, b)
	require.ErrorIs(t, err, context.Canceled)

	require.NoError(t, b.Close())
	_, listErr := b.List(context.Background())
	require.Error(t, listErr)
	_, err = scanned(context.Background(), t, b)
	require.Error(t, err)
	require.ErrorIs(t, err, os.ErrClosed)
	require.ErrorIs(t, listErr, os.ErrClosed)
}

// Scans that run at once each read the directory from its start: a scan
// opens the directory anew rather than share a descriptor's offset.
func TestConcurrentScansEachPassEveryName(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i := 0; i < 1500; i++ {
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("step_%08d.json", i)), nil, 0o644))
	}
	b, err := dirstore.Open(dir, dirstore.ReadOnly())
	require.NoError(t, err)
	defer b.Close()
	want := listed(t, b)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			sc := b.(listing.Scanner)
			n := 0
			err := sc.ScanNames(context.Background(), func([]byte) { n++ })
			if err == nil && n != len(want) {
				err = fmt.Errorf("scanned %d names, want %d", n, len(want))
			}
			errs <- err
		}()
	}
	for range 4 {
		require.NoError(t, <-errs)
	}
}
