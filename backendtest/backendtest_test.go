package backendtest_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest"
	"github.com/stretchr/testify/require"
)

const leaseTTL = 20 * time.Millisecond

// memOpener opens the Mem the mutant tests run the suite on: local (so
// that it has every optional interface the suite checks), with a lease,
// and broken by mutant if it is not "".
func memOpener(mutant string) func(t *testing.T) backendtest.Opener {
	return func(t *testing.T) backendtest.Opener {
		return backendtest.NewMem(backendtest.MemLocal(), backendtest.MemLease(leaseTTL), backendtest.MemMutant(mutant)).Open
	}
}

// mutantEnv names the broken backend TestMutantHost runs the suite on, in
// the child process TestSuiteFailsBrokenBackends starts.
const mutantEnv = "BACKENDTEST_MUTANT"

func TestMutantHost(t *testing.T) {
	mutant := os.Getenv(mutantEnv)
	if mutant == "" {
		t.Skip("run by TestSuiteFailsBrokenBackends")
	}
	backendtest.Run(t, memOpener(mutant), backendtest.LeaseTTL(leaseTTL), backendtest.RewriteInPlace(backendtest.MemRewrite))
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
		{"unsynced-replace-ignores-write-error", "UnsyncedReplaceIsAtomicAndVisible"},
		{"unsynced-remove-says-nothing-gone", "UnsyncedRemoveRemovesAndReports"},
		{"remove-temps-takes-dot-objects", "RemoveTempsNeverRemovesAnObject"},
		{"lock-state-never-held", "LockStateNeverHidesAHolderNorInventsOne"},
		{"create-replaces", "GroupCreateIsWholeVisibleAndNeverReplaces"},
		{"handles-not-shared", "GroupCreateIsWholeVisibleAndNeverReplaces"},
		{"failed-write-publishes", "GroupCreateThatFailsLeavesNothing"},
		{"ctx-ignored", "GroupCreateThatFailsLeavesNothing"},
		{"names-unchecked", "GroupCreateThatFailsLeavesNothing"},
		{"names-unchecked", "GroupCommitKeepsWhatItCommits"},
		{"commit-takes-back", "GroupCommitKeepsWhatItCommits"},
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

// A backend wrapped by Inject with no fault keeps the contract, and a
// fault fails exactly the operation it names.
func TestInjectKeepsTheContract(t *testing.T) {
	backendtest.Run(t, func(t *testing.T) backendtest.Opener {
		open := memOpener("")(t)
		return func() (checkpoint.Backend, error) {
			b, err := open()
			if err != nil {
				return nil, err
			}
			return backendtest.Inject(b, func(backendtest.Op) error { return nil }), nil
		}
	})
}

func TestInjectFailsTheOperationItNames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := memOpener("")(t)()
	require.NoError(t, err)
	boom := errors.New("boom")
	var seen []backendtest.Op
	w := backendtest.Inject(b, func(op backendtest.Op) error {
		seen = append(seen, op)
		if op.Kind == backendtest.OpRemove && op.Name == "b" || op.Kind == backendtest.OpCreate && op.Name == "c" {
			return boom
		}
		return nil
	})
	for _, n := range []string{"a", "b"} {
		_, err := w.Create(ctx, n, func(io.Writer) error { return nil })
		require.NoError(t, err)
	}
	_, err = w.Create(ctx, "c", func(io.Writer) error { t.Error("a failed Create wrote"); return nil })
	require.ErrorIs(t, err, boom)
	_, err = b.Stat(ctx, "c")
	require.ErrorIs(t, err, fs.ErrNotExist, "a failed Create reached the backend")
	gone, err := w.Remove(ctx, "a", "b")
	require.ErrorIs(t, err, boom)
	require.Equal(t, []bool{true, false}, gone, "one failed removal stops no other")
	_, err = b.Stat(ctx, "b")
	require.NoError(t, err, "a failed removal reached the backend")
	require.Equal(t, backendtest.Op{Kind: backendtest.OpRemove, Store: b.Locate(""), Name: "b"}, seen[len(seen)-1])
	require.Equal(t, "Remove", backendtest.OpRemove.String())
}
