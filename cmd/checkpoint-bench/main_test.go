package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestQuickRunPrintsTheTable runs the command with tiny sizes: every
// measurement runs, and the table has a row for each target of the issue.
func TestQuickRunPrintsTheTable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var out bytes.Buffer
	require.NoError(t, run([]string{"-quick", "-dir", dir}, &out))
	text := out.String()
	for _, want := range []string{
		"- machine: ", "- directory: ", "- states (JSON): ", "load average after",
		"| measurement | result | compared with | ratio | target | met |",
		"| Save, plain, 2 KB state, durable |",
		"| Save, gzip, 10 KB state, durable |",
		"| Save, zstd, 10 KB state, durable |",
		"vs the disk's floor",
		"| gzip, klauspost vs compress/gzip",
		"| zstd, klauspost",
		"reused compressor",
		"| Load / Latest, zstd, 200 KB state |",
		"| List, 300 checkpoints |",
		"| Latest, 300 checkpoints |",
		"| Latest vs a naive reader, 300 checkpoints |",
		"| Prune (KeepLast, nothing to remove), 300 checkpoints |",
		"| heap growth of a warm Save, zstd, 200 KB state |",
		"| Async Save, 10 KB state, latency seen by the caller |",
		"| NoSync Save, 10 KB state |",
		"| Async(16) throughput, 2 KB durable saves, Flush every 100, time per save |",
		"| CPU per save of the Async(16) row (user and system, all threads), and that row's bound on ",
		"| creating an empty unnamed file in the Async(16) row's directory, on ",
		"| Save, plain, 20.4 KB state, durable |",
		"| Save with KeepLast(3), plain, 2 KB state, durable |",
		"| first List after Open, 300 checkpoints |",
		"| peak heap of Load beyond the decoded value, plain, 200.3 KB state",
		"| peak heap of Load beyond the decoded value, zstd, 200.3 KB state",
		"| Save, encrypted, 6.4 KB state, durable |",
		"| Load, encrypted, 20.4 KB state |",
		"| first List after Open, encrypted, 300 checkpoints |",
		"| first List after Open, encrypted, without the header index, 300 checkpoints |",
	} {
		require.Contains(t, text, want)
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "| ") {
			require.Equal(t, 7, strings.Count(line, "|"), line)
		}
	}
	// It cleaned up after itself.
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)
}

func TestBadFlagIsAnError(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	require.Error(t, run([]string{"-no-such-flag"}, &out))
}

func TestWorldHasTheAskedSize(t *testing.T) {
	t.Parallel()
	for _, size := range []int{10 << 10, 100 << 10, 1 << 20} {
		got := encodedSize(newWorld(size))
		require.InDelta(t, size, got, float64(size)/10, "size %d", size)
	}
	require.Equal(t, "10 KB", sizeName(10<<10))
	require.Equal(t, "1.5 MB", sizeName(3<<19))
	require.Equal(t, "12 B", sizeName(12))
}
