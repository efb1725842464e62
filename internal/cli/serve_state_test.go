package cli

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSearchStateFindsKeysAndValuesInDocumentOrder(t *testing.T) {
	t.Parallel()
	state := []byte(`{"turn":6,"players":[{"name":"ann","hp":94},{"name":"bob","hp":90}],"hp":"HP bar","list":[1,"hp"]}`)
	got, err := searchState(context.Background(), state, "hp", 10)
	require.NoError(t, err)
	var paths []string
	for _, n := range got.Results {
		paths = append(paths, n.Path)
	}
	assert.Equal(t, []string{"/players/0/hp", "/players/1/hp", "/hp", "/list/1"}, paths)
}
