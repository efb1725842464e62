package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	agelib "filippo.io/age"
	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/internal/killtest"
)

// TestMain keeps the tests hermetic: an identity in the environment of
// whoever runs them would make every command read encrypted stores only.
// In a child process started by a kill test, it runs the child's role.
func TestMain(m *testing.M) {
	os.Unsetenv(identityEnv)
	killtest.Dispatch()
	os.Exit(m.Run())
}

// testKey is an identity and its identity file, made by checkpoint keygen.
type testKey struct {
	id   *agelib.X25519Identity
	file string
	kid  string // checkpoint.KeyID
}

func newKey(t *testing.T) testKey {
	t.Helper()
	file := filepath.Join(t.TempDir(), "key.txt")
	r := runCLI(t, "keygen", "-o", file)
	require.Equal(t, 0, r.code, r.stderr)
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	ids, err := agelib.ParseIdentities(f)
	require.NoError(t, err)
	require.Len(t, ids, 1)
	id := ids[0].(*agelib.X25519Identity)
	return testKey{id: id, file: file, kid: checkpoint.KeyID(id.Recipient())}
}

// saveSteps saves steps 1..n to the store in dir with opts (Encrypt, or
// none for a plaintext store), state {"turn": step}.
func saveSteps(t *testing.T, dir string, n int, opts ...checkpoint.Option) {
	t.Helper()
	st, err := checkpoint.Open[map[string]int](dir, append(opts, checkpoint.NoSync())...)
	require.NoError(t, err)
	for i := 1; i <= n; i++ {
		_, err := st.Save(context.Background(), int64(i), map[string]int{"turn": i})
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())
}

// encryptedStore makes a store of three steps encrypted to k.
func encryptedStore(t *testing.T, k testKey) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	saveSteps(t, dir, 3, checkpoint.Encrypt(k.id))
	return dir
}

// encryptedSessions makes a root of sessions encrypted to k: sessions a
// (two steps) and b (one).
func encryptedSessions(t *testing.T, k testKey) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "root")
	ctx := context.Background()
	r, err := checkpoint.OpenSessions(root, checkpoint.Encrypt(k.id), checkpoint.NoSync())
	require.NoError(t, err)
	for id, steps := range map[string]int{"a": 2, "b": 1} {
		_, err := r.Create(ctx, id, map[string]string{"player": id})
		require.NoError(t, err)
		st, err := checkpoint.OpenSessionStore[map[string]int](r, id)
		require.NoError(t, err)
		for i := 1; i <= steps; i++ {
			_, err := st.Save(ctx, int64(i), map[string]int{"turn": i})
			require.NoError(t, err)
		}
		require.NoError(t, st.Close())
	}
	require.NoError(t, r.Close())
	return root
}

func TestKeygenWritesAnAgeIdentityFileOfMode0600AndNeverOverwritesIt(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "key.txt")
	r := runCLI(t, "keygen", "-o", file)
	require.Equal(t, 0, r.code, r.stderr)
	require.Empty(t, r.stdout)
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	ids, err := agelib.ParseIdentities(bytes.NewReader(data))
	require.NoError(t, err, "age reads the file")
	id := ids[0].(*agelib.X25519Identity)
	pub := id.Recipient().String()
	require.Contains(t, r.stderr, "# public key: "+pub+"\n")
	require.Contains(t, r.stderr, "# key ID: "+checkpoint.KeyID(id.Recipient())+"\n")
	require.NotContains(t, r.stderr, "AGE-SECRET-KEY", "the secret key is never printed")
	require.Contains(t, string(data), "# public key: "+pub+"\n")
	if runtime.GOOS != "windows" {
		fi, err := os.Stat(file)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	}

	// A second keygen to the same file fails and leaves the key as it was.
	r = runCLI(t, "keygen", "-o", file)
	require.Equal(t, exitFailed, r.code)
	require.Contains(t, r.stderr, "checkpoint keygen: -o "+file+": file already exists: keygen never overwrites a file")
	again, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, data, again)

	// Without -o the identity file goes to stdout, the public key to stderr.
	r = runCLI(t, "keygen")
	require.Equal(t, 0, r.code, r.stderr)
	ids, err = agelib.ParseIdentities(strings.NewReader(r.stdout))
	require.NoError(t, err)
	require.Contains(t, r.stderr, "# public key: "+ids[0].(*agelib.X25519Identity).Recipient().String())
	require.NotContains(t, r.stderr, "AGE-SECRET-KEY")

	r = runCLI(t, "keygen", "extra")
	require.Equal(t, exitUsage, r.code)
	r = runCLI(t, "keygen", "--identity", file)
	require.Equal(t, exitUsage, r.code)
}

func TestEncryptedStoreIsReadWithItsIdentity(t *testing.T) {
	t.Parallel()
	k := newKey(t)
	dir := encryptedStore(t, k)

	r := runCLI(t, "ls", "--identity", k.file, dir)
	require.Equal(t, 0, r.code, r.stderr)
	require.Empty(t, r.stderr)
	require.Regexp(t, `(?m)^3 +step +\d{4}-\d\d-\d\dT`, r.stdout)
	require.NotContains(t, r.stdout, "unreadable")

	r = runCLI(t, "show", dir, "latest", "--state", "--identity", k.file)
	require.Equal(t, 0, r.code, r.stderr)
	require.JSONEq(t, `{"turn": 3}`, r.stdout)

	// The flag may come before the command's name too.
	r = runCLI(t, "--identity", k.file, "diff", dir, "1", "3")
	require.Equal(t, exitFound, r.code, r.stderr)
	require.Contains(t, r.stdout, "~ .turn: 1 -> 3\n")

	r = runCLI(t, "--identity="+k.file, "verify", dir)
	require.Equal(t, 0, r.code, r.stderr+r.stdout)
	require.Contains(t, r.stdout, "3 files checked in "+dir+" (layout step/8): 3 ok, 0 bad\n")

	// A writing command encrypts what it writes: the store still reads
	// with the key alone, and never without it.
	r = runCLI(t, "prune", dir, "--keep-last", "1", "--identity", k.file)
	require.Equal(t, 0, r.code, r.stderr)
	r = runCLI(t, "verify", dir, "--identity", k.file)
	require.Equal(t, 0, r.code, r.stdout)
	require.Contains(t, r.stdout, "1 file checked")
}

func TestEncryptedStoreWithoutItsIdentitySaysToPassOne(t *testing.T) {
	t.Parallel()
	k := newKey(t)
	dir := encryptedStore(t, k)
	hint := "the store is encrypted and no identity was given: pass the key's identity file with --identity FILE, or set CHECKPOINT_IDENTITY"

	r := runCLI(t, "ls", dir)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "step_00000003.json  (encrypted to a key no identity given opens)")
	require.Contains(t, r.stderr, "encrypted to key "+k.kid)
	require.Contains(t, r.stderr, hint)

	for _, args := range [][]string{{"show", dir, "latest"}, {"show", dir, "2"}, {"diff", dir, "1", "2"}} {
		r = runCLI(t, args...)
		require.Equal(t, exitFailed, r.code, "%v", args)
		require.Contains(t, r.stderr, "encrypted to key "+k.kid, "%v", args)
		require.Contains(t, r.stderr, hint, "%v", args)
	}

	r = runCLI(t, "verify", dir)
	require.Equal(t, exitFound, r.code)
	require.Regexp(t, `(?m)^NO KEY +\S+step_00000001.json +encrypted to a key not given: the file is encrypted to key `+k.kid, r.stdout)
	require.Contains(t, r.stdout, "0 ok, 3 bad, 3 encrypted to a key no identity given opens\n")
	require.Contains(t, r.stderr, hint)

	// A writing command removes nothing it cannot read, and says why.
	r = runCLI(t, "prune", dir, "--keep-last", "1")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "nothing to prune")
	require.Contains(t, r.stderr, hint)
	require.Len(t, names(t, dir), 4, "the lock file and the three checkpoints")

	r = runCLI(t, "verify", dir, "--json")
	require.Equal(t, exitFound, r.code)
	var rep verifyReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	require.Equal(t, "no_key", rep.Files[0].Problem)

	// A wrong identity: the error names the store's key and says that none
	// of the identities given opens it.
	other := newKey(t)
	r = runCLI(t, "show", dir, "latest", "--identity", other.file)
	require.Equal(t, exitFailed, r.code)
	require.Contains(t, r.stderr, "is encrypted to key "+k.kid+", which none of the 1 identities given opens")
	require.Contains(t, r.stderr, "none of the identities given (--identity "+other.file+") opens it")
	require.NotContains(t, r.stderr, "AGE-SECRET-KEY")

	// A plaintext store read with an identity: not read, and said why.
	plain := filepath.Join(t.TempDir(), "plain")
	saveSteps(t, plain, 1)
	r = runCLI(t, "show", plain, "latest", "--identity", k.file)
	require.Equal(t, exitFailed, r.code)
	require.Contains(t, r.stderr, "not encrypted")
	require.Contains(t, r.stderr, "checkpoint rekey --plaintext")
}

// TestIdentityFromTheEnvironment sets CHECKPOINT_IDENTITY: not parallel.
func TestIdentityFromTheEnvironment(t *testing.T) {
	a, b := newKey(t), newKey(t)
	dir := encryptedStore(t, a)

	// Every file listed is read: the store's key is the second.
	t.Setenv(identityEnv, b.file+string(os.PathListSeparator)+a.file)
	r := runCLI(t, "show", dir, "latest", "--state")
	require.Equal(t, 0, r.code, r.stderr)
	require.JSONEq(t, `{"turn": 3}`, r.stdout)

	// --identity replaces the environment's files.
	r = runCLI(t, "show", dir, "latest", "--identity", b.file)
	require.Equal(t, exitFailed, r.code)
	require.Contains(t, r.stderr, "none of the identities given (--identity "+b.file+")")

	// A file the variable names that does not exist is an error naming it.
	missing := filepath.Join(t.TempDir(), "nope.txt")
	t.Setenv(identityEnv, missing)
	r = runCLI(t, "ls", dir)
	require.Equal(t, exitFailed, r.code)
	require.Contains(t, r.stderr, "CHECKPOINT_IDENTITY file "+missing+": ")
}

func TestIdentityFilesThatAreNotX25519IdentitiesAreRefusedByName(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	store := filepath.Join(tmp, "store")
	saveSteps(t, store, 1)
	write := func(name, content string) string {
		p := filepath.Join(tmp, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	pq, err := agelib.GenerateHybridIdentity()
	require.NoError(t, err)
	x, err := agelib.GenerateX25519Identity()
	require.NoError(t, err)
	secret := x.String()
	broken := secret[:len(secret)-4] + "zzzz" // a bad checksum
	for _, c := range []struct {
		file, want string
		code       int
	}{
		{write("empty.txt", "# nothing here\n\n"), "not an age identity file (want lines AGE-SECRET-KEY-1..., as checkpoint keygen writes): no identities found", exitUsage},
		{write("pq.txt", pq.String()+"\n"), "identity 1 is a post-quantum (AGE-SECRET-KEY-PQ-1...) identity: checkpoint reads X25519 identities only", exitUsage},
		{write("broken.txt", "# a key\n"+broken+"\n"), "not an age identity file (want lines AGE-SECRET-KEY-1..., as checkpoint keygen writes): error at line 2: malformed secret key\n", exitUsage},
		{write("junk.txt", "hello\n"), "not an age identity file (want lines AGE-SECRET-KEY-1..., as checkpoint keygen writes): error at line 1: unknown identity type", exitUsage},
		{filepath.Join(tmp, "missing.txt"), "", exitFailed},
		{tmp, "not a regular file", exitUsage},
	} {
		r := runCLI(t, "ls", store, "--identity", c.file)
		require.Equal(t, c.code, r.code, "%s: %s", c.file, r.stderr)
		require.Contains(t, r.stderr, "--identity "+c.file+": "+c.want, c.file)
		require.NotContains(t, r.stderr, "AGE-SECRET-KEY-1Q", c.file)
		require.NotContains(t, r.stderr, broken[16:], c.file)
	}
}

func TestRekeyRotatesAStoreAndAStoreReadsWithTheNewKeyOnly(t *testing.T) {
	t.Parallel()
	a, b := newKey(t), newKey(t)
	dir := encryptedStore(t, a)

	r := runCLI(t, "rekey", "--to", b.file, "--identity", a.file, dir)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "rewrote "+filepath.Join(dir, "step_00000001.json")+" (1 so far)\n")
	require.Contains(t, r.stdout, "(3 so far)\n")
	require.Contains(t, r.stdout, "rekey of "+dir+" to key "+b.kid+": rewritten 3, already current 0, failed 0\n")

	r = runCLI(t, "show", dir, "latest", "--state", "--identity", b.file)
	require.Equal(t, 0, r.code, r.stderr)
	require.JSONEq(t, `{"turn": 3}`, r.stdout)
	r = runCLI(t, "verify", dir, "--identity", b.file)
	require.Equal(t, 0, r.code, r.stdout)

	r = runCLI(t, "show", dir, "latest", "--identity", a.file)
	require.Equal(t, exitFailed, r.code)
	require.Contains(t, r.stderr, "encrypted to key "+b.kid)

	// Through the library: ErrNoKey, naming B's key.
	st, err := checkpoint.Open[map[string]int](dir, checkpoint.Encrypt(a.id), checkpoint.ReadOnly())
	require.NoError(t, err)
	_, _, err = st.Latest(context.Background())
	require.ErrorIs(t, err, checkpoint.ErrNoKey)
	require.ErrorContains(t, err, b.kid)
	require.NoError(t, st.Close())

	// A second run rewrites nothing.
	r = runCLI(t, "rekey", "--to", b.file, "--identity", a.file, dir)
	require.Equal(t, 0, r.code, r.stderr)
	require.NotContains(t, r.stdout, "rewrote")
	require.Contains(t, r.stdout, "rewritten 0, already current 3, failed 0\n")
}

func TestRekeyWithoutTheOldKeyReportsEachFileAndFails(t *testing.T) {
	t.Parallel()
	a, b := newKey(t), newKey(t)
	dir := encryptedStore(t, a)
	r := runCLI(t, "rekey", "--to", b.file, dir)
	require.Equal(t, exitFailed, r.code)
	require.Contains(t, r.stdout, "rewritten 0, already current 0, failed 3\n")
	for i := 1; i <= 3; i++ {
		require.Regexp(t, fmt.Sprintf(`(?m)^checkpoint rekey: failed: \S*step_0000000%d.json: .*encrypted to key %s`, i, a.kid), r.stderr)
	}
	require.Contains(t, r.stderr, "--identity FILE")

	// Nothing was changed: A still reads it.
	r = runCLI(t, "verify", dir, "--identity", a.file)
	require.Equal(t, 0, r.code, r.stdout)

	r = runCLI(t, "rekey", dir)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "missing --to FILE")

	// A directory without checkpoints is left alone: no lock file made.
	empty := t.TempDir()
	r = runCLI(t, "rekey", "--to", b.file, empty)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "nothing to rekey in "+empty)
	require.Empty(t, names(t, empty))
}

func TestRekeyOfARootWhoseSessionsHaveNoCheckpointYetRewritesTheirMetadata(t *testing.T) {
	t.Parallel()
	a, b := newKey(t), newKey(t)
	root := filepath.Join(t.TempDir(), "root")
	r0, err := checkpoint.OpenSessions(root, checkpoint.Encrypt(a.id), checkpoint.NoSync())
	require.NoError(t, err)
	_, err = r0.Create(context.Background(), "fresh", nil)
	require.NoError(t, err)
	require.NoError(t, r0.Close())

	r := runCLI(t, "rekey", "--to", b.file, "--identity", a.file, root)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "rewrote "+filepath.Join(root, "fresh", "session.json")+" (1 so far)\n")
	r = runCLI(t, "sessions", "ls", root, "--identity", b.file)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^fresh +0 +- `, r.stdout)
}

func TestRekeyOfARootOfSessionsRewritesEverySession(t *testing.T) {
	t.Parallel()
	a, b := newKey(t), newKey(t)
	root := encryptedSessions(t, a)
	r := runCLI(t, "rekey", "--to", b.file, "--identity", a.file, root)
	require.Equal(t, 0, r.code, r.stderr)
	// Two session.json files and three checkpoints; the session
	// directories the root lists are not files.
	require.Contains(t, r.stdout, "rewritten 5, already current 0, failed 0\n")
	require.Contains(t, r.stdout, "rewrote "+filepath.Join(root, "a", "session.json"))
	r = runCLI(t, "rekey", "--to", b.file, "--identity", a.file, root)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "rewritten 0, already current 5, failed 0\n")

	r = runCLI(t, "verify", root, "--identity", b.file)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, "5 files checked")
	r = runCLI(t, "sessions", "ls", root, "--identity", b.file)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^a +2 +2 `, r.stdout)
	require.Regexp(t, `(?m)^b +1 +1 `, r.stdout)

	r = runCLI(t, "ls", root, "--identity", a.file)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "(encrypted to a key not given: "+filepath.Join(root, "a", "session.json")+" is encrypted to key "+b.kid+", which none of the 1 identities given opens)")
	require.NotContains(t, r.stdout, "damaged")
	require.Contains(t, r.stderr, "encrypted to key "+b.kid)
	require.Contains(t, r.stderr, "none of the identities given")
}

func TestRekeyPlaintextEncryptsAPlaintextStore(t *testing.T) {
	t.Parallel()
	a := newKey(t)
	dir := filepath.Join(t.TempDir(), "plain")
	saveSteps(t, dir, 3)

	// Without --plaintext, plaintext files are failures, left as they are.
	r := runCLI(t, "rekey", "--to", a.file, dir)
	require.Equal(t, exitFailed, r.code)
	require.Contains(t, r.stdout, "rewritten 0, already current 0, failed 3\n")
	require.Contains(t, r.stderr, "plaintext files are encrypted only with --plaintext")

	r = runCLI(t, "rekey", "--to", a.file, "--plaintext", dir)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "rewritten 3, already current 0, failed 0\n")

	r = runCLI(t, "verify", dir, "--identity", a.file)
	require.Equal(t, 0, r.code, r.stdout)
	r = runCLI(t, "show", dir, "2", "--state", "--identity", a.file)
	require.Equal(t, 0, r.code, r.stderr)
	require.JSONEq(t, `{"turn": 2}`, r.stdout)
	r = runCLI(t, "verify", dir)
	require.Equal(t, exitFound, r.code, "no file is readable without the key")
	require.Contains(t, r.stdout, "3 encrypted to a key no identity given opens")

	r = runCLI(t, "rekey", "--to", a.file, "--plaintext", dir)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "rewritten 0, already current 3, failed 0\n")
}

func TestVerifyReportsEachEncryptedFileThatFailsAuthenticationHasNoKeyOrIsPlaintext(t *testing.T) {
	t.Parallel()
	a, c := newKey(t), newKey(t)
	dir := encryptedStore(t, a)
	// Step 2: one byte flipped inside its ciphertext.
	p2 := filepath.Join(dir, "step_00000002.json")
	data, err := os.ReadFile(p2)
	require.NoError(t, err)
	data[len(data)-20] ^= 0x01
	require.NoError(t, os.WriteFile(p2, data, 0o600))
	// Step 4: a file encrypted to another key; step 5: a plaintext one.
	other := filepath.Join(t.TempDir(), "other")
	saveSteps(t, other, 4, checkpoint.Encrypt(c.id))
	plain := filepath.Join(t.TempDir(), "plain")
	saveSteps(t, plain, 5)
	for src, name := range map[string]string{other: "step_00000004.json", plain: "step_00000005.json"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o600))
	}

	r := runCLI(t, "verify", dir, "-v", "--identity", a.file)
	require.Equal(t, exitFound, r.code, r.stderr)
	require.Regexp(t, `(?m)^ok +\S+step_00000001.json$`, r.stdout)
	require.Regexp(t, `(?m)^BAD +\S+step_00000002.json +corrupt checkpoint: \S+step_00000002.json fails authentication`, r.stdout)
	require.Regexp(t, `(?m)^ok +\S+step_00000003.json$`, r.stdout)
	require.Regexp(t, `(?m)^NO KEY +\S+step_00000004.json +.*encrypted to key `+c.kid+`, which none of the 1 identities given opens`, r.stdout)
	require.Regexp(t, `(?m)^PLAINTEXT +\S+step_00000005.json +not encrypted`, r.stdout)
	require.Contains(t, r.stdout, "5 files checked in "+dir+" (layout step/8): 2 ok, 3 bad, 1 encrypted to a key no identity given opens, 1 not encrypted\n")

	r = runCLI(t, "verify", dir, "--json", "--identity", a.file)
	require.Equal(t, exitFound, r.code)
	var rep verifyReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	var problems []string
	for _, f := range rep.Files {
		problems = append(problems, f.Problem)
	}
	require.Equal(t, []string{"", "damaged", "", "no_key", "plaintext"}, problems)
}

// writableRemote is dirRemote with stores opened for writing (rekey).
func writableRemote(root string) Remote {
	return Remote{Scheme: "test", Open: func(ctx context.Context, loc string) (checkpoint.Backend, error) {
		dir := loc
		if name, ok := strings.CutPrefix(loc, "test://"); ok {
			dir = filepath.Join(root, filepath.FromSlash(strings.TrimSuffix(name, "/")))
		}
		return dirstore.Open(dir, dirstore.NoSync())
	}}
}

func TestEncryptedStoresThroughARemote(t *testing.T) {
	t.Parallel()
	a, b := newKey(t), newKey(t)
	dir := encryptedStore(t, a)
	root := filepath.Dir(dir)
	var opened atomic.Int32
	ro := dirRemote(root, &opened)

	r := runRemote(t, ro, "show", "test://store", "latest", "--state", "--identity", a.file)
	require.Equal(t, 0, r.code, r.stderr)
	require.JSONEq(t, `{"turn": 3}`, r.stdout)
	r = runRemote(t, ro, "ls", "test://store", "--identity", a.file)
	require.Equal(t, 0, r.code, r.stderr)
	require.NotContains(t, r.stdout, "unreadable")
	r = runRemote(t, ro, "verify", "test://store")
	require.Equal(t, exitFound, r.code)
	require.Contains(t, r.stderr, "--identity FILE")

	r = runRemote(t, writableRemote(root), "rekey", "--to", b.file, "--identity", a.file, "test://store")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "rekey of test://store to key "+b.kid+": rewritten 3, already current 0, failed 0\n")
	r = runRemote(t, ro, "diff", "test://store", "1", "latest", "--identity", b.file)
	require.Equal(t, exitFound, r.code, r.stderr)
	require.Contains(t, r.stdout, "~ .turn: 1 -> 3\n")

	sessions := encryptedSessions(t, a)
	ro = dirRemote(filepath.Dir(sessions), &opened)
	r = runRemote(t, ro, "sessions", "ls", "test://root", "--identity", a.file)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^a +2 +2 `, r.stdout)
	r = runRemote(t, ro, "verify", "test://root", "--identity", a.file)
	require.Equal(t, 0, r.code, r.stdout)
}

func TestUsageSaysHowToReadEncryptedStores(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "help")
	require.Equal(t, 0, r.code)
	require.Contains(t, r.stdout, "checkpoint keygen [-o FILE]")
	require.Contains(t, r.stdout, "checkpoint rekey  --to FILE [--plaintext] DIR")
	require.Contains(t, r.stdout, "Encrypted stores (checkpoint.Encrypt) are read with --identity FILE")
	require.Contains(t, r.stdout, "CHECKPOINT_IDENTITY")
	for _, cmd := range []string{"ls", "show", "verify", "diff", "prune", "gc", "sessions", "rekey"} {
		r = runCLI(t, "help", cmd)
		require.Contains(t, r.stdout, "\n  --identity FILE\n", cmd)
	}
	r = runCLI(t, "help", "keygen")
	require.NotContains(t, r.stdout, "--identity")
	require.Contains(t, r.stdout, "\n  -o FILE\n")
	r = runCLI(t, "--identity")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "flag needs an argument: -identity")
}

func TestRekeyBesideARunningWriterRewritesNothingAndExitsWith4(t *testing.T) {
	t.Parallel()
	a, b := newKey(t), newKey(t)
	dir := encryptedStore(t, a)
	w, err := checkpoint.Open[map[string]int](dir, checkpoint.Encrypt(a.id))
	require.NoError(t, err)
	defer w.Close()

	for _, args := range [][]string{{"rekey", "--to", b.file, "--identity", a.file, dir}, {"rekey", "--to", b.file, "--identity", a.file, "--wait", "10ms", dir}} {
		r := runCLI(t, args...)
		require.Equal(t, exitLocked, r.code, r.stderr)
		require.Contains(t, r.stderr, "checkpoint rekey: "+dir+" is open by a running writer")
		require.NotContains(t, r.stdout, "rewrote")
	}
	r := runCLI(t, "verify", dir, "--identity", a.file)
	require.Equal(t, 0, r.code, "every file still of key A: %s", r.stdout)

	r = runCLI(t, "rekey", "--to", b.file, "--wait", "forever", dir)
	require.Equal(t, exitUsage, r.code)
}
