package checkpoint

import (
	"bytes"
	"compress/gzip"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// requireUntouched checks that the file at path still holds before and
// was not moved aside.
func requireUntouched(t *testing.T, path string, before []byte) {
	t.Helper()
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, before, after)
	require.NoFileExists(t, path+quarantineSuffix)
}

type corpusState struct {
	Turn   int64             `json:"turn"`
	Agents map[string]string `json:"agents"`
	Log    []string          `json:"log"`
}

func corpusStateAt(turn int64) corpusState {
	return corpusState{Turn: turn, Agents: map[string]string{"dm": "narrates", "ana": "sneaks"}, Log: []string{"a", "b"}}
}

func gzipped(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write(b)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}
