package backendtest_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest"
	"github.com/gocheckpoint/checkpoint/internal/format"
	"github.com/gocheckpoint/checkpoint/internal/sealed"
	"github.com/gocheckpoint/checkpoint/storage"
)

// The power-cut tests of encryption: the store scenarios run with Encrypt
// on, and a re-encryption is cut at each of its calls.

func newCutIdentity(t *testing.T) *age.X25519Identity {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// sealedObjects opens every object of b (of a store and its child stores)
// but a write's temporaries and the backend's own, and returns what breaks
// the promise of an encrypting store after a crash: each is sealed to one
// of ids, opens with it and reads to its end. It returns the count by key.
func sealedObjects(b checkpoint.Backend, ids ...*age.X25519Identity) (map[string]int, []string) {
	ctx := context.Background()
	byID := map[string]*age.X25519Identity{}
	for _, id := range ids {
		byID[checkpoint.KeyID(id.Recipient())] = id
	}
	count := map[string]int{}
	var bad []string
	var walk func(b checkpoint.Backend, depth int)
	walk = func(b checkpoint.Backend, depth int) {
		objs, err := b.List(ctx)
		if err != nil {
			bad = append(bad, fmt.Sprintf("List: %v", err))
			return
		}
		for _, o := range objs {
			if _, _, temp := storage.TempOf(b, o.Name); temp || !o.Mode.IsRegular() || strings.HasPrefix(o.Name, ".checkpoint.") && o.Name != ".checkpoint.index" {
				continue
			}
			rc, _, err := b.Open(ctx, o.Name)
			if err != nil {
				bad = append(bad, fmt.Sprintf("open %s: %v", b.Locate(o.Name), err))
				continue
			}
			data, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				bad = append(bad, fmt.Sprintf("read %s: %v", b.Locate(o.Name), err))
				continue
			}
			kid, ok := bytes.CutPrefix(data, []byte(format.SealedMagic))
			if !ok || len(kid) < format.SealedKeyIDLen || byID[string(kid[:format.SealedKeyIDLen])] == nil {
				bad = append(bad, fmt.Sprintf("%s is not sealed to a key given", b.Locate(o.Name)))
				continue
			}
			id := string(kid[:format.SealedKeyIDLen])
			k, err := sealed.NewKeys(byID[id], nil, false)
			if err == nil {
				var r io.Reader
				if r, _, err = k.Open(bytes.NewReader(data), b.Locate(o.Name)); err == nil {
					_, err = io.Copy(io.Discard, r)
				}
			}
			if err != nil {
				bad = append(bad, fmt.Sprintf("%s does not open: %v", b.Locate(o.Name), err))
				continue
			}
			count[id]++
		}
		if depth > 2 {
			return
		}
		children, err := b.Children(ctx)
		if err != nil {
			bad = append(bad, fmt.Sprintf("Children: %v", err))
			return
		}
		for _, name := range children {
			sub, err := b.Sub(ctx, name, false)
			if err != nil {
				bad = append(bad, fmt.Sprintf("Sub(%s): %v", name, err))
				continue
			}
			walk(sub, depth+1)
			sub.Close()
		}
	}
	walk(b, 0)
	return count, bad
}

// underRace are the scenarios the encrypted power-cut tests run under the
// race detector, on the local flavour only: there, X25519 is some ten
// times slower, and the whole set takes half a minute. These write
// numbered checkpoints, the rolling file and byte payloads, and save from
// a goroutine (Async).
var underRace = map[string]bool{"RollingWrites": true, "AsyncSaves": true, "BytePayloads": true}

// Every promise a store made before a power cut holds with Encrypt on, in
// every scenario and on both flavours of Mem; and whatever the cut leaves
// is sealed: no object of the store is plaintext or torn. (Under the race
// detector: the scenarios of underRace, on a local Mem.)
func TestPowerCutKeepsStorePromisesEncrypted(t *testing.T) {
	t.Parallel()
	id := newCutIdentity(t)
	for _, f := range memFlavours {
		for _, sc := range storeScenarios {
			if raceEnabled && (f.name != "Local" || !underRace[sc.name]) {
				continue
			}
			t.Run(f.name+"/"+sc.name, func(t *testing.T) {
				t.Parallel()
				sc.opts = append(append([]checkpoint.Option(nil), sc.opts...), checkpoint.Encrypt(id))
				violations := powerCuts(t, func() *backendtest.Mem { return backendtest.NewMem(f.opts...) }, runStore(sc, nil), func(clone *backendtest.Mem, l *ledger) []string {
					b, err := clone.Open()
					if err != nil {
						return []string{fmt.Sprintf("open the clone: %v", err)}
					}
					_, bad := sealedObjects(b, id)
					return append(bad, checkStore(b, sc.opts, sc.rules, l)...)
				}, sc.images...)
				for _, v := range violations {
					t.Error(v)
				}
			})
		}
	}
}

// A power cut at any call of Reencrypt, rotating a store (numbered steps,
// the rolling file, a side file) from key A to key B, leaves every object
// whole and sealed to A or to B; Latest with both keys returns the newest
// state; and a rerun completes: every object is then B's, and B alone
// loads the newest state.
func TestPowerCutDuringReencryptLeavesEveryObjectToOneKey(t *testing.T) {
	t.Parallel()
	a, b := newCutIdentity(t), newCutIdentity(t)
	ctx := context.Background()
	opts := []checkpoint.Option{checkpoint.WithRolling(), checkpoint.SaveEvery(2)}
	const last = 5
	inEachFlavour(t, func(t *testing.T, f memFlavour) {
		if raceEnabled && f.name != "Local" {
			t.Skip("on a local Mem only under the race detector (see underRace)")
		}
		base := backendtest.NewMem(f.opts...)
		bb, err := base.Open()
		if err != nil {
			t.Fatal(err)
		}
		st, err := checkpoint.OpenBackend[cutState](bb, append(opts, checkpoint.Encrypt(a))...)
		if err != nil {
			t.Fatal(err)
		}
		for step := int64(1); step <= last; step++ {
			if _, _, err := st.Tick(ctx, step, cutState{Step: step, Tag: "clean", Gen: 1}); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.WriteJSON(ctx, "result.json", "one"); err != nil {
			t.Fatal(err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		latest := func(b checkpoint.Backend, keys checkpoint.Option) error {
			st, err := checkpoint.OpenBackend[cutState](b, append(opts, keys, checkpoint.ReadOnly())...)
			if err != nil {
				return err
			}
			defer st.Close()
			got, info, err := st.Latest(ctx)
			if err == nil && (info.Step != last || got != cutState{Step: last, Tag: "clean", Gen: 1}) {
				err = fmt.Errorf("Latest returns step %d, %+v; want step %d", info.Step, got, last)
			}
			return err
		}
		violations := powerCuts(t, func() *backendtest.Mem { return base.CrashClone(backendtest.CrashCloneConfig{}) }, func(m *backendtest.Mem) (struct{}, error) {
			mb, err := m.Open()
			if err != nil {
				return struct{}{}, err
			}
			defer mb.Close()
			_, err = checkpoint.Reencrypt(ctx, mb, checkpoint.Encrypt(b, a))
			return struct{}{}, err
		}, func(clone *backendtest.Mem, _ struct{}) []string {
			cb, err := clone.Open()
			if err != nil {
				return []string{fmt.Sprintf("open the clone: %v", err)}
			}
			_, bad := sealedObjects(cb, a, b)
			if err := latest(cb, checkpoint.Encrypt(b, a)); err != nil {
				bad = append(bad, fmt.Sprintf("Latest with both keys: %v", err))
			}
			if _, err := checkpoint.Reencrypt(ctx, cb, checkpoint.Encrypt(b, a)); err != nil {
				return append(bad, fmt.Sprintf("the rerun: %v", err))
			}
			count, more := sealedObjects(cb, b)
			bad = append(bad, more...)
			if count[checkpoint.KeyID(b.Recipient())] == 0 {
				bad = append(bad, "no object is B's after the rerun")
			}
			if err := latest(cb, checkpoint.Encrypt(b)); err != nil {
				bad = append(bad, fmt.Sprintf("Latest with B alone after the rerun: %v", err))
			}
			return bad
		})
		for _, v := range violations {
			t.Error(v)
		}
	})
}

// The index scenario (see TestPowerCutKeepsStorePromisesWithTheIndex)
// with Encrypt on: a sealed header index, whole or torn by the cut, never
// stands for what the files say. It opens 260 sealed files at each of 30
// crash images: under the race detector (which has nothing to find in
// this sequential scenario) that takes half a minute, so it runs without.
func TestPowerCutKeepsStorePromisesWithTheIndexEncrypted(t *testing.T) {
	t.Parallel()
	if raceEnabled {
		t.Skip("30 s under the race detector, which has nothing to find here")
	}
	powerCutsWithTheIndex(t, checkpoint.Encrypt(newCutIdentity(t)))
}

// No session appears partly with Encrypt on either, wherever a power cut
// falls in creating, saving in, forking and describing sessions (see
// TestPowerCutKeepsSessionPromises); and every object the cut leaves, a
// session.json as a checkpoint, is whole and sealed. (Not under the race
// detector: 13 s there, see underRace.)
func TestPowerCutKeepsSessionPromisesEncrypted(t *testing.T) {
	t.Parallel()
	id := newCutIdentity(t)
	if raceEnabled {
		t.Skip("13 s under the race detector, which has nothing to find in this sequential scenario")
	}
	inEachFlavour(t, func(t *testing.T, f memFlavour) {
		check := func(clone *backendtest.Mem, l *sessionsLedger) []string {
			root, err := clone.Open()
			if err != nil {
				return []string{fmt.Sprintf("open the clone: %v", err)}
			}
			_, bad := sealedObjects(root, id)
			return append(bad, checkSessions(clone, l)...)
		}
		for _, v := range powerCuts(t, func() *backendtest.Mem { return backendtest.NewMem(f.opts...) }, runSessionsWith(checkpoint.Encrypt(id)), check) {
			t.Error(v)
		}
	})
}
