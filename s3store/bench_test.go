package s3store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/gocheckpoint/checkpoint"
)

// Measurements against the S3 server of the tests (versitygw on loopback:
// latency is the server's and this machine's, not a network's). Each
// reports the HTTP requests per operation as requests/op.
//
//	cd s3store && go test -run '^$' -bench . -benchtime 200x

var benchState = state{Writer: "bench", Pad: strings.Repeat("x", 1000)}

// BenchmarkSaveOnS3 is Store.Save of a 1 KB state, lease held.
func BenchmarkSaveOnS3(b *testing.B) {
	f := newFixture(b)
	be, err := New(f.client, f.bucket, "run")
	if err != nil {
		b.Fatal(err)
	}
	st, err := checkpoint.OpenBackend[state](be)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	f.count.total.Store(0)
	f.count.retries.Store(0)
	b.ResetTimer()
	for i := range b.N {
		s := benchState
		s.Step = int64(i)
		if _, err := st.Save(ctx, int64(i), s); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(f.count.total.Load())/float64(b.N), "requests/op")
	b.ReportMetric(float64(f.count.retries.Load())/float64(b.N), "retries/op")
}

// BenchmarkPutObjectOnS3 is a hand-written PutObject of the same state's
// JSON: the floor under BenchmarkSaveOnS3. Its variants add what a save
// sends besides: If-None-Match: *, and the generation's metadata.
func BenchmarkPutObjectOnS3(b *testing.B) {
	for _, c := range []struct {
		name    string
		ifNone  bool
		withGen bool
	}{{"plain", false, false}, {"if-none-match", true, false}, {"if-none-match+metadata", true, true}} {
		b.Run(c.name, func(b *testing.B) {
			f := newFixture(b)
			ctx := context.Background()
			b.ResetTimer()
			for i := range b.N {
				s := benchState
				s.Step = int64(i)
				data, err := json.Marshal(s)
				if err != nil {
					b.Fatal(err)
				}
				in := &s3.PutObjectInput{Bucket: &f.bucket, Key: aws.String(fmt.Sprintf("run/%012d.json", i)), Body: bytes.NewReader(data)}
				if c.ifNone {
					in.IfNoneMatch = aws.String("*")
				}
				if c.withGen {
					in.Metadata = map[string]string{genKey: "1"}
				}
				if _, err := f.client.PutObject(ctx, in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkListOnS3 is Backend.List and Store.Latest and Store.List over
// stores of 1,000 and 10,000 checkpoints, by the writer and by a ReadOnly
// reader that has listed once before (its generations cached).
func BenchmarkListOnS3(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			f := newFixture(b)
			be, err := New(f.client, f.bucket, "run", LeaseTTL(3*time.Second))
			if err != nil {
				b.Fatal(err)
			}
			w, err := checkpoint.OpenBackend[state](be)
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			fill(b, w, n)
			// A renewal lists the checkpoints in the lease's written set.
			for deadline := time.Now().Add(time.Minute); ; {
				st, _, err := be.readLease(context.Background(), "")
				if err != nil {
					b.Fatal(err)
				}
				if len(st.doc.Written) == n {
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("written set has %d of %d", len(st.doc.Written), n)
				}
				time.Sleep(100 * time.Millisecond) // polling for the renewal
			}
			reader, err := checkpoint.OpenBackend[state](f.backend("run"), checkpoint.ReadOnly())
			if err != nil {
				b.Fatal(err)
			}
			defer reader.Close()
			ctx := context.Background()
			for _, c := range []struct {
				name string
				run  func() error
			}{
				{"backend-list", func() error { _, err := be.List(ctx); return err }},
				{"writer-latest", func() error { _, _, err := w.Latest(ctx); return err }},
				{"writer-list", func() error { _, err := w.List(ctx); return err }},
				{"reader-latest", func() error { _, _, err := reader.Latest(ctx); return err }},
				{"new-reader-list", func() error {
					r, err := New(f.client, f.bucket, "run")
					if err != nil {
						return err
					}
					defer r.Close()
					_, err = r.List(ctx)
					return err
				}},
			} {
				if err := c.run(); err != nil { // warm the caches
					b.Fatal(err)
				}
				b.Run(c.name, func(b *testing.B) {
					f.count.total.Store(0)
					f.count.retries.Store(0)
					for range b.N {
						if err := c.run(); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(f.count.total.Load())/float64(b.N), "requests/op")
					b.ReportMetric(float64(f.count.retries.Load())/float64(b.N), "retries/op")
				})
			}
		})
	}
}

// fill saves n checkpoints, 16 at a time (their Creates straight through
// the store's backend).
func fill(b *testing.B, w *checkpoint.Store[state], n int) {
	ctx := context.Background()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	var mu sync.Mutex
	var first error
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s := benchState
			s.Step = int64(i)
			if _, err := w.Save(ctx, int64(i), s); err != nil {
				mu.Lock()
				first = err
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if first != nil {
		b.Fatal(first)
	}
}
