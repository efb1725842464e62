package raftstore_test

import (
	"fmt"
	"io"
	"log"
	"os"

	"github.com/gocheckpoint/checkpoint/raftstore"
	"github.com/hashicorp/raft"
)

// A Store takes the place of raft.NewFileSnapshotStore: hand it to
// raft.NewRaft. Here the snapshot raft would write is written by hand.
func Example() {
	dir, err := os.MkdirTemp("", "raft-snapshots")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	snaps, err := raftstore.New(dir, 2) // keep the newest 2 snapshots
	if err != nil {
		log.Fatal(err)
	}
	defer snaps.Close()
	// r, err := raft.NewRaft(conf, fsm, logs, stable, snaps, transport)

	conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: "n1", Address: "10.0.0.1:8300"}}}
	sink, err := snaps.Create(raft.SnapshotVersionMax, 120, 3, conf, 1, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := io.WriteString(sink, "the FSM's state"); err != nil {
		_ = sink.Cancel() // nothing is published
		log.Fatal(err)
	}
	if err := sink.Close(); err != nil { // published atomically and durably
		log.Fatal(err)
	}

	list, err := snaps.List() // newest first, from the headers
	if err != nil {
		log.Fatal(err)
	}
	meta, r, err := snaps.Open(list[0].ID) // verified before it is returned
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	state, err := io.ReadAll(r)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: term %d, index %d, %d bytes: %s\n", meta.ID, meta.Term, meta.Index, meta.Size, state)
	// Output: 3-120-0: term 3, index 120, 15 bytes: the FSM's state
}
