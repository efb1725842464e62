package einostore_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cloudwego/eino/compose"
	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/einostore"
	"github.com/stretchr/testify/require"
)

// The test binary runs itself as a child process (a writer to kill, a
// resumer) when childEnv names a role; TestMain dispatches.
const (
	childEnv = "EINOSTORE_TEST_CHILD"
	dirEnv   = "EINOSTORE_TEST_DIR"
	idEnv    = "EINOSTORE_TEST_ID"
)

func TestMain(m *testing.M) {
	role := os.Getenv(childEnv)
	if role == "" {
		os.Exit(m.Run())
	}
	if err := runChild(role, os.Getenv(dirEnv), os.Getenv(idEnv)); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runChild(role, dir, id string) error {
	ctx := context.Background()
	store, err := einostore.New(dir)
	if err != nil {
		return err
	}
	defer store.Close()
	switch role {
	case "interrupt":
		// Runs the graph until Eino interrupts it before node c (Eino has
		// Set the checkpoint by then), says so, and waits to be killed.
		r, err := compileGraph(ctx, store, false)
		if err != nil {
			return err
		}
		_, err = r.Invoke(ctx, "start", compose.WithCheckPointID(id))
		if _, ok := compose.ExtractInterruptInfo(err); !ok {
			return fmt.Errorf("want an interrupt, got %v", err)
		}
		fmt.Println("interrupted")
		time.Sleep(time.Hour)
	case "resume":
		// Resumes the run: a and b must not run again, and the input
		// given now must be ignored in favour of the checkpoint's.
		r, err := compileGraph(ctx, store, true)
		if err != nil {
			return err
		}
		out, err := r.Invoke(ctx, "ignored", compose.WithCheckPointID(id))
		if err != nil {
			return err
		}
		fmt.Println("result " + out)
	case "sets":
		// Sets value i of the ID for i = 0, 1, ... and prints each
		// acknowledged i, until killed.
		for i := 0; ; i++ {
			if err := store.Set(ctx, id, value(id, i)); err != nil {
				return err
			}
			fmt.Println(i)
		}
	case "hammer":
		return hammer(ctx, store, "p"+os.Getenv("EINOSTORE_TEST_PROC"), 30)
	case "churn":
		return churn(ctx, store, 40)
	default:
		return fmt.Errorf("unknown role %q", role)
	}
	return nil
}

// compileGraph compiles START -> a -> b -> c -> END, each node appending its
// name, interrupted before c. With resumed, a and b fail if they run.
func compileGraph(ctx context.Context, store compose.CheckPointStore, resumed bool) (compose.Runnable[string, string], error) {
	g := compose.NewGraph[string, string]()
	node := func(name string, mustNotRun bool) *compose.Lambda {
		return compose.InvokableLambda(func(_ context.Context, in string) (string, error) {
			if mustNotRun {
				return "", fmt.Errorf("node %s ran again after the resume", name)
			}
			return in + "-" + name, nil
		})
	}
	for _, n := range []struct {
		name string
		skip bool
	}{{"a", resumed}, {"b", resumed}, {"c", false}} {
		if err := g.AddLambdaNode(n.name, node(n.name, n.skip)); err != nil {
			return nil, err
		}
	}
	for _, e := range [][2]string{{compose.START, "a"}, {"a", "b"}, {"b", "c"}, {"c", compose.END}} {
		if err := g.AddEdge(e[0], e[1]); err != nil {
			return nil, err
		}
	}
	return g.Compile(ctx,
		compose.WithCheckPointStore(store),
		compose.WithInterruptBeforeNodes([]string{"c"}),
		compose.WithGraphName("run"))
}

// value is the i-th value a test sets for id: it names both, so that a
// torn or foreign value cannot pass for it.
func value(id string, i int) []byte {
	return []byte(fmt.Sprintf("%s#%d#%s", id, i, strings.Repeat("x", i%7*100)))
}

// parseValue returns the i of value(id, i), or an error if b is no value
// of id.
func parseValue(id string, b []byte) (int, error) {
	var i int
	rest := strings.TrimPrefix(string(b), id+"#")
	if rest == string(b) {
		return 0, fmt.Errorf("value %.40q is not %q's", b, id)
	}
	if _, err := fmt.Sscanf(rest, "%d#", &i); err != nil || string(value(id, i)) != string(b) {
		return 0, fmt.Errorf("value %.40q of %q is torn or foreign", b, id)
	}
	return i, nil
}

// hammer Sets and Gets the IDs "shared" and "own-"+who n times each,
// checking every Get.
func hammer(ctx context.Context, store *einostore.Store, who string, n int) error {
	for i := range n {
		for _, id := range []string{"shared", "own-" + who} {
			if err := store.Set(ctx, id, value(id, i)); err != nil {
				return err
			}
			b, ok, err := store.Get(ctx, id)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("get %q after its set: not found", id)
			}
			j, err := parseValue(id, b)
			if err != nil {
				return err
			}
			if id != "shared" && j != i {
				return fmt.Errorf("get %q: value %d, want %d", id, j, i)
			}
		}
	}
	return nil
}

// churn Sets, Gets and Deletes the IDs "c0" to "c2" n times each, in
// turn, checking that every call succeeds and every Get returns nothing or
// one of the ID's values.
func churn(ctx context.Context, store *einostore.Store, n int) error {
	for i := range n {
		id := fmt.Sprint("c", i%3)
		var err error
		switch i % 4 {
		case 0, 1:
			err = store.Set(ctx, id, value(id, i))
		case 2:
			var b []byte
			var found bool
			if b, found, err = store.Get(ctx, id); err == nil && found {
				_, err = parseValue(id, b)
			}
		case 3:
			err = store.Delete(ctx, id)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// child starts the test binary in role, with stdout piped to the returned
// reader; the process is killed at the test's end if still running.
func child(t *testing.T, role, dir, id string, env ...string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+role, dirEnv+"="+dir, idEnv+"="+id)
	cmd.Env = append(cmd.Env, env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() && stderr.Len() > 0 {
			t.Logf("%s child's stderr:\n%s", role, stderr.String())
		}
	})
	return cmd, bufio.NewReader(out)
}

func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	line, err := r.ReadString('\n')
	if err == io.EOF && line == "" {
		t.Fatalf("child ended without a line")
	}
	require.NoError(t, err)
	return strings.TrimSuffix(line, "\n")
}

func newStore(t *testing.T, opts ...checkpoint.Option) (*einostore.Store, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := einostore.New(dir, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s, dir
}
