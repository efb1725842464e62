package dirstore_test

import (
	"context"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest/inject"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/storage"
)

// Open creates a missing directory unless ReadOnly, where it is
// ErrNotFound and nothing is made; an empty name is ErrInvalid. Every
// error is an *fs.PathError of "open" on the directory.
func TestOpenCreatesUnlessReadOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	missing := filepath.Join(t.TempDir(), "a", "b")

	_, err := dirstore.Open(missing, dirstore.ReadOnly())
	require.ErrorIs(t, err, storage.ErrNotFound)
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "open", pe.Op)
	require.Equal(t, missing, pe.Path)
	require.NoDirExists(t, missing, "ReadOnly made the directory")

	_, err = dirstore.Open("")
	require.ErrorIs(t, err, storage.ErrInvalid)
	require.ErrorAs(t, err, &pe)

	b, err := dirstore.Open(missing, dirstore.NoSync())
	require.NoError(t, err)
	require.DirExists(t, missing)
	_, err = b.Create(ctx, "x.json", writeString("x"))
	require.NoError(t, err)
	require.NoError(t, b.Close())

	ro, err := dirstore.Open(missing, dirstore.ReadOnly())
	require.NoError(t, err)
	defer ro.Close()
	_, err = ro.Create(ctx, "y.json", writeString("y"))
	require.ErrorIs(t, err, storage.ErrReadOnly)
	_, err = ro.Remove(ctx, "x.json")
	require.ErrorIs(t, err, storage.ErrReadOnly)
	_, err = ro.Lock(ctx)
	require.ErrorIs(t, err, storage.ErrReadOnly)
	require.FileExists(t, filepath.Join(missing, "x.json"))
}

// The directory tells its temporary files by name (storage.TempNamer), of
// the marked naming and of the legacy one, and so does a wrapper that
// unwraps to it; a wrapper that does not unwrap says nothing is one.
func TestTempOfTellsTheDirectorysTemporaryFiles(t *testing.T) {
	t.Parallel()
	b, err := dirstore.Open(t.TempDir(), dirstore.NoSync())
	require.NoError(t, err)
	defer b.Close()
	wrapped := inject.Wrap(b, func(inject.Op) error { return nil })
	opaque := struct{ storage.Backend }{b}
	for name, want := range map[string]struct {
		final         string
		legacy, isTmp bool
	}{
		".c_001.json" + tempMarker + "123": {"c_001.json", false, true},
		".c_001.json123":                   {"c_001.json", true, true},
		"c_001.json":                       {"", false, false},
		".c_001.json":                      {"", false, false},
		"." + tempMarker + "1":             {"", false, false},
	} {
		for _, tb := range []storage.Backend{b, wrapped} {
			final, legacy, ok := storage.TempOf(tb, name)
			require.Equal(t, want.isTmp, ok, name)
			if ok {
				require.Equal(t, want.final, final, name)
				require.Equal(t, want.legacy, legacy, name)
			}
		}
		_, _, ok := storage.TempOf(opaque, name)
		require.False(t, ok, "%s: a backend that is neither a TempNamer nor a Wrapper names no temporary files", name)
	}
	_, ok := b.(storage.TempNamer)
	require.True(t, ok)
}

// The temporary file of a save and of a side file, seen at the point of
// its publish, is named with the marker after its final name, and the
// directory's TempOf tells it for a temporary file of that final name, of
// the marked naming.
func TestSaveTempFilesCarryTheMarker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	var seen []string
	s, b := openFaultyBackend[int](t, dir, func(point, name string) error {
		if point == "publish" {
			seen = append(seen, dirNames(t, dir)...)
		}
		return nil
	}, nil, checkpoint.NoSync())
	_, err := s.Save(ctx, 1, 1)
	require.NoError(t, err)
	require.NoError(t, s.WriteJSON(ctx, "notes.json", 1))
	var temps []string
	for _, n := range seen {
		if strings.HasPrefix(n, ".") && n != lockName {
			temps = append(temps, n)
			final, legacy, ok := b.(storage.TempNamer).TempOf(n)
			require.True(t, ok && !legacy, n)
			require.Contains(t, []string{"step_00000001.json", "notes.json"}, final, n)
		}
	}
	require.Len(t, temps, 2)
	require.True(t, strings.HasPrefix(temps[0], tempPrefix("step_00000001.json")), temps[0])
	require.True(t, strings.HasPrefix(temps[1], tempPrefix("notes.json")), temps[1])
}
