package raftstore_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// fsm is a small state machine whose snapshot is large: its state is a
// count and a hash chained over every command, and its snapshot carries a
// blob of blobSize bytes derived from the hash, which Restore checks, so
// that a snapshot is a few MiB and any byte of it that changes is caught.
type fsm struct {
	blobSize int

	mu      sync.Mutex
	count   uint64
	sum     [32]byte
	changed chan struct{} // closed and replaced on every change
}

func newFSM(blobSize int) *fsm {
	return &fsm{blobSize: blobSize, changed: make(chan struct{})}
}

func (f *fsm) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := sha256.New()
	h.Write(f.sum[:])
	h.Write(l.Data)
	h.Sum(f.sum[:0])
	f.count++
	close(f.changed)
	f.changed = make(chan struct{})
	return f.count
}

// state is what a test compares: the count and the hash.
func (f *fsm) state() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fmt.Sprintf("%d:%s", f.count, hex.EncodeToString(f.sum[:]))
}

// waitCount waits until the FSM applied at least n commands.
func (f *fsm) waitCount(n uint64, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		count, ch := f.count, f.changed
		f.mu.Unlock()
		if count >= n {
			return nil
		}
		select {
		case <-ch:
		case <-deadline.C:
			return fmt.Errorf("fsm applied %d commands, want %d", count, n)
		}
	}
}

func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &fsmSnapshot{count: f.count, sum: f.sum, blobSize: f.blobSize}, nil
}

// blobBlock is the 64 KiB block that the blob of a snapshot with hash sum
// repeats.
func blobBlock(sum [32]byte) []byte {
	block := make([]byte, 0, 64<<10)
	var i [8]byte
	for len(block) < cap(block) {
		binary.BigEndian.PutUint64(i[:], uint64(len(block)))
		h := sha256.New()
		h.Write(sum[:])
		h.Write(i[:])
		block = h.Sum(block)
	}
	return block
}

func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var hdr [48]byte
	if _, err := io.ReadFull(rc, hdr[:]); err != nil {
		return fmt.Errorf("fsm restore: header: %w", err)
	}
	count := binary.BigEndian.Uint64(hdr[0:8])
	var sum [32]byte
	copy(sum[:], hdr[8:40])
	size := binary.BigEndian.Uint64(hdr[40:48])
	block := blobBlock(sum)
	buf := make([]byte, len(block))
	for left := size; left > 0; {
		n := min(left, uint64(len(buf)))
		if _, err := io.ReadFull(rc, buf[:n]); err != nil {
			return fmt.Errorf("fsm restore: blob: %w", err)
		}
		if !bytes.Equal(buf[:n], block[:n]) {
			return errors.New("fsm restore: blob differs")
		}
		left -= n
	}
	// The stream must end here, and verify at its end.
	if n, err := rc.Read(buf[:1]); n != 0 || err != io.EOF {
		return fmt.Errorf("fsm restore: trailing data or error at the end: %d, %v", n, err)
	}
	f.mu.Lock()
	f.count, f.sum = count, sum
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
	return nil
}

type fsmSnapshot struct {
	count    uint64
	sum      [32]byte
	blobSize int
}

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	var hdr [48]byte
	binary.BigEndian.PutUint64(hdr[0:8], s.count)
	copy(hdr[8:40], s.sum[:])
	binary.BigEndian.PutUint64(hdr[40:48], uint64(s.blobSize))
	if _, err := sink.Write(hdr[:]); err != nil {
		_ = sink.Cancel()
		return err
	}
	block := blobBlock(s.sum)
	for left := s.blobSize; left > 0; {
		n := min(left, len(block))
		if _, err := sink.Write(block[:n]); err != nil {
			_ = sink.Cancel()
			return err
		}
		left -= n
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() {}
