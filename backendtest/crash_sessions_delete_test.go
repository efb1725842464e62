package backendtest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest"
)

// deleteLedger records the calls of the deletion scenario.
type deleteLedger struct {
	deleteBegun, deleteAcked bool
	pruneBegun, pruneAcked   bool
}

// deletionBase returns a Mem holding the sessions "a" and "b", three
// checkpoints and a side file each, and "keep", pinned, with three
// checkpoints; all of them idle by the time it returns.
func deletionBase(t *testing.T, opts ...backendtest.MemOption) *backendtest.Mem {
	t.Helper()
	ctx := context.Background()
	m := backendtest.NewMem(opts...)
	r, err := openMemSessions(m)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, id := range []string{"a", "b", "keep"} {
		if _, err := r.Create(ctx, id, nil); err != nil {
			t.Fatal(err)
		}
		st, err := checkpoint.OpenSessionStore[int](r, id)
		if err != nil {
			t.Fatal(err)
		}
		for step := int64(1); step <= 3; step++ {
			if _, err := st.Save(ctx, step, int(step)); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.WriteJSON(ctx, "notes.json", id); err != nil {
			t.Fatal(err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.SetMeta(ctx, "keep", map[string]string{checkpoint.PinMeta: "yes"}); err != nil {
		t.Fatal(err)
	}
	list, err := r.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// PruneIdle(ctx, 0) must find them idle: wait for a coarse clock to
	// tick past their last activity.
	for deadline := time.Now().Add(5 * time.Second); !time.Now().After(list[0].Active()); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the clock does not move")
		}
	}
	return m
}

// Whatever call a power cut interrupts in a Delete and a PruneIdle, a
// session is listed whole or not at all, one whose Delete or PruneIdle
// returned is gone, the pinned one stays, and the next Delete and
// PruneIdle remove what the cut left, after which the IDs are free again.
func TestPowerCutKeepsDeletePromises(t *testing.T) {
	t.Parallel()
	inEachFlavour(t, func(t *testing.T, f memFlavour) {
		base := deletionBase(t, f.opts...)
		run := func(m *backendtest.Mem) (*deleteLedger, error) {
			ctx := context.Background()
			l := &deleteLedger{}
			r, err := openMemSessions(m)
			if err != nil {
				return l, err
			}
			defer r.Close()
			return l, steps(
				func() error {
					l.deleteBegun = true
					err := r.Delete(ctx, "a")
					l.deleteAcked = err == nil
					return err
				},
				func() error {
					l.pruneBegun = true
					removed, err := r.PruneIdle(ctx, 0)
					if err == nil && !slices.Equal(removed, []string{"b"}) {
						return fmt.Errorf("PruneIdle removed %q; want b", removed)
					}
					l.pruneAcked = err == nil
					return err
				},
			)
		}
		clone := func() *backendtest.Mem { return base.CrashClone(backendtest.CrashCloneConfig{}) }
		for _, v := range powerCuts(t, clone, run, checkDeletion) {
			t.Error(v)
		}
	})
}

// checkDeletion returns every promise broken in what a cut left of the
// deletion scenario.
func checkDeletion(clone *backendtest.Mem, l *deleteLedger) (violations []string) {
	ctx := context.Background()
	bad := func(format string, args ...any) { violations = append(violations, fmt.Sprintf(format, args...)) }
	r, err := openMemSessions(clone)
	if err != nil {
		return []string{fmt.Sprintf("reopen the sessions: %v", err)}
	}
	defer r.Close()
	list, err := r.List(ctx)
	if err != nil {
		return []string{fmt.Sprintf("List: %v", err)}
	}
	listed := map[string]bool{}
	for _, s := range list {
		listed[s.ID] = true
		if s.Err != nil || s.Checkpoints != 3 || s.LastStep != 3 {
			bad("session %q is listed, and not whole: %d checkpoints, last step %d, err %v", s.ID, s.Checkpoints, s.LastStep, s.Err)
			continue
		}
		st, err := checkpoint.OpenSessionStore[int](r, s.ID, checkpoint.ReadOnly())
		if err != nil {
			bad("open listed session %q: %v", s.ID, err)
			continue
		}
		var notes string
		if err := st.ReadJSON(ctx, "notes.json", &notes); err != nil || notes != s.ID {
			bad("session %q is listed without its side file: %q, %v", s.ID, notes, err)
		}
		if _, info, err := st.Latest(ctx); err != nil || info.Step != 3 {
			bad("session %q: Latest is step %d, %v", s.ID, info.Step, err)
		}
		st.Close()
	}
	switch {
	case !listed["keep"]:
		bad("the pinned session is gone")
	case listed["a"] && l.deleteAcked:
		bad("Delete(a) returned nil, and a is listed")
	case !listed["a"] && !l.deleteBegun:
		bad("a is gone before its Delete")
	case listed["b"] && l.pruneAcked:
		bad("PruneIdle returned nil, and b is listed")
	case !listed["b"] && !l.pruneBegun:
		bad("b is gone before PruneIdle")
	}

	// The next Delete and cleanup remove what the cut left.
	err = r.Delete(ctx, "a")
	if err != nil && (listed["a"] || !errors.Is(err, checkpoint.ErrNotFound)) {
		bad("Delete(a) after the cut: %v", err)
	}
	if _, err := r.PruneIdle(ctx, 0); err != nil {
		bad("PruneIdle after the cut: %v", err)
	}
	if _, err := r.RemoveStaging(ctx); err != nil {
		bad("RemoveStaging after the cut: %v", err)
	}
	for _, id := range []string{"a", "b"} {
		objs, err := subOf(clone, id).List(ctx)
		if err != nil {
			bad("list %s: %v", id, err)
		}
		var names []string
		for _, o := range objs {
			names = append(names, o.Name)
		}
		if len(names) > 0 {
			bad("after the next Delete and PruneIdle, %s still holds %q", id, names)
		}
		if _, err := r.Create(ctx, id, nil); err != nil {
			bad("Create(%s) after its deletion: %v", id, err)
		}
	}
	if got := sessionIDs(mustList(r)); !slices.Equal(got, []string{"a", "b", "keep"}) {
		bad("after the cleanup the sessions are %q", got)
	}
	return violations
}

func mustList(r *checkpoint.Sessions) []checkpoint.Session {
	list, _ := r.List(context.Background())
	return list
}
