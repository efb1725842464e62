package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/s3store"
	"github.com/gocheckpoint/checkpoint/s3store/internal/s3test"
)

// dirFiles returns the files below dir that a copy carries (no hidden
// one: lock, index, temporary files, claims), by their slash-separated
// path from dir, with their bytes.
func dirFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), ".") && p != dir {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = data
		return nil
	}))
	return out
}

// bucketFiles is dirFiles of the objects under prefix in bucket.
func bucketFiles(t *testing.T, client *s3.Client, bucket, prefix string) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	out := map[string][]byte{}
	p := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String(prefix + "/")})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		require.NoError(t, err)
		for _, o := range page.Contents {
			rel := strings.TrimPrefix(*o.Key, prefix+"/")
			if strings.HasPrefix(path.Base(rel), ".") {
				continue
			}
			got, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: o.Key})
			require.NoError(t, err)
			data, err := io.ReadAll(got.Body)
			got.Body.Close()
			require.NoError(t, err)
			out[rel] = data
		}
	}
	return out
}

// copyStore makes a store in a directory: gzip, a rolling file, an error
// checkpoint, a side file, and one damaged checkpoint (step 4).
func copyStore(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	st, err := checkpoint.Open[game](dir, checkpoint.WithLayout("turn", 3), checkpoint.Gzip(), checkpoint.WithRolling(), checkpoint.SaveEvery(3), checkpoint.NoSync())
	require.NoError(t, err)
	g := game{HP: 40}
	for turn := 1; turn <= 10; turn++ {
		g.Turn, g.HP = turn, g.HP-1
		_, _, err := st.Tick(ctx, int64(turn), g)
		require.NoError(t, err)
	}
	_, err = st.SaveError(ctx, 11, g, io.ErrUnexpectedEOF)
	require.NoError(t, err)
	require.NoError(t, st.WriteJSON(ctx, "notes.json", map[string]int{"boss": 3}))
	require.NoError(t, st.Close())
	require.NoError(t, os.Truncate(filepath.Join(dir, "turn_006.json.gz"), 30))
	return dir
}

func TestCpMovesAStoreBetweenADirectoryAndBucketsAndBack(t *testing.T) {
	client, bucket := withBucket(t)
	other := s3test.ForTest(t).Bucket(t, client)
	src := copyStore(t)
	good := dirFiles(t, src)
	delete(good, "turn_006.json.gz")

	// Directory to S3: the damaged checkpoint skipped (exit 1), the rest
	// byte for byte.
	loc := "s3://" + bucket + "/runs/1"
	r := run(t, "cp", src, loc)
	require.Equal(t, 1, r.code, r.stderr)
	require.Contains(t, r.stdout, "SKIPPED (damaged)")
	require.Contains(t, r.stdout, "1 skipped, 0 failed")
	require.Equal(t, good, bucketFiles(t, client, bucket, "runs/1"))
	r = run(t, "verify", loc)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)

	// A rerun finds everything there; a lease is left released.
	r = run(t, "cp", src, loc, "--json")
	require.Equal(t, 1, r.code, r.stderr)
	var rep struct{ Copied, Present int }
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	require.Equal(t, 0, rep.Copied)
	require.Equal(t, len(good), rep.Present)

	// S3 to a directory, and bucket to bucket.
	back := filepath.Join(t.TempDir(), "back")
	r = run(t, "cp", loc, back)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, good, dirFiles(t, back))
	loc2 := "s3://" + other + "/moved/here"
	r = run(t, "cp", loc, loc2)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, good, bucketFiles(t, client, other, "moved/here"))

	// The copy opens as the source does, with a writer on S3.
	b, err := s3store.New(client, other, "moved/here")
	require.NoError(t, err)
	st, err := checkpoint.OpenBackend[game](b, checkpoint.WithLayout("turn", 3))
	require.NoError(t, err)
	got, info, err := st.Latest(context.Background())
	require.NoError(t, err)
	require.Equal(t, int64(11), info.Step)
	require.Equal(t, 10, got.Turn) // the error checkpoint holds the state of turn 10
	require.NoError(t, st.Close())

	// Other bytes under a name at the destination are never replaced.
	key := "runs/1/turn_003.json.gz"
	_, err = client.PutObject(context.Background(), &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: bytes.NewReader([]byte("not these"))})
	require.NoError(t, err)
	r = run(t, "cp", src, loc)
	require.Equal(t, 3, r.code, r.stdout)
	require.Contains(t, r.stderr, "checkpoint cp: failed: "+filepath.Join(src, "turn_003.json.gz")+" to "+loc+"/turn_003.json.gz: checkpoint already exists")
	require.Equal(t, []byte("not these"), bucketFiles(t, client, bucket, "runs/1")["turn_003.json.gz"])
}

func TestCpMovesAnEncryptedRootOfSessionsToABucketAndBack(t *testing.T) {
	ctx := context.Background()
	client, bucket := withBucket(t)
	keyFile := filepath.Join(t.TempDir(), "key.txt")
	r := run(t, "keygen", "-o", keyFile)
	require.Equal(t, 0, r.code, r.stderr)
	data, err := os.ReadFile(keyFile)
	require.NoError(t, err)
	ids, err := age.ParseIdentities(bytes.NewReader(data))
	require.NoError(t, err)
	key := ids[0].(*age.X25519Identity)

	src := filepath.Join(t.TempDir(), "root")
	opts := []checkpoint.Option{checkpoint.Encrypt(key), checkpoint.Zstd(), checkpoint.NoSync()}
	root, err := checkpoint.OpenSessions(src, opts...)
	require.NoError(t, err)
	for i := range 3 {
		s, err := root.New(ctx, map[string]string{"player": string(rune('a' + i))})
		require.NoError(t, err)
		st, err := checkpoint.OpenSessionStore[game](root, s.ID)
		require.NoError(t, err)
		for turn := 1; turn <= 2+i; turn++ {
			_, err := st.Save(ctx, int64(turn), game{Turn: turn})
			require.NoError(t, err)
		}
		require.NoError(t, st.Close())
	}
	_, err = root.Create(ctx, "user:1/thread#2", nil)
	require.NoError(t, err)
	want, err := root.List(ctx)
	require.NoError(t, err)
	require.NoError(t, root.Close())

	// Without the identity nothing verifies: nothing is copied as good.
	loc := "s3://" + bucket + "/campaign"
	r = run(t, "cp", src, loc)
	require.Equal(t, 1, r.code, r.stderr)
	require.Contains(t, r.stdout, "SKIPPED (no_key)")
	require.Contains(t, r.stdout, "0 sessions whole")
	require.Empty(t, bucketFiles(t, client, bucket, "campaign"))

	r = run(t, "cp", "--identity", keyFile, src, loc)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, "4 sessions whole; 0 skipped, 0 failed")
	require.Equal(t, dirFiles(t, src), bucketFiles(t, client, bucket, "campaign"))

	listOf := func(b checkpoint.Backend) []checkpoint.Session {
		r, err := checkpoint.OpenSessionsBackend(b, append(opts, checkpoint.ReadOnly())...)
		require.NoError(t, err)
		defer r.Close()
		list, err := r.List(ctx)
		require.NoError(t, err)
		for i := range list {
			require.NoError(t, list[i].Err)
			list[i].Dir = ""
		}
		return list
	}
	for i := range want {
		want[i].Dir = ""
	}
	b, err := s3store.New(client, bucket, "campaign")
	require.NoError(t, err)
	require.Equal(t, want, listOf(b))

	back := filepath.Join(t.TempDir(), "back")
	r = run(t, "cp", "--identity", keyFile, loc, back)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	require.Equal(t, dirFiles(t, src), dirFiles(t, back))
	r = run(t, "ls", "--identity", keyFile, back)
	require.Equal(t, 0, r.code, r.stderr)
	for _, s := range want {
		require.Contains(t, r.stdout, s.ID)
	}
}
