package names

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// sampleIDs are session IDs of every kind: IDs of earlier releases
// (their own names), Windows device names and trailing dots among them
// (mapped), and strings no file system takes as they are.
var sampleIDs = []string{
	"001", "run-7", "a.b_c", "Run", "run", "CON", "con", "Nul.txt", "COM1", "lpt0", "COM10", "a.", "x",
	"user:42/thread#7", "Ünïcode", "ÜNÏCODE", "..", ".", "a/b", `a\b`, "a b", "A B", " ", "trail ",
	"\x00", ".hidden", ".staging-x", ".sessions.lock", ".session.claim", "session.json",
	strings.Repeat("é", 256), strings.Repeat("x", 64), strings.Repeat("x", 65), strings.Repeat("x", 1024),
	Mapped("a b"), strings.ToUpper(Mapped("a b")), Mapped("x") + ".",
}

// checkName checks what SessionName promises of the name of id.
func checkName(t *testing.T, id string) string {
	t.Helper()
	name := SessionName(id)
	if !IsSessionName(name) || !Plain(name) || !Portable(name) {
		t.Fatalf("%q is stored under %q, which is no portable session name", id, name)
	}
	if Legacy(id) && Portable(id) {
		if name != id {
			t.Fatalf("%q, an ID of earlier releases, is stored under %q", id, name)
		}
		return name
	}
	if !IsMapped(name) || len(name) <= MaxLegacyID || len(name) > 97 || strings.ToLower(name) != name {
		t.Fatalf("%q is stored under %q, which is no mapped name", id, name)
	}
	return name
}

func TestSessionNamesAreOwnOrMapped(t *testing.T) {
	t.Parallel()
	seen := map[string]string{}
	for _, id := range sampleIDs {
		name := checkName(t, id)
		if other, ok := seen[strings.ToLower(name)]; ok && !(Legacy(id) && Legacy(other)) {
			t.Fatalf("%q and %q are stored under names equal but for case: %q", id, other, name)
		}
		seen[strings.ToLower(name)] = id
	}
	for id, want := range map[string]string{
		"user:42/thread#7": "user_42_thread_7-",
		"Ünïcode":          "n_code-",
		"..":               "id-",
		"CON":              "con-",
	} {
		if name := SessionName(id); !strings.HasPrefix(name, want) {
			t.Errorf("%q is stored under %q, want %q and a hash", id, name, want+"...")
		}
	}
	if got := SessionName(Mapped("a b")); got == Mapped("a b") {
		t.Fatal("an ID equal to another's mapped name is stored under it")
	}
}

func TestIsMappedTakesOnlyMappedNames(t *testing.T) {
	t.Parallel()
	m := Mapped("a b")
	for _, name := range []string{"", "001", m[:len(m)-1], m + "0", strings.ToUpper(m), "-" + m[len(m)-64:], "a.b" + m[len(m)-65:], strings.Repeat("a", 33) + m[len(m)-65:]} {
		if IsMapped(name) {
			t.Errorf("IsMapped(%q)", name)
		}
	}
	if !IsMapped(m) || !IsMapped(strings.Repeat("a", 32)+m[len(m)-65:]) {
		t.Error("a mapped name is not taken")
	}
}

func TestPortable(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"CON", "con", "Prn", "aux.txt", "NUL", "nul.tar.gz", "COM0", "com9", "LPT1", "a.", "x..", "001."} {
		if Portable(s) {
			t.Errorf("Portable(%q)", s)
		}
	}
	for _, s := range []string{"console", "COM", "COM10", "LPT", "nul_", "con-1", "a.b", "001"} {
		if !Portable(s) {
			t.Errorf("!Portable(%q)", s)
		}
	}
}

// FuzzSessionName checks that the map from IDs to stored names is
// injective, even ignoring case but for two IDs of earlier releases (which
// were stored that way before), and that each name round-trips (an ID
// that is its own name) or verifies (a mapped name, recomputed from the
// ID session.json records).
func FuzzSessionName(f *testing.F) {
	for i, a := range sampleIDs {
		f.Add(a, sampleIDs[(i+1)%len(sampleIDs)])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if a == "" || b == "" || !utf8.ValidString(a) || !utf8.ValidString(b) {
			return
		}
		na, nb := checkName(t, a), checkName(t, b)
		if na == a && SessionName(na) != a {
			t.Fatalf("%q does not round-trip", a)
		}
		if IsMapped(na) && SessionName(a) != na {
			t.Fatalf("%q does not verify against %q", a, na)
		}
		if a == b {
			return
		}
		if na == nb {
			t.Fatalf("%q and %q share the stored name %q", a, b, na)
		}
		if strings.EqualFold(na, nb) && !(Legacy(a) && Legacy(b)) {
			t.Fatalf("%q and %q are stored under %q and %q, equal but for case", a, b, na, nb)
		}
	})
}
