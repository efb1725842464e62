package checkpoint

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"strings"

	"github.com/gocheckpoint/checkpoint/internal/format"
	"github.com/gocheckpoint/checkpoint/storage"
)

// indexName is the store's header index: the headers of its checkpoints as
// its header cache last knew them, each with the Version of the object it
// was read from. It spares the first List of a later store (a reader's, or
// a writer's after a restart) from opening every checkpoint: a stat (on
// object storage, the listing) tells whether a file is still the one the
// index describes, and only the others are read. It is advisory: nothing
// is trusted beyond a Version match, and a missing, damaged, foreign or
// oversized index only costs the reads it would have saved. The leading
// dot keeps it out of every layout, like the lock file.
const indexName = ".checkpoint.index"

const (
	// indexMagic is the index's first line: its format. Format 2 is
	// format 1 written by a release that knows metrics: an index of
	// format 1, written by an older release, may describe a checkpoint
	// with metrics without them (its header decoder skipped the field),
	// so it is not read, and costs the reads it would have saved.
	indexMagic = "checkpoint-index 2\n"
	// indexMaxSize bounds what a store reads of an index; a larger one is
	// ignored, and a writer leaves out what would make its index larger.
	indexMaxSize = 32 << 20
	// indexMaxHeader is the longest header an index holds: a header with
	// a long error record or much metadata is read from its file. A
	// reader ignores a longer entry (see indexEntry.decode).
	indexMaxHeader = 4 << 10
	// indexMinFill is the number of headers a fill must otherwise read
	// before it reads the index: for fewer, the index costs more than it
	// saves.
	indexMinFill = 64
	// indexMinWrite is the number of headers a full scan must have read
	// from their files before it writes the index, and the number of
	// cached headers under which Close writes none: a small store's first
	// List is fast without one.
	indexMinWrite = 256
)

var indexCRC = crc32.MakeTable(crc32.Castagnoli)

// indexEntry is one checkpoint's line of an index: slices of the index's
// bytes, decoded only if the file is still the one it describes.
type indexEntry struct {
	size    int64
	version []byte
	header  []byte // as encoding/json writes a header
}

// decode returns the header of the entry, if it is a well-formed one that
// fn, the file's name, agrees with. A header longer than the writer puts
// in an index (indexMaxHeader) is not decoded, so that the header's file
// is read instead: a hostile entry would otherwise cost its decoded form,
// many times its size (see BENCHMARKS.md), kept by the header cache.
func (x indexEntry) decode(fn fileName) (header, bool) {
	if len(x.header) > indexMaxHeader {
		return header{}, false
	}
	// The index's header means what the file's header means: the one
	// header decoder decodes both.
	h, err := format.DecodeHeaderJSON(x.header)
	if err != nil || fn.agrees(h) != nil {
		return header{}, false
	}
	return h, true
}

// indexFile is an index read whole and checked as a whole (its format,
// end line and checksum), not yet parsed: entries keeps of it only the
// lines of names a fill asks for.
type indexFile struct {
	body  []byte // the entry lines
	count int    // how many there are, as the end line says
}

// readIndex returns the store's index, or nil if there is none or it
// cannot be trusted as a whole: unreadable, too large, of another format,
// or failing its checksum.
func (s *Store[T]) readIndex(ctx context.Context) *indexFile {
	f, o, err := s.b.Open(ctx, indexName)
	if err != nil {
		return nil
	}
	defer f.Close()
	if o.Size > indexMaxSize {
		return nil
	}
	// Read into a buffer of the size the open said, with room to see
	// that the index did not grow meanwhile: io.ReadAll would grow its
	// buffer a dozen times for an index of 10,000 entries.
	buf := bytes.NewBuffer(make([]byte, 0, max(o.Size, 0)+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(f, indexMaxSize+1)); err != nil || buf.Len() > indexMaxSize {
		return nil
	}
	return checkIndex(buf.Bytes())
}

// indexEndMax is the longest end line an index can have.
const indexEndMax = len("end 18446744073709551615 ffffffff\n")

// checkIndex checks an index: indexMagic, then a line per entry (name,
// size, version and header, separated by tabs), then "end", the number of
// entries and the CRC-32C of everything before the end line, in hex. It
// returns nil for anything else. The lines are parsed by entries.
func checkIndex(data []byte) *indexFile {
	if !bytes.HasPrefix(data, []byte(indexMagic)) || data[len(data)-1] != '\n' {
		return nil
	}
	last := bytes.LastIndexByte(data[:len(data)-1], '\n') + 1
	if last < len(indexMagic) || len(data)-last > indexEndMax {
		return nil
	}
	var count int
	var sum uint32
	if n, err := fmt.Sscanf(string(data[last:]), "end %d %08x\n", &count, &sum); n != 2 || err != nil || count < 0 {
		return nil
	}
	if crc32.Checksum(data[:last], indexCRC) != sum {
		return nil
	}
	return &indexFile{body: data[len(indexMagic):last], count: count}
}

// entries parses the index's lines and returns the entries of the names
// want asks for (want returns the name as the map's key), or nil if a line
// is malformed or the lines are not as many as the end line says. What it
// allocates is bounded by what want asks for, not by what the index
// claims: a hostile index of a million tiny lines, or an end line that
// claims billions, costs its own bytes and no more. A nil index has none.
func (x *indexFile) entries(want func(name []byte) (key string, ok bool)) map[string]indexEntry {
	if x == nil {
		return nil
	}
	var out map[string]indexEntry
	lines := 0
	for off := 0; off < len(x.body); {
		line, _, _ := bytes.Cut(x.body[off:], []byte{'\n'})
		off += len(line) + 1
		if lines++; lines > x.count {
			return nil
		}
		name, rest, ok1 := bytes.Cut(line, []byte{'\t'})
		size, rest, ok2 := bytes.Cut(rest, []byte{'\t'})
		version, h, ok3 := bytes.Cut(rest, []byte{'\t'})
		if !ok1 || !ok2 || !ok3 {
			return nil
		}
		key, ok := want(name)
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(string(size), 10, 64)
		if err != nil {
			return nil
		}
		if _, dup := out[key]; dup {
			return nil
		}
		if out == nil {
			out = make(map[string]indexEntry)
		}
		out[key] = indexEntry{size: n, version: version, header: h}
	}
	if lines != x.count {
		return nil
	}
	return out
}

// indexable reports whether a name or version can stand in an index line.
func indexable(s string) bool {
	return s != "" && !strings.ContainsAny(s, "\t\n")
}

// indexLine is a line writeIndex writes: a cached header, or raw, the
// header of a line of the old index that carryIndex keeps as it was.
type indexLine struct {
	name, version string
	size          int64
	h             header
	raw           []byte
}

// carryIndex returns, for writeIndex in a store that never read the index
// (it saved, and maybe loaded, but never listed enough headers to read
// it), the old index's lines of the checkpoints that are still there and
// whose names cached (the headers the store holds) does not have: without
// them the new index would describe only what this store saw, and the next
// first List would read every other header from its file. A line is kept
// as it was, and checked against its file's Version and size where it is
// used, as every line is (see fill); one whose listed Version or size
// differs is dropped here already. It costs the index's read and a
// listing, once, when the index is written.
func (s *Store[T]) carryIndex(ctx context.Context, cached map[string]bool) []indexLine {
	old := s.readIndex(ctx)
	if old == nil {
		return nil
	}
	objs, err := s.b.List(ctx)
	if err != nil {
		return nil
	}
	listed := make(map[string]Object, len(objs))
	for _, o := range objs {
		if !cached[o.Name] {
			listed[o.Name] = o
		}
	}
	var lines []indexLine
	for name, x := range old.entries(func(name []byte) (string, bool) {
		o, ok := listed[string(name)]
		return o.Name, ok
	}) {
		o := listed[name]
		version := string(x.version)
		if !indexable(version) || x.size < 0 || o.Version != "" && (o.Version != version || o.Size != x.size) {
			continue
		}
		lines = append(lines, indexLine{name: name, version: version, size: x.size, raw: x.header})
	}
	return lines
}

// writeIndex writes the index from the header cache, unless the store is
// ReadOnly or another writeIndex is under way (which writes what this one
// would). Only headers that read well go in: a damaged file is read again,
// and reported again. A failure is logged, never returned: the index only
// saves reads.
func (s *Store[T]) writeIndex(ctx context.Context) {
	if s.cfg.readOnly || !s.imu.TryLock() {
		return
	}
	defer s.imu.Unlock()
	s.mu.Lock()
	lines := make([]indexLine, 0, len(s.headers))
	for name, c := range s.headers {
		if c.err == nil && indexable(name) && indexable(c.obj.Version) && c.obj.Size >= 0 {
			lines = append(lines, indexLine{name: name, version: c.obj.Version, size: c.obj.Size, h: c.h})
		}
	}
	read := s.indexRead
	var cached map[string]bool
	if !read {
		cached = make(map[string]bool, len(s.headers))
		for name := range s.headers {
			cached[name] = true
		}
	}
	gen := s.cacheGen
	s.mu.Unlock()
	if !read {
		lines = append(lines, s.carryIndex(ctx, cached)...)
	}
	write := func(w io.Writer) error {
		bw := bufio.NewWriterSize(w, 64<<10)
		crc := crc32.New(indexCRC)
		out := io.MultiWriter(bw, crc)
		if _, err := io.WriteString(out, indexMagic); err != nil {
			return err
		}
		n, total := 0, len(indexMagic)
		buf := make([]byte, 0, 512)
		for _, l := range lines {
			j := l.raw
			if j == nil {
				var err error
				if j, err = json.Marshal(l.h); err != nil {
					continue
				}
			}
			if len(j) > indexMaxHeader {
				continue
			}
			buf = append(buf[:0], l.name...)
			buf = append(buf, '\t')
			buf = strconv.AppendInt(buf, l.size, 10)
			buf = append(buf, '\t')
			buf = append(buf, l.version...)
			buf = append(buf, '\t')
			buf = append(buf, j...)
			buf = append(buf, '\n')
			if total+len(buf)+64 > indexMaxSize {
				break
			}
			if _, err := out.Write(buf); err != nil {
				return err
			}
			n++
			total += len(buf)
		}
		if _, err := fmt.Fprintf(bw, "end %d %08x\n", n, crc.Sum32()); err != nil {
			return err
		}
		return bw.Flush()
	}
	var err error
	// The index needs no durability (see storage.Unsynced): a crash of the
	// program leaves the old index or the new one, and whatever a power cut
	// leaves of it (an empty or torn file, an old one) is ignored or
	// checked entry by entry against the files' Versions. On the local
	// directory the syncs would cost more than writing the index.
	if u, ok := s.b.(storage.Unsynced); ok {
		_, err = u.ReplaceUnsynced(ctx, indexName, write)
	} else {
		_, err = s.b.Replace(ctx, indexName, "", write)
	}
	if err != nil {
		s.cfg.logger.Warn("checkpoint: cannot write the header index", "path", s.path(indexName), "error", err)
		return
	}
	s.mu.Lock()
	s.indexGen = max(s.indexGen, gen)
	s.mu.Unlock()
}
