package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"filippo.io/age"
	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint/internal/format"
	"github.com/gocheckpoint/checkpoint/internal/killtest"
	"github.com/gocheckpoint/checkpoint/internal/sealed"
)

// The kill tests of encryption: a process saving to an encrypting store,
// and one re-encrypting a store to a new key, are killed at random
// instants (see internal/killtest).

var (
	// encryptSaverRole runs encryptSaverChild on the directory Args[0]
	// with the identity Args[1].
	encryptSaverRole = killtest.Register("encrypt-saver", encryptSaverChild)
	// reencryptRole runs reencryptChild on the directory Args[0] with the
	// identities Args[1] (current) and Args[2] (older).
	reencryptRole = killtest.Register("reencrypt", reencryptChild)
)

// plaintextMarker is in every state, payload and side file the encrypted
// kill tests write: no file of an encrypting store may hold it.
const plaintextMarker = "PLAINTEXT-MARKER-b7c1e0"

// encState is the state of step in the encrypted kill tests: over one
// 64 KiB chunk, so that a kill lands between chunks too.
type encState struct {
	Step   int64  `json:"step"`
	Marker string `json:"marker"`
	Pad    string `json:"pad"`
}

func newEncState(step int64) encState {
	return encState{Step: step, Marker: plaintextMarker, Pad: strings.Repeat(strconv.FormatInt(step, 36)+"-", 40<<10)}
}

// encPayload is the byte payload of step: the marker, then killPayload's.
func encPayload(step int64) []byte {
	return append([]byte(plaintextMarker), killPayload(step)...)
}

func encJSONOptions(id *age.X25519Identity) []Option {
	return []Option{WithLayout("c", 6), SaveEvery(3), WithRolling(), KeepLast(crashKeep), Encrypt(id)}
}

func encPayloadOptions(id *age.X25519Identity) []Option {
	return []Option{WithLayout("p", 6), KeepLast(crashKeep), Encrypt(id)}
}

// encryptSaverChild ticks JSON states (numbered every third step, the
// others to the rolling file) in Args[0]/json, rewrites a side file every
// fifth, and saves each step's byte payload with SaveFrom in
// Args[0]/payload, all encrypted to the identity Args[1], acknowledging
// each step once all of its saves returned.
func encryptSaverChild(c *killtest.Child) int {
	dir, fail := c.Args[0], c.Fail
	id, err := age.ParseX25519Identity(c.Args[1])
	if err != nil {
		fail(2, err)
	}
	ctx := context.Background()
	js, err := Open[encState](filepath.Join(dir, "json"), encJSONOptions(id)...)
	if err != nil {
		fail(2, err)
	}
	ps, err := Open[[]byte](filepath.Join(dir, "payload"), encPayloadOptions(id)...)
	if err != nil {
		fail(2, err)
	}
	for next := resumeStep(ctx, js, fail); ; next++ {
		if _, _, err := js.Tick(ctx, next, newEncState(next)); err != nil {
			fail(4, err)
		}
		if next%5 == 0 {
			if err := js.WriteJSON(ctx, "progress.json", map[string]any{"step": next, "marker": plaintextMarker}); err != nil {
				fail(6, err)
			}
		}
		if _, err := ps.SaveFrom(ctx, next, func(w io.Writer) error {
			p := encPayload(next)
			for len(p) > 0 {
				n := min(len(p), 4<<10)
				if _, err := w.Write(p[:n]); err != nil {
					return err
				}
				p = p[n:]
			}
			return nil
		}); err != nil {
			fail(5, err)
		}
		c.Ack(next)
	}
}

// requireSealedFiles proves that no file below dir holds the plaintext
// marker, that none was moved aside as damaged, and that every file but
// the lock and a write's leftover temporary is sealed (begins with a key
// line) to one of kids; it returns the files by key ID.
func requireSealedFiles(t *testing.T, dir string, kids ...string) map[string][]string {
	t.Helper()
	byKey := map[string][]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		require.False(t, bytes.Contains(b, []byte(plaintextMarker)), "%s holds plaintext", path)
		require.NotContains(t, d.Name(), quarantineSuffix, "%s was moved aside", path)
		if d.Name() == lockName || isLeftover(d.Name()) && d.Name() != indexName {
			return nil
		}
		require.True(t, bytes.HasPrefix(b, []byte(format.SealedMagic)), "%s is not sealed", path)
		kid := string(b[len(format.SealedMagic) : len(format.SealedMagic)+format.SealedKeyIDLen])
		require.Contains(t, kids, kid, "%s is sealed to another key", path)
		byKey[kid] = append(byKey[kid], path)
		return nil
	})
	require.NoError(t, err)
	return byKey
}

// leftoversUnder counts the temporary files of a write below dir.
func leftoversUnder(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && isLeftover(d.Name()) && d.Name() != indexName {
			n++
		}
		return err
	}))
	return n
}

// TestKill9DuringEncryptedSavesLosesNothing kills a process saving to
// encrypting stores (JSON states, the rolling file, a side file, byte
// payloads) at random instants and proves, after every kill, that every
// checkpoint listed loads, with the key, as what was saved, that Latest
// is the last acknowledged step or newer, that the last acknowledged
// payload survived, that no file holds plaintext, and that nothing was
// moved aside as damaged.
func TestKill9DuringEncryptedSavesLosesNothing(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns processes")
	}
	kills := killtest.Kills(t, 5)
	dir := t.TempDir()
	id, err := age.GenerateX25519Identity()
	require.NoError(t, err)
	kid := KeyID(id.Recipient())
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 26))
	ctx := context.Background()
	lastAck, midWrite, acked := int64(0), 0, map[int64]bool{}
	for kill := 0; kill < kills; kill++ {
		p := encryptSaverRole.Start(t, dir, id.String())
		want := 1 + rng.IntN(8)
		p.AwaitAcks(t, want)
		p.Kill(t)
		for _, ack := range p.Acks() {
			step, err := strconv.ParseInt(ack, 10, 64)
			require.NoError(t, err, ack)
			lastAck = max(lastAck, step)
			acked[step] = true
		}
		require.NotContains(t, p.Stderr(), "checkpoint:", "the child failed before it was killed")
		requireSealedFiles(t, dir, kid)
		if leftoversUnder(t, dir) > 0 {
			midWrite++
		}

		js, err := Open[encState](filepath.Join(dir, "json"), encJSONOptions(id)...)
		require.NoError(t, err, "kill %d", kill)
		list, err := js.List(ctx)
		require.NoError(t, err)
		numbered := map[int64]bool{}
		for _, info := range list {
			got, _, err := js.LoadExact(ctx, info)
			require.NoError(t, err, "kill %d: %s", kill, info.Location)
			require.Equal(t, newEncState(info.Step), got, "kill %d: %s", kill, info.Location)
			numbered[info.Step] = numbered[info.Step] || info.Kind == KindStep
		}
		// The acknowledged numbered steps that KeepLast keeps (all but one
		// of its window: a save published but not acknowledged may have
		// moved it) are there.
		for i, step := 0, lastAck-lastAck%3; i < crashKeep-1 && step > 0; i, step = i+1, step-3 {
			require.True(t, numbered[step] || !acked[step], "kill %d: the acknowledged step %d is gone", kill, step)
		}
		got, info, err := js.Latest(ctx)
		require.NoError(t, err, "kill %d", kill)
		require.GreaterOrEqual(t, info.Step, lastAck, "kill %d: Latest is older than the last acknowledged step", kill)
		require.Equal(t, newEncState(info.Step), got)
		var progress map[string]any
		if err := js.ReadJSON(ctx, "progress.json", &progress); !errors.Is(err, ErrNotFound) {
			require.NoError(t, err, "the side file is whole")
		}
		require.NoError(t, js.Close())

		ps, err := Open[[]byte](filepath.Join(dir, "payload"), encPayloadOptions(id)...)
		require.NoError(t, err, "kill %d", kill)
		list, err = ps.List(ctx)
		require.NoError(t, err)
		seen := map[int64]bool{}
		for _, info := range list {
			r, _, err := ps.OpenPayloadExact(ctx, info)
			require.NoError(t, err, "kill %d: %s", kill, info.Location)
			b, err := io.ReadAll(r)
			r.Close()
			require.NoError(t, err, "kill %d: %s is torn", kill, info.Location)
			require.True(t, bytes.Equal(encPayload(info.Step), b), "kill %d: %s holds other bytes", kill, info.Location)
			seen[info.Step] = true
		}
		for step := lastAck; step > max(0, lastAck-crashKeep+1); step-- {
			require.True(t, seen[step] || !acked[step], "kill %d: the acknowledged payload of step %d is gone", kill, step)
		}
		require.NoError(t, ps.Close())
		// The reopens removed the dead child's temporaries: every file
		// left is sealed, as is.
		requireSealedFiles(t, dir, kid)
		lastAck = info.Step
	}
	t.Logf("%d kills, %d of them mid-write (a temporary file was left); last step %d", kills, midWrite, lastAck)
}

// ackingBackend acknowledges each file Reencrypt rewrote or removed.
type ackingBackend struct {
	Backend
	c *killtest.Child
}

func (a ackingBackend) Unwrap() Backend { return a.Backend }

func (a ackingBackend) Replace(ctx context.Context, name, ifVersion string, write func(io.Writer) error) (Object, error) {
	o, err := a.Backend.Replace(ctx, name, ifVersion, write)
	if err == nil {
		a.c.Ack(a.Locate(name))
	}
	return o, err
}

func (a ackingBackend) Remove(ctx context.Context, names ...string) ([]bool, error) {
	ok, err := a.Backend.Remove(ctx, names...)
	if err == nil {
		a.c.Ack(a.Locate(names[0]))
	}
	return ok, err
}

func (a ackingBackend) Sub(ctx context.Context, name string, create bool) (Backend, error) {
	sub, err := a.Backend.Sub(ctx, name, create)
	if err != nil {
		return nil, err
	}
	return ackingBackend{sub, a.c}, nil
}

// reencryptChild re-encrypts the store Args[0]/store and the root of
// sessions Args[0]/sessions to the identity Args[1], reading Args[2]'s
// files too, or plaintext files if Args[2] is "plaintext" (a migration),
// acknowledging each file rewritten, then waits to be killed.
func reencryptChild(c *killtest.Child) int {
	dir, fail := c.Args[0], c.Fail
	b, err := age.ParseX25519Identity(c.Args[1])
	if err != nil {
		fail(2, err)
	}
	opts := []Option{Encrypt(b), ReadPlaintext()}
	if c.Args[2] != "plaintext" {
		a, err := age.ParseX25519Identity(c.Args[2])
		if err != nil {
			fail(2, err)
		}
		opts = []Option{Encrypt(b, a)}
	}
	ctx := context.Background()
	for _, sub := range []string{"store", "sessions"} {
		backend, err := openDirWith(filepath.Join(dir, sub))
		if err != nil {
			fail(2, err)
		}
		if _, err := Reencrypt(ctx, ackingBackend{backend, c}, append(opts, WithLayout("turn", 3))...); err != nil {
			fail(3, err)
		}
		backend.Close()
	}
	c.Pause("done")
	return 0
}

// reencryptSetup writes, encrypted to a (in plaintext if a is nil), a
// store in dir/store (numbered steps, the rolling file, a side file) and
// a root of sessions in dir/sessions with two sessions, and returns the
// newest step of the store and the IDs of the sessions.
func reencryptSetup(t *testing.T, dir string, a *age.X25519Identity) (int64, []string) {
	t.Helper()
	ctx := context.Background()
	opts := []Option{NoSync(), WithLayout("turn", 3)}
	if a != nil {
		opts = append(opts, Encrypt(a))
	}
	s, err := Open[encState](filepath.Join(dir, "store"), append(opts, SaveEvery(2), WithRolling())...)
	require.NoError(t, err)
	const last = 9
	for step := int64(1); step <= last; step++ {
		_, _, err := s.Tick(ctx, step, newEncState(step))
		require.NoError(t, err)
	}
	require.NoError(t, s.WriteJSON(ctx, "progress.json", map[string]any{"marker": plaintextMarker}))
	require.NoError(t, s.Close())

	r, err := OpenSessions(filepath.Join(dir, "sessions"), opts...)
	require.NoError(t, err)
	var ids []string
	for i := 0; i < 2; i++ {
		sess, err := r.New(ctx, map[string]string{"marker": plaintextMarker})
		require.NoError(t, err)
		st, err := OpenSessionStore[encState](r, sess.ID)
		require.NoError(t, err)
		for step := int64(1); step <= int64(2+i); step++ {
			_, err := st.Save(ctx, step, newEncState(step))
			require.NoError(t, err)
		}
		require.NoError(t, st.Close())
		ids = append(ids, sess.ID)
	}
	require.NoError(t, r.Close())
	return last, ids
}

// requireWholeUnder proves that every file below dir (but locks and
// temporaries) is sealed to a or b, opens with that key and decodes: a
// checkpoint as an envelope, any other file as JSON. It returns how many
// are sealed to each.
func requireWholeUnder(t *testing.T, dir string, a, b *age.X25519Identity) map[string]int {
	t.Helper()
	ids := map[string]*age.X25519Identity{KeyID(a.Recipient()): a, KeyID(b.Recipient()): b}
	count := map[string]int{}
	for kid, paths := range requireSealedFiles(t, dir, KeyID(a.Recipient()), KeyID(b.Recipient())) {
		k, err := sealed.NewKeys(ids[kid], nil, false)
		require.NoError(t, err)
		for _, path := range paths {
			f, err := os.Open(path)
			require.NoError(t, err)
			r, _, err := k.Open(f, path)
			require.NoError(t, err, path)
			plain, err := io.ReadAll(r)
			f.Close()
			require.NoError(t, err, "%s is not whole", path)
			name := filepath.Base(path)
			switch {
			case strings.HasPrefix(name, "turn_"):
				_, err := readEnvelope(bytes.NewReader(plain), DefaultMaxReadSize)
				require.NoError(t, err, path)
			case name != indexName:
				require.True(t, json.Valid(plain), "%s is not JSON", path)
			}
			count[kid]++
		}
	}
	return count
}

// requireLatestOf proves that the store in dir/store and both sessions
// return their newest states through Latest with opts.
func requireLatestOf(t *testing.T, dir string, last int64, ids []string, opts ...Option) {
	t.Helper()
	ctx := context.Background()
	opts = append([]Option{ReadOnly(), WithLayout("turn", 3)}, opts...)
	s, err := Open[encState](filepath.Join(dir, "store"), opts...)
	require.NoError(t, err)
	got, info, err := s.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, last, info.Step)
	require.Equal(t, newEncState(last), got)
	list, err := s.List(ctx)
	require.NoError(t, err)
	for _, info := range list {
		got, _, err := s.LoadExact(ctx, info)
		require.NoError(t, err, info.Location)
		require.Equal(t, newEncState(info.Step), got)
	}
	var side map[string]any
	require.NoError(t, s.ReadJSON(ctx, "progress.json", &side))
	require.NoError(t, s.Close())

	r, err := OpenSessions(filepath.Join(dir, "sessions"), opts...)
	require.NoError(t, err)
	sessions, err := r.List(ctx)
	require.NoError(t, err)
	require.Len(t, sessions, 2)
	for i, id := range ids {
		st, err := OpenSessionStore[encState](r, id)
		require.NoError(t, err)
		got, info, err := st.Latest(ctx)
		require.NoError(t, err, id)
		require.Equal(t, int64(2+i), info.Step)
		require.Equal(t, newEncState(int64(2+i)), got)
		require.NoError(t, st.Close())
	}
	require.NoError(t, r.Close())
}

// TestKill9DuringReencryptLeavesEveryFileWholeToOneKey kills a process
// re-encrypting a store and a root of two sessions from key A to key B
// after a random number of rewritten files, and proves that every file is
// then whole and sealed to A or B (opens with that key and decodes), that
// Latest with both keys returns the newest states, and that a rerun
// completes: every file is then B's, B alone loads every step, and a
// second rerun rewrites nothing.
func TestKill9DuringReencryptLeavesEveryFileWholeToOneKey(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns processes")
	}
	kills := killtest.Kills(t, 3)
	a, err := age.GenerateX25519Identity()
	require.NoError(t, err)
	b, err := age.GenerateX25519Identity()
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 2626))
	ctx := context.Background()
	mixed, midWrite := 0, 0
	for kill := 0; kill < kills; kill++ {
		dir := t.TempDir()
		last, ids := reencryptSetup(t, dir, a)
		total := requireWholeUnder(t, dir, a, b)[KeyID(a.Recipient())]

		p := reencryptRole.Start(t, dir, b.String(), a.String())
		p.AwaitAcks(t, 1+rng.IntN(total-1))
		p.Kill(t)
		require.Empty(t, p.Stderr(), "the child failed before it was killed")

		if leftoversUnder(t, dir) > 0 {
			midWrite++
		}
		count := requireWholeUnder(t, dir, a, b)
		if count[KeyID(a.Recipient())] > 0 && count[KeyID(b.Recipient())] > 0 {
			mixed++
		}
		requireLatestOf(t, dir, last, ids, Encrypt(b, a))

		// A rerun completes the work.
		for _, sub := range []string{"store", "sessions"} {
			backend, err := openDirWith(filepath.Join(dir, sub))
			require.NoError(t, err)
			_, err = Reencrypt(ctx, backend, Encrypt(b, a), WithLayout("turn", 3))
			require.NoError(t, err, "kill %d: the rerun of %s", kill, sub)
			again, err := Reencrypt(ctx, backend, Encrypt(b, a), WithLayout("turn", 3))
			require.NoError(t, err)
			require.Empty(t, again.Rewritten, "kill %d: a second rerun rewrites nothing", kill)
			require.NoError(t, backend.Close())
		}
		count = requireWholeUnder(t, dir, a, b)
		require.Zero(t, count[KeyID(a.Recipient())], "kill %d: files left to A after the rerun", kill)
		requireLatestOf(t, dir, last, ids, Encrypt(b))
	}
	require.Positive(t, mixed, "no kill left a store of both keys: the kills landed after the work")
	t.Logf("%d kills, %d of them left files of both keys, %d mid-write (a temporary file was left)", kills, mixed, midWrite)
}

// requireWholePlainOrSealed proves that every file below dir (but locks
// and temporaries) is a whole plaintext file of the store (a checkpoint's
// envelope, or JSON) or sealed to b, opening with it and decoding; it
// returns how many are plaintext and how many sealed.
func requireWholePlainOrSealed(t *testing.T, dir string, b *age.X25519Identity) (plain, sealedToB int) {
	t.Helper()
	k, err := sealed.NewKeys(b, nil, true)
	require.NoError(t, err)
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == lockName || isLeftover(d.Name()) && d.Name() != indexName {
			return err
		}
		require.NotContains(t, d.Name(), quarantineSuffix, "%s was moved aside", path)
		f, err := os.Open(path)
		require.NoError(t, err)
		defer f.Close()
		r, isPlain, err := k.Open(f, path)
		require.NoError(t, err, "%s is neither plaintext nor sealed to B", path)
		data, err := io.ReadAll(r)
		require.NoError(t, err, "%s is not whole", path)
		if isPlain {
			plain++
		} else {
			sealedToB++
		}
		switch name := d.Name(); {
		case strings.HasPrefix(name, "turn_"):
			_, err := readEnvelope(bytes.NewReader(data), DefaultMaxReadSize)
			require.NoError(t, err, path)
		case name != indexName:
			require.True(t, json.Valid(data), "%s is not JSON", path)
		}
		return nil
	}))
	return plain, sealedToB
}

// TestKill9DuringPlaintextMigrationLeavesEveryFileWhole kills a process
// migrating a plaintext store and root of two sessions to key B
// (Reencrypt with ReadPlaintext) after a random number of rewritten
// files, and proves that every file is then a whole plaintext file or
// whole and sealed to B, that Latest with B and ReadPlaintext returns the
// newest states, and that a rerun completes: no plaintext is left, and B
// alone loads every step.
func TestKill9DuringPlaintextMigrationLeavesEveryFileWhole(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns processes")
	}
	kills := killtest.Kills(t, 3)
	b, err := age.GenerateX25519Identity()
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 2627))
	ctx := context.Background()
	mixed := 0
	for kill := 0; kill < kills; kill++ {
		dir := t.TempDir()
		last, ids := reencryptSetup(t, dir, nil)
		total, _ := requireWholePlainOrSealed(t, dir, b)

		p := reencryptRole.Start(t, dir, b.String(), "plaintext")
		p.AwaitAcks(t, 1+rng.IntN(total-1))
		p.Kill(t)
		require.Empty(t, p.Stderr(), "the child failed before it was killed")

		plain, toB := requireWholePlainOrSealed(t, dir, b)
		if plain > 0 && toB > 0 {
			mixed++
		}
		requireLatestOf(t, dir, last, ids, Encrypt(b), ReadPlaintext())

		for _, sub := range []string{"store", "sessions"} {
			backend, err := openDirWith(filepath.Join(dir, sub))
			require.NoError(t, err)
			_, err = Reencrypt(ctx, backend, Encrypt(b), ReadPlaintext(), WithLayout("turn", 3))
			require.NoError(t, err, "kill %d: the rerun of %s", kill, sub)
			require.NoError(t, backend.Close())
		}
		requireSealedFiles(t, dir, KeyID(b.Recipient()))
		requireLatestOf(t, dir, last, ids, Encrypt(b))
	}
	require.Positive(t, mixed, "no kill left a store half migrated: the kills landed after the work")
	t.Logf("%d kills, %d of them left plaintext and sealed files", kills, mixed)
}
