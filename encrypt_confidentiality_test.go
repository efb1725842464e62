package checkpoint_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest"
	"github.com/gocheckpoint/checkpoint/dirstore"
)

// rawObjects returns every object under b and its child stores, by path,
// as the storage holds it (read without any key).
func rawObjects(t *testing.T, b checkpoint.Backend, prefix string, out map[string][]byte) {
	t.Helper()
	ctx := context.Background()
	objs, err := b.List(ctx)
	require.NoError(t, err)
	for _, o := range objs {
		rc, _, err := b.Open(ctx, o.Name)
		if err != nil {
			continue // a lock, a directory
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		require.NoError(t, err)
		out[prefix+o.Name] = data
	}
	children, err := b.Children(ctx)
	require.NoError(t, err)
	for _, c := range children {
		sub, err := b.Sub(ctx, c, false)
		require.NoError(t, err)
		rawObjects(t, sub, prefix+c+"/", out)
		require.NoError(t, sub.Close())
	}
}

// requireAllSealed checks that every object of objs but a lock is
// encrypted to line's key and holds none of secrets.
func requireAllSealed(t *testing.T, objs map[string][]byte, line string, secrets ...string) {
	t.Helper()
	require.NotEmpty(t, objs)
	for name, data := range objs {
		base := name[strings.LastIndex(name, "/")+1:]
		if base == dirstore.LockName || base == ".sessions.lock" {
			for _, s := range secrets {
				require.NotContains(t, string(data), s, name)
			}
			continue
		}
		require.Truef(t, bytes.HasPrefix(data, []byte(line)), "%s is not encrypted: %q", name, data[:min(len(data), 60)])
		for _, s := range secrets {
			require.NotContains(t, string(data), s, name)
		}
	}
}

// Every object that any write path of an encrypting store or root of
// sessions leaves behind is encrypted, on a local directory and on object
// storage: asynchronous saves, Append and AppendFrom, error and final
// checkpoints, the rolling file, side files, pruning, the index, and the
// sessions' metadata, forks, deletions and claims.
func TestEncryptConfidentialityOfEveryWritePath(t *testing.T) {
	t.Parallel()
	const metaSecret, errSecret, idSecret = "meta-secret-zq", "error-secret-zq", "idsecretzq"
	for _, flavour := range []string{"dir", "mem-remote", "mem-local"} {
		t.Run(flavour, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			id := newIdentity(t)
			var open func() checkpoint.Backend
			switch flavour {
			case "dir":
				dir := t.TempDir()
				open = func() checkpoint.Backend {
					b, err := dirstore.Open(dir, dirstore.NoSync())
					require.NoError(t, err)
					return b
				}
			default:
				var m *backendtest.Mem
				if flavour == "mem-local" {
					m = backendtest.NewMem(backendtest.MemLocal())
				} else {
					m = backendtest.NewMem()
				}
				open = func() checkpoint.Backend {
					b, err := m.Open()
					require.NoError(t, err)
					return b
				}
			}
			root, err := checkpoint.OpenSessionsBackend(open(), checkpoint.Encrypt(id), checkpoint.NoSync())
			require.NoError(t, err)
			defer root.Close()
			sessionID := "user:" + idSecret + "/7"
			_, err = root.Create(ctx, sessionID, map[string]string{"owner": metaSecret})
			require.NoError(t, err)
			require.NoError(t, root.SetMeta(ctx, sessionID, map[string]string{"owner": metaSecret, "more": metaSecret}))
			st, err := checkpoint.OpenSession[secretState](root, sessionID, checkpoint.Async(4), checkpoint.WithRolling(), checkpoint.SaveEvery(5), checkpoint.KeepLast(3))
			require.NoError(t, err)
			for step := int64(1); step <= 12; step++ {
				_, _, err := st.Tick(ctx, step, secretAt(step), checkpoint.WithMeta("who", metaSecret), checkpoint.WithMetric("m", 1))
				require.NoError(t, err)
			}
			_, err = st.Save(ctx, 13, secretAt(13))
			require.NoError(t, err)
			require.NoError(t, st.Flush(ctx))
			_, err = st.Append(ctx, secretAt(14), checkpoint.WithMeta("who", metaSecret))
			require.NoError(t, err)
			_, err = st.AppendFrom(ctx, func(w io.Writer) error {
				_, err := io.WriteString(w, secretMarker)
				return err
			})
			require.NoError(t, err)
			_, err = st.SaveError(ctx, 20, secretAt(20), errors.New(errSecret))
			require.NoError(t, err)
			_, err = st.SaveFinal(ctx, 21, secretAt(21), checkpoint.WithMeta("who", metaSecret))
			require.NoError(t, err)
			require.NoError(t, st.WriteJSON(ctx, "side.json", map[string]string{"x": secretMarker}))
			_, err = st.List(ctx)
			require.NoError(t, err)
			require.NoError(t, st.Close())
			forked, err := root.Fork(ctx, sessionID, 14, map[string]string{"owner": metaSecret})
			require.NoError(t, err)
			gone, err := root.New(ctx, map[string]string{"owner": metaSecret})
			require.NoError(t, err)
			require.NoError(t, root.Delete(ctx, gone.ID))
			fst, err := checkpoint.OpenSession[secretState](root, forked.ID)
			require.NoError(t, err)
			v, _, err := fst.Latest(ctx)
			require.NoError(t, err)
			require.Equal(t, secretAt(14), v)
			require.NoError(t, fst.Close())

			raw := open()
			defer raw.Close()
			objs := map[string][]byte{}
			rawObjects(t, raw, "", objs)
			line := "checkpoint-age-v1 " + checkpoint.KeyID(id.Recipient()) + "\n"
			requireAllSealed(t, objs, line, secretMarker, metaSecret, errSecret, idSecret, `"step"`)
		})
	}
}

// What an interrupted Fork and Create leave (a claim, a half-made child
// store) is encrypted too.
func TestEncryptConfidentialityOfInterruptedSessionCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	id := newIdentity(t)
	m := backendtest.NewMem()
	raw, err := m.Open()
	require.NoError(t, err)
	var failing atomic.Bool
	b := backendtest.Inject(raw, func(op backendtest.Op) error {
		if failing.Load() && (op.Kind == backendtest.OpCreate && strings.HasPrefix(op.Name, "step_") || op.Kind == backendtest.OpRemove) {
			return errors.New("injected")
		}
		return nil
	})
	root, err := checkpoint.OpenSessionsBackend(b, checkpoint.Encrypt(id))
	require.NoError(t, err)
	defer root.Close()
	_, err = root.Create(ctx, "src", map[string]string{"owner": secretMarker})
	require.NoError(t, err)
	st, err := checkpoint.OpenSession[secretState](root, "src")
	require.NoError(t, err)
	_, err = st.Save(ctx, 1, secretAt(1))
	require.NoError(t, err)
	require.NoError(t, st.Close())
	failing.Store(true)
	_, err = root.Fork(ctx, "src", 1, map[string]string{"owner": secretMarker})
	require.Error(t, err)
	_, err = root.Create(ctx, "other", map[string]string{"owner": secretMarker})
	require.NoError(t, err)
	require.Error(t, root.Delete(ctx, "src"))
	failing.Store(false)

	check, err := m.Open()
	require.NoError(t, err)
	defer check.Close()
	objs := map[string][]byte{}
	rawObjects(t, check, "", objs)
	require.Contains(t, objs, "001/.session.claim", "the interrupted fork left no claim: the test proves less than it says")
	requireAllSealed(t, objs, "checkpoint-age-v1 "+checkpoint.KeyID(id.Recipient())+"\n", secretMarker, `"step"`)
}
