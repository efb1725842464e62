package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Arrays nested in arrays would cost go-cmp's edit script exponential
// time: past its budget, diff compares arrays index by index and says so.
func TestDiffOfDeeplyNestedArraysComparesThemIndexByIndex(t *testing.T) {
	t.Parallel()
	nested := func(leaf string) any {
		v, err := decodeJSON(json.RawMessage(strings.Repeat("[", 20) + leaf + strings.Repeat("]", 20)))
		require.NoError(t, err)
		return v
	}
	changes, exact := diffChanges(nested(`1,{"k":1}`), nested(`2,{"k":1},3`))
	assert.False(t, exact)
	require.Len(t, changes, 2)
	deep := strings.Repeat("[0]", 19)
	ptr := strings.Repeat("/0", 19)
	assert.Equal(t, "changed", changes[0].Op)
	assert.Equal(t, "."+deep+"[0]", changes[0].JQ)
	assert.Equal(t, ptr+"/0", *changes[0].APath)
	assert.Equal(t, "1", *changes[0].A)
	assert.Equal(t, "2", *changes[0].B)
	assert.Equal(t, "added", changes[1].Op)
	assert.Equal(t, "."+deep+"[2]", changes[1].JQ)
	assert.Nil(t, changes[1].APath)
	assert.Equal(t, ptr+"/2", *changes[1].BPath)
}

// Where arrays only change in place or grow at their end, the index by
// index walk finds what go-cmp's edit script finds, paths and values alike.
func TestDiffWalkAgreesWithTheEditScriptWhereArraysKeepTheirOrder(t *testing.T) {
	t.Parallel()
	decode := func(s string) any {
		v, err := decodeJSON(json.RawMessage(s))
		require.NoError(t, err)
		return v
	}
	for _, tc := range []struct{ a, b string }{
		{`{"a":1,"b":[1,2,{"c":"x"}],"odd key":{"~/":true}}`, `{"a":2,"b":[1,3,{"c":"y"},4],"odd key":{"~/":false},"new":null}`},
		{`[1,[2,[3]],"s"]`, `[1,[2,[4]],"s",{"x":[]}]`},
		{`{"x":{"y":[1,2,3]}}`, `{"x":{"y":[1,2]}}`},
		{`{"a":"1"}`, `{"a":1}`},
	} {
		exact, ok := diffChanges(decode(tc.a), decode(tc.b))
		require.True(t, ok)
		var w walker
		w.walk(decode(tc.a), decode(tc.b), true, true)
		assert.Equal(t, exact, w.changes, "%s -> %s", tc.a, tc.b)
	}
}
