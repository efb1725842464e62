package sealed_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"

	"filippo.io/age"

	"github.com/gocheckpoint/checkpoint/internal/format"
	"github.com/gocheckpoint/checkpoint/internal/sealed"
)

// The fuzz target's keys are fixed, so that the inputs it saves in
// testdata/fuzz open tomorrow as today. They are public, for tests only.
const (
	fuzzIdentityA = "AGE-SECRET-KEY-1UJMXHSEG46EPU3F2QGPQQP3750K3GDKCD26LKNZXV8HR8UT2N97S5DAHEU"
	fuzzIdentityB = "AGE-SECRET-KEY-13CTGG9UK9AE3509M8MZDAWDPE55XKRRHLFA23CL0ZMD6T69JZ05QEV4YAW"
	fuzzIdentityC = "AGE-SECRET-KEY-13PJ5RCURQM3CZJ8SJSUWDSV3US9XDNKMS6WAWQC8PWMGUA92L63SWVRLVU"
)

// fuzzSizes are the sizes of the payloads sealed as seeds: empty, small,
// exactly one chunk, one chunk and a byte, two chunks and a bit.
var fuzzSizes = []int{0, 10, 64 << 10, 64<<10 + 1, 128<<10 + 5}

// plainOf is the payload of n bytes of the seeds: its bytes depend on n,
// so that a prefix of a longer payload never passes for a shorter one.
func plainOf(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + n*13 + i>>9)
	}
	return b
}

func fuzzIdentity(t testing.TB, s string) *age.X25519Identity {
	t.Helper()
	id, err := age.ParseX25519Identity(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// sealTo returns payload sealed by k.
func sealTo(t testing.TB, k *sealed.Keys, payload []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := k.Seal(func(w io.Writer) error { _, err := w.Write(payload); return err })(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// fuzzKeys returns the keys the target opens with (A, and the older B),
// and those of the seeds: A's, B's and C's, which the target does not
// hold.
func fuzzKeys(t testing.TB) (open *sealed.Keys, seal []*sealed.Keys) {
	a, b, c := fuzzIdentity(t, fuzzIdentityA), fuzzIdentity(t, fuzzIdentityB), fuzzIdentity(t, fuzzIdentityC)
	open, err := sealed.NewKeys(a, []*age.X25519Identity{b}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []*age.X25519Identity{a, b, c} {
		k, err := sealed.NewKeys(id, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		seal = append(seal, k)
	}
	return open, seal
}

// checkOpen opens data with k and reads it to its end, and returns what
// breaks the promise of Keys.Open: the whole payload of one of the seeds
// and no error, or an error that is ErrNoKey, ErrPlaintext or damage,
// after a prefix of a seed's payload at most.
func checkOpen(k *sealed.Keys, data []byte) error {
	r, plain, err := k.Open(bytes.NewReader(data), "fuzz")
	if err != nil {
		if errors.Is(err, sealed.ErrNoKey) || errors.Is(err, sealed.ErrPlaintext) || format.IsDamage(err) {
			return nil
		}
		return fmt.Errorf("Open: an error neither ErrNoKey, ErrPlaintext nor damage: %v", err)
	}
	if plain {
		return errors.New("Open read plaintext with keys that do not")
	}
	got, err := io.ReadAll(r)
	if err != nil {
		if !format.IsDamage(err) {
			return fmt.Errorf("read: an error that is not damage: %v", err)
		}
		for _, n := range fuzzSizes {
			if bytes.HasPrefix(plainOf(n), got) {
				return nil
			}
		}
		return fmt.Errorf("read: %d bytes of no seed's payload before the error %v", len(got), err)
	}
	if !slices.Contains(fuzzSizes, len(got)) || !bytes.Equal(got, plainOf(len(got))) {
		return fmt.Errorf("read %d bytes without an error that are no seed's payload", len(got))
	}
	return nil
}

// FuzzOpenSealed mutates sealed objects (of every payload size around a
// chunk boundary, to the keys held and to one not held, and plaintext) and
// proves that opening one never returns other bytes than those sealed
// without an error, nor panics: an object opens and reads to exactly a
// seed's payload, or fails with ErrNoKey, ErrPlaintext or a damage error.
func FuzzOpenSealed(f *testing.F) {
	k, seal := fuzzKeys(f)
	for _, n := range fuzzSizes {
		f.Add(sealTo(f, seal[0], plainOf(n)))
	}
	f.Add(sealTo(f, seal[1], plainOf(10)))
	f.Add(sealTo(f, seal[2], plainOf(10)))
	f.Add([]byte(`{"format":3,"step":1}`))
	f.Add([]byte(format.SealedMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := checkOpen(k, data); err != nil {
			t.Fatal(err)
		}
	})
}

// A sealed object cut anywhere, at a chunk boundary in particular (what
// is left is then whole chunks, each authenticating), fails to read as
// damage: age marks the last chunk, so no prefix of an object passes for
// one.
func TestSealedTruncationIsDamageAtEveryChunkBoundary(t *testing.T) {
	t.Parallel()
	k, seal := fuzzKeys(t)
	for _, n := range fuzzSizes {
		obj := sealTo(t, seal[0], plainOf(n))
		if err := checkOpen(k, obj); err != nil {
			t.Fatalf("size %d, whole: %v", n, err)
		}
		header := len(obj) - (n + 16*max(1, (n+64<<10-1)/(64<<10)))
		cuts := []int{0, 1, sealed.KeyLineLen - 1, sealed.KeyLineLen, header - 16, header, header + 1, len(obj) - 1}
		for b := header + 64<<10 + 16; b < len(obj); b += 64<<10 + 16 {
			cuts = append(cuts, b-1, b, b+1)
		}
		for _, cut := range cuts {
			r, _, err := k.Open(bytes.NewReader(obj[:cut]), "cut")
			if err == nil {
				_, err = io.ReadAll(r)
			}
			if !format.IsDamage(err) {
				t.Errorf("size %d cut to %d of %d bytes: %v; want damage", n, cut, len(obj), err)
			}
		}
	}
}

// A flipped byte anywhere in a sealed object's key line is damage (or, in
// its key ID, damage once the key that opens it disagrees), never
// ErrPlaintext: a key line a byte off the magic is not a plaintext file.
func TestSealedFlippedKeyLineIsDamage(t *testing.T) {
	t.Parallel()
	k, seal := fuzzKeys(t)
	obj := sealTo(t, seal[0], plainOf(10))
	for i := 0; i < sealed.KeyLineLen; i++ {
		for _, bit := range []byte{1, 0x20, 0x80} {
			b := bytes.Clone(obj)
			b[i] ^= bit
			r, _, err := k.Open(bytes.NewReader(b), "flip")
			if err == nil {
				_, err = io.ReadAll(r)
			}
			if !format.IsDamage(err) {
				t.Errorf("byte %d ^ %#x: %v; want damage", i, bit, err)
			}
		}
	}
}
