package backendtest_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest"
)

const leaseTTL = 20 * time.Millisecond

func memOpener(mutant string) func(t *testing.T) backendtest.Opener {
	return func(t *testing.T) backendtest.Opener {
		return newMemStore(mutant, leaseTTL).open
	}
}

// A backend that keeps the contract and is no directory passes.
func TestMemBackendConforms(t *testing.T) {
	backendtest.Run(t, memOpener(""), backendtest.LeaseTTL(leaseTTL), backendtest.RewriteInPlace(memRewrite))
}

func memRewrite(t *testing.T, b checkpoint.Backend, name string, p []byte) {
	b.(*memBackend).rewrite(name, p)
}

// mutantEnv names the broken backend TestMutantHost runs the suite on, in
// the child process TestSuiteFailsBrokenBackends starts.
const mutantEnv = "BACKENDTEST_MUTANT"

func TestMutantHost(t *testing.T) {
	mutant := os.Getenv(mutantEnv)
	if mutant == "" {
		t.Skip("run by TestSuiteFailsBrokenBackends")
	}
	backendtest.Run(t, memOpener(mutant), backendtest.LeaseTTL(leaseTTL), backendtest.RewriteInPlace(memRewrite))
}

// Each broken promise fails the subtest that checks it: the suite cannot
// pass a backend that breaks it.
func TestSuiteFailsBrokenBackends(t *testing.T) {
	for _, c := range []struct{ mutant, subtest string }{
		{"create-replaces", "CreateNeverReplaces"},
		{"create-replaces", "CreateRaceHasOneWinner"},
		{"create-no-check", "CreateRaceHasOneWinner"},
		{"failed-write-publishes", "FailedCreateLeavesNothing"},
		{"failed-write-publishes", "FailedReplaceKeepsOld"},
		{"ctx-ignored", "CancelledCreateLeavesNothing"},
		{"replace-ignores-version", "ReplaceConflictChangesNothing"},
		{"replace-ignores-version", "ReplaceNoObject"},
		{"version-by-size", "VersionChangesOnEveryWrite"},
		{"torn-replace", "ReplaceIsAtomicToReaders"},
		{"torn-replace", "OpenStreamIsOneObject"},
		{"missing-not-notexist", "MissingIsNotExist"},
		{"list-one-page", "ListPastOnePage"},
		{"list-children", "ListExcludesChildren"},
		{"children-lists-lazy", "ChildrenListsChildStores"},
		{"remove-missing-fails", "RemoveReportsEachName"},
		{"rename-overwrites", "RenameRefusesExisting"},
		{"rename-checks-then-moves", "RenameNeverReplacesACreate"},
		{"version-kept-on-rewrite", "VersionChangesOnRewriteBehindTheBackend"},
		{"lock-per-handle", "LockExcludesOtherWriters"},
		{"lock-per-handle", "LockRaceHasOneWinner"},
		{"lease-never-expires", "AbandonedLeaseExpires"},
		{"lock-global", "LockIsPerStore"},
		{"version-per-call", "VersionIsStable"},
		{"version-per-call", "CreateRoundTripsBytes"},
		{"open-zero-modtime", "OpenAgreesWithStat"},
		{"early-close-fails", "OpenEarlyClose"},
		{"rename-copies", "RenameMoves"},
		{"sub-shares-parent", "ChildrenAreSeparateStores"},
		{"locate-constant", "LocateIsDistinct"},
		{"names-unchecked", "NamesOutsideTheNamespaceRefused"},
		{"handles-not-shared", "WritesVisibleToOtherHandles"},
	} {
		t.Run(c.mutant+"/"+c.subtest, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestMutantHost$/^"+c.subtest+"$", "-test.count=1", "-test.v", "-test.timeout=2m")
			cmd.Env = append(os.Environ(), mutantEnv+"="+c.mutant)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a backend broken by %s:\n%s", c.mutant, out)
			}
			if !strings.Contains(string(out), "--- FAIL: TestMutantHost/"+c.subtest) {
				t.Fatalf("%s did not fail %s:\n%s", c.mutant, c.subtest, out)
			}
			t.Logf("%s", out)
		})
	}
}
