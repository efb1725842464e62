package backendtest_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest"
	"github.com/gocheckpoint/checkpoint/internal/names"
)

// sessionsLedger records the calls of the sessions scenarios.
type sessionsLedger struct {
	id                   string // the ID of the session the scenario creates: "a", or one stored under a mapped name
	crashedFork          string // the ID a fork interrupted before the scenario left
	cleaned              bool   // RemoveStaging returned nil
	created, createAcked bool
	a                    *ledger             // the saves in session "a"
	forks                []string            // the IDs of the forks that returned nil
	metas                []string            // the values of meta "v" written to "a": by Create, then SetMeta
	metaAcked            int                 // how many of metas returned nil
	opts                 []checkpoint.Option // the root's options (Encrypt): the checks open it with them too
}

// openMemSessions opens a root of sessions on a new handle of m.
func openMemSessions(m *backendtest.Mem, opts ...checkpoint.Option) (*checkpoint.Sessions, error) {
	root, err := m.Open()
	if err != nil {
		return nil, err
	}
	return checkpoint.OpenSessionsBackend(root, opts...)
}

// runSessions creates session "a", saves in it, forks it at step 1,
// writes its metadata and makes a second fork, on a root of sessions on
// m (OpenSessionsBackend).
func runSessions(m *backendtest.Mem) (*sessionsLedger, error) { return runSessionsOf(m, "a") }

// runSessionsAs is runSessions with the session id in place of "a".
func runSessionsAs(id string) func(m *backendtest.Mem) (*sessionsLedger, error) {
	return func(m *backendtest.Mem) (*sessionsLedger, error) { return runSessionsOf(m, id) }
}

// runSessionsWith is runSessions of a root opened with opts.
func runSessionsWith(opts ...checkpoint.Option) func(m *backendtest.Mem) (*sessionsLedger, error) {
	return func(m *backendtest.Mem) (*sessionsLedger, error) { return runSessionsOf(m, "a", opts...) }
}

func runSessionsOf(m *backendtest.Mem, id string, opts ...checkpoint.Option) (*sessionsLedger, error) {
	ctx := context.Background()
	l := &sessionsLedger{id: id, a: &ledger{}, opts: opts}
	r, err := openMemSessions(m, opts...)
	if err != nil {
		return l, err
	}
	defer r.Close()
	run := &cutRun{ctx: ctx, m: m, l: l.a, openStore: func() (*checkpoint.Store[cutState], error) {
		return checkpoint.OpenSessionStore[cutState](r, id)
	}}
	defer run.close()
	fork := func() error {
		s, err := r.Fork(ctx, id, 1, map[string]string{"v": "fork"})
		if err == nil {
			l.forks = append(l.forks, s.ID)
		}
		return err
	}
	setMeta := func(v string) func() error {
		return func() error {
			l.metas = append(l.metas, v)
			if err := r.SetMeta(ctx, id, map[string]string{"v": v}); err != nil {
				return err
			}
			l.metaAcked++
			return nil
		}
	}
	return l, steps(
		func() error {
			l.created = true
			l.metas = append(l.metas, "0")
			_, err := r.Create(ctx, id, map[string]string{"v": "0"})
			l.createAcked = err == nil
			if err == nil {
				l.metaAcked++
			}
			return err
		},
		run.open, func() error { return run.save(1, 1) }, func() error { return run.save(2, 1) }, run.close,
		fork, setMeta("1"), fork,
	)
}

// checkSessions returns every promise broken in what a crash left of the
// sessions scenario's root.
func checkSessions(clone *backendtest.Mem, l *sessionsLedger) (violations []string) {
	ctx := context.Background()
	bad := func(format string, args ...any) { violations = append(violations, fmt.Sprintf(format, args...)) }
	root, err := clone.Open()
	if err != nil {
		return []string{fmt.Sprintf("open the clone: %v", err)}
	}
	r, err := checkpoint.OpenSessionsBackend(root, l.opts...)
	if err != nil {
		return []string{fmt.Sprintf("reopen the sessions: %v", err)}
	}
	defer func() {
		if err := r.Close(); err != nil {
			bad("close the reopened sessions: %v", err)
		}
	}()
	list, err := r.List(ctx)
	if err != nil {
		return append(violations, fmt.Sprintf("List: %v", err))
	}
	ids := map[string]checkpoint.Session{}
	for _, s := range list {
		ids[s.ID] = s
		if s.Err != nil {
			bad("session %q is listed damaged: %v", s.ID, s.Err)
		}
	}

	// Session "a" is there if its Create returned nil, with its metadata
	// and every save made in it.
	a, ok := ids[l.id]
	switch {
	case !ok && l.createAcked:
		bad("Create(a) returned nil, and no session a is listed")
	case ok && !l.created:
		bad("session a is listed before its Create")
	case ok:
		may := l.metas[max(l.metaAcked-1, 0):]
		if !slices.Contains(may, a.Meta["v"]) {
			bad("session a has meta v=%q; want one of %q", a.Meta["v"], may)
		}
		sub := subOf(clone, names.SessionName(l.id))
		violations = append(violations, prefixed("session a: ", checkStore(sub, l.opts, rules{}, l.a))...)
	}

	// Every other session is a whole fork of a at step 1; the forks that
	// returned nil are there.
	for _, id := range l.forks {
		if _, ok := ids[id]; !ok {
			bad("Fork returned session %q, which is not listed", id)
		}
	}
	if l.crashedFork != "" && l.cleaned {
		if left := checkpointsIn(subOf(clone, l.crashedFork)); len(left) > 0 {
			bad("RemoveStaging returned nil, and the crashed fork %q still holds %q", l.crashedFork, left)
		}
	}
	for id, s := range ids {
		if id == l.id {
			continue
		}
		if s.Parent != l.id || s.ParentStep != 1 || s.Meta["v"] != "fork" {
			bad("session %q is listed, and is no fork of a at step 1 (%+v)", id, s)
			continue
		}
		fork := &ledger{events: []*event{{what: "save", save: saved{step: 1, tag: "clean", gen: 1, kind: checkpoint.KindStep}, acked: true}}}
		violations = append(violations, prefixed(fmt.Sprintf("fork %q: ", id), checkStore(subOf(clone, id), l.opts, rules{}, fork))...)
	}

	// What crashed calls left is cleaned without touching a session, and
	// the root takes new sessions.
	if _, err := r.RemoveStaging(ctx); err != nil {
		bad("RemoveStaging: %v", err)
	}
	after, err := r.List(ctx)
	if err != nil {
		bad("List after RemoveStaging: %v", err)
	}
	if got := sessionIDs(after); !slices.Equal(got, slices.Sorted(maps.Keys(ids))) {
		bad("RemoveStaging changed the sessions listed from %q to %q", slices.Sorted(maps.Keys(ids)), got)
	}
	if _, err := r.New(ctx, nil); err != nil {
		bad("New after the crash: %v", err)
	}
	if _, ok := ids[l.id]; !ok {
		if _, err := r.Create(ctx, l.id, nil); err != nil {
			bad("Create(a) after a crash left no session a: %v", err)
		}
	} else if _, err := r.Create(ctx, l.id, nil); !errors.Is(err, checkpoint.ErrExists) {
		bad("Create(a) over the session a: %v; want ErrExists", err)
	}
	return violations
}

func subOf(m *backendtest.Mem, id string) checkpoint.Backend {
	root, _ := m.Open()
	sub, err := root.Sub(context.Background(), id, false)
	if err != nil {
		panic(err) // Mem's Sub fails only on an invalid name or a power cut
	}
	return sub
}

func sessionIDs(list []checkpoint.Session) []string {
	var ids []string
	for _, s := range list {
		ids = append(ids, s.ID)
	}
	slices.Sort(ids)
	return ids
}

func prefixed(p string, vs []string) []string {
	for i := range vs {
		vs[i] = p + vs[i]
	}
	return vs
}

// No session appears partly, whatever call a power cut interrupts in
// creating, saving in, forking and describing sessions: every session
// listed after the cut is whole, every call that returned nil kept its
// promise, and the root is cleaned and takes new sessions.
func TestPowerCutKeepsSessionPromises(t *testing.T) {
	t.Parallel()
	inEachFlavour(t, func(t *testing.T, f memFlavour) {
		for _, v := range powerCuts(t, func() *backendtest.Mem { return backendtest.NewMem(f.opts...) }, runSessions, checkSessions) {
			t.Error(v)
		}
	})
}

// The same holds for a session whose ID is stored under a mapped name.
func TestPowerCutKeepsSessionPromisesOfAMappedID(t *testing.T) {
	t.Parallel()
	inEachFlavour(t, func(t *testing.T, f memFlavour) {
		for _, v := range powerCuts(t, func() *backendtest.Mem { return backendtest.NewMem(f.opts...) }, runSessionsAs("thread #1/Ünï"), checkSessions) {
			t.Error(v)
		}
	})
}

// The sessions' power-cut test sees a missing sync too: a Create that
// never becomes durable loses a session that Create returned, and a
// Replace that never does, the metadata SetMeta wrote.
func TestPowerCutCatchesAMissingSyncInSessions(t *testing.T) {
	t.Parallel()
	for _, op := range []string{"create", "replace"} {
		t.Run(op, func(t *testing.T) {
			t.Parallel()
			violations := powerCuts(t, func() *backendtest.Mem { return backendtest.NewMemLosing(op) }, runSessions, checkSessions)
			if len(violations) == 0 {
				t.Fatalf("no violation found on a Mem whose %s never syncs", op)
			}
			t.Logf("%d violations, the first: %s", len(violations), violations[0])
		})
	}
}

// crashedFork returns a Mem holding session "a" (steps 1 and 2) and what a
// power cut left of a fork of it: the first cut of runSessions whose
// durable state holds, besides "a", a child store with a checkpoint in it
// and no session listed. It returns the ID of that child store.
func crashedFork(t *testing.T, opts ...backendtest.MemOption) (*backendtest.Mem, string) {
	t.Helper()
	ctx := context.Background()
	for cut := 1; cut <= 20; cut++ {
		m := backendtest.NewMem(opts...)
		m.CutPowerAt(cut)
		if _, err := runSessions(m); !errors.Is(err, backendtest.ErrPowerCut) {
			break
		}
		clone := m.CrashClone(backendtest.CrashCloneConfig{})
		root, _ := clone.Open()
		r, err := checkpoint.OpenSessionsBackend(root)
		if err != nil {
			t.Fatal(err)
		}
		list, err := r.List(ctx)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		root, _ = clone.Open()
		children, _ := root.Children(ctx)
		for _, id := range children {
			if id == "a" || slices.ContainsFunc(list, func(s checkpoint.Session) bool { return s.ID == id }) {
				continue
			}
			if len(checkpointsIn(subOf(clone, id))) > 0 {
				return clone, id
			}
		}
	}
	t.Fatal("no power cut in runSessions leaves a fork's checkpoints without a session")
	return nil, ""
}

// checkpointsIn returns the names in b that may be a checkpoint's: not
// session.json, not hidden.
func checkpointsIn(b checkpoint.Backend) []string {
	objs, _ := b.List(context.Background())
	var names []string
	for _, o := range objs {
		if o.Name != "session.json" && !strings.HasPrefix(o.Name, ".") {
			names = append(names, o.Name)
		}
	}
	return names
}

// Whatever call a power cut interrupts in cleaning up a crashed fork and
// forking again, the crashed fork never appears, what it left is cleaned
// once RemoveStaging returns nil, and every session listed is whole.
func TestPowerCutKeepsSessionPromisesInCleanup(t *testing.T) {
	t.Parallel()
	inEachFlavour(t, func(t *testing.T, f memFlavour) { powerCutsInCleanup(t, f.opts...) })
}

func powerCutsInCleanup(t *testing.T, opts ...backendtest.MemOption) {
	base, id := crashedFork(t, opts...)
	run := func(m *backendtest.Mem) (*sessionsLedger, error) {
		ctx := context.Background()
		a := &ledger{}
		for step := int64(1); step <= 2; step++ {
			a.begin(event{what: "save", save: saved{step: step, tag: "clean", gen: 1, kind: checkpoint.KindStep}, acked: true})
		}
		l := &sessionsLedger{id: "a", crashedFork: id, created: true, createAcked: true, a: a, metas: []string{"0"}, metaAcked: 1}
		r, err := openMemSessions(m)
		if err != nil {
			return l, err
		}
		defer r.Close()
		return l, steps(
			func() error { _, err := r.RemoveStaging(ctx); l.cleaned = err == nil; return err },
			func() error {
				s, err := r.Fork(ctx, "a", 1, map[string]string{"v": "fork"})
				if err == nil {
					l.forks = append(l.forks, s.ID)
				}
				return err
			},
		)
	}
	clone := func() *backendtest.Mem { return base.CrashClone(backendtest.CrashCloneConfig{}) }
	for _, v := range powerCuts(t, clone, run, checkSessions) {
		t.Error(v)
	}
}
