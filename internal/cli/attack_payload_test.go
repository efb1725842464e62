package cli

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAttackShowPayloadOfDamagedFiles: README, Command-line tool: "--payload
// writes the payload itself to stdout, raw, once verified" and verify
// "reads it to its end". For every truncation and every flipped byte of a
// plain payload file: show --payload either writes exactly the payload and
// succeeds, or writes nothing and fails; verify never passes a damaged
// file.
func TestAttackShowPayloadOfDamagedFiles(t *testing.T) {
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
