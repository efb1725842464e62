package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
)

// FuzzStateTreeAgreesWithEncodingJSON: for any JSON text, the state tree
// serve sends describes what encoding/json decodes: the root's type and
// size, each child's key, and each child found again by its own path (so
// that a path with ~ and / in its keys, or an index, leads back to it).
// Nothing panics, and search answers.
func FuzzStateTreeAgreesWithEncodingJSON(f *testing.F) {
	for _, seed := range []string{
		`{"turn":6,"players":[{"name":"ann","hp":94}],"a/b~c":null,"":true}`,
		`[1,2.5e300,-0,"x",[],{},[[[]]]]`,
		`"\ud800 \u00e9 \u2028"`,
		`{"k":1,"k":2}`,
		` {"nested":{"deeper":{"deepest":[false]}}} `,
		`12345678901234567890123`,
		"{\"\xff~1\":{\"x\xfe\":[1]}}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return
		}
		root, err := nodeAt(data, "")
		if err != nil {
			t.Fatalf("root of %q: %v", data, err)
		}
		want := map[string]string{"map[string]interface {}": "object", "[]interface {}": "array", "string": "string", "json.Number": "number", "bool": "bool", "<nil>": "null"}[typeName(v)]
		if root.Type != want {
			t.Fatalf("root of %q is %s, encoding/json decodes %s", data, root.Type, typeName(v))
		}
		page, err := childrenAt(data, "", 0, 1000)
		if err != nil {
			t.Fatalf("children of %q: %v", data, err)
		}
		switch x := v.(type) {
		case []any:
			if *root.Count != len(x) || len(page.Children) != min(len(x), 1000) {
				t.Fatalf("%q: %d elements, the tree says %d (%d sent)", data, len(x), *root.Count, len(page.Children))
			}
		case map[string]any:
			keys := map[string]bool{}
			for _, c := range page.Children {
				keys[*c.Key] = true
			}
			if *root.Count < len(x) || len(keys) != len(x) {
				t.Fatalf("%q: %d keys, the tree says %d (%d distinct)", data, len(x), *root.Count, len(keys))
			}
			for k := range x {
				if !keys[k] {
					t.Fatalf("%q: key %q missing from the tree", data, k)
				}
			}
		case string:
			var got string
			if err := json.Unmarshal(root.Value, &got); err != nil {
				t.Fatalf("%q: the string node's value %q does not decode: %v", data, root.Value, err)
			}
			if !root.Truncated && got != x {
				t.Fatalf("%q: the tree says %q, encoding/json %q", data, got, x)
			}
		}
		last := map[string]jsonNode{} // a duplicate name means its last member
		for _, c := range page.Children {
			last[c.Path] = c
		}
		for _, c := range last {
			again, err := nodeAt(data, c.Path)
			if err != nil {
				t.Fatalf("%q: child %q not found by its path %q: %v", data, *c.Key, c.Path, err)
			}
			if again.Type != c.Type || !bytes.Equal(again.Value, c.Value) || (c.Count == nil) != (again.Count == nil) {
				t.Fatalf("%q: child %q found by its path %q is another node: %+v, not %+v", data, *c.Key, c.Path, again, c)
			}
		}
		if _, err := searchState(context.Background(), data, "a", 20); err != nil {
			t.Fatalf("search of %q: %v", data, err)
		}
	})
}

func typeName(v any) string {
	if v == nil {
		return "<nil>"
	}
	switch v.(type) {
	case map[string]any:
		return "map[string]interface {}"
	case []any:
		return "[]interface {}"
	case string:
		return "string"
	case json.Number:
		return "json.Number"
	case bool:
		return "bool"
	}
	return "?"
}
