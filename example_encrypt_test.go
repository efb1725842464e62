package checkpoint_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"filippo.io/age"

	"github.com/gocheckpoint/checkpoint"
)

// An encrypting store keeps every file encrypted and authenticated. A key
// is rotated by opening with the new identity first and the old one after
// it, then re-encrypting what was written to the old one.
func ExampleEncrypt() {
	ctx := context.Background()
	dir := tempDir()
	defer os.RemoveAll(dir)
	// In a program: age.ParseIdentities on a key file kept out of the store
	// (checkpoint keygen -o FILE makes one).
	oldKey, _ := age.GenerateX25519Identity()
	newKey, _ := age.GenerateX25519Identity()

	store, err := checkpoint.Open[map[string]string](dir, checkpoint.Encrypt(oldKey))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := store.Save(ctx, 1, map[string]string{"token": "s3cr3t"}); err != nil {
		log.Fatal(err)
	}
	store.Close()

	// Without the key, nothing is read, and nothing is mistaken for damage.
	other, _ := age.GenerateX25519Identity()
	store, err = checkpoint.Open[map[string]string](dir, checkpoint.Encrypt(other))
	if err != nil {
		log.Fatal(err)
	}
	_, _, err = store.Latest(ctx)
	fmt.Println("another key:", errors.Is(err, checkpoint.ErrNoKey))
	store.Close()

	// Rotation: write to the new key, read the old one too...
	store, err = checkpoint.Open[map[string]string](dir, checkpoint.Encrypt(newKey, oldKey))
	if err != nil {
		log.Fatal(err)
	}
	state, _, err := store.Latest(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("loaded:", state["token"])
	store.Close()

	// ...then rewrite the old files to the new key, and drop the old one.
	backend, err := checkpoint.OpenDir(dir)
	if err != nil {
		log.Fatal(err)
	}
	done, err := checkpoint.Reencrypt(ctx, backend, checkpoint.Encrypt(newKey, oldKey))
	backend.Close()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("rewritten:", len(done.Rewritten))
	// Output:
	// another key: true
	// loaded: s3cr3t
	// rewritten: 1
}
