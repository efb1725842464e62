package cli

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
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

// rekeyRole runs checkpoint rekey --to Args[2] --identity Args[1] Args[0]
// as the command does (synced writes), acknowledging each file it reports
// rewritten; then it waits to be killed or stopped, so that a kill always
// finds it alive.
var rekeyRole = killtest.Register("cli-rekey", func(c *killtest.Child) int {
	stop := c.Stopping()
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			if path, ok := strings.CutPrefix(line, "rewrote "); ok {
				c.Ack(path[:strings.LastIndex(path, " (")])
			} else {
				c.Printf("out %s", line)
			}
		}
	}()
	code := Run([]string{"rekey", "--to", c.Args[2], "--identity", c.Args[1], c.Args[0]}, pw, os.Stderr)
	pw.Close()
	<-done
	c.Printf("exit %d", code)
	<-stop
	return code
})

func TestRekeyKilledAtAnyInstantLeavesEachFileWholeOfTheOldKeyOrTheNewAndARerunFinishes(t *testing.T) {
	t.Parallel()
	const files = 24
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 26))
	for round := range killtest.Kills(t, 3) {
		a, b := newKey(t), newKey(t)
		dir := filepath.Join(t.TempDir(), "store")
		saveSteps(t, dir, files, checkpoint.Encrypt(a.id))

		p := rekeyRole.Command(t, dir, a.file, b.file)
		p.Start(t)
		p.AwaitAcks(t, 1+rng.IntN(files-1))
		p.Kill(t)
		acked := p.Acks()

		// Every file is whole, of the old key or of the new one, and
		// authenticates with both keys given; every acknowledged file is of
		// the new key.
		keyLine := func(k testKey) []byte { return []byte("checkpoint-age-v1 " + k.kid + "\n") }
		st, err := checkpoint.Open[map[string]int](dir, checkpoint.Encrypt(b.id, a.id), checkpoint.ReadOnly())
		require.NoError(t, err)
		infos, err := st.List(context.Background())
		require.NoError(t, err)
		require.Len(t, infos, files, "round %d", round)
		for _, info := range infos {
			state, _, err := st.LoadExact(context.Background(), info)
			require.NoError(t, err, "round %d: %s", round, info.Location)
			require.Equal(t, int(info.Step), state["turn"])
			data, err := os.ReadFile(info.Location)
			require.NoError(t, err)
			require.True(t, bytes.HasPrefix(data, keyLine(a)) || bytes.HasPrefix(data, keyLine(b)), info.Location)
		}
		require.NoError(t, st.Close())
		for _, path := range acked {
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			require.True(t, bytes.HasPrefix(data, keyLine(b)), "round %d: %s was reported rewritten", round, path)
		}

		// A rerun finishes the work; then the new key alone reads it all.
		r := runCLI(t, "rekey", "--to", b.file, "--identity", a.file, dir)
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stdout, "failed 0\n")
		t.Logf("round %d: killed after %d files acknowledged; the rerun: %s", round, len(acked), r.stdout[strings.LastIndex(r.stdout, "rewritten"):])
		r = runCLI(t, "verify", dir, "--identity", b.file)
		require.Equal(t, 0, r.code, r.stdout)
		require.Contains(t, r.stdout, fmt.Sprintf("%d files checked", files))
	}
}
