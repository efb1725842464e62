package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint/s3store/internal/s3test"
)

// TestQuickRunPrintsTheTable runs the command with tiny sizes against the
// test's server: every measurement runs and has its row.
func TestQuickRunPrintsTheTable(t *testing.T) {
	srv := s3test.ForTest(t)
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	var out bytes.Buffer
	require.NoError(t, run([]string{"-quick", "-endpoint", srv.Endpoint}, &out))
	text := out.String()
	for _, want := range []string{
		"- machine: ", "- server: " + srv.Endpoint, "- load average before: ", "load average after",
		"| measurement | result | requests | compared with | ratio | target | met |",
		"| Save, plain, 2 KiB state | ", " | 1.00 PUT per save | hand-written json.Marshal + PutObject: ",
		"| take the lease (a writer's OpenBackend, lease free) | ",
		"| release the lease (Close) | ", " | 1 PUT lease | ",
		"| lease renewals while saving, LeaseTTL(3s): one every TTL/3 | ",
		"| Latest, 20 checkpoints, reader just opened (ReadOnly) | ",
		"| List, 50 checkpoints, reader just opened (ReadOnly) | ",
		"| List again, 20 checkpoints, same reader | ",
		"| resume: a writer's OpenBackend (takes the lease) + Latest, 50 checkpoints | ",
		"| Latest again, 50 checkpoints, same writer | ",
		"| List, 50 checkpoints, reader just opened (ReadOnly), after a takeover | ",
		"| cp (checkpoint.Copy) of 30 checkpoints, directory to S3, 1 at once | ",
		"| cp (checkpoint.Copy) of 30 checkpoints, directory to S3, 8 at once | ", " checkpoints/s (",
		"| cp (checkpoint.Copy) of 30 checkpoints, directory to S3, 8 at once, 1ms added to each request (a network's round trip) | ",
	} {
		require.Contains(t, text, want)
	}
}
