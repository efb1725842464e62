package cli

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAttackShowLatestPayloadSaysItSkippedIt: README, Command-line tool:
// show "latest is what Latest returns"; the "skipped" notes are for the
// damaged checkpoints a load passed over (noteSkipped). show DIR latest
// of a store whose newest checkpoint is a good byte payload shows that
// payload, and also prints "note: skipped <that file>: checkpoint holds
// another kind of payload" on stderr: it claims to have skipped, as if it
// did not load, the very checkpoint it shows (the CLI's hook counts
// Latest's ErrPayloadMismatch, which is no skip, as one).
func TestAttackShowLatestPayloadSaysItSkippedIt(t *testing.T) {
	dir, _ := payloadStore(t, []byte("aaa"))
	addPayload(t, dir, 4, []byte("bbb"))
	for _, args := range [][]string{{"latest"}, {"latest", "--payload"}} {
		r := runCLI(t, append([]string{"show", dir}, args...)...)
		require.Equal(t, exitOK, r.code, r.stderr)
		if strings.Contains(r.stderr, "skipped") {
			t.Errorf("show %v of a good newest payload: stderr %q", args, r.stderr)
		}
	}
}
