package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// The tests of the commands are in internal/cli; this one checks what the
// binary adds: an s3:// location names the build that reads it.
func TestMain(m *testing.M) {
	if os.Getenv("CHECKPOINT_CMD_TEST_MAIN") == "1" {
		os.Args = append(os.Args[:1], os.Args[2:]...) // drop "--"
		main()
	}
	os.Exit(m.Run())
}

func TestS3LocationNamesTheBuildWithS3Support(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "--", "ls", "s3://bucket/runs/1")
	cmd.Env = append(os.Environ(), "CHECKPOINT_CMD_TEST_MAIN=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "%v", err)
	require.Equal(t, 2, exit.ExitCode())
	require.Contains(t, stderr.String(), "checkpoint ls: s3://bucket/runs/1: this checkpoint command reads local directories only; for s3:// locations install the one with s3 support: go install github.com/gocheckpoint/checkpoint/s3store/cmd/checkpoint@latest\n")
}
