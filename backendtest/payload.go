package backendtest

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/gocheckpoint/checkpoint"
)

// A store keeps byte payloads (Store.SaveFrom) on the backend as it keeps
// states: each reads back byte for byte, a failed write leaves nothing
// under its name, a payload is never replaced, a damaged one is passed
// over by LatestPayload and moved aside by a save of its step, and a
// state's load of a payload is ErrPayloadMismatch, not damage.
func (s *suite) testBytePayloads(t *testing.T) {
	ctx := t.Context()
	open := s.newStore(t)
	b, err := open()
	if err != nil {
		t.Fatalf("open a handle on the store: %v", err)
	}
	st, err := checkpoint.OpenBackend[[]byte](b, checkpoint.WithLayout("turn", 3)) // owns b
	if err != nil {
		t.Fatalf("OpenBackend: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("Close the store: %v", err)
		}
	})
	other := openHandle(t, open) // another program, holding no lock
	payloads := map[int64][]byte{1: payload(1, 200<<10), 2: nil, 3: payload(3, 100)}
	for step := int64(1); step <= 3; step++ {
		info, err := st.SaveFrom(ctx, step, writeBytes(payloads[step]))
		if err != nil {
			t.Fatalf("SaveFrom %d: %v", step, err)
		}
		if info.Payload != checkpoint.PayloadBytes || info.PayloadSize != int64(len(payloads[step])) {
			t.Fatalf("SaveFrom %d: Info says payload %q of %d bytes; want bytes, %d", step, info.Payload, info.PayloadSize, len(payloads[step]))
		}
	}
	if _, err := st.SaveFrom(ctx, 5, failAfter(payload(5, 5000))); !errors.Is(err, errWrite) {
		t.Fatalf("SaveFrom with a failing write = %v; want its error", err)
	}
	requireMissing(t, other, "turn_005.json")
	if _, err := st.SaveFrom(ctx, 3, writeBytes([]byte("other"))); !errors.Is(err, checkpoint.ErrExists) {
		t.Fatalf("SaveFrom of a saved step = %v; want ErrExists", err)
	}
	list, err := st.List(ctx)
	if err != nil || len(list) != 3 {
		t.Fatalf("List = %d checkpoints, %v; want 3", len(list), err)
	}
	for _, info := range list {
		if info.Payload != checkpoint.PayloadBytes {
			t.Fatalf("List: step %d says payload %q; want bytes", info.Step, info.Payload)
		}
		r, _, err := st.OpenPayload(ctx, info.Step)
		if err != nil {
			t.Fatalf("OpenPayload %d: %v", info.Step, err)
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(got, payloads[info.Step]) {
			t.Fatalf("OpenPayload %d read %d bytes, %v; want the %d saved", info.Step, len(got), err, len(payloads[info.Step]))
		}
	}
	if _, _, err := st.Latest(ctx); !errors.Is(err, checkpoint.ErrPayloadMismatch) {
		t.Fatalf("Latest of a store of payloads = %v; want ErrPayloadMismatch", err)
	}

	// A damaged payload put at step 4's name by another program.
	damaged := intactPayload(t, 4, payload(4, 3000))
	damaged[len(damaged)/2] ^= 0x20
	create(t, other, "turn_004.json", damaged)
	r, info, err := st.LatestPayload(ctx)
	if err != nil || info.Step != 3 {
		t.Fatalf("LatestPayload = step %d, %v; want step 3, passing over the damaged step 4", info.Step, err)
	}
	r.Close()
	if _, err := st.SaveFrom(ctx, 4, writeBytes(payloads[3])); err != nil {
		t.Fatalf("SaveFrom 4 over a damaged payload at its name: %v; want it moved aside and the step saved", err)
	}
	requireBytes(t, other, "turn_004.json.corrupt", damaged)
}

// intactPayload returns the bytes of a byte payload checkpoint of step
// holding p, in the layout turn/3, plain, as another writer saves it.
func intactPayload(t *testing.T, step int64, p []byte) []byte {
	t.Helper()
	dir := t.TempDir()
	st, err := checkpoint.Open[[]byte](dir, checkpoint.WithLayout("turn", 3), checkpoint.NoSync())
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.SaveFrom(t.Context(), step, writeBytes(p))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, info.Name()))
	if err != nil {
		t.Fatal(err)
	}
	return data
}
