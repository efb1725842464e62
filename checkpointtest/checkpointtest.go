// Package checkpointtest helps a program prove, in its own tests, that the
// checkpoints its earlier releases wrote still load after its state type
// has changed.
//
// Keep a checkpoint of each released schema (see checkpoint.WithSchema) in
// the program's testdata: copy one file a release wrote, for example into
// testdata/schema1/turn_007.json. Then a test loads them all with the
// options the program opens its store with:
//
//	func TestOldCheckpointsLoad(t *testing.T) {
//		for _, c := range checkpointtest.LoadAll[State](t, "testdata/schema1", storeOptions()...) {
//			if c.State.Health.Max == 0 {
//				t.Errorf("%s: health lost in migration", c.Info.Name())
//			}
//		}
//	}
//
// A file that no longer loads fails the test and names itself; so does a
// field that the state type has lost, which is how a change of the type
// without a new schema version shows.
package checkpointtest

import (
	"context"
	"testing"

	"github.com/gocheckpoint/checkpoint"
)

// Loaded is a checkpoint that LoadAll loaded: its Info, describing the file
// (Info.Schema is the schema it was saved at), and its state, migrated to
// the store's schema.
type Loaded[T any] struct {
	Info  checkpoint.Info
	State T
}

// LoadAll loads every checkpoint in dir as a store opened with opts would
// (give it the program's WithLayout and WithSchema), and returns them in the
// order checkpoint.Store.List returns them. Each checkpoint that does not
// load is reported with t.Errorf, naming the file and why; the others are
// returned. A directory that holds no checkpoint of the store's layout, or
// that cannot be opened, stops the test with t.Fatalf: an empty golden
// directory proves nothing.
//
// The store is opened with checkpoint.ReadOnly, so dir is never written,
// and with checkpoint.StrictDecoding: a field in a file that T does not
// have fails the test, which is what a field renamed or dropped without a
// new schema version and a migration looks like.
func LoadAll[T any](t testing.TB, dir string, opts ...checkpoint.Option) []Loaded[T] {
	t.Helper()
	ctx := context.Background()
	opts = append(append([]checkpoint.Option(nil), opts...), checkpoint.ReadOnly(), checkpoint.StrictDecoding())
	st, err := checkpoint.Open[T](dir, opts...)
	if err != nil {
		t.Fatalf("checkpointtest: %v", err)
	}
	defer st.Close()
	infos, err := st.List(ctx)
	if err != nil {
		t.Fatalf("checkpointtest: %v", err)
	}
	if len(infos) == 0 {
		hint := ""
		if found, err := checkpoint.DetectLayouts(dir); err == nil && len(found) > 0 {
			hint = " (it holds files of layout " + found[0].String() + ": pass its WithLayout option)"
		}
		t.Fatalf("checkpointtest: no checkpoint of the store's layout in %s%s", dir, hint)
	}
	var out []Loaded[T]
	for _, info := range infos {
		state, loaded, err := st.LoadExact(ctx, info)
		if err != nil {
			t.Errorf("checkpointtest: %v", err)
			continue
		}
		out = append(out, Loaded[T]{Info: loaded, State: state})
	}
	return out
}
