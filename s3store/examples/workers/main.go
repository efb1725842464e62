// Command workers is an example of two worker processes sharing one run
// in one bucket: whichever holds the store's lease works on the run and
// saves a checkpoint per step; the other waits. Kill the working one with
// kill -9 and the waiting one takes the run over once the lease has
// expired, resumes from Latest and finishes it. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/s3store"
)

// Run is the run's state: the sum of the squares of the steps done so far
// (so a step lost or done twice shows in the result) and how many steps
// each worker did.
type Run struct {
	Step  int64            `json:"step"`
	Total int64            `json:"total"`
	By    map[string]int64 `json:"by"`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "workers:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("workers", flag.ContinueOnError)
	bucket := fs.String("bucket", "", "the `BUCKET` of the run (created if missing)")
	prefix := fs.String("prefix", "runs/demo", "the run's key `PREFIX`")
	name := fs.String("name", "", "this worker's `NAME`, recorded in the run (default: the process id)")
	steps := fs.Int64("steps", 100, "the run's `N` steps")
	stepTime := fs.Duration("step-time", 200*time.Millisecond, "how long one step's work takes")
	ttl := fs.Duration("lease", 5*time.Second, "the lease's expiry (s3store.LeaseTTL): how long a dead worker blocks the run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *bucket == "" {
		return errors.New("-bucket is required")
	}
	if *name == "" {
		*name = fmt.Sprint(os.Getpid())
	}
	say := func(format string, a ...any) { fmt.Fprintf(out, "worker %s: %s\n", *name, fmt.Sprintf(format, a...)) }

	client, err := newClient(ctx)
	if err != nil {
		return err
	}
	if err := ensureBucket(ctx, client, *bucket); err != nil {
		return err
	}

	// Take the run: OpenBackend takes the lease, or fails with ErrLocked
	// while another worker holds it. A lease whose holder died is taken
	// over once it has not been renewed for a TTL.
	var st *checkpoint.Store[Run]
	for waited := false; ; waited = true {
		b, err := s3store.New(client, *bucket, *prefix, s3store.LeaseTTL(*ttl))
		if err != nil {
			return err
		}
		st, err = checkpoint.OpenBackend[Run](b)
		if err == nil {
			break
		}
		if !errors.Is(err, checkpoint.ErrLocked) {
			return err
		}
		if !waited {
			say("waiting: another worker has the run (%v)", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(*ttl / 3):
		}
	}
	defer st.Close()

	r, info, err := st.Latest(ctx)
	switch {
	case errors.Is(err, checkpoint.ErrNotFound):
		r = Run{By: map[string]int64{}}
		say("has the run: starting it")
	case err != nil:
		return err
	case info.Kind == checkpoint.KindFinal:
		say("the run is finished already (step %d, total %d)", r.Step, r.Total)
		return nil
	default:
		say("has the run: resuming after step %d (%s)", r.Step, info.Location)
	}

	for r.Step < *steps {
		select { // the step's work
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(*stepTime):
		}
		r.Step++
		r.Total += r.Step * r.Step
		r.By[*name]++
		if r.Step == *steps {
			_, err = st.SaveFinal(ctx, r.Step, r)
		} else {
			_, err = st.Save(ctx, r.Step, r)
		}
		if err != nil {
			// ErrLocked: this worker lost the lease (paused past it, cut
			// off from S3); another has the run, and nothing saved from
			// here on would be seen. Stop.
			return fmt.Errorf("step %d: %w", r.Step, err)
		}
		say("saved step %d", r.Step)
	}
	say("finished the run: step %d, total %d, steps by worker %v", r.Step, r.Total, r.By)
	return st.Close()
}

// newClient configures the client the usual AWS way (environment, then
// shared files). An endpoint (AWS_ENDPOINT_URL_S3) means an S3-compatible
// server such as versitygw or MinIO: address buckets by path.
func newClient(ctx context.Context) (*s3.Client, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, err
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = o.BaseEndpoint != nil }), nil
}

func ensureBucket(ctx context.Context, c *s3.Client, bucket string) error {
	if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &bucket}); err == nil {
		return nil
	}
	_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &bucket})
	var owned *types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		return fmt.Errorf("create bucket %s: %w", bucket, err)
	}
	return nil
}
