package raftstore_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/raftstore"
	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// The tests below run this test binary again as a child process, whose role
// the environment variable childRole selects (TestMain runs it instead of
// the tests).
const (
	childRole = "RAFTSTORE_TEST_CHILD"
	childDirs = "RAFTSTORE_TEST_DIRS"
	childID   = "RAFTSTORE_TEST_ID"
	childBlob = "RAFTSTORE_TEST_BLOB"
)

func TestMain(m *testing.M) {
	switch os.Getenv(childRole) {
	case "":
		os.Exit(m.Run())
	case "restore":
		os.Exit(childRestore())
	case "churn":
		os.Exit(childChurn())
	default:
		fmt.Fprintln(os.Stderr, "unknown child role")
		os.Exit(2)
	}
}

// exitWithParent ends the child when its parent goes (its stdin closes), so
// that a failed test leaves no process behind.
func exitWithParent() {
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(3)
	}()
}

// childRestore opens one node's snapshot store in this new process, starts a
// raft node on it with fresh in-memory logs (NewRaft restores the FSM from
// the newest snapshot), and prints the FSM's state and raft's applied index.
func childRestore() int {
	exitWithParent()
	blob, _ := strconv.Atoi(os.Getenv(childBlob))
	n, err := newNode(raft.ServerID(os.Getenv(childID)), os.Getenv(childDirs), blob, 2)
	if err != nil {
		fmt.Fprintln(os.Stderr, "restore:", err)
		return 1
	}
	fmt.Printf("state %s %d\n", n.fsm.state(), n.raft.AppliedIndex())
	if err := n.shutdown(); err != nil {
		fmt.Fprintln(os.Stderr, "shutdown:", err)
		return 1
	}
	return 0
}

// childChurn runs a cluster on the given directories that applies commands
// and snapshots every node at once, round after round, until it is killed.
// It prints "ready" once every node has a snapshot, then "round" after each.
func childChurn() int {
	exitWithParent()
	blob, _ := strconv.Atoi(os.Getenv(childBlob))
	c, err := startCluster(filepath.SplitList(os.Getenv(childDirs)), blob)
	if err != nil {
		fmt.Fprintln(os.Stderr, "churn:", err)
		return 1
	}
	for round := 0; ; round++ {
		if _, err := c.apply(3, fmt.Sprintf("round%d", round)); err != nil {
			fmt.Fprintln(os.Stderr, "churn apply:", err)
			return 1
		}
		var wg sync.WaitGroup
		errs := make([]error, len(c.nodes))
		for i, n := range c.nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = n.raft.Snapshot().Error()
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				fmt.Fprintln(os.Stderr, "churn snapshot:", err)
				return 1
			}
		}
		if round == 0 {
			fmt.Println("ready")
		} else {
			fmt.Println("round")
		}
	}
}

// child starts this test binary in a role, with its stdout as a pipe.
func child(t *testing.T, role string, env ...string) (*exec.Cmd, *bufio.Reader, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append(env, childRole+"="+role)...)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	t.Cleanup(func() { _ = stdin.Close() })
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderr := new(bytes.Buffer)
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd, bufio.NewReader(out), stderr
}

func TestRestoresANodeFromASnapshotInANewProcess(t *testing.T) {
	t.Parallel()
	const blob = 3 << 20
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	c, err := startCluster(dirs, blob)
	require.NoError(t, err)
	_, err = c.apply(25, "cmd")
	require.NoError(t, err)
	require.NoError(t, c.snapshotAll())
	want := c.nodes[0].fsm.state()
	var index []uint64
	for _, n := range c.nodes {
		list, err := n.snaps.List()
		require.NoError(t, err)
		require.NotEmpty(t, list)
		index = append(index, list[0].Index)
	}
	// Commands after the snapshot are in the logs only, which the new
	// process does not have: it must come back to the snapshot's state.
	_, err = c.apply(5, "after")
	require.NoError(t, err)
	require.NoError(t, c.shutdown())

	for i, dir := range dirs {
		cmd, out, stderr := child(t, "restore", childDirs+"="+dir, childID+"="+string(c.nodes[i].id), childBlob+"="+strconv.Itoa(blob))
		line, err := out.ReadString('\n')
		require.NoError(t, err, "child: %s", stderr)
		require.NoError(t, cmd.Wait(), "child: %s", stderr)
		require.Equal(t, fmt.Sprintf("state %s %d\n", want, index[i]), line, "node %d", i)
	}
}

func TestSurvivesKill9OfANodeMidSnapshot(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("kill -9 is a Unix signal")
	}
	t.Parallel()
	const blob = 2 << 20
	for round := 0; round < 3; round++ {
		dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
		cmd, out, stderr := child(t, "churn", childDirs+"="+strings.Join(dirs, string(filepath.ListSeparator)), childBlob+"="+strconv.Itoa(blob))
		line, err := out.ReadString('\n')
		require.NoError(t, err, "child: %s", stderr)
		require.Equal(t, "ready\n", line)
		for k := rand.IntN(3); k > 0; k-- {
			_, err := out.ReadString('\n')
			require.NoError(t, err, "child: %s", stderr)
		}
		time.Sleep(time.Duration(rand.IntN(40)) * time.Millisecond) // a random instant, not a synchronisation
		require.NoError(t, cmd.Process.Signal(os.Kill))
		_ = cmd.Wait()

		temps := 0
		for i, dir := range dirs {
			temps += checkNodeAfterKill(t, dir, raft.ServerID(fmt.Sprintf("node%d", i)), blob)
		}
		t.Logf("round %d: %d temporary files left by the kill, all removed on reopen", round, temps)
	}
}

// checkNodeAfterKill opens a killed node's store: every listed snapshot opens,
// reads to its verified end and restores an FSM; no temporary file outlives
// the reopen; raft.NewRaft starts from the newest. It returns how many
// temporary files the kill left.
func checkNodeAfterKill(t *testing.T, dir string, id raft.ServerID, blob int) int {
	t.Helper()
	temps := func() int {
		cp, err := checkpoint.Open[[]byte](dir, checkpoint.ReadOnly())
		require.NoError(t, err)
		defer cp.Close()
		l, err := cp.Leftovers(t.Context())
		require.NoError(t, err)
		require.Empty(t, l.Quarantined)
		return len(l.Temps)
	}
	left := temps()

	s, err := raftstore.New(dir, 2)
	require.NoError(t, err)
	list, err := s.List()
	require.NoError(t, err)
	require.NotEmpty(t, list, "%s: the snapshot acknowledged before ready survives", id)
	var newest string
	for i, meta := range list {
		m, r, err := s.Open(meta.ID)
		require.NoError(t, err, "%s: %s", id, meta.ID)
		f := newFSM(blob)
		require.NoError(t, f.Restore(r), "%s: %s", id, meta.ID)
		require.Equal(t, meta.Size, m.Size)
		if i == 0 {
			newest = f.state()
		}
	}
	require.NoError(t, s.Close())
	require.Zero(t, temps(), "%s: a reopen removes stale temporary files", id)

	n, err := newNode(id, dir, blob, 2)
	require.NoError(t, err)
	require.Equal(t, newest, n.fsm.state())
	require.Equal(t, list[0].Index, n.raft.AppliedIndex())
	require.NoError(t, n.shutdown())
	return left
}
