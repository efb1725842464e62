package checkpoint_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"strings"

	"github.com/gocheckpoint/checkpoint"
)

// A host that hands over bytes (a raft snapshot, gob) saves them as a byte
// payload, streamed from an io.Writer and stored as they are, and reads
// them back as a stream that verifies the checksum at its end.
func ExampleStore_SaveFrom() {
	ctx := context.Background()
	dir := tempDir()
	defer os.RemoveAll(dir)
	store, err := checkpoint.Open[[]byte](dir, checkpoint.Zstd(), checkpoint.KeepLast(2))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	for index := int64(1); index <= 3; index++ {
		_, err := store.SaveFrom(ctx, index, func(w io.Writer) error {
			// Write as much as you like, in pieces: nothing is held in memory.
			_, err := io.Copy(w, strings.NewReader(fmt.Sprintf("snapshot at index %d\n", index)))
			return err
		}, checkpoint.WithMeta("term", "4"))
		if err != nil {
			log.Fatal(err)
		}
	}

	r, info, err := store.LatestPayload(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	// Act on the bytes once the reader has returned io.EOF: io.ReadAll
	// returns an error wrapping checkpoint.ErrCorrupt if they are damaged.
	b, err := io.ReadAll(r)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("step %d (%s, term %s): %s", info.Step, info.Payload, info.Meta["term"], b)
	// Output:
	// step 3 (bytes, term 4): snapshot at index 3
}
