// Package raftstore keeps the snapshots of a hashicorp/raft node in a
// checkpoint store: Store implements raft.SnapshotStore on checkpoint's byte
// payloads, so that every snapshot is published atomically and durably,
// checksummed, streamed both ways in a memory independent of its size, and
// kept in a local directory or on any checkpoint.Backend (S3 included).
//
// Each snapshot is one checkpoint whose payload is the bytes the FSM writes
// to the sink, and whose header carries raft's metadata as labels
// (checkpoint.WithMeta): the version, term, index, configuration (as JSON)
// and configuration index. List reads headers only; Open verifies the
// payload's checksum before it hands the snapshot to raft. See the README
// for what differs from raft's FileSnapshotStore.
package raftstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/gocheckpoint/checkpoint"
	"github.com/hashicorp/raft"
)

// Labels under which a snapshot's raft metadata is kept in its checkpoint's
// header, written compactly so that the header is no larger than the
// meta.json of raft's FileSnapshotStore.
const (
	// LabelMeta holds the version, term, index and configuration index, in
	// decimal, separated by single spaces: "1 3 120 7".
	LabelMeta = "raft"
	// LabelConfiguration holds the configuration as a JSON array with one
	// array per server: [suffrage, "id", "address"], the suffrage as
	// raft.ServerSuffrage numbers it (0 voter, 1 nonvoter, 2 staging).
	LabelConfiguration = "raft.conf"
)

// ErrSinkClosed is wrapped by the error of a sink used after Close or
// Cancel: a Write, a Close after Cancel, a Cancel after Close.
var ErrSinkClosed = errors.New("raftstore: snapshot sink is closed")

// errCanceled is what a canceled sink makes the save's write callback
// return, so that nothing is published.
var errCanceled = errors.New("raftstore: snapshot canceled")

// closedChan is the turn of the first sink: it need not wait.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// MaxLabelsSize is the most bytes a snapshot's labels (LabelMeta and
// LabelConfiguration) may take as a JSON object: the checkpoint store's
// limit on the labels of one save (see checkpoint.WithMeta). The
// configuration takes nearly all of it: about 1000 servers with IDs such as
// "node-0042" and addresses such as "node-0042.cluster.example.internal.svc:8300",
// about 2000 with IDs such as "n42" and addresses such as "10.0.0.42:8300".
// Create refuses a larger configuration.
const MaxLabelsSize = 64 << 10

// Store is a raft.SnapshotStore kept in a checkpoint store. It is safe for
// concurrent use. It holds the checkpoint store's writer lock until Close.
type Store struct {
	cp     *checkpoint.Store[[]byte]
	retain int
	ctx    context.Context

	mu    sync.Mutex      // guards next, full, last and sinks
	next  int64           // the step the next Create takes, unless full
	full  bool            // a checkpoint holds step math.MaxInt64: no step is left
	last  <-chan struct{} // the turn channel of the sink created last
	sinks map[*sink]struct{}

	reapMu sync.Mutex // one reaping pass at a time
}

var _ raft.SnapshotStore = (*Store)(nil)

// New opens (creating it if needed) the snapshot store in the directory dir,
// keeping the newest retain snapshots (see Store.Create). opts are the
// checkpoint store's options (such as checkpoint.Zstd or checkpoint.NoSync);
// a retention rule among them would prune by step order, not raft's: leave
// retention to retain. A snapshot larger than the read limit
// (checkpoint.WithMaxReadSize, 1 GiB by default) fails its Close with
// checkpoint.ErrInvalid. retain < 1 is an error wrapping checkpoint.ErrInvalid.
// A stale temporary file that a crash left in dir is removed, as
// checkpoint.Open does.
func New(dir string, retain int, opts ...checkpoint.Option) (*Store, error) {
	if retain < 1 {
		return nil, fmt.Errorf("raftstore: open %q: retain %d must be at least 1: %w", dir, retain, checkpoint.ErrInvalid)
	}
	cp, err := checkpoint.Open[[]byte](dir, opts...)
	if err != nil {
		return nil, fmt.Errorf("raftstore: open %q: %w", dir, err)
	}
	return newStore(cp, retain)
}

// NewOnBackend opens the snapshot store kept in b, such as an S3 prefix of
// the s3store module, as New does for a directory. The store owns b from then
// on: Close closes it, and so does a failed NewOnBackend.
func NewOnBackend(b checkpoint.Backend, retain int, opts ...checkpoint.Option) (*Store, error) {
	if retain < 1 {
		if b != nil {
			_ = b.Close()
		}
		return nil, fmt.Errorf("raftstore: open backend: retain %d must be at least 1: %w", retain, checkpoint.ErrInvalid)
	}
	cp, err := checkpoint.OpenBackend[[]byte](b, opts...)
	if err != nil {
		return nil, fmt.Errorf("raftstore: open backend: %w", err)
	}
	return newStore(cp, retain)
}

func newStore(cp *checkpoint.Store[[]byte], retain int) (*Store, error) {
	s := &Store{cp: cp, retain: retain, ctx: context.Background(), sinks: map[*sink]struct{}{}}
	infos, err := cp.List(s.ctx)
	if err != nil {
		_ = cp.Close()
		return nil, fmt.Errorf("raftstore: open %s: %w", cp.Location(), err)
	}
	for _, info := range infos {
		if info.Step == math.MaxInt64 {
			s.full = true
		} else if info.Step >= s.next {
			s.next = info.Step + 1
		}
	}
	return s, nil
}

// Close cancels every sink still open (nothing of theirs is published; a
// Write waiting on one returns ErrSinkClosed), waits for the sinks
// whose Close was called before to finish publishing, and releases the
// checkpoint store and its writer lock. It never waits for a caller's next
// Write. A Create after Close returns a sink whose Close fails with
// checkpoint.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	open := make([]*sink, 0, len(s.sinks))
	for k := range s.sinks {
		open = append(open, k)
	}
	s.mu.Unlock()
	for _, k := range open {
		_ = k.Cancel() // returns at once for a sink being closed
	}
	for _, k := range open {
		<-k.done
	}
	return s.cp.Close()
}

// Location says where the snapshots are: the directory, or the backend's URL.
func (s *Store) Location() string { return s.cp.Location() }

// Create starts a snapshot of the given index and term. The sink streams
// what is written to it into a new checkpoint: Close publishes it atomically
// and durably, then removes all but the newest retain snapshots in raft's
// order (term, index, then creation); Cancel publishes nothing. A crash at
// any instant leaves no trace of an unfinished snapshot but a temporary file,
// which the next New removes.
//
// Each snapshot takes the next step of the checkpoint store, which its ID
// holds ("term-index-step"), so two snapshots of the same term and index
// never collide. The next step is one past the highest step of the
// checkpoints in the store; when a checkpoint (a foreign one) holds step
// math.MaxInt64, no step is left and Create fails with an error wrapping
// checkpoint.ErrInvalid.
//
// The snapshots of one Store are written strictly in the order of their
// Create: a sink's Writes and Close wait until every sink created before it
// is closed (published and reaped) or canceled. So a caller that holds two
// sinks must end the first before it writes the second. Cancel never waits
// for another sink: Cancel of a sink whose turn has not come returns at
// once, and nothing of it is published.
//
// The configuration is kept in the checkpoint's header: a configuration
// whose labels take more than MaxLabelsSize bytes as JSON makes Create fail
// with an error wrapping checkpoint.ErrInvalid, which says how many servers
// and bytes it has.
//
// A Write returns once its bytes are handed to the checkpoint's writer; it
// must not be called by several goroutines at once. A Write after Close or
// Cancel, Close after Cancel and Cancel after Close fail with ErrSinkClosed;
// a second Close returns the first one's result, a second Cancel is nil.
// trans is not used (the legacy Peers field is not kept).
func (s *Store) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	if version < raft.SnapshotVersionMin || version > raft.SnapshotVersionMax {
		return nil, fmt.Errorf("raftstore: create snapshot %d-%d: unsupported snapshot version %d: %w", term, index, version, checkpoint.ErrInvalid)
	}
	conf, err := encodeConfiguration(configuration)
	if err != nil {
		return nil, fmt.Errorf("raftstore: create snapshot %d-%d: encode configuration: %w", term, index, err)
	}
	metaLabel := fmt.Sprintf("%d %d %d %d", version, term, index, configurationIndex)
	labels := map[string]string{LabelMeta: metaLabel, LabelConfiguration: conf}
	if b, _ := json.Marshal(labels); len(b) > MaxLabelsSize { // a map of strings always encodes
		return nil, fmt.Errorf("raftstore: create snapshot %d-%d: the configuration is too large: %d servers take %d bytes of labels as JSON, more than the limit of %d: %w",
			term, index, len(configuration.Servers), len(b), MaxLabelsSize, checkpoint.ErrInvalid)
	}

	k := &sink{
		store: s,
		meta: raft.SnapshotMeta{
			Version:            version,
			Index:              index,
			Term:               term,
			Configuration:      configuration,
			ConfigurationIndex: configurationIndex,
		},
		pieces: make(chan []byte),
		wrote:  make(chan error),
		closed: make(chan struct{}),
		cancel: make(chan struct{}),
		done:   make(chan struct{}),
		turn:   make(chan struct{}),
	}
	s.mu.Lock()
	if s.full {
		s.mu.Unlock()
		return nil, fmt.Errorf("raftstore: create snapshot %d-%d: no step left in %s: a checkpoint holds step %d, the highest: %w",
			term, index, s.cp.Location(), int64(math.MaxInt64), checkpoint.ErrInvalid)
	}
	step := s.next
	if step == math.MaxInt64 {
		s.full = true
	} else {
		s.next++
	}
	k.meta.ID = formatID(term, index, step)
	prev := s.last
	s.last = k.turn
	s.sinks[k] = struct{}{}
	s.mu.Unlock()

	go k.run(prev, step, []checkpoint.SaveOption{
		checkpoint.WithMeta(LabelMeta, metaLabel),
		checkpoint.WithMeta(LabelConfiguration, conf),
	})
	return k, nil
}

// run is a sink's goroutine: it waits for its turn (the sink created before
// it has passed it on) unless the sink is canceled first, then runs the save
// and, if it published, reaps. It sets the sink's result, closes done, and
// passes the turn on (closes turn) once the store is free for the next sink.
// A sink canceled before its turn is done at once, but passes the turn on
// only when its own comes, so that the sinks after it keep Create's order.
func (k *sink) run(prev <-chan struct{}, step int64, labels []checkpoint.SaveOption) {
	s := k.store
	finish := func() {
		s.mu.Lock()
		delete(s.sinks, k)
		s.mu.Unlock()
		close(k.done)
	}
	if prev == nil {
		prev = closedChan
	}
	select {
	case <-prev:
	case <-k.cancel:
	}
	select {
	case <-k.cancel:
		k.saveErr = errCanceled // its turn did not come: nothing was written
		finish()
		<-prev
		close(k.turn)
		return
	default:
	}
	defer close(k.turn)
	defer finish()
	_, k.saveErr = s.cp.SaveFrom(s.ctx, step, k.save, labels...)
	if k.saveErr != nil {
		k.closeErr = fmt.Errorf("raftstore: close snapshot %s: %w", k.meta.ID, k.saveErr)
		return
	}
	if err := s.reap(); err != nil {
		k.closeErr = fmt.Errorf("raftstore: close snapshot %s: published, but reaping older ones failed: %w", k.meta.ID, err)
	}
}

// sink is the raft.SnapshotSink of Create: raft pushes bytes with Write, and
// a goroutine running SaveFrom pulls them: each Write hands its slice to the
// save's write callback (save), which writes it and answers, so that no byte
// is copied on the way and no buffer is held.
type sink struct {
	store  *Store
	meta   raft.SnapshotMeta
	pieces chan []byte   // Write -> save: a piece to write
	wrote  chan error    // save -> Write: the piece's result
	closed chan struct{} // closed by Close: the save publishes
	cancel chan struct{} // closed by Cancel: the save fails
	done   chan struct{} // closed when the save has returned and reaping is over
	turn   chan struct{} // closed when the next sink may start its save
	// saveErr is SaveFrom's result and closeErr Close's, both set before
	// done is closed.
	saveErr, closeErr error

	mu    sync.Mutex
	state int // sinkOpen, sinkClosed, sinkCanceled
}

const (
	sinkOpen = iota
	sinkClosed
	sinkCanceled
)

// ID returns the snapshot's ID, "term-index-step".
func (k *sink) ID() string { return k.meta.ID }

// Write streams p into the snapshot. A write after Close or Cancel fails with
// ErrSinkClosed, and one after the save failed with the save's error.
func (k *sink) Write(p []byte) (int, error) {
	k.mu.Lock()
	st := k.state
	k.mu.Unlock()
	if st != sinkOpen {
		return 0, fmt.Errorf("raftstore: write snapshot %s: %w", k.meta.ID, ErrSinkClosed)
	}
	select {
	case k.pieces <- p:
		select {
		case err := <-k.wrote:
			if err != nil {
				return 0, fmt.Errorf("raftstore: write snapshot %s: %w", k.meta.ID, err)
			}
			return len(p), nil
		case <-k.done: // the callback did not answer: it panicked
			return 0, fmt.Errorf("raftstore: write snapshot %s: %w", k.meta.ID, k.ended())
		}
	case <-k.done: // the save ended (an error, or the store closed)
		return 0, fmt.Errorf("raftstore: write snapshot %s: %w", k.meta.ID, k.ended())
	}
}

// ended is the error of a save that returned while the sink was open, or
// that Cancel or Close ended while a Write waited.
func (k *sink) ended() error {
	if k.saveErr != nil && !errors.Is(k.saveErr, errCanceled) {
		return k.saveErr
	}
	return ErrSinkClosed
}

// save is the write callback of SaveFrom: it writes the pieces Write hands
// it, until Close (nil: publish) or Cancel (an error: publish nothing).
func (k *sink) save(w io.Writer) error {
	for {
		select {
		case p := <-k.pieces:
			_, err := w.Write(p)
			k.wrote <- err
			if err != nil {
				return err
			}
		case <-k.closed:
			return nil
		case <-k.cancel:
			return errCanceled
		}
	}
}

// Close publishes the snapshot and, once it is durable, reaps the snapshots
// beyond the store's retain. It waits for its turn: the sinks created before
// it must be closed or canceled first. A second Close returns the first
// one's result; Close after Cancel fails with ErrSinkClosed.
func (k *sink) Close() error {
	k.mu.Lock()
	switch k.state {
	case sinkCanceled:
		k.mu.Unlock()
		return fmt.Errorf("raftstore: close snapshot %s: canceled: %w", k.meta.ID, ErrSinkClosed)
	case sinkOpen:
		k.state = sinkClosed
		close(k.closed)
	}
	k.mu.Unlock()
	<-k.done
	return k.closeErr // the save's error, the reaping's, or nil
}

// Cancel abandons the snapshot: nothing is published. It waits for no
// other sink: a sink whose turn has not come is dropped at once, and one
// being written ends its save. A second Cancel does nothing; Cancel after
// Close fails with ErrSinkClosed (the published snapshot stays).
func (k *sink) Cancel() error {
	k.mu.Lock()
	switch k.state {
	case sinkCanceled:
		k.mu.Unlock()
		return nil
	case sinkClosed:
		k.mu.Unlock()
		return fmt.Errorf("raftstore: cancel snapshot %s: already closed: %w", k.meta.ID, ErrSinkClosed)
	}
	k.state = sinkCanceled
	close(k.cancel)
	k.mu.Unlock()
	<-k.done
	if k.saveErr == nil {
		// Unreachable: with Close never called, the write callback returns
		// only errCanceled or an error. Say so rather than claim nothing
		// was published.
		return fmt.Errorf("raftstore: cancel snapshot %s: the snapshot was published", k.meta.ID)
	}
	return nil
}

// entry is one snapshot found in the checkpoint store.
type entry struct {
	meta raft.SnapshotMeta
	info checkpoint.Info
}

// entries lists the store's snapshots whose header holds valid raft
// metadata, newest first by (term, index, step).
func (s *Store) entries() ([]entry, error) {
	infos, err := s.cp.List(s.ctx)
	if err != nil {
		return nil, err
	}
	var out []entry
	for _, info := range infos {
		if info.Kind != checkpoint.KindStep || info.Payload != checkpoint.PayloadBytes {
			continue
		}
		meta, ok := metaOf(info)
		if !ok {
			continue
		}
		out = append(out, entry{meta: meta, info: info})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.meta.Term != b.meta.Term {
			return a.meta.Term > b.meta.Term
		}
		if a.meta.Index != b.meta.Index {
			return a.meta.Index > b.meta.Index
		}
		if a.info.Step != b.info.Step {
			return a.info.Step > b.info.Step
		}
		return a.info.Time.After(b.info.Time) // two files of one step: saved last first
	})
	return out, nil
}

// List returns the newest retain snapshots, newest first by (term, index,
// then creation), from their checkpoints' headers: no payload is read.
// A checkpoint whose header cannot be read, or holds no valid raft metadata,
// is not listed (as FileSnapshotStore skips a snapshot whose meta.json it
// cannot read); a snapshot whose payload is damaged is listed, and Open
// fails on it. Size is the payload's size for a store without compression;
// with compression it is known only by reading the payload, and List
// reports the compressed size on disk (Open reports the exact size).
func (s *Store) List() ([]*raft.SnapshotMeta, error) {
	es, err := s.entries()
	if err != nil {
		return nil, fmt.Errorf("raftstore: list snapshots: %w", err)
	}
	if len(es) > s.retain {
		es = es[:s.retain]
	}
	out := make([]*raft.SnapshotMeta, 0, len(es))
	for _, e := range es {
		meta := e.meta
		// With compression the payload's size shows only at its end: the
		// size on disk stands. A plain file's is known from a header read.
		meta.Size = e.info.Size
		if e.info.Compression == "" {
			if r, info, err := s.cp.OpenPayloadExact(s.ctx, e.info); err == nil {
				if info.PayloadSize >= 0 {
					meta.Size = info.PayloadSize
				}
				_ = r.Close()
			}
		}
		out = append(out, &meta)
	}
	return out, nil
}

// Open opens the snapshot id for reading. It first reads the whole payload,
// verifying its checksum (as FileSnapshotStore verifies its CRC before it
// returns), so that a damaged snapshot fails here, with an error wrapping
// checkpoint.ErrCorrupt, before raft sees a byte of it; then it returns a
// reader that streams the payload again (and verifies it again at its end).
// An ID that is not of this store's form is checkpoint.ErrInvalid; one that
// names no snapshot of the store is checkpoint.ErrNotFound. Open opens
// exactly the snapshot that List lists under id: another checkpoint of its
// step (of another kind or payload, saved by another program) is ignored.
func (s *Store) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	term, index, step, ok := parseID(id)
	if !ok {
		return nil, nil, fmt.Errorf("raftstore: open snapshot %q: malformed ID (want term-index-step): %w", id, checkpoint.ErrInvalid)
	}
	es, err := s.entries()
	if err != nil {
		return nil, nil, fmt.Errorf("raftstore: open snapshot %s: %w", id, err)
	}
	var found *entry
	for i := range es {
		if e := &es[i]; e.info.Step == step && e.meta.Term == term && e.meta.Index == index {
			found = e
			break
		}
	}
	if found == nil {
		return nil, nil, fmt.Errorf("raftstore: open snapshot %s: no such snapshot: %w", id, checkpoint.ErrNotFound)
	}
	meta := found.meta
	// The reader handed to raft is opened first and the snapshot verified
	// through a second open, as checkpoint's LatestPayload does: where an
	// open file stays readable (a local one), a reap in between cannot
	// take it away.
	r, info, err := s.cp.OpenPayloadExact(s.ctx, found.info)
	if err != nil {
		return nil, nil, fmt.Errorf("raftstore: open snapshot %s: %w", id, err)
	}
	check, _, err := s.cp.OpenPayloadExact(s.ctx, info)
	if err != nil {
		_ = r.Close()
		return nil, nil, fmt.Errorf("raftstore: open snapshot %s: %w", id, err)
	}
	n, err := io.Copy(io.Discard, check)
	_ = check.Close()
	if err != nil {
		_ = r.Close()
		return nil, nil, fmt.Errorf("raftstore: open snapshot %s: verify: %w", id, err)
	}
	meta.Size = n
	return &meta, r, nil
}

// reap removes the snapshots beyond the newest retain in raft's order, each
// exactly (DeleteExact): another checkpoint of its step stays.
func (s *Store) reap() error {
	s.reapMu.Lock()
	defer s.reapMu.Unlock()
	es, err := s.entries()
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range es[min(s.retain, len(es)):] {
		if err := s.cp.DeleteExact(s.ctx, e.info); err != nil && !errors.Is(err, checkpoint.ErrNotFound) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// metaOf reads raft's metadata from a checkpoint's labels.
func metaOf(info checkpoint.Info) (raft.SnapshotMeta, bool) {
	var m raft.SnapshotMeta
	f := strings.Split(info.Meta[LabelMeta], " ")
	if len(f) != 4 {
		return m, false
	}
	var n [4]uint64
	for i, s := range f {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil || strconv.FormatUint(v, 10) != s {
			return m, false
		}
		n[i] = v
	}
	if n[0] < uint64(raft.SnapshotVersionMin) || n[0] > uint64(raft.SnapshotVersionMax) {
		return m, false
	}
	conf, ok := decodeConfiguration(info.Meta[LabelConfiguration])
	if !ok {
		return m, false
	}
	m.Version = raft.SnapshotVersion(n[0])
	m.Term, m.Index, m.ConfigurationIndex = n[1], n[2], n[3]
	m.Configuration = conf
	m.ID = formatID(m.Term, m.Index, info.Step)
	return m, true
}

// encodeConfiguration writes c as LabelConfiguration says.
func encodeConfiguration(c raft.Configuration) (string, error) {
	servers := make([][3]any, 0, len(c.Servers))
	for _, s := range c.Servers {
		servers = append(servers, [3]any{int(s.Suffrage), string(s.ID), string(s.Address)})
	}
	b, err := json.Marshal(servers)
	return string(b), err
}

// decodeConfiguration reads what encodeConfiguration writes.
func decodeConfiguration(label string) (raft.Configuration, bool) {
	var servers [][3]json.RawMessage
	if err := json.Unmarshal([]byte(label), &servers); err != nil {
		return raft.Configuration{}, false
	}
	c := raft.Configuration{Servers: make([]raft.Server, 0, len(servers))}
	for _, s := range servers {
		var suffrage int
		var id, addr string
		if json.Unmarshal(s[0], &suffrage) != nil || json.Unmarshal(s[1], &id) != nil || json.Unmarshal(s[2], &addr) != nil ||
			suffrage < int(raft.Voter) || suffrage > int(raft.Staging) {
			return raft.Configuration{}, false
		}
		c.Servers = append(c.Servers, raft.Server{Suffrage: raft.ServerSuffrage(suffrage), ID: raft.ServerID(id), Address: raft.ServerAddress(addr)})
	}
	return c, true
}

func formatID(term, index uint64, step int64) string {
	return fmt.Sprintf("%d-%d-%d", term, index, step)
}

// parseID accepts exactly the IDs formatID writes.
func parseID(id string) (term, index uint64, step int64, ok bool) {
	parts := strings.Split(id, "-")
	if len(parts) != 3 {
		return 0, 0, 0, false
	}
	term, err1 := strconv.ParseUint(parts[0], 10, 64)
	index, err2 := strconv.ParseUint(parts[1], 10, 64)
	step, err3 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || step < 0 || formatID(term, index, step) != id {
		return 0, 0, 0, false
	}
	return term, index, step, true
}
