package s3store

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/dirstore"
	"github.com/gocheckpoint/checkpoint/internal/killtest"
)

// copierRole copies the directory Args[2] into the bucket Args[0] under
// the prefix Args[1] with checkpoint.Copy (a lease of childTTL),
// acknowledging each file handled; then it waits to be killed or stopped.
var copierRole = killtest.Register("s3-copier", func(c *killtest.Child) int {
	stop := c.Stopping()
	s := server{endpoint: os.Getenv(envEndpoint), key: os.Getenv(envKey), secret: os.Getenv(envSecret)}
	src, err := dirstore.Open(c.Args[2], dirstore.ReadOnly())
	if err != nil {
		c.Fail(2, err)
	}
	dst, err := New(s.client(&counter{rt: http0()}), c.Args[0], c.Args[1], LeaseTTL(childTTL))
	if err != nil {
		c.Fail(2, err)
	}
	_, err = checkpoint.Copy(context.Background(), dst, src, checkpoint.WaitLock(time.Minute),
		checkpoint.OnCopyProgress(func(p checkpoint.CopyProgress) {
			if p.Done > 0 {
				c.Ack(p.Done)
			}
		}))
	c.Printf("done %v", err)
	<-stop
	return 0
})

// objectsUnder returns the objects under prefix in f's bucket that a copy
// carries (no hidden one), by their key below prefix, with their bytes.
func objectsUnder(t *testing.T, f *fixture, prefix string) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	out := map[string][]byte{}
	p := s3.NewListObjectsV2Paginator(f.client, &s3.ListObjectsV2Input{Bucket: &f.bucket, Prefix: aws.String(prefix + "/")})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		require.NoError(t, err)
		for _, o := range page.Contents {
			rel := strings.TrimPrefix(*o.Key, prefix+"/")
			if strings.HasPrefix(path.Base(rel), ".") {
				continue
			}
			got, err := f.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &f.bucket, Key: o.Key})
			require.NoError(t, err)
			data, err := io.ReadAll(got.Body)
			got.Body.Close()
			require.NoError(t, err)
			out[rel] = data
		}
	}
	return out
}

// localFiles is objectsUnder of a directory.
func localFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.IsDir() {
			data, err := os.ReadFile(p)
			require.NoError(t, err)
			rel, _ := filepath.Rel(dir, p)
			out[filepath.ToSlash(rel)] = data
		}
		return nil
	}))
	return out
}

// TestCopyToS3KilledAtAnyInstantShowsNothingHalfMadeAndARerunCompletesIt
// kills a copy of a directory to S3 at random instants: what a reader
// then sees at the destination (a store's checkpoints, a root's sessions)
// is whole and the source's, and a rerun, which takes the dead copy's
// lease over once it expires, makes the destination the source's good
// files byte for byte.
func TestCopyToS3KilledAtAnyInstantShowsNothingHalfMadeAndARerunCompletesIt(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 2727))
	for _, sessions := range []bool{false, true} {
		src := filepath.Join(t.TempDir(), "src")
		total := 60
		if sessions {
			r, err := checkpoint.OpenSessions(src, checkpoint.NoSync())
			require.NoError(t, err)
			for range 4 {
				s, err := r.New(ctx, nil)
				require.NoError(t, err)
				saveLocal(t, filepath.Join(src, s.ID), 15)
			}
			require.NoError(t, r.Close())
			total = 4 * 16
		} else {
			saveLocal(t, src, total)
		}
		want := localFiles(t, src)
		for round := range killtest.Kills(t, 2) {
			prefix := fmt.Sprintf("copy-%v-%d", sessions, round)
			p := copierRole.Command(t, f.bucket, prefix, src)
			p.Cmd.Env = append(os.Environ(), envEndpoint+"="+f.srv.endpoint, envKey+"="+f.srv.key, envSecret+"="+f.srv.secret)
			p.Start(t)
			p.AwaitAcks(t, 1+rng.IntN(total-2))
			p.Kill(t)

			// What a reader sees is whole.
			stores := map[string]string{"": prefix}
			if sessions {
				r, err := checkpoint.OpenSessionsBackend(f.backend(prefix), checkpoint.ReadOnly())
				require.NoError(t, err)
				list, err := r.List(ctx)
				require.NoError(t, err)
				require.NoError(t, r.Close())
				stores = map[string]string{}
				for _, s := range list {
					require.NoError(t, s.Err)
					stores[s.ID+"/"] = prefix + "/" + s.ID
					require.Equal(t, 15, s.Checkpoints, "a listed session is whole")
				}
				t.Logf("round %d: killed after %d files; %d sessions listed", round, len(p.Acks()), len(list))
			}
			for rel, pfx := range stores {
				st, err := checkpoint.OpenBackend[state](f.backend(pfx), checkpoint.ReadOnly())
				require.NoError(t, err)
				infos, err := st.List(ctx)
				require.NoError(t, err)
				for _, info := range infos {
					_, _, err := st.LoadExact(ctx, info)
					require.NoError(t, err, "every listed checkpoint verifies")
					require.Contains(t, want, rel+info.Name())
				}
				require.NoError(t, st.Close())
				if !sessions {
					t.Logf("round %d: killed after %d files; %d checkpoints listed", round, len(p.Acks()), len(infos))
				}
			}

			// A rerun takes the dead copy's lease over and completes it.
			res, err := checkpoint.Copy(ctx, f.backend(prefix, LeaseTTL(childTTL)), dirBackendOf(t, src), checkpoint.WaitLock(4*childTTL))
			require.NoError(t, err, "round %d", round)
			require.Equal(t, total, res.Copied+res.Present)
			require.Equal(t, want, objectsUnder(t, f, prefix))
		}
	}
}

func dirBackendOf(t *testing.T, dir string) checkpoint.Backend {
	t.Helper()
	b, err := dirstore.Open(dir, dirstore.ReadOnly())
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	return b
}

// saveLocal saves steps 1..n to a store in the directory dir.
func saveLocal(t *testing.T, dir string, n int) {
	t.Helper()
	st, err := checkpoint.Open[state](dir, checkpoint.NoSync(), checkpoint.Gzip())
	require.NoError(t, err)
	for i := 1; i <= n; i++ {
		_, err := st.Save(context.Background(), int64(i), state{})
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())
}
