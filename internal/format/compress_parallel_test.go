package format

import (
	"bytes"
	stdgzip "compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/gocheckpoint/checkpoint/internal/benchkit"
)

// TestParallelCompressionIsAStandardFile checks that a checkpoint
// compressed in pieces on several goroutines is one standard file, read
// back whole by this package and by other readers (the standard library's
// gzip, a zstd decoder of default options, the gzip and zstd commands
// where they are installed), and that the pieces cost
// little in size against one goroutine's compression.
func TestParallelCompressionIsAStandardFile(t *testing.T) {
	t.Parallel()
	h := Header{Format: Version, Step: 3, Kind: KindStep, Time: time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)}
	for _, comp := range []Compression{CompressGzip, CompressZstd} {
		for _, size := range []int{parallelCompressMin, 10 << 10, 100 << 10, 600 << 10} {
			state, err := json.Marshal(benchkit.NewWorld(size))
			if err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("%v/%d", comp, size)
			c := NewCodec(comp, defaultMaxRead)
			head, err := envelopeHead(h)
			if err != nil {
				t.Fatal(err)
			}
			var whole bytes.Buffer
			if err := NewCodec(CompressNone, defaultMaxRead).WriteEnvelope(&whole, h, state); err != nil {
				t.Fatal(err)
			}
			tail := whole.Bytes()[len(head)+len(state):]
			var pieces, one bytes.Buffer
			if done, err := c.compressParallel(&pieces, [][]byte{head, state, tail}); !done || err != nil {
				t.Fatalf("%s: compressed in pieces: %v, %v", name, done, err)
			}
			if err := c.compressTo(&one, int64(whole.Len()), func(w io.Writer) error { _, err := w.Write(whole.Bytes()); return err }); err != nil {
				t.Fatal(err)
			}
			if r := float64(pieces.Len()) / float64(one.Len()); r > 1.15 {
				t.Errorf("%s: the pieces take %d bytes, one stream %d (%.2fx)", name, pieces.Len(), one.Len(), r)
			}
			var written bytes.Buffer
			if err := c.WriteEnvelope(&written, h, state); err != nil {
				t.Fatal(err)
			}
			for _, file := range [][]byte{pieces.Bytes(), written.Bytes()} {
				err := c.Read(bytes.NewReader(file), int64(len(file)), func(got Header, s []byte) error {
					if got.Step != 3 || !bytes.Equal(s, state) {
						return fmt.Errorf("read back step %d, state equal %v", got.Step, bytes.Equal(s, state))
					}
					return nil
				})
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				var other []byte
				if comp == CompressGzip {
					zr, err := stdgzip.NewReader(bytes.NewReader(file))
					if err != nil {
						t.Fatal(err)
					}
					other, err = io.ReadAll(zr)
					if err != nil {
						t.Fatalf("%s: the standard library's gzip: %v", name, err)
					}
				} else {
					zr, err := zstd.NewReader(bytes.NewReader(file))
					if err != nil {
						t.Fatal(err)
					}
					other, err = io.ReadAll(zr)
					zr.Close()
					if err != nil {
						t.Fatalf("%s: a zstd decoder: %v", name, err)
					}
				}
				if !bytes.Equal(other, whole.Bytes()) {
					t.Fatalf("%s: another reader reads %d bytes, not the %d of the checkpoint", name, len(other), whole.Len())
				}
				// And the command-line tool, where it is installed.
				tool := map[Compression]string{CompressGzip: "gzip", CompressZstd: "zstd"}[comp]
				if _, err := exec.LookPath(tool); err == nil {
					path := filepath.Join(t.TempDir(), "file")
					if err := os.WriteFile(path, file, 0o644); err != nil {
						t.Fatal(err)
					}
					out, err := exec.Command(tool, "-dc", path).Output()
					if err != nil || !bytes.Equal(out, whole.Bytes()) {
						t.Fatalf("%s: %s -dc: %v, %d bytes of %d", name, tool, err, len(out), whole.Len())
					}
				}
			}
		}
	}
}
