//go:build linux

package dirstore_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
)

func TestAttackSomethingAtTheFinalNameAtPublish(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	plants := map[string]func(t *testing.T, p string){
		"symlink": func(t *testing.T, p string) {
			require.NoError(t, os.Symlink(filepath.Join(filepath.Dir(p), "c_001.json"), p))
		},
		"dangling": func(t *testing.T, p string) { require.NoError(t, os.Symlink("/nonexistent/x", p)) },
		"dir":      func(t *testing.T, p string) { require.NoError(t, os.Mkdir(p, 0o755)) },
		"fifo":     func(t *testing.T, p string) { require.NoError(t, syscall.Mkfifo(p, 0o644)) },
		"file":     func(t *testing.T, p string) { require.NoError(t, os.WriteFile(p, []byte("theirs"), 0o644)) },
	}
	for what, plant := range plants {
		for _, rolling := range []bool{false, true} {
			name := what
			if rolling {
				name += "-rolling"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				armed := false
				target := "c_002.json"
				if rolling {
					target = "c_last.json"
				}
				fault := func(point, n string) error {
					if armed && point == "publish" && n == target {
						armed = false
						plant(t, filepath.Join(dir, n))
					}
					return nil
				}
				s := openFaulty[int](t, dir, fault, nil, checkpoint.WithLayout("c", 3), checkpoint.WithRolling(), checkpoint.SaveEvery(100))
				_, err := s.Save(ctx, 1, 1)
				require.NoError(t, err)
				armed = true
				if rolling {
					_, _, err = s.Tick(ctx, 2, 2)
				} else {
					_, err = s.Save(ctx, 2, 2)
				}
				t.Logf("%s: %v", name, err)
				fi, lerr := os.Lstat(filepath.Join(dir, target))
				require.NoError(t, lerr)
				for _, n := range dirNames(t, dir) {
					require.False(t, strings.Contains(n, tempMarker), "temporary file %s left", n)
				}
				switch {
				case what == "dir" || what == "fifo" && !rolling:
					// Not a regular file: an error saying so, and left
					// where it is (a directory cannot be replaced by a
					// file).
					require.Error(t, err)
					require.False(t, fi.Mode().IsRegular())
				case !rolling:
					// A numbered checkpoint never replaces. What was put
					// at the name between the save's look and its publish
					// is looked at as if it had been there before: a
					// symlink, or a file that is no checkpoint, is moved
					// aside as it is, and the step saves.
					require.NoError(t, err)
					require.True(t, fi.Mode().IsRegular())
					q, err := os.Lstat(filepath.Join(dir, target+".corrupt"))
					require.NoError(t, err)
					if what == "file" {
						b, err := os.ReadFile(filepath.Join(dir, target+".corrupt"))
						require.NoError(t, err)
						require.Equal(t, "theirs", string(b))
					} else {
						require.NotZero(t, q.Mode()&os.ModeSymlink, "the link is moved, not its target")
					}
					got, _, err := s.Load(ctx, 2)
					require.NoError(t, err)
					require.Equal(t, 2, got)
				default:
					// The rolling file replaces what is at its name
					// (rename over it); the result must be our file.
					require.NoError(t, err)
					require.True(t, fi.Mode().IsRegular())
					got, info, err := s.Latest(ctx)
					require.NoError(t, err)
					require.Equal(t, int64(2), info.Step)
					require.Equal(t, 2, got)
				}
				got, _, err := s.Load(ctx, 1)
				require.NoError(t, err)
				require.Equal(t, 1, got)
				b, err := os.ReadFile(filepath.Join(dir, "c_001.json"))
				require.NoError(t, err)
				require.Contains(t, string(b), `"step":1`)
			})
		}
	}
}
