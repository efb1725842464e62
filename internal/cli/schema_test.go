package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/stretchr/testify/require"
)

// schemaStore writes steps 1, 2 and 3 of a store at schemas 0, 1 and 2, as
// three releases of a program would, and returns its directory.
func schemaStore(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	keep := func(s json.RawMessage) (json.RawMessage, error) { return s, nil }
	for step, opts := range [][]checkpoint.Option{
		nil,
		{checkpoint.WithSchema(1, checkpoint.Migration{From: 0, Migrate: keep})},
		{checkpoint.WithSchema(2, checkpoint.Migration{From: 0, Migrate: keep}, checkpoint.Migration{From: 1, Migrate: keep})},
	} {
		st, err := checkpoint.Open[map[string]any](dir, append(opts, checkpoint.NoSync(), checkpoint.WithLayout("turn", 3))...)
		require.NoError(t, err)
		_, err = st.Save(context.Background(), int64(step+1), gameState(int64(step+1)))
		require.NoError(t, err)
		require.NoError(t, st.Close())
	}
	return dir
}

func TestLsAndShowPrintTheSchema(t *testing.T) {
	t.Parallel()
	dir := schemaStore(t)
	r := runCLI(t, "ls", dir)
	require.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 4)
	require.Regexp(t, `^STEP +KIND +SCHEMA +TIME +SIZE`, lines[0])
	for i, line := range lines[1:] {
		require.Regexp(t, `^`+string(rune('1'+i))+` +step +`+string(rune('0'+i))+` +2\d\d\d-`, line)
	}

	r = runCLI(t, "show", dir, "3")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "format:     2\nschema:     2\nstep:       3\n")
	require.Contains(t, r.stdout, `"scene": "the Salt Caves"`, "the state as it was saved")
	r = runCLI(t, "show", dir, "latest")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "schema:     2\n")
	r = runCLI(t, "show", dir, "1")
	require.Equal(t, 0, r.code, r.stderr)
	require.NotContains(t, r.stdout, "schema:", "a file without a schema shows none")
	r = runCLI(t, "diff", dir, "1", "3")
	require.Equal(t, exitFound, r.code, r.stderr) // the states differ
	require.Empty(t, r.stderr)
}

func TestVerifyReportsNewerSchemaNotBad(t *testing.T) {
	t.Parallel()
	dir := schemaStore(t)
	r := runCLI(t, "verify", dir)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "3 files checked in "+dir+" (layout turn/3): 3 ok, 0 bad\n", r.stdout, "every schema is read by default")

	r = runCLI(t, "verify", "--schema", "1", dir)
	require.Equal(t, 0, r.code, r.stderr)
	path := filepath.Join(dir, "turn_003.json")
	require.Equal(t, "newer schema  "+path+"  checkpoint has a newer schema: the file has schema 2, this store reads schema 1 and older (see WithSchema)\n"+
		"3 files checked in "+dir+" (layout turn/3): 2 ok, 0 bad, 1 of a newer schema\n", r.stdout)

	r = runCLI(t, "verify", "--schema", "1", "--json", dir)
	require.Equal(t, 0, r.code, r.stderr)
	var rep verifyReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	require.True(t, rep.OK)
	require.Equal(t, 0, rep.Bad)
	require.Equal(t, 1, rep.Newer)
	require.True(t, rep.Files[2].Newer)
	require.Equal(t, 2, rep.Files[2].Schema)
	require.False(t, rep.Files[1].Newer)

	// A program of schema 0 sees two newer files.
	r = runCLI(t, "verify", "--schema", "0", dir)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, ": 1 ok, 0 bad, 2 of a newer schema\n")

	r = runCLI(t, "verify", "--schema", "1000000000", dir)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "--schema 1000000000: want a schema version from 0 to 65536")
}
