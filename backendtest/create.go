package backendtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/gocheckpoint/checkpoint"
)

func (s *suite) createCases() []testCase {
	return []testCase{
		{"CreateRoundTripsBytes", s.testCreateRoundTripsBytes},
		{"CreateRaceHasOneWinner", s.testCreateRaceHasOneWinner},
		{"CreateNeverReplaces", s.testCreateNeverReplaces},
		{"FailedCreateLeavesNothing", s.testFailedCreateLeavesNothing},
		{"CancelledCreateLeavesNothing", s.testCancelledCreateLeavesNothing},
	}
}

// A created object reads back byte for byte, whatever its size (an empty
// object included), and Stat describes it as Create did.
func (s *suite) testCreateRoundTripsBytes(t *testing.T) {
	b := s.one(t)
	for i, n := range []int{0, 1, 3000, 3001, 1<<20 + 7} {
		name := fmt.Sprintf("size-%d.bin", n)
		p := payload(uint64(i), n)
		made := create(t, b, name, p)
		got := requireBytes(t, b, name, p)
		st := stat(t, b, name)
		if st.Name != name || st.Size != int64(n) {
			t.Errorf("Stat %q = Name %q Size %d; want Size %d", name, st.Name, st.Size, n)
		}
		if st.Version != made.Version || got.Version != made.Version {
			t.Errorf("%q: Create returned Version %q, Open %q, Stat %q: one object has one Version", name, made.Version, got.Version, st.Version)
		}
		if st.ModTime.IsZero() {
			t.Errorf("Stat %q returned a zero ModTime: only List may leave it unsaid", name)
		}
		if st.Mode != 0 {
			t.Errorf("Stat %q of a regular object returned Mode %v; want 0", name, st.Mode)
		}
	}
}

// Of 16 concurrent Creates of one name, spread over two handles (two
// processes), exactly one succeeds, the others fail with ErrExists, and
// the name holds the winner's bytes whole.
func (s *suite) testCreateRaceHasOneWinner(t *testing.T) {
	bs := s.handles(t, 2)
	before := listNames(t, bs[0])
	const racers = 16
	var names []string
	for round := range 3 {
		name := fmt.Sprintf("race-%d.json", round)
		names = append(names, name)
		payloads := make([][]byte, racers)
		objs := make([]checkpoint.Object, racers)
		for i := range payloads {
			payloads[i] = payload(uint64(round*racers+i), 64<<10+i)
		}
		errs := parallel(racers, func(i int) error {
			var err error
			objs[i], err = bs[i%2].Create(t.Context(), name, writeBytes(payloads[i]))
			return err
		})
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("%q: Creates %d and %d both succeeded: exactly one Create of a name may win", name, winner, i)
			case err == nil:
				winner = i
			default:
				requireErr(t, fmt.Sprintf("losing Create %d of %q", i, name), err, checkpoint.ErrExists)
			}
		}
		if winner < 0 {
			t.Fatalf("%q: all %d concurrent Creates failed; one must win", name, racers)
		}
		checkWritten(t, "Create", objs[winner], name, payloads[winner])
		for _, b := range bs {
			got := requireBytes(t, b, name, payloads[winner])
			if got.Version != objs[winner].Version {
				t.Errorf("%q: the winning Create returned Version %q, Open on %s says %q", name, objs[winner].Version, b.Locate(""), got.Version)
			}
		}
	}
	requireAdded(t, bs[0], before, names...)
}

// Create on a taken name fails with ErrExists, from this handle or another,
// and leaves the object as it was: bytes and Version.
func (s *suite) testCreateNeverReplaces(t *testing.T) {
	bs := s.handles(t, 2)
	const name = "taken.json"
	old := payload(1, 5000)
	made := create(t, bs[0], name, old)
	attempts := []struct {
		what  string
		b     checkpoint.Backend
		write func(io.Writer) error
	}{
		{"Create on the same handle", bs[0], writeBytes(payload(2, 5000))},
		{"Create on another handle", bs[1], writeBytes(payload(3, 7000))},
		{"Create with an empty object", bs[1], writeBytes(nil)},
		{"Create whose write fails", bs[0], failAfter(payload(4, 100))},
	}
	for _, a := range attempts {
		_, err := a.b.Create(t.Context(), name, a.write)
		if err == nil {
			t.Fatalf("%s of %q succeeded; Create never replaces an object", a.what, name)
		}
		if !errors.Is(err, checkpoint.ErrExists) && !errors.Is(err, errWrite) {
			t.Errorf("%s of %q: %v; want an error wrapping ErrExists", a.what, name, err)
		}
		got := requireBytes(t, bs[1], name, old)
		if got.Version != made.Version {
			t.Fatalf("%s of %q failed but changed its Version from %q to %q", a.what, name, made.Version, got.Version)
		}
	}
	_, err := bs[0].Create(t.Context(), name, writeBytes(payload(5, 10)))
	requireErr(t, "Create of a taken name", err, checkpoint.ErrExists)
}

// A Create whose write function fails returns that failure and leaves
// nothing: no object under the name, no other name (a temporary) in List,
// and the name is free for the next Create.
func (s *suite) testFailedCreateLeavesNothing(t *testing.T) {
	b := s.one(t)
	before := listNames(t, b)
	for i, n := range []int{0, 10 << 10, 1<<20 + 3} {
		name := fmt.Sprintf("failed-%d.json", i)
		_, err := b.Create(t.Context(), name, failAfter(payload(uint64(i), n)))
		if !errors.Is(err, errWrite) {
			t.Fatalf("Create %q whose write failed after %d bytes: %v; want an error wrapping the write's error", name, n, err)
		}
		requireMissing(t, b, name)
		requireAdded(t, b, before)
		create(t, b, name, payload(9, 100))
		before[name] = 1
	}
}

// A Create whose context has ended, before the call or while its write
// function runs, fails with the context's error and leaves nothing.
func (s *suite) testCancelledCreateLeavesNothing(t *testing.T) {
	b := s.one(t)
	before := listNames(t, b)

	const early = "cancelled-before.json"
	_, err := b.Create(cancelled(t), early, writeBytes(payload(1, 100)))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Create %q with a cancelled context: %v; want an error wrapping context.Canceled", early, err)
	}
	requireMissing(t, b, early)

	const during = "cancelled-during.json"
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	_, err = b.Create(ctx, during, func(w io.Writer) error {
		if err := writeBytes(payload(2, 20<<10))(w); err != nil {
			return err
		}
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Create %q whose context ended while it wrote: %v; want an error wrapping context.Canceled", during, err)
	}
	requireMissing(t, b, during)
	requireAdded(t, b, before)
}
