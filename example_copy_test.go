package checkpoint_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/dirstore"
)

// Moving a store to another Backend: here another directory; an
// s3store.New(client, bucket, prefix) destination is copied into the same
// way. A rerun after an interruption finds what was copied (Present) and
// copies the rest.
func ExampleCopy() {
	ctx := context.Background()
	root := tempDir()
	defer os.RemoveAll(root)
	dir := filepath.Join(root, "old")
	st, err := checkpoint.Open[Game](dir, checkpoint.Gzip())
	if err != nil {
		log.Fatal(err)
	}
	for turn := 1; turn <= 3; turn++ {
		if _, err := st.Save(ctx, int64(turn), Game{Turn: turn}); err != nil {
			log.Fatal(err)
		}
	}
	st.Close()

	src, err := dirstore.Open(dir, dirstore.ReadOnly())
	if err != nil {
		log.Fatal(err)
	}
	defer src.Close()
	dst, err := dirstore.Open(filepath.Join(root, "new"))
	if err != nil {
		log.Fatal(err)
	}
	defer dst.Close()
	for range 2 {
		res, err := checkpoint.Copy(ctx, dst, src, checkpoint.OnCopyProgress(func(p checkpoint.CopyProgress) {
			if p.Done == p.Total {
				fmt.Printf("%d/%d files\n", p.Done, p.Total)
			}
		}))
		if err != nil {
			log.Fatal(err) // names what was skipped (damaged) or failed
		}
		fmt.Printf("copied %d, already there %d\n", res.Copied, res.Present)
	}
	// Output:
	// 3/3 files
	// copied 3, already there 0
	// 3/3 files
	// copied 0, already there 3
}
