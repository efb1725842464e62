package checkpoint_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/gocheckpoint/checkpoint"
	"github.com/gocheckpoint/checkpoint/dirstore"
)

// A second writer waits for the store's writer lock for as long as its
// context allows (here a directory's; on S3, a lease), and is told who
// holds it when the wait ends.
func ExampleOpenBackendContext() {
	dir := tempDir()
	defer os.RemoveAll(dir)
	first, err := checkpoint.Open[Game](dir)
	if err != nil {
		log.Fatal(err)
	}
	defer first.Close()

	b, err := dirstore.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = checkpoint.OpenBackendContext[Game](ctx, b, checkpoint.WaitLock(time.Minute))
	fmt.Println(errors.Is(err, checkpoint.ErrLocked), errors.Is(err, context.DeadlineExceeded))
	// Output: true true
}
