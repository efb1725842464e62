package checkpoint_test

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest"
)

// gated wraps a Backend and calls hook before each Create of a child
// store's object; hook may block, fail the call (non-nil error) or let it
// through.
type gated struct {
	checkpoint.Backend
	child string
	hook  func(child, name string) error
}

func (g gated) Create(ctx context.Context, name string, write func(io.Writer) error) (checkpoint.Object, error) {
	if g.hook != nil {
		if err := g.hook(g.child, name); err != nil {
			return checkpoint.Object{}, err
		}
	}
	return g.Backend.Create(ctx, name, write)
}

func (g gated) Sub(ctx context.Context, name string, create bool) (checkpoint.Backend, error) {
	b, err := g.Backend.Sub(ctx, name, create)
	if err != nil {
		return nil, err
	}
	return gated{Backend: b, child: name, hook: g.hook}, nil
}

// TestCreatedSessionNeverHoldsAForksCheckpoints: a Create that goes on over
// another creation's claim holds no claim of its own; when that creation
// fails and removes its claim, a Fork claims the same ID and fills it, and
// the Create publishes session.json over the fork's checkpoints. The new,
// empty session then shows the parent's checkpoints (and keeps them if the
// fork is killed before it cleans up): two sessions were made in one ID.
func TestCreatedSessionNeverHoldsAForksCheckpoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := backendtest.NewMem(backendtest.MemNoSync())
	open := func(hook func(child, name string) error) *checkpoint.Sessions {
		b, err := m.Open()
		require.NoError(t, err)
		r, err := checkpoint.OpenSessionsBackend(gated{Backend: b, hook: hook})
		require.NoError(t, err)
		t.Cleanup(func() { r.Close() })
		return r
	}
	setup := open(nil)
	_, err := setup.Create(ctx, "001", nil)
	require.NoError(t, err)
	playSession(t, setup, "001", 2)

	aAt, aGo := make(chan struct{}), make(chan struct{})
	bAt, bGo := make(chan struct{}), make(chan struct{})
	fAt, fGo := make(chan struct{}), make(chan struct{})
	defer close(fGo)
	at := func(ch, gate chan struct{}, fail error) func(child, name string) error {
		return func(child, name string) error {
			if child != "002" || name != "session.json" {
				return nil
			}
			close(ch)
			<-gate
			return fail
		}
	}
	rA := open(at(aAt, aGo, errors.New("injected: A fails to publish")))
	rB := open(at(bAt, bGo, nil))
	rF := open(at(fAt, fGo, nil))

	aDone := make(chan error, 1)
	go func() { _, err := rA.New(ctx, nil); aDone <- err }()
	<-aAt // A holds the claim of 002 and is about to publish
	type result struct {
		s   checkpoint.Session
		err error
	}
	bDone := make(chan result, 1)
	go func() { s, err := rB.Create(ctx, "002", nil); bDone <- result{s, err} }()
	<-bAt // B went on over A's claim
	close(aGo)
	require.Error(t, <-aDone) // A fails and removes its claim
	fDone := make(chan result, 1)
	go func() { s, err := rF.Fork(ctx, "001", 2, nil); fDone <- result{s, err} }()
	select {
	case <-fAt: // F claimed 002 and filled it
	case r := <-fDone:
		t.Skipf("the fork did not take 002: %v %v", r.s.ID, r.err)
	}
	close(bGo)
	b := <-bDone
	require.NoError(t, b.err)
	require.Equal(t, "002", b.s.ID)
	// What a kill -9 of the fork at this instant leaves for good:
	got, err := setup.Get(ctx, "002")
	require.NoError(t, err)
	require.Zero(t, got.Checkpoints, "the session Create made holds checkpoints it never saved (the fork's)")
	require.Zero(t, b.s.Checkpoints, "Create returned a session holding the fork's checkpoints")
}
