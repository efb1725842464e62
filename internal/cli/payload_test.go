package cli

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/stretchr/testify/require"
)

// payloadStore makes a store whose step 1 is a byte payload of payload
// and whose step 2 is a JSON state, and returns its directory and the
// payload's Info.
func payloadStore(t *testing.T, payload []byte, opts ...checkpoint.Option) (string, checkpoint.Info) {
	t.Helper()
	dir := t.TempDir()
	st, err := checkpoint.Open[[]byte](dir, append(opts, checkpoint.NoSync())...)
	require.NoError(t, err)
	defer st.Close()
	info, err := st.SaveFrom(context.Background(), 1, func(w io.Writer) error {
		_, err := w.Write(payload)
		return err
	})
	require.NoError(t, err)
	_, err = st.Save(context.Background(), 2, []byte("state"))
	require.NoError(t, err)
	return dir, info
}

// addPayload saves payload as the checkpoint of step in dir.
func addPayload(t *testing.T, dir string, step int64, payload []byte) {
	t.Helper()
	st, err := checkpoint.Open[[]byte](dir, checkpoint.NoSync(), checkpoint.Gzip())
	require.NoError(t, err)
	defer st.Close()
	_, err = st.SaveFrom(context.Background(), step, func(w io.Writer) error {
		_, err := w.Write(payload)
		return err
	})
	require.NoError(t, err)
}

// TestShowAPayloadPrintsItsHeaderAndSize proves that show of a byte
// payload prints its header and its size once verified, and ls marks it.
func TestShowAPayloadPrintsItsHeaderAndSize(t *testing.T) {
	t.Parallel()
	payload := bytes.Repeat([]byte("\x00raft\xff"), 1000)
	for _, opts := range [][]checkpoint.Option{nil, {checkpoint.Zstd()}} {
		dir, _ := payloadStore(t, payload, opts...)
		r := runCLI(t, "show", dir, "1")
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, "format:     3\n")
		require.Contains(t, r.stdout, "checksum:   ok (crc32c verified)\n")
		require.Contains(t, r.stdout, "payload:    5.9 KiB (6000 bytes, byte payload: show --payload writes it)\n")
		// --state promises JSON for jq: a byte payload has none.
		r = runCLI(t, "show", dir, "1", "--state")
		require.NotEqual(t, exitOK, r.code)
		require.Empty(t, r.stdout)
		require.Contains(t, r.stderr, "payload")

		r = runCLI(t, "ls", dir)
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, "(byte payload)")
		r = runCLI(t, "ls", dir, "--json")
		require.Equal(t, exitOK, r.code, r.stderr)
		var infos []checkpoint.Info
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &infos))
		require.Equal(t, checkpoint.PayloadBytes, infos[0].Payload)
		require.Equal(t, checkpoint.PayloadJSON, infos[1].Payload)
	}
}

// TestShowPayloadWritesTheRawBytes proves that show --payload writes the
// payload to stdout byte for byte, and nothing else; that it refuses a
// JSON state; and that a damaged payload fails the command with nothing
// written, and fails verify.
func TestShowPayloadWritesTheRawBytes(t *testing.T) {
	t.Parallel()
	payload := []byte("\x00\x01binary\n\xff,\"checksum\":\"")
	dir, info := payloadStore(t, payload, checkpoint.Gzip())
	r := runCLI(t, "show", dir, "1", "--payload")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, string(payload), r.stdout)

	// By --file, and by --kind: latest of a kind stops at the newest
	// payload that verifies (step 3), as Latest does, rather than go back
	// to an older state.
	addPayload(t, dir, 3, payload)
	for _, args := range [][]string{{"--file", "step_00000001.json.gz"}, {"latest", "--kind", "step"}, {"3", "--kind", "step"}} {
		r = runCLI(t, append([]string{"show", dir, "--payload"}, args...)...)
		require.Equal(t, exitOK, r.code, r.stderr)
		require.Equal(t, string(payload), r.stdout)
	}

	r = runCLI(t, "show", dir, "2", "--payload")
	require.Equal(t, exitFailed, r.code)
	require.Contains(t, r.stderr, "not a byte payload")

	r = runCLI(t, "verify", dir)
	require.Equal(t, exitOK, r.code, r.stdout+r.stderr)

	// Damaged: gunzip, flip a payload byte, gzip again.
	zr, err := gzip.NewReader(bytes.NewReader(readFile(t, info.Location)))
	require.NoError(t, err)
	plain, err := io.ReadAll(zr)
	require.NoError(t, err)
	plain[len(plain)-40] ^= 1
	require.NoError(t, os.WriteFile(info.Location, gzipped(t, plain), 0o644))
	r = runCLI(t, "show", dir, "1", "--payload")
	require.Equal(t, exitFailed, r.code)
	require.Empty(t, r.stdout)
	require.Contains(t, r.stderr, "checksum mismatch")
	r = runCLI(t, "verify", dir)
	require.Equal(t, exitFound, r.code, r.stdout+r.stderr)
}

// TestShowPayloadOfADamagedFileWritesNothing proves that for every
// truncation and every flipped byte of a plain payload file, show
// --payload either writes exactly the payload and succeeds (the file is
// intact) or writes nothing and fails, and that verify never passes a
// damaged file.
func TestShowPayloadOfADamagedFileWritesNothing(t *testing.T) {
	t.Parallel()
	payload := []byte("\x00raft,\"checksum\":\"crc32c:00000000\"}\n")
	dir, info := payloadStore(t, payload)
	orig := readFile(t, info.Location)
	try := func(what string, data []byte) {
		require.NoError(t, os.WriteFile(info.Location, data, 0o644))
		r := runCLI(t, "show", dir, "1", "--payload")
		if r.code == exitOK {
			if r.stdout != string(payload) || !bytes.Equal(data, orig) {
				t.Errorf("%s: show --payload succeeded writing %q", what, r.stdout)
			}
		} else if r.stdout != "" {
			t.Errorf("%s: show --payload failed (%d) after writing %q", what, r.code, r.stdout)
		}
		r = runCLI(t, "verify", dir)
		if r.code == exitOK && !bytes.Equal(data, orig) {
			t.Errorf("%s: verify passes a damaged payload: %s", what, r.stdout)
		}
	}
	for n := 0; n < len(orig); n++ {
		try(fmt.Sprint("truncated to ", n), orig[:n])
	}
	for i := range orig {
		d := bytes.Clone(orig)
		d[i] ^= 0x01
		try(fmt.Sprintf("byte %d ^ 1", i), d)
	}
}

// TestShowLatestOfAGoodPayloadNotesNoSkip proves that show latest of a
// store whose newest checkpoint is a good byte payload shows it without a
// "skipped" note: the notes name only damaged checkpoints a load passed
// over, never the one shown.
func TestShowLatestOfAGoodPayloadNotesNoSkip(t *testing.T) {
	t.Parallel()
	dir, _ := payloadStore(t, []byte("aaa"))
	addPayload(t, dir, 4, []byte("bbb"))
	for _, args := range [][]string{{"latest"}, {"latest", "--payload"}} {
		r := runCLI(t, append([]string{"show", dir}, args...)...)
		require.Equal(t, exitOK, r.code, r.stderr)
		require.NotContains(t, r.stderr, "skipped", "show %v of a good newest payload", args)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}
