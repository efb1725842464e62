package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/internal/cli"
	"github.com/gocheckpoint/checkpoint/s3store"
	"github.com/gocheckpoint/checkpoint/s3store/internal/s3test"
)

type result struct {
	stdout, stderr string
	code           int
}

// run runs the command as main does, with a remote made afresh, so that
// the AWS environment the test set is read.
func run(t *testing.T, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := cli.Run(args, &stdout, &stderr, s3Remote())
	return result{stdout.String(), stderr.String(), code}
}

// awsEnv points config.LoadDefaultConfig at srv through the standard AWS
// environment variables only: no shared file of the machine counts. The
// endpoint names the host localhost, not 127.0.0.1, so that a client that
// addressed buckets by host name (BUCKET.localhost) rather than by path,
// which the SDK does not do for an IP address, would fail.
func awsEnv(t *testing.T, srv *s3test.Server) {
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		if k == "AWS_ENDPOINT_URL_S3" {
			v = strings.Replace(v, "//127.0.0.1:", "//localhost:", 1)
		}
		t.Setenv(k, v)
	}
	none := filepath.Join(t.TempDir(), "none")
	t.Setenv("AWS_CONFIG_FILE", none)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", none)
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv("AWS_SESSION_TOKEN", "")
}

type game struct {
	Turn int      `json:"turn"`
	HP   int      `json:"hp"`
	Log  []string `json:"log"`
}

// withBucket starts the server, points the AWS environment at it and
// returns a client and a bucket of the test's own.
func withBucket(t *testing.T) (*s3.Client, string) {
	srv := s3test.ForTest(t)
	awsEnv(t, srv)
	client := srv.Client(nil)
	return client, srv.Bucket(t, client)
}

func TestCommandsReadAStoreInS3(t *testing.T) {
	ctx := context.Background()
	client, bucket := withBucket(t)
	loc := "s3://" + bucket + "/runs/1"

	b, err := s3store.New(client, bucket, "runs/1")
	require.NoError(t, err)
	st, err := checkpoint.OpenBackend[game](b, checkpoint.WithLayout("turn", 3))
	require.NoError(t, err)
	g := game{HP: 12}
	for turn := 1; turn <= 3; turn++ {
		g.Turn, g.HP, g.Log = turn, g.HP-turn, append(g.Log, "turn "+string(rune('0'+turn)))
		_, err := st.Save(ctx, int64(turn), g)
		require.NoError(t, err)
	}

	// The reading commands work beside the writer, which holds the lease.
	r := run(t, "ls", loc)
	require.Equal(t, 0, r.code, r.stderr)
	require.Empty(t, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 4, r.stdout)
	require.Regexp(t, `^STEP +KIND +TIME +SIZE +COMPRESSED +FILE +META$`, lines[0])
	for i, line := range lines[1:] {
		require.Regexp(t, `^`+string(rune('1'+i))+` +step +\S+ \(.*\) +\d+ B +no +turn_00`+string(rune('1'+i))+`\.json$`, line)
	}

	r = run(t, "ls", "--json", loc)
	require.Equal(t, 0, r.code, r.stderr)
	var infos []checkpoint.Info
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &infos))
	require.Len(t, infos, 3)
	require.Equal(t, loc+"/turn_002.json", infos[1].Location)

	r = run(t, "show", loc, "latest", "--state")
	require.Equal(t, 0, r.code, r.stderr)
	var got game
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
	require.Equal(t, g, got)

	r = run(t, "diff", loc, "1", "latest")
	require.Equal(t, 1, r.code, r.stderr)
	require.Contains(t, r.stdout, "--- step 1 (step) "+loc+"/turn_001.json\n+++ step 3 (step) "+loc+"/turn_003.json\n")
	require.Contains(t, r.stdout, "~ .hp: 11 -> 6\n")

	r = run(t, "verify", loc)
	require.Equal(t, 0, r.code, r.stderr+r.stdout)
	require.Equal(t, "3 files checked in "+loc+" (layout turn/3): 3 ok, 0 bad\n", r.stdout)

	// prune takes the lease as a writer would: not while the writer runs.
	r = run(t, "prune", loc, "--keep-last", "1")
	require.Equal(t, 4, r.code, r.stdout)
	require.Contains(t, r.stderr, loc+" is open by a running writer")
	require.NoError(t, st.Close())

	// A damaged newest checkpoint, written by hand: verify names it by its
	// URL, show latest passes over it to the newest that loads.
	_, err = client.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String("runs/1/turn_004.json"), Body: strings.NewReader(`{"format":2,"step":4,"kind":"step","state":{}`)})
	require.NoError(t, err)
	r = run(t, "verify", loc)
	require.Equal(t, 1, r.code, r.stderr)
	require.Regexp(t, `(?m)^BAD +`+loc+`/turn_004\.json +`, r.stdout)
	r = run(t, "show", loc, "latest")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "file:       "+loc+"/turn_003.json\n")
	require.Contains(t, r.stderr, "note: skipped "+loc+"/turn_004.json")

	// With the writer gone, prune takes the lease, removes, releases it
	// (the damaged step 4 counts for nothing toward --keep-last).
	r = run(t, "prune", loc, "--keep-last", "2")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "removed 1 of 4 checkpoints")
	r = run(t, "ls", "--json", loc)
	require.Equal(t, 0, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &infos))
	require.Len(t, infos, 3)
	require.Equal(t, int64(2), infos[0].Step)
	// gc too takes the lease and releases it; S3 has no temporary files.
	r = run(t, "gc", loc)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "nothing to remove in "+loc+" (layout turn/3)\n", r.stdout)
	// and both released it: a writer opens the store at once.
	b, err = s3store.New(client, bucket, "runs/1")
	require.NoError(t, err)
	st, err = checkpoint.OpenBackend[game](b, checkpoint.WithLayout("turn", 3))
	require.NoError(t, err)
	require.NoError(t, st.Close())

	// One level too high: the prefixes that hold checkpoints are named.
	r = run(t, "verify", "s3://"+bucket+"/runs")
	require.Equal(t, 3, r.code, r.stdout)
	require.Contains(t, r.stderr, "no checkpoints in s3://"+bucket+"/runs (layout step/8)")
	require.Contains(t, r.stderr, "these prefixes hold checkpoints: "+loc)
}

func TestMissingBucketAndBadLocationsAreNamed(t *testing.T) {
	srv := s3test.ForTest(t)
	awsEnv(t, srv)
	r := run(t, "ls", "s3://no-such-bucket-9f3a/runs")
	require.Equal(t, 3, r.code, r.stdout)
	require.Contains(t, r.stderr, "s3://no-such-bucket-9f3a/runs/")
	require.Contains(t, r.stderr, "NoSuchBucket")

	// A prefix that would leave its parent is refused, never cleaned into
	// another one (runs/.. is not the bucket's root).
	for _, loc := range []string{"s3://", "s3:///runs", "s3://bucket//runs", "s3://bucket/runs/..", "s3://bucket/runs/../other", "s3://bucket/./runs"} {
		r = run(t, "ls", loc)
		require.Equal(t, 2, r.code, loc)
		require.Contains(t, r.stderr, loc, loc)
	}
}

func TestParseLocation(t *testing.T) {
	t.Parallel()
	for loc, want := range map[string][2]string{
		"s3://b": {"b", ""}, "s3://b/": {"b", ""}, "s3://b/runs/42": {"b", "runs/42"}, "s3://b/runs/42/": {"b", "runs/42"}, "S3://b/p": {"b", "p"},
		// The prefix is the key's bytes, not URL-decoded.
		"s3://b/runs+1/a b/100%2B/ü": {"b", "runs+1/a b/100%2B/ü"},
	} {
		bucket, prefix, err := parseLocation(loc)
		require.NoError(t, err, loc)
		require.Equal(t, want, [2]string{bucket, prefix}, loc)
	}
}

// sessionsInS3 makes a root of sessions at s3://BUCKET/campaigns holding
// one session of turns 1 to turns, and returns the bucket and the session.
func sessionsInS3(t *testing.T, turns int) (string, checkpoint.Session) {
	ctx := context.Background()
	client, bucket := withBucket(t)
	b, err := s3store.New(client, bucket, "campaigns")
	require.NoError(t, err)
	root, err := checkpoint.OpenSessionsBackend(b)
	require.NoError(t, err)
	defer root.Close()
	s, err := root.New(ctx, map[string]string{"players": "3"})
	require.NoError(t, err)
	st, err := checkpoint.OpenSessionStore[game](root, s.ID)
	require.NoError(t, err)
	for turn := 1; turn <= turns; turn++ {
		_, err := st.Save(ctx, int64(turn), game{Turn: turn, HP: 10 - turn})
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())
	return bucket, s
}

func TestCommandsReadARootOfSessionsInS3(t *testing.T) {
	bucket, s := sessionsInS3(t, 2)

	loc := "s3://" + bucket + "/campaigns"
	r := run(t, "ls", loc)
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^`+s.ID+` +2 +2 +\S+ \(.*\) +\S+ \(.*\) +- +players=3$`, r.stdout)

	r = run(t, "verify", loc, "-v")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, loc+"/"+s.ID+"/session.json\n")
	require.Contains(t, r.stdout, "3 files checked in "+loc+" (layout step/8): 3 ok, 0 bad\n")

	r = run(t, "ls", "--json", loc+"/"+s.ID)
	require.Equal(t, 0, r.code, r.stderr)
	var infos []checkpoint.Info
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &infos))
	require.Len(t, infos, 2)
}

// The tool judges a running writer's lease by the writer's LeaseTTL, not
// by its own default: what it says of the lease is the writer's TTL.
func TestLockedStoreIsReportedWithTheWritersLeaseTTL(t *testing.T) {
	ctx := context.Background()
	client, bucket := withBucket(t)
	b, err := s3store.New(client, bucket, "runs/1", s3store.LeaseTTL(time.Second))
	require.NoError(t, err)
	st, err := checkpoint.OpenBackend[game](b)
	require.NoError(t, err)
	defer st.Close()
	_, err = st.Save(ctx, 1, game{Turn: 1})
	require.NoError(t, err)
	loc := "s3://" + bucket + "/runs/1"
	r := run(t, "gc", loc)
	require.Equal(t, 4, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stderr, loc+" is open by a running writer")
	require.Contains(t, r.stderr, "it expires when it has gone 1s without renewal")
}

// The usage of this build says that it reads s3:// locations, beside
// directories, and how it reaches them.
func TestUsageSaysItReadsS3Locations(t *testing.T) {
	for _, args := range [][]string{{"help"}, {}} {
		r := run(t, args...)
		out := r.stdout + r.stderr
		require.Contains(t, out, "checkpoint inspects and maintains checkpoint directories and the stores at s3:// locations\n")
		require.Contains(t, out, "DIR may be s3://BUCKET/PREFIX")
		require.Contains(t, out, "AWS_ENDPOINT_URL_S3")
		require.Contains(t, out, "DIR is a store's directory or a root of sessions.")
	}
}

// The S3 build reads an encrypted store in a bucket with --identity, says
// which key is missing without it, and rotates it to a new key with rekey.
func TestCommandsReadAndRekeyAnEncryptedStoreInS3(t *testing.T) {
	ctx := context.Background()
	client, bucket := withBucket(t)
	loc := "s3://" + bucket + "/secret"
	dir := t.TempDir()
	oldFile, newFile := filepath.Join(dir, "old.txt"), filepath.Join(dir, "new.txt")
	for _, f := range []string{oldFile, newFile} {
		r := run(t, "keygen", "-o", f)
		require.Equal(t, 0, r.code, r.stderr)
	}
	readKey := func(file string) *age.X25519Identity {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		ids, err := age.ParseIdentities(bytes.NewReader(data))
		require.NoError(t, err)
		return ids[0].(*age.X25519Identity)
	}
	oldKey, newKey := readKey(oldFile), readKey(newFile)

	b, err := s3store.New(client, bucket, "secret")
	require.NoError(t, err)
	st, err := checkpoint.OpenBackend[game](b, checkpoint.Encrypt(oldKey))
	require.NoError(t, err)
	for turn := 1; turn <= 3; turn++ {
		_, err := st.Save(ctx, int64(turn), game{Turn: turn, Log: []string{"the secret plan"}})
		require.NoError(t, err)
	}
	require.NoError(t, st.Close())

	r := run(t, "show", loc, "latest", "--state")
	require.NotEqual(t, 0, r.code)
	require.Contains(t, r.stderr, checkpoint.KeyID(oldKey.Recipient()))
	require.Contains(t, r.stderr, "--identity")

	r = run(t, "show", "--identity", oldFile, loc, "latest", "--state")
	require.Equal(t, 0, r.code, r.stderr)
	var got game
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
	require.Equal(t, 3, got.Turn)

	r = run(t, "rekey", "--identity", oldFile, "--to", newFile, loc)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "rewritten 3, already current 0, failed 0")

	t.Setenv("CHECKPOINT_IDENTITY", newFile)
	r = run(t, "verify", loc)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	// The old key alone no longer reads the store: ls says which key it wants.
	r = run(t, "ls", "--identity", oldFile, loc)
	require.Contains(t, r.stderr, checkpoint.KeyID(newKey.Recipient()))
}

// serve on s3:// reads a root of sessions in S3 through the same API as a
// directory: the sessions, a timeline, a checkpoint's state and a diff.
func TestServeBrowsesARootOfSessionsInS3(t *testing.T) {
	bucket, s := sessionsInS3(t, 3)
	sctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	stderr := new(lockedBuffer)
	go func() {
		done <- cli.RunContext(sctx, []string{"serve", "--write", "s3://" + bucket + "/campaigns"}, pw, stderr, s3Remote())
		pw.Close()
	}()
	defer func() { cancel(); <-done }()
	line, err := bufio.NewReader(pr).ReadString('\n')
	require.NoError(t, err, stderr.String())
	go io.Copy(io.Discard, pr)
	u, err := url.Parse(strings.TrimSpace(strings.TrimPrefix(line, "checkpoint serve: ")))
	require.NoError(t, err)
	token := u.Query().Get("token")
	get := func(p string, v any) int {
		resp, err := http.Get(u.Scheme + "://" + u.Host + "/" + p + "&token=" + token)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
		return resp.StatusCode
	}
	var sessions struct {
		Sessions []struct{ Key, ID string }
	}
	require.Equal(t, 200, get("api/sessions?", &sessions))
	require.Len(t, sessions.Sessions, 1)
	require.Equal(t, s.ID, sessions.Sessions[0].ID)
	key := url.QueryEscape(sessions.Sessions[0].Key)
	var tl struct {
		Location    string
		Checkpoints []struct{ File string }
	}
	require.Equal(t, 200, get("api/timeline?session="+key, &tl))
	require.Len(t, tl.Checkpoints, 3)
	require.Equal(t, "s3://"+bucket+"/campaigns/"+s.ID+"/", tl.Location)
	var node struct {
		Children []struct {
			Key   string
			Value json.RawMessage
		}
	}
	require.Equal(t, 200, get("api/node?session="+key+"&file="+tl.Checkpoints[2].File+"&path=", &node))
	require.Equal(t, "turn", node.Children[0].Key)
	require.JSONEq(t, "3", string(node.Children[0].Value))
	var diff struct{ Changes []struct{ JQ string } }
	require.Equal(t, 200, get("api/diff?a_session="+key+"&a_file="+tl.Checkpoints[0].File+"&b_session="+key+"&b_file="+tl.Checkpoints[2].File, &diff))
	require.Len(t, diff.Changes, 2)
	var e struct{ Error, Kind string }
	require.Equal(t, 404, get("api/checkpoint?session="+key+"&file=step_00000009.json", &e))
	require.Contains(t, e.Error, "s3://"+bucket+"/campaigns/"+s.ID+"/step_00000009.json")

	// A fork from step 2 (with --write), under the root's lease in S3.
	var info struct{ CSRF string }
	require.Equal(t, 200, get("api/info?", &info))
	req, err := http.NewRequest(http.MethodPost, u.Scheme+"://"+u.Host+"/api/fork?token="+token, strings.NewReader(`{"session":"`+sessions.Sessions[0].Key+`","step":2}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Checkpoint-CSRF", info.CSRF)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var forked struct {
		Session struct {
			Key, Parent string
			ParentStep  int64 `json:"parent_step"`
			Checkpoints int
		}
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&forked))
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, s.ID, forked.Session.Parent)
	require.Equal(t, int64(2), forked.Session.ParentStep)
	require.Equal(t, 2, forked.Session.Checkpoints)
	require.Equal(t, 200, get("api/sessions?", &sessions))
	require.Len(t, sessions.Sessions, 2)
}

// lockedBuffer is a bytes.Buffer written by one goroutine and read by
// another.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
