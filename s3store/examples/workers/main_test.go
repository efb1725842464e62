package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/internal/killtest"
	"github.com/gocheckpoint/checkpoint/s3store"
	"github.com/gocheckpoint/checkpoint/s3store/internal/s3test"
)

func TestMain(m *testing.M) {
	killtest.Dispatch()
	os.Exit(m.Run())
}

// workerRole runs the example's main with Args as its arguments: the test
// runs the workers as child processes of its own binary.
var workerRole = killtest.Register("worker", func(c *killtest.Child) int {
	os.Args = append(os.Args[:1], c.Args...)
	main()
	return 0
})

// worker is a worker process and the lines it prints.
type worker struct {
	*killtest.Proc
}

func startWorker(t *testing.T, srv *s3test.Server, args ...string) *worker {
	t.Helper()
	p := workerRole.Command(t, args...)
	none := filepath.Join(t.TempDir(), "none")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") {
			p.Cmd.Env = append(p.Cmd.Env, kv)
		}
	}
	p.Cmd.Env = append(p.Cmd.Env, srv.Env()...)
	p.Cmd.Env = append(p.Cmd.Env, "AWS_CONFIG_FILE="+none, "AWS_SHARED_CREDENTIALS_FILE="+none)
	p.Timeout = 2 * time.Minute // a failure, not a synchronisation
	p.Start(t)
	return &worker{p}
}

// await returns the first line of w that matches re, and the lines before.
func (w *worker) await(t *testing.T, re *regexp.Regexp) (match []string, before []string) {
	t.Helper()
	for {
		line, ok := w.Next(t)
		if !ok {
			t.Fatalf("the worker ended without printing a line that matches %s; it printed:\n%s", re, strings.Join(before, "\n"))
		}
		t.Log(line)
		if m := re.FindStringSubmatch(line); m != nil {
			return m, before
		}
		before = append(before, line)
	}
}

func TestSecondWorkerTakesOverTheRunOfAKilledOne(t *testing.T) {
	srv := s3test.ForTest(t)
	client := srv.Client(nil)
	bucket := srv.Bucket(t, client)
	const steps = 30
	args := func(name string) []string {
		return []string{"-bucket", bucket, "-prefix", "runs/1", "-name", name, "-steps", strconv.Itoa(steps), "-step-time", "50ms", "-lease", "1s"}
	}
	saved := regexp.MustCompile(`^worker A: saved step (\d+)$`)

	a := startWorker(t, srv, args("A")...)
	a.await(t, regexp.MustCompile(`^worker A: saved step 3$`))
	b := startWorker(t, srv, args("B")...)
	b.await(t, regexp.MustCompile(`^worker B: waiting: another worker has the run \(.*locked.*\)$`))

	a.Kill(t) // kill -9 mid-run
	lastA := int64(3)
	for line, ok := a.Next(t); ok; line, ok = a.Next(t) {
		if m := saved.FindStringSubmatch(line); m != nil {
			lastA, _ = strconv.ParseInt(m[1], 10, 64)
		}
	}
	require.Less(t, lastA, int64(steps), "A finished the run before it was killed: nothing to take over")

	m, _ := b.await(t, regexp.MustCompile(`^worker B: has the run: resuming after step (\d+) \(s3://`+bucket+`/runs/1/step_\d+\.json\)$`))
	resumed, _ := strconv.ParseInt(m[1], 10, 64)
	require.GreaterOrEqual(t, resumed, lastA, "B resumed before A's last acknowledged save")
	b.await(t, regexp.MustCompile(fmt.Sprintf(`^worker B: finished the run: step %d, `, steps)))
	require.NoError(t, b.Wait())

	// The run in the bucket: final, every step counted once, both workers
	// in it, and every checkpoint loads.
	be, err := s3store.New(client, bucket, "runs/1")
	require.NoError(t, err)
	st, err := checkpoint.OpenBackend[Run](be, checkpoint.ReadOnly())
	require.NoError(t, err)
	defer st.Close()
	ctx := context.Background()
	r, info, err := st.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, checkpoint.KindFinal, info.Kind)
	require.Equal(t, int64(steps), r.Step)
	require.Equal(t, int64(steps*(steps+1)*(2*steps+1)/6), r.Total)
	require.Equal(t, resumed, r.By["A"])
	require.Equal(t, int64(steps)-resumed, r.By["B"])
	infos, err := st.List(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, infos)
	for _, info := range infos {
		_, _, err := st.LoadExact(ctx, info)
		require.NoError(t, err, info.Location)
	}
}
