package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/s3store"
	"github.com/gocheckpoint/checkpoint/s3store/internal/s3test"
)

// The test runs the workers as child processes of its own binary.
const childEnv = "WORKERS_EXAMPLE_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// worker is a worker process and the lines it prints.
type worker struct {
	cmd   *exec.Cmd
	lines chan string // closed at the end of its output
}

func startWorker(t *testing.T, srv *s3test.Server, args ...string) *worker {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	none := filepath.Join(t.TempDir(), "none")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, srv.Env()...)
	cmd.Env = append(cmd.Env, childEnv+"=1", "AWS_CONFIG_FILE="+none, "AWS_SHARED_CREDENTIALS_FILE="+none)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	w := &worker{cmd: cmd, lines: make(chan string, 1000)}
	go func() {
		defer close(w.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return w
}

// await returns the first line of w that matches re, and the lines before.
func (w *worker) await(t *testing.T, re *regexp.Regexp) (match []string, before []string) {
	t.Helper()
	timeout := time.After(2 * time.Minute) // a failure, not a synchronisation
	for {
		select {
		case line, ok := <-w.lines:
			if !ok {
				t.Fatalf("the worker ended without printing a line that matches %s; it printed:\n%s", re, strings.Join(before, "\n"))
			}
			t.Log(line)
			if m := re.FindStringSubmatch(line); m != nil {
				return m, before
			}
			before = append(before, line)
		case <-timeout:
			t.Fatalf("no line matching %s; the worker printed:\n%s", re, strings.Join(before, "\n"))
		}
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

	require.NoError(t, a.cmd.Process.Kill()) // kill -9 mid-run
	lastA := int64(3)
	for line := range a.lines {
		if m := saved.FindStringSubmatch(line); m != nil {
			lastA, _ = strconv.ParseInt(m[1], 10, 64)
		}
	}
	require.Less(t, lastA, int64(steps), "A finished the run before it was killed: nothing to take over")

	m, _ := b.await(t, regexp.MustCompile(`^worker B: has the run: resuming after step (\d+) \(s3://`+bucket+`/runs/1/step_\d+\.json\)$`))
	resumed, _ := strconv.ParseInt(m[1], 10, 64)
	require.GreaterOrEqual(t, resumed, lastA, "B resumed before A's last acknowledged save")
	b.await(t, regexp.MustCompile(fmt.Sprintf(`^worker B: finished the run: step %d, `, steps)))
	require.NoError(t, b.cmd.Wait())

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
		_, _, err := st.LoadInfo(ctx, info)
		require.NoError(t, err, info.Path)
	}
}
