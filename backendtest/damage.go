package backendtest

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/gocheckpoint/checkpoint"
)

// storeCases check promises of a checkpoint.Store opened on the backend
// with checkpoint.OpenBackend: the store keeps them the same way on every
// backend, but only if the backend tells it the truth.
func (s *suite) storeCases() []testCase {
	return []testCase{
		{"SaveMovesDamageAtItsNameAside", s.testSaveMovesDamageAtItsNameAside},
		{"BytePayloads", s.testBytePayloads},
	}
}

// An object put at a step's checkpoint name after the writer opened the
// store (by another program, or by a paused writer's late PUT) that is
// provably damaged does not block that step: Latest passes over it, and a
// Save of the step moves it aside to NAME.corrupt, bytes unchanged, and
// saves. An intact checkpoint put there is never moved: the Save fails
// with ErrExists and leaves it as it is.
func (s *suite) testSaveMovesDamageAtItsNameAside(t *testing.T) {
	ctx := t.Context()
	open := s.newStore(t)
	b, err := open()
	if err != nil {
		t.Fatalf("open a handle on the store: %v", err)
	}
	st, err := checkpoint.OpenBackend[int](b, checkpoint.WithLayout("turn", 3)) // owns b
	if err != nil {
		t.Fatalf("OpenBackend: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("Close the store: %v", err)
		}
	})
	other := openHandle(t, open) // another program, holding no lock
	for step := int64(1); step <= 2; step++ {
		if _, err := st.Save(ctx, step, int(step)*10); err != nil {
			t.Fatalf("Save %d: %v", step, err)
		}
	}
	garbage := []byte("{\"format\": 1, \"step\": 3, torn")
	create(t, other, "turn_003.json", garbage)
	if _, info, err := st.Latest(ctx); err != nil || info.Step != 2 {
		t.Fatalf("Latest = step %d, %v; want step 2, passing over the damaged step 3", info.Step, err)
	}
	intact := intactCheckpoint(t, 4, 40)
	create(t, other, "turn_004.json", intact)
	if _, err := st.Save(ctx, 3, 30); err != nil {
		t.Fatalf("Save 3 over a damaged object at its name: %v; want it moved aside and the step saved", err)
	}
	requireBytes(t, other, "turn_003.json.corrupt", garbage)
	got, _, err := st.Load(ctx, 3)
	if err != nil || got != 30 {
		t.Fatalf("Load 3 = %d, %v; want 30", got, err)
	}
	if _, err := st.Save(ctx, 4, 41); !errors.Is(err, checkpoint.ErrExists) {
		t.Fatalf("Save 4 over an intact checkpoint: %v; want ErrExists", err)
	}
	requireBytes(t, other, "turn_004.json", intact)
	requireMissing(t, other, "turn_004.json.corrupt")
}

// intactCheckpoint returns the bytes of a checkpoint of step holding v, in
// the layout turn/3, as another writer would have saved it.
func intactCheckpoint(t *testing.T, step int64, v int) []byte {
	t.Helper()
	dir := t.TempDir()
	st, err := checkpoint.Open[int](dir, checkpoint.WithLayout("turn", 3), checkpoint.NoSync())
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Save(t.Context(), step, v)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, info.Name()))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
