package cli

import (
	"bufio"
	"context"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/internal/killtest"
)

// cpRole runs checkpoint cp Args[0] Args[1] as the command does (synced
// writes), acknowledging each progress line it prints (one per tenth of
// the copy); then it waits to be killed or stopped, so that a kill always
// finds it alive.
var cpRole = killtest.Register("cli-cp", func(c *killtest.Child) int {
	stop := c.Stopping()
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			if p, ok := strings.CutPrefix(line, "checkpoint cp: "); ok && strings.Contains(p, " files (") {
				c.Ack(p)
			} else {
				c.Printf("err %s", line)
			}
		}
	}()
	code := Run([]string{"cp", c.Args[0], c.Args[1]}, io.Discard, pw)
	pw.Close()
	<-done
	c.Printf("exit %d", code)
	<-stop
	return code
})

// requireWholeCopy fails unless every file dst shows (every checkpoint a
// store lists, every session a root lists, with all it lists) is whole
// and the same as src's, and, if complete, dst shows every file of src
// but the damaged ones.
func requireWholeCopy(t *testing.T, src, dst string, sessions bool, damaged []string, complete bool) {
	t.Helper()
	ctx := context.Background()
	stores := map[string]string{".": dst} // a store's path in src and dst
	if sessions {
		r, err := checkpoint.OpenSessions(dst, checkpoint.ReadOnly())
		if err != nil {
			require.False(t, complete)
			return // nothing made yet
		}
		list, err := r.List(ctx)
		require.NoError(t, err)
		require.NoError(t, r.Close())
		stores = map[string]string{}
		for _, s := range list {
			require.NoError(t, s.Err, "a listed session is whole")
			stores[s.ID] = s.Dir
		}
		if complete {
			require.Len(t, stores, 4)
		}
	}
	for rel, dir := range stores {
		want := visibleFiles(t, filepath.Join(src, rel))
		got := map[string][]byte{}
		if _, err := os.Stat(dir); err == nil {
			got = visibleFiles(t, dir)
		}
		for name, data := range got {
			require.Equal(t, want[name], data, "%s/%s is whole and the source's", rel, name)
		}
		st, err := checkpoint.Open[map[string]int](dir, checkpoint.ReadOnly())
		if err == nil {
			infos, err := st.List(ctx)
			require.NoError(t, err)
			for _, info := range infos {
				_, _, err := st.LoadExact(ctx, info)
				require.NoError(t, err, "every listed checkpoint verifies")
			}
			require.NoError(t, st.Close())
		}
		if sessions || complete {
			// A listed session holds everything: it appeared whole.
			for _, d := range damaged {
				if filepath.Dir(d) == rel {
					delete(want, filepath.Base(d))
				}
			}
			require.Equal(t, len(want), len(got), "%s holds every good file of the source's", rel)
		}
	}
}

func TestCpKilledAtAnyInstantShowsNothingHalfMadeAndARerunCompletesTheCopy(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 27))
	for _, sessions := range []bool{false, true} {
		src := filepath.Join(t.TempDir(), "src")
		var damaged []string
		if sessions {
			r, err := checkpoint.OpenSessions(src, checkpoint.NoSync())
			require.NoError(t, err)
			for range 4 {
				s, err := r.New(context.Background(), map[string]string{"who": "me"})
				require.NoError(t, err)
				saveSteps(t, filepath.Join(src, s.ID), 30)
			}
			require.NoError(t, r.Close())
			damaged = []string{filepath.Join("002", "step_00000007.json")}
		} else {
			saveSteps(t, src, 150, checkpoint.Gzip())
			damaged = []string{filepath.Join(".", "step_00000077.json.gz")}
		}
		for _, d := range damaged {
			require.NoError(t, os.Truncate(filepath.Join(src, d), 50))
		}
		for round := range killtest.Kills(t, 3) {
			dst := filepath.Join(t.TempDir(), "dst")
			p := cpRole.Command(t, src, dst)
			p.Start(t)
			p.AwaitAcks(t, 1+rng.IntN(8))
			p.Kill(t)
			requireWholeCopy(t, src, dst, sessions, damaged, false)
			// What the kill left out of sight: sessions claimed but not
			// published, temporary files of writes under way.
			claimed, _ := filepath.Glob(filepath.Join(dst, "*", ".session.claim"))
			temps, _ := filepath.Glob(filepath.Join(dst, ".*.ckpt-tmp-*"))
			more, _ := filepath.Glob(filepath.Join(dst, "*", ".*.ckpt-tmp-*"))

			r := runCLI(t, "cp", src, dst)
			require.Equal(t, exitFound, r.code, "round %d: %s", round, r.stderr)
			require.Contains(t, r.stdout, "1 skipped, 0 failed", "round %d", round)
			t.Logf("sessions %v, round %d: killed after %d progress lines, leaving %d sessions claimed and unseen, %d temporary files; the rerun: %s", sessions, round, len(p.Acks()), len(claimed), len(temps)+len(more), strings.TrimSpace(r.stdout[strings.LastIndex(r.stdout, "copied"):strings.Index(r.stdout, " from ")]))
			requireWholeCopy(t, src, dst, sessions, damaged, true)
		}
	}
}
