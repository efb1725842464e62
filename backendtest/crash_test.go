package backendtest_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest"
	"github.com/gocheckpoint/checkpoint/storage"
)

// The power-cut tests run a small scenario of a store's calls on a Mem
// once to count its mutating backend calls, then once for each of them
// with the power cut during that call (and once after the last), and check
// every promise the store made before the cut on what a crash leaves: the
// durable state only, everything that reached the storage, and a seeded
// mix of the two (see Mem.CrashClone).

// cutState is the state the scenarios save: what it says of itself is
// checked against the Info it loads with, and against the save that
// made it, so that a wrong state (another step's, an older generation's,
// a torn one) is seen.
type cutState struct {
	Step int64  `json:"step"`
	Tag  string `json:"tag"` // "clean", "final" or "error"
	Gen  int    `json:"gen"` // which saving of the step: a step saved again after Truncate is generation 2
}

// saved is the identity of one save.
type saved struct {
	step int64
	tag  string
	gen  int
	kind checkpoint.Kind // as the save returned it; "" if it did not return
	loss *float64        // the metric "loss" it was saved with, if any
}

func (s saved) is(st cutState) bool { return s.step == st.Step && s.tag == st.Tag && s.gen == st.Gen }

func (s saved) String() string { return fmt.Sprintf("%s step %d gen %d", s.tag, s.step, s.gen) }

// event is one call of a scenario that the checks know of.
type event struct {
	what  string // "save", "truncate", "delete", "side"
	save  saved
	k     int64  // truncate's or delete's step
	name  string // side file
	value string // side file's value
	acked bool   // the call returned nil
}

// ledger records the calls of one store in one run, in order: those that
// returned nil, and the one the power cut interrupted (the last, unacked).
type ledger struct {
	events []*event
}

func (l *ledger) begin(e event) *event {
	l.events = append(l.events, &e)
	return l.events[len(l.events)-1]
}

// rules says what else than a truncation may remove an acknowledged save.
type rules struct {
	keepLast int // KeepLast: only the newest keepLast acknowledged saves must stay (and every final one)
	keepBest int // KeepBest(keepBest, "loss", Minimize): and the keepBest with the lowest loss
	// loadFrom, if not 0, is the first step the checks load: an older
	// one that the scenario never changes is only looked for in List.
	loadFrom int64
}

// cutRun is one run of a scenario: a store on m, and its ledger.
type cutRun struct {
	ctx  context.Context
	m    *backendtest.Mem
	opts []checkpoint.Option
	l    *ledger
	st   *checkpoint.Store[cutState]
	// openStore, if set, opens the store instead of OpenBackend on m.
	openStore func() (*checkpoint.Store[cutState], error)
	// async: a save that returns nil is acknowledged only by the next
	// Flush or Close that returns nil.
	async bool
}

// acked records that every save so far returned nil and was published.
func (r *cutRun) ackSaves() {
	for _, e := range r.l.events {
		if e.what == "save" {
			e.acked = true
		}
	}
}

func (r *cutRun) flush() error {
	err := r.st.Flush(r.ctx)
	if err == nil {
		r.ackSaves()
	}
	return err
}

func (r *cutRun) open() error {
	if r.openStore != nil {
		st, err := r.openStore()
		r.st = st
		return err
	}
	b, err := r.m.Open()
	if err != nil {
		return err
	}
	st, err := checkpoint.OpenBackend[cutState](b, r.opts...)
	r.st = st
	return err
}

func (r *cutRun) close() error {
	if r.st == nil {
		return nil
	}
	st := r.st
	r.st = nil
	err := st.Close()
	if err == nil && r.async {
		r.ackSaves() // Close publishes the queued saves, and returns their failures
	}
	return err
}

func (r *cutRun) save(step int64, gen int) error {
	e := r.l.begin(event{what: "save", save: saved{step: step, tag: "clean", gen: gen}})
	info, err := r.st.Save(r.ctx, step, cutState{Step: step, Tag: "clean", Gen: gen})
	e.acked, e.save.kind = err == nil && !r.async, info.Kind
	return err
}

// saveFrom is save of the state as a byte payload: its JSON, written by
// SaveFrom in pieces.
func (r *cutRun) saveFrom(step int64, gen int) error {
	e := r.l.begin(event{what: "save", save: saved{step: step, tag: "clean", gen: gen}})
	p, err := json.Marshal(cutState{Step: step, Tag: "clean", Gen: gen})
	if err != nil {
		return err
	}
	info, err := r.st.SaveFrom(r.ctx, step, func(w io.Writer) error {
		for _, b := range p {
			if _, err := w.Write([]byte{b}); err != nil {
				return err
			}
		}
		return nil
	})
	e.acked, e.save.kind = err == nil && !r.async, info.Kind
	return err
}

// loadAny is Load, or for a byte payload (saveFrom), its payload read to
// its end and decoded.
func loadAny(ctx context.Context, st *checkpoint.Store[cutState], step int64) (cutState, checkpoint.Info, error) {
	state, info, err := st.Load(ctx, step)
	if errors.Is(err, checkpoint.ErrPayloadMismatch) {
		var r io.ReadCloser
		if r, info, err = st.OpenPayload(ctx, step); err == nil {
			state, err = decodePayload(r)
		}
	}
	return state, info, err
}

// latestAny is Latest, or LatestPayload where Latest stops at a payload.
func latestAny(ctx context.Context, st *checkpoint.Store[cutState]) (cutState, checkpoint.Info, error) {
	state, info, err := st.Latest(ctx)
	if errors.Is(err, checkpoint.ErrPayloadMismatch) {
		var r io.ReadCloser
		if r, info, err = st.LatestPayload(ctx); err == nil {
			state, err = decodePayload(r)
		}
	}
	return state, info, err
}

func decodePayload(r io.ReadCloser) (cutState, error) {
	defer r.Close()
	var v cutState
	b, err := io.ReadAll(r)
	if err == nil {
		err = json.Unmarshal(b, &v)
	}
	return v, err
}

// saveLoss is save with the metric "loss".
func (r *cutRun) saveLoss(step int64, loss float64) error {
	e := r.l.begin(event{what: "save", save: saved{step: step, tag: "clean", gen: 1, loss: &loss}})
	info, err := r.st.Save(r.ctx, step, cutState{Step: step, Tag: "clean", Gen: 1}, checkpoint.WithMetric("loss", loss))
	e.acked, e.save.kind = err == nil && !r.async, info.Kind
	return err
}

// appendAt appends the state of step want, which the scenario's earlier
// calls make the step after the newest: an Append that takes another step
// fails the scenario.
func (r *cutRun) appendAt(want int64, gen int) error {
	e := r.l.begin(event{what: "save", save: saved{step: want, tag: "clean", gen: gen}})
	info, err := r.st.Append(r.ctx, cutState{Step: want, Tag: "clean", Gen: gen})
	e.acked, e.save.kind = err == nil && !r.async, info.Kind
	if err == nil && info.Step != want {
		return fmt.Errorf("Append took step %d; want %d", info.Step, want)
	}
	return err
}

func (r *cutRun) saveFinal(step int64) error {
	e := r.l.begin(event{what: "save", save: saved{step: step, tag: "final", gen: 1}})
	info, err := r.st.SaveFinal(r.ctx, step, cutState{Step: step, Tag: "final", Gen: 1})
	e.acked, e.save.kind = err == nil && !r.async, info.Kind
	return err
}

func (r *cutRun) delete(step int64) error {
	e := r.l.begin(event{what: "delete", k: step})
	err := r.st.Delete(r.ctx, step)
	e.acked = err == nil
	return err
}

func (r *cutRun) tick(step int64, gen int) error {
	e := r.l.begin(event{what: "save", save: saved{step: step, tag: "clean", gen: gen}})
	info, _, err := r.st.Tick(r.ctx, step, cutState{Step: step, Tag: "clean", Gen: gen})
	e.acked, e.save.kind = err == nil, info.Kind
	return err
}

func (r *cutRun) saveError(step int64) error {
	e := r.l.begin(event{what: "save", save: saved{step: step, tag: "error", gen: 1}})
	info, err := r.st.SaveError(r.ctx, step, cutState{Step: step, Tag: "error", Gen: 1}, errors.New("the step failed"))
	e.acked, e.save.kind = err == nil, info.Kind
	return err
}

func (r *cutRun) truncate(k int64) error {
	e := r.l.begin(event{what: "truncate", k: k})
	_, err := r.st.Truncate(r.ctx, k)
	e.acked = err == nil
	return err
}

func (r *cutRun) writeJSON(name, value string) error {
	e := r.l.begin(event{what: "side", name: name, value: value})
	err := r.st.WriteJSON(r.ctx, name, value)
	e.acked = err == nil
	return err
}

// storeScenario is a scenario on one store.
type storeScenario struct {
	name  string
	opts  []checkpoint.Option
	rules rules
	run   func(r *cutRun) error
	// images are crash images to check besides cloneConfigs'.
	images []backendtest.CrashCloneConfig
}

var storeScenarios = []storeScenario{
	{name: "Saves", run: func(r *cutRun) error {
		return steps(r.open, func() error { return r.save(1, 1) }, func() error { return r.save(2, 1) }, func() error { return r.save(3, 1) }, r.close)
	}},
	{name: "Retention", opts: []checkpoint.Option{checkpoint.KeepLast(2)}, rules: rules{keepLast: 2}, run: func(r *cutRun) error {
		return steps(r.open, func() error { return r.save(1, 1) }, func() error { return r.save(2, 1) }, func() error { return r.save(3, 1) },
			func() error { return r.save(4, 1) }, r.close, r.open, func() error { return r.save(5, 1) }, r.close)
	}},
	{name: "RollingWrites", opts: []checkpoint.Option{checkpoint.WithRolling(), checkpoint.SaveEvery(3), checkpoint.KeepLast(1)}, rules: rules{keepLast: 1}, run: func(r *cutRun) error {
		fs := []func() error{r.open}
		for step := int64(1); step <= 7; step++ {
			fs = append(fs, func() error { return r.tick(step, 1) })
		}
		return steps(append(fs, r.close)...)
	}},
	{name: "RollingTruncation", opts: []checkpoint.Option{checkpoint.WithRolling(), checkpoint.SaveEvery(3)}, run: func(r *cutRun) error {
		fs := []func() error{r.open}
		for step := int64(1); step <= 5; step++ {
			fs = append(fs, func() error { return r.tick(step, 1) })
		}
		fs = append(fs, func() error { return r.truncate(3) }, func() error { return r.tick(4, 2) }, func() error { return r.tick(5, 2) }, r.close)
		return steps(fs...)
	}},
	{name: "SideFiles", run: func(r *cutRun) error {
		return steps(r.open, func() error { return r.save(1, 1) }, func() error { return r.writeJSON("result.json", "one") },
			func() error { return r.writeJSON("result.json", "two") }, func() error { return r.save(2, 1) }, r.close)
	}},
	{name: "Truncation", run: func(r *cutRun) error {
		fs := []func() error{r.open}
		for step := int64(1); step <= 5; step++ {
			fs = append(fs, func() error { return r.save(step, 1) })
		}
		fs = append(fs, func() error { return r.truncate(2) }, func() error { return r.save(3, 2) }, r.close)
		return steps(fs...)
	}},
	{name: "ErrorCheckpoints", run: func(r *cutRun) error {
		return steps(r.open, func() error { return r.save(1, 1) }, func() error { return r.saveError(2) }, r.close,
			r.open, func() error { return r.save(2, 1) }, func() error { return r.saveError(3) }, func() error { return r.save(3, 1) }, r.close)
	}},
	{name: "FinalAndDelete", opts: []checkpoint.Option{checkpoint.KeepLast(1)}, rules: rules{keepLast: 1}, run: func(r *cutRun) error {
		return steps(r.open, func() error { return r.save(1, 1) }, func() error { return r.saveFinal(1) }, func() error { return r.save(2, 1) },
			func() error { return r.save(3, 1) }, func() error { return r.delete(3) }, func() error { return r.save(4, 1) }, r.close)
	}},
	{name: "AsyncSaves", opts: []checkpoint.Option{checkpoint.Async(2), checkpoint.KeepLast(2)}, rules: rules{keepLast: 2}, run: func(r *cutRun) error {
		r.async = true
		return steps(r.open, func() error { return r.save(1, 1) }, func() error { return r.save(2, 1) }, func() error { return r.save(3, 1) },
			r.flush, func() error { return r.save(4, 1) }, func() error { return r.save(5, 1) }, r.close)
	}},
	{name: "AsyncBatch", opts: []checkpoint.Option{checkpoint.Async(8), checkpoint.KeepLast(3)}, rules: rules{keepLast: 3}, run: asyncBatch},
	{name: "KeepBest", opts: []checkpoint.Option{checkpoint.KeepBest(2, "loss", checkpoint.Minimize), checkpoint.KeepLast(1)}, rules: rules{keepLast: 1, keepBest: 2}, run: func(r *cutRun) error {
		fs := []func() error{r.open}
		for step, loss := range []float64{5, 3, 8, 1, 9} {
			fs = append(fs, func() error { return r.saveLoss(int64(step+1), loss) })
		}
		return steps(append(fs, r.close, r.open, func() error { return r.saveLoss(6, 2) }, func() error { return r.saveLoss(7, 7) }, r.close)...)
	}},
	{name: "Appends", opts: []checkpoint.Option{checkpoint.KeepLast(2)}, rules: rules{keepLast: 2}, run: func(r *cutRun) error {
		return steps(r.open, func() error { return r.appendAt(1, 1) }, func() error { return r.appendAt(2, 1) }, r.close,
			r.open, func() error { return r.appendAt(3, 1) }, func() error { return r.truncate(2) }, func() error { return r.appendAt(3, 2) },
			func() error { return r.save(5, 1) }, func() error { return r.appendAt(6, 1) }, r.close)
	}},
	{name: "AsyncAppends", opts: []checkpoint.Option{checkpoint.Async(2)}, run: func(r *cutRun) error {
		r.async = true
		return steps(r.open, func() error { return r.appendAt(1, 1) }, func() error { return r.save(2, 1) }, func() error { return r.appendAt(3, 1) },
			r.flush, r.close, r.open, func() error { return r.appendAt(4, 1) }, r.close)
	}},
	{name: "ErrorCheckpointsWithRetention", opts: []checkpoint.Option{checkpoint.KeepLast(1)}, rules: rules{keepLast: 1}, run: func(r *cutRun) error {
		return steps(r.open, func() error { return r.save(1, 1) }, func() error { return r.saveError(2) },
			func() error { return r.save(2, 1) }, func() error { return r.save(3, 1) }, r.close)
	}},
	// Byte payloads (SaveFrom) beside states, pruned together: the checks
	// read a payload where Load finds one (see loadAny).
	{name: "BytePayloads", opts: []checkpoint.Option{checkpoint.KeepLast(2), checkpoint.Zstd()}, rules: rules{keepLast: 2}, run: func(r *cutRun) error {
		return steps(r.open, func() error { return r.saveFrom(1, 1) }, func() error { return r.save(2, 1) }, func() error { return r.saveFrom(3, 1) },
			r.close, r.open, func() error { return r.saveFrom(4, 1) }, func() error { return r.saveFrom(5, 1) }, r.close)
	}},
}

// asyncBatch makes an Async store publish a batch of four saves: the
// store's goroutine is held in the hook of the first save (OnSave, or
// OnError if the cut failed it) while four more are queued, and the Flush
// after them publishes the four together (on a local Mem, a group commit:
// four CreateUncommitted, one Commit, then the prunes), so that the power
// is cut at every call of a batch. Two more saves follow, and Close.
func asyncBatch(r *cutRun) error {
	r.async = true
	entered, release := make(chan struct{}), make(chan struct{})
	var once, released sync.Once
	free := func() error { released.Do(func() { close(release) }); return nil }
	defer free() // the goroutine must not stay held: the store's Close waits for it
	hold := func() { once.Do(func() { close(entered); <-release }) }
	r.opts = append(slices.Clone(r.opts), checkpoint.WithHooks(checkpoint.Hooks{
		OnSave: func(info checkpoint.Info) {
			if info.Step == 1 {
				hold()
			}
		},
		OnError: func(err error) {
			if e := (*checkpoint.Error)(nil); errors.As(err, &e) && e.HasStep && e.Step == 1 {
				hold()
			}
		},
	}))
	fs := []func() error{r.open, func() error { return r.save(1, 1) }, func() error { <-entered; return nil }}
	for step := int64(2); step <= 5; step++ {
		fs = append(fs, func() error { return r.save(step, 1) })
	}
	fs = append(fs, r.flush, free, func() error { return r.save(6, 1) }, func() error { return r.save(7, 1) }, r.close)
	return steps(fs...)
}

// steps runs fs in order up to the first error.
func steps(fs ...func() error) error {
	for _, f := range fs {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

// cloneConfigs are the crash images each cut is checked on.
func cloneConfigs(cut int) []backendtest.CrashCloneConfig {
	return []backendtest.CrashCloneConfig{
		{UnsyncedPercent: 0},
		{UnsyncedPercent: 100},
		{UnsyncedPercent: 50, Rand: rand.New(rand.NewPCG(uint64(cut), 22))},
	}
}

// powerCuts runs sc with the power cut at each of its mutating calls and
// after its end, checks each crash image (cloneConfigs' and extra) with
// check, and returns the violations found. newMem makes the Mem of each
// run.
func powerCuts[L any](t *testing.T, newMem func() *backendtest.Mem, run func(m *backendtest.Mem) (L, error), check func(clone *backendtest.Mem, l L) []string, extra ...backendtest.CrashCloneConfig) []string {
	t.Helper()
	m := newMem()
	if _, err := run(m); err != nil {
		t.Fatalf("the scenario fails without a power cut: %v", err)
	}
	n := m.Ops()
	if n == 0 {
		t.Fatal("the scenario makes no mutating call")
	}
	t.Logf("%d mutating calls: %d power cuts, %d crash images each", n, n+1, len(cloneConfigs(0))+len(extra))
	var violations []string
	for cut := 1; cut <= n+1; cut++ {
		m := newMem()
		m.CutPowerAt(cut)
		l, err := run(m)
		if err != nil && !m.PowerCut() {
			violations = append(violations, fmt.Sprintf("cut at call %d of %d: the scenario failed before the cut: %v", cut, n, err))
			continue
		}
		for _, cfg := range append(cloneConfigs(cut), extra...) {
			for _, v := range check(m.CrashClone(cfg), l) {
				violations = append(violations, fmt.Sprintf("cut at call %d of %d, %d%% of unsynced changes kept (torn: %v): %s", cut, n, cfg.UnsyncedPercent, cfg.TearUnsynced, v))
			}
		}
	}
	return violations
}

// runStore runs sc on a store on m, through wrap if it is not nil.
func runStore(sc storeScenario, wrap func(checkpoint.Backend) checkpoint.Backend) func(m *backendtest.Mem) (*ledger, error) {
	return func(m *backendtest.Mem) (*ledger, error) {
		r := &cutRun{ctx: context.Background(), m: m, opts: sc.opts, l: &ledger{}}
		if wrap != nil {
			r.openStore = func() (*checkpoint.Store[cutState], error) {
				b, err := m.Open()
				if err != nil {
					return nil, err
				}
				return checkpoint.OpenBackend[cutState](wrap(b), sc.opts...)
			}
		}
		err := sc.run(r)
		if r.st != nil {
			r.st.Close() // after a cut: the process is gone, and so is what Close would do
		}
		return r.l, err
	}
}

func storeCuts(t *testing.T, sc storeScenario, newMem func() *backendtest.Mem) []string {
	return storeCutsThrough(t, sc, newMem, nil)
}

// storeCutsThrough is storeCuts with the store of the scenario on wrap(a
// backend of the Mem); the checks read what the cut leaves through a
// store on the Mem's own backend.
func storeCutsThrough(t *testing.T, sc storeScenario, newMem func() *backendtest.Mem, wrap func(checkpoint.Backend) checkpoint.Backend) []string {
	return powerCuts(t, newMem, runStore(sc, wrap), func(clone *backendtest.Mem, l *ledger) []string {
		b, err := clone.Open()
		if err != nil {
			return []string{fmt.Sprintf("open the clone: %v", err)}
		}
		return checkStore(b, sc.opts, sc.rules, l)
	}, sc.images...)
}

// Every promise a store made before a power cut holds on what the cut
// leaves, wherever it falls: in saves, retention, rolling writes, side
// files, truncation and error checkpoints.
// Each scenario runs on both flavours of Mem: object storage, and a local
// directory, on which the store skips syncs (storage.Unsynced) and takes
// the paths of a Local backend.
func TestPowerCutKeepsStorePromises(t *testing.T) {
	t.Parallel()
	for _, f := range memFlavours {
		for _, sc := range storeScenarios {
			t.Run(f.name+"/"+sc.name, func(t *testing.T) {
				t.Parallel()
				for _, v := range storeCuts(t, sc, func() *backendtest.Mem { return backendtest.NewMem(f.opts...) }) {
					t.Error(v)
				}
			})
		}
	}
}

// checkStore opens a store on b, what a crash left of the store whose
// calls l records, and returns every promise broken.
func checkStore(b checkpoint.Backend, opts []checkpoint.Option, ru rules, l *ledger) (violations []string) {
	ctx := context.Background()
	bad := func(format string, args ...any) { violations = append(violations, fmt.Sprintf(format, args...)) }
	st, err := checkpoint.OpenBackend[cutState](b, opts...)
	if err != nil {
		bad("reopen the store: %v", err)
		return violations
	}
	defer func() {
		if err := st.Close(); err != nil {
			bad("close the reopened store: %v", err)
		}
	}()
	// Of the temporary objects a cut write left, the store's Open removes
	// its own (Sessions removes session.json's, by the directory's names
	// of them: not a Mem's).
	left := slices.DeleteFunc(backendtest.MemTemps(b), func(name string) bool { return strings.HasPrefix(name, ".session.json.") })
	if len(left) > 0 {
		bad("the reopened store left the temporary objects %q of a cut write", left)
	}
	e := expectations(l, ru)

	// Every checkpoint there is one a save made, whole, and not one a
	// truncation that returned removed.
	infos, listErr := st.List(ctx)
	if listErr != nil {
		bad("List: %v", listErr)
	}
	seen := map[int64]bool{}
	for _, info := range infos {
		if seen[info.Step] {
			continue
		}
		seen[info.Step] = true
		if info.Step < ru.loadFrom {
			continue
		}
		state, got, err := loadAny(ctx, st, info.Step)
		if err != nil {
			bad("List shows step %d (%s), which does not load: %v", info.Step, info.Kind, err)
			continue
		}
		if msg := e.judge(state, got); msg != "" {
			bad("Load(%d): %s", info.Step, msg)
		}
	}

	// Every acknowledged save that nothing may have removed loads, as
	// itself or as a later save of its step.
	for _, s := range e.mustLoad {
		if s.step < ru.loadFrom {
			if !seen[s.step] && listErr == nil {
				bad("a save of %s returned nil, and List does not show its step", s)
			}
			continue
		}
		state, got, err := loadAny(ctx, st, s.step)
		if err != nil {
			bad("a save of %s returned nil, and its step does not load: %v", s, err)
			continue
		}
		if msg := e.judge(state, got); msg != "" {
			bad("Load(%d): %s", s.step, msg)
		} else if !e.atOrAfter(state, s) {
			bad("Load(%d) returns %+v, older than %s, whose save returned nil", s.step, state, s)
		}
	}

	// Latest is the newest checkpoint that nothing may have removed, or a
	// newer one.
	state, got, err := latestAny(ctx, st)
	switch {
	case e.latest == nil && errors.Is(err, checkpoint.ErrNotFound):
	case err != nil:
		bad("Latest: %v (want %v or newer)", err, e.latest)
	default:
		if msg := e.judge(state, got); msg != "" {
			bad("Latest: %s", msg)
		} else if i := slices.IndexFunc(e.made, func(s saved) bool { return s.is(state) }); e.latest != nil && e.made[i] != *e.latest && !e.newer(e.made[i], *e.latest) {
			bad("Latest returns %+v (%s), older than %v, which nothing removed", state, got.Kind, e.latest)
		}
	}

	// A truncation the cut interrupted leaves a prefix of the old history.
	if e.truncating != nil {
		k, gap := e.truncating.k, int64(0)
		for _, s := range e.truncated {
			_, _, err := st.Load(ctx, s.step)
			switch {
			case errors.Is(err, checkpoint.ErrNotFound):
				if gap == 0 {
					gap = s.step
				}
			case err != nil:
				bad("Load(%d) during Truncate(%d): %v", s.step, k, err)
			case gap != 0:
				bad("a cut Truncate(%d) left step %d but not step %d: not a prefix of the old history", k, s.step, gap)
			}
		}
	}

	// A side file holds the value of the last WriteJSON that returned nil,
	// or that of the one the cut interrupted.
	for name, may := range e.side {
		var v string
		err := st.ReadJSON(ctx, name, &v)
		switch {
		case errors.Is(err, checkpoint.ErrNotFound):
			if may[0] != "" {
				bad("ReadJSON(%s) is ErrNotFound after a WriteJSON of %q returned nil", name, may[0])
			}
		case err != nil:
			bad("ReadJSON(%s): %v", name, err)
		case !slices.Contains(may, v):
			bad("ReadJSON(%s) = %q; want one of %q", name, v, may)
		}
	}

	// The reopened writer appends after the newest checkpoint the cut
	// left, of any kind (the last check: it writes).
	if listErr == nil {
		next := int64(1)
		for _, info := range infos {
			next = max(next, info.Step+1)
		}
		info, err := st.Append(ctx, cutState{Step: next, Tag: "clean", Gen: 99})
		if err == nil {
			err = st.Flush(ctx)
		}
		switch {
		case err != nil:
			bad("Append after the cut: %v", err)
		case info.Step != next:
			bad("Append after the cut took step %d; the newest checkpoint listed is step %d", info.Step, next-1)
		}
	}
	return violations
}

// expected is what a ledger allows a store to hold after a crash.
type expected struct {
	made       []saved // every save that returned nil or was interrupted, in order
	gone       []saved // saves that a Truncate or Delete which returned nil removed
	mustLoad   []saved // acknowledged saves that nothing may have removed
	latest     *saved  // what Latest must return, or a newer save
	truncating *event  // a Truncate the cut interrupted
	truncated  []saved // the acknowledged saves it may have removed, by step
	side       map[string][]string
}

// expectations follows the ledger's calls and what each may have removed.
// Two lists follow what retention keeps: of every save made (those not
// acknowledged may have been published, and their retention pass run),
// whose acknowledged entries must load; and of acknowledged saves only,
// whose newest Latest must return, or a newer one.
func expectations(l *ledger, ru rules) expected {
	e := expected{side: map[string][]string{}}
	var all, acked []saved
	for _, ev := range l.events {
		switch ev.what {
		case "save":
			e.made = append(e.made, ev.save)
			all = ru.keep(all, ev.save)
			if ev.acked {
				acked = ru.keep(acked, ev.save)
			}
		case "truncate", "delete":
			removes := func(s saved) bool { return s.step > ev.k }
			if ev.what == "delete" {
				removes = func(s saved) bool { return s.step == ev.k }
			}
			for _, s := range e.made {
				if removes(s) && ev.acked && !slices.Contains(e.gone, s) {
					e.gone = append(e.gone, s)
				}
			}
			if !ev.acked && ev.what == "truncate" {
				e.truncating = ev
				e.truncated = slices.DeleteFunc(slices.Clone(acked), func(s saved) bool { return !removes(s) })
				slices.SortFunc(e.truncated, func(a, b saved) int { return int(a.step - b.step) })
			}
			all = slices.DeleteFunc(all, removes)
			acked = slices.DeleteFunc(acked, removes)
		case "side":
			may := e.side[ev.name]
			if may == nil {
				may = []string{""}
			}
			if ev.acked {
				may = []string{ev.value}
			} else {
				may = append(may, ev.value)
			}
			e.side[ev.name] = may
		}
	}
	for _, s := range all {
		if slices.Contains(acked, s) {
			e.mustLoad = append(e.mustLoad, s)
		}
	}
	for i := range acked {
		if e.latest == nil || e.newer(acked[i], *e.latest) {
			e.latest = &acked[i]
		}
	}
	return e
}

// keep adds s to the saves list holds that retention keeps, and drops
// what s lets it remove: the rolling file it replaces, the error
// checkpoints a clean save supersedes, and, with KeepLast, the step
// checkpoints beyond the newest ru.keepLast (a save whose kind is not
// known, because it did not return, counts as rolling and as a step).
func (ru rules) keep(list []saved, s saved) []saved {
	rolling := s.kind == checkpoint.KindRolling || s.kind == ""
	list = slices.DeleteFunc(slices.Clone(list), func(o saved) bool {
		return rolling && o.kind == checkpoint.KindRolling || s.tag != "error" && o.tag == "error" && o.step <= s.step
	})
	list = append(list, s)
	if ru.keepLast == 0 && ru.keepBest == 0 {
		return list
	}
	// A step checkpoint stays if KeepLast or KeepBest keeps it.
	var counted []int // the step checkpoints' indices, oldest first
	for i, o := range list {
		if o.kind == checkpoint.KindStep || o.kind == "" {
			counted = append(counted, i)
		}
	}
	kept := make(map[int]bool)
	for _, i := range counted[max(0, len(counted)-ru.keepLast):] {
		kept[i] = true
	}
	ranked := slices.DeleteFunc(slices.Clone(counted), func(i int) bool { return list[i].loss == nil })
	slices.SortStableFunc(ranked, func(i, j int) int {
		return cmp.Or(cmp.Compare(*list[i].loss, *list[j].loss), j-i) // of equal losses, the newer
	})
	for _, i := range ranked[:min(ru.keepBest, len(ranked))] {
		kept[i] = true
	}
	for k := len(counted) - 1; k >= 0; k-- {
		if i := counted[k]; !kept[i] {
			list = slices.Delete(list, i, i+1)
		}
	}
	return list
}

// newer reports whether Latest prefers a to b: a higher step, or the same
// step saved later.
func (e expected) newer(a, b saved) bool {
	if a.step != b.step {
		return a.step > b.step
	}
	return slices.Index(e.made, a) > slices.Index(e.made, b)
}

// judge checks a loaded state against the Info it came with and against
// the saves made: it must be one of them, and not one a truncation that
// returned removed.
func (e expected) judge(st cutState, info checkpoint.Info) string {
	if st.Step != info.Step || (st.Tag == "error") != (info.Kind == checkpoint.KindError) || (st.Tag == "final") != (info.Kind == checkpoint.KindFinal) {
		return fmt.Sprintf("the state %+v came with the Info of %s step %d", st, info.Kind, info.Step)
	}
	if !slices.ContainsFunc(e.made, func(s saved) bool { return s.is(st) }) {
		return fmt.Sprintf("the state %+v is no save's", st)
	}
	if slices.ContainsFunc(e.gone, func(s saved) bool { return s.is(st) }) {
		return fmt.Sprintf("the state %+v was removed by a Truncate or Delete that returned nil", st)
	}
	return ""
}

// atOrAfter reports whether st is s or a save of its step made after s.
func (e expected) atOrAfter(st cutState, s saved) bool {
	i := slices.IndexFunc(e.made, func(m saved) bool { return m == s })
	return slices.ContainsFunc(e.made[i:], func(m saved) bool { return m.step == s.step && m.is(st) })
}

// The power-cut test sees a missing sync, on both flavours of Mem: on a
// Mem whose Creates (or Replaces, or Removes) never become durable, a
// save, a rolling write or a side file that returned nil is lost by a cut
// after it.
func TestPowerCutCatchesAMissingSync(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ op, scenario string }{
		{"create", "Saves"},
		{"replace", "RollingWrites"},
		{"replace", "SideFiles"},
		{"remove", "Truncation"},
	} {
		for _, f := range memFlavours {
			t.Run(f.name+"/"+c.op+"/"+c.scenario, func(t *testing.T) {
				t.Parallel()
				i := slices.IndexFunc(storeScenarios, func(sc storeScenario) bool { return sc.name == c.scenario })
				violations := storeCuts(t, storeScenarios[i], func() *backendtest.Mem { return backendtest.NewMemLosing(c.op, f.opts...) })
				if len(violations) == 0 {
					t.Fatalf("no violation found on a Mem whose %s never syncs", c.op)
				}
				t.Logf("%d violations, the first: %s", len(violations), violations[0])
			})
		}
	}
}

// The power-cut test sees a batch of Async saves that is reported saved
// without its Commit being durable: on a local Mem whose Commits sync
// nothing, a save the Flush after the batch acknowledged is lost by a cut
// after it.
func TestPowerCutCatchesABatchNotCommitted(t *testing.T) {
	t.Parallel()
	i := slices.IndexFunc(storeScenarios, func(sc storeScenario) bool { return sc.name == "AsyncBatch" })
	violations := storeCuts(t, storeScenarios[i], func() *backendtest.Mem { return backendtest.NewMemLosing("commit", backendtest.MemLocal()) })
	if len(violations) == 0 {
		t.Fatal("no violation found on a Mem whose Commits never sync")
	}
	t.Logf("%d violations, the first: %s", len(violations), violations[0])
}

// unsyncedAlways is a local backend whose Remove and Replace are its
// RemoveUnsynced and ReplaceUnsynced: a store that takes an unsynced
// change for a durable one.
type unsyncedAlways struct{ storage.Unsynced }

func (u unsyncedAlways) Remove(ctx context.Context, names ...string) ([]bool, error) {
	return u.RemoveUnsynced(ctx, names...)
}

// Replace ignores ifVersion: the scenarios it runs in make no conflict.
func (u unsyncedAlways) Replace(ctx context.Context, name, _ string, write func(io.Writer) error) (checkpoint.Object, error) {
	return u.ReplaceUnsynced(ctx, name, write)
}

func (u unsyncedAlways) Unwrap() checkpoint.Backend { return u.Unsynced }

// The crash model makes an unsynced change durable only when a later
// synced call syncs its directory: a store that relied on a truncation's
// removals, or a side file's replacement, being durable when they return
// unsynced is caught by a cut before that call.
func TestPowerCutCatchesAStoreTrustingUnsyncedChanges(t *testing.T) {
	t.Parallel()
	for _, scenario := range []string{"Truncation", "SideFiles"} {
		t.Run(scenario, func(t *testing.T) {
			t.Parallel()
			i := slices.IndexFunc(storeScenarios, func(sc storeScenario) bool { return sc.name == scenario })
			wrap := func(b checkpoint.Backend) checkpoint.Backend { return unsyncedAlways{b.(storage.Unsynced)} }
			violations := storeCutsThrough(t, storeScenarios[i], func() *backendtest.Mem { return backendtest.NewMem(backendtest.MemLocal()) }, wrap)
			if len(violations) == 0 {
				t.Fatal("no violation found of a store whose removals and replacements are all unsynced")
			}
			t.Logf("%d violations, the first: %s", len(violations), violations[0])
		})
	}
}

// indexSteps is how many checkpoints the index scenario starts with: more
// than a first List reads without writing the store's header index.
const indexSteps = 260

// Whatever call a power cut interrupts after a store on a local backend
// wrote its header index without a sync (storage.Unsynced), what the
// index says never stands for what the files say: a reopened store lists
// only checkpoints that load as what they are, and the truncated steps'
// new saves. The store starts with indexSteps checkpoints, lists them
// (writing the index), truncates the last two, saves one of them again
// and closes (writing the index again). The index survives whole, or torn
// as the directory may leave it (TearUnsynced).
func TestPowerCutKeepsStorePromisesWithTheIndex(t *testing.T) {
	t.Parallel()
	powerCutsWithTheIndex(t)
}

// powerCutsWithTheIndex is TestPowerCutKeepsStorePromisesWithTheIndex of
// a store opened with opts.
func powerCutsWithTheIndex(t *testing.T, opts ...checkpoint.Option) {
	ctx := context.Background()
	base := backendtest.NewMem(backendtest.MemLocal())
	b, err := base.Open()
	if err != nil {
		t.Fatal(err)
	}
	st, err := checkpoint.OpenBackend[cutState](b, opts...)
	if err != nil {
		t.Fatal(err)
	}
	for step := int64(1); step <= indexSteps; step++ {
		if _, err := st.Save(ctx, step, cutState{Step: step, Tag: "clean", Gen: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	torn := []backendtest.CrashCloneConfig{{UnsyncedPercent: 0, TearUnsynced: true}, {UnsyncedPercent: 100, TearUnsynced: true}}
	sc := storeScenario{name: "Index", opts: opts, rules: rules{loadFrom: indexSteps - 3}, images: torn, run: func(r *cutRun) error {
		for step := int64(1); step <= indexSteps; step++ {
			r.l.begin(event{what: "save", save: saved{step: step, tag: "clean", gen: 1, kind: checkpoint.KindStep}, acked: true})
		}
		list := func() error { _, err := r.st.List(r.ctx); return err }
		return steps(r.open, list, func() error { return r.truncate(indexSteps - 2) }, func() error { return r.save(indexSteps-1, 2) }, r.close)
	}}
	newMem := func() *backendtest.Mem { return base.CrashClone(backendtest.CrashCloneConfig{}) }
	for _, v := range storeCuts(t, sc, newMem) {
		t.Error(v)
	}
}
