package s3store

import (
	"testing"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/backendtest"
)

// TestConformance runs the Backend conformance suite on S3: each subtest
// gets a prefix of its own in one bucket.
func TestConformance(t *testing.T) {
	f := newFixture(t)
	backendtest.Run(t, func(t *testing.T) backendtest.Opener {
		prefix := "conformance-" + randomHex(6)
		return func() (checkpoint.Backend, error) { return New(f.client, f.bucket, prefix, LeaseTTL(testTTL)) }
	}, backendtest.LeaseTTL(testTTL))
}

// TestSessionsOnS3 runs the sessions suite on S3: many workers sharing one
// bucket, each session a prefix.
func TestSessionsOnS3(t *testing.T) {
	f := newFixture(t)
	backendtest.RunSessions(t, func(t *testing.T) checkpoint.Backend {
		b, err := New(f.client, f.bucket, "sessions-"+randomHex(6), LeaseTTL(testTTL))
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}
