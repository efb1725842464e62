// Command checkpoint is the checkpoint tool of
// github.com/gocheckpoint/checkpoint/cmd/checkpoint (the same commands,
// flags, output and exit codes; see its documentation) that also reads and
// maintains stores in S3 and S3-compatible object storage:
//
//	go install github.com/gocheckpoint/checkpoint/s3store/cmd/checkpoint@latest
//
//	checkpoint ls s3://bucket/runs/42
//	checkpoint show s3://bucket/runs/42 latest --state | jq .
//	checkpoint verify s3://bucket/runs/42
//	checkpoint diff s3://bucket/runs/42 100 latest
//	checkpoint serve s3://bucket/runs
//	checkpoint cp ./runs s3://bucket/runs             # a directory to a bucket
//	checkpoint cp s3://bucket/runs s3://other/runs    # a bucket to another
//
// Wherever the other takes a directory, this one takes s3://BUCKET/PREFIX
// too: the store that s3store.New(client, BUCKET, PREFIX) opens. The client
// is configured the usual AWS way, by config.LoadDefaultConfig: the
// environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
// AWS_REGION, AWS_PROFILE, AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL), then
// the shared config and credentials files. AWS_REGION defaults to us-east-1.
// When an endpoint is set (an S3-compatible server such as MinIO or
// versitygw), buckets are addressed by path (http://host/bucket/key), as
// such servers need.
//
// A prefix whose child prefixes hold sessions (made with
// checkpoint.OpenSessionsBackend) is a root of sessions, as a directory of
// sessions is: ls lists them and verify checks every one; show, diff and
// prune want one session (s3://BUCKET/PREFIX/ID), and so does gc there.
//
// ls, show, verify, diff and the --dry-run forms send only reads (LIST,
// GET, HEAD) and take no lease, so they run beside the program that writes
// the store. prune and gc take the store's lease as a writer does (exit code
// 4 while a writer holds it) and release it when done. cp reads its source
// that way and takes the lease of its destination (of each session's store,
// for a root of sessions): after a cp was killed, its lease expires one to
// two lease TTLs later, and cp --wait 90s waits for it.
//
// An encrypted store (checkpoint.Encrypt) is read with --identity FILE or
// CHECKPOINT_IDENTITY, and rotated to a new key in place with rekey, in a
// bucket as in a directory:
//
//	checkpoint ls --identity key.txt s3://bucket/runs/42
//	checkpoint rekey --identity old.txt --to new.txt s3://bucket/runs
//
// This binary is separate from cmd/checkpoint so that the core module
// depends on no AWS package; the two share their code.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/internal/cli"
	"github.com/gocheckpoint/checkpoint/s3store"
)

func main() {
	os.Exit(cli.Run(os.Args[1:], os.Stdout, os.Stderr, s3Remote()))
}

// s3Remote opens s3://bucket/prefix locations with one client, configured
// from the environment on first use.
func s3Remote() cli.Remote {
	client := sync.OnceValues(func() (*s3.Client, error) { return newClient(context.Background()) })
	return cli.Remote{Scheme: "s3", Usage: s3Usage, Open: func(ctx context.Context, loc string) (checkpoint.Backend, error) {
		bucket, prefix, err := parseLocation(loc)
		if err != nil {
			return nil, err
		}
		c, err := client()
		if err != nil {
			return nil, err
		}
		return s3store.New(c, bucket, prefix)
	}}
}

// s3Usage is what the usage text says of s3:// locations.
const s3Usage = `This build also reads and maintains stores in S3 and S3-compatible object
storage: DIR may be s3://BUCKET/PREFIX, the store (or root of sessions)
under that key prefix, taken byte for byte (not URL-decoded). The client is
configured the AWS SDK's default way: AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION (default us-east-1),
AWS_PROFILE, AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL (an S3-compatible
server, addressed by path), then the shared config and credentials files.
prune and gc take the store's lease as its writer does, and cp takes DST's
(cp copies between directories and buckets either way).`

// newClient builds the S3 client the AWS SDK's default way: environment,
// then shared files. An endpoint (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL or
// endpoint_url in the shared config) means an S3-compatible server: path
// addressing.
func newClient(ctx context.Context) (*s3.Client, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("load the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		if o.BaseEndpoint != nil {
			o.UsePathStyle = true
		}
	}), nil
}

// parseLocation splits s3://bucket/prefix into the bucket and the key
// prefix ("" for the bucket's root, without a trailing slash otherwise).
// The prefix is the key prefix byte for byte, not URL-decoded (as the AWS
// CLI reads s3:// URLs): s3://b/runs+1 is the prefix "runs+1/". Whether it
// is a valid prefix (no empty, "." or ".." segment) is s3store.New's to
// say.
func parseLocation(loc string) (bucket, prefix string, err error) {
	rest, ok := strings.CutPrefix(loc, "s3://")
	if !ok {
		rest, ok = strings.CutPrefix(loc, "S3://")
	}
	bucket, prefix, _ = strings.Cut(rest, "/")
	prefix = strings.TrimSuffix(prefix, "/")
	if !ok || bucket == "" {
		return "", "", fmt.Errorf("%w: %s: want s3://BUCKET/PREFIX", checkpoint.ErrInvalid, loc)
	}
	return bucket, prefix, nil
}
