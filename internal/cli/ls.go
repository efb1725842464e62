package cli

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/gocheckpoint/checkpoint"
)

var lsCommand = command{
	name:    "ls",
	args:    "DIR",
	summary: "list the checkpoints of a store, or the sessions of a root",
	flags: func(fs *flag.FlagSet) func(context.Context, *cli, []string) error {
		asJSON := fs.Bool("json", false, "print JSON instead of a table")
		exact := fs.Bool("bytes", false, "print sizes in bytes, exactly (by default 4.2 KiB)")
		layout := layoutFlag(fs)
		return func(ctx context.Context, c *cli, args []string) error {
			t, err := c.oneDir(ctx, args, *layout)
			if err != nil {
				return err
			}
			if t.sessions {
				return c.lsSessions(ctx, t, *asJSON)
			}
			return c.lsStore(ctx, t, *asJSON, *exact)
		}
	},
}

func (c *cli) lsStore(ctx context.Context, t target, asJSON, exact bool) error {
	keyErrs := &headerErrors{}
	st, err := t.open(ctx, t.dir, t.options(checkpoint.ReadOnly(), checkpoint.WithLogger(slog.New(keyErrs)))...)
	if err != nil {
		return err
	}
	defer st.Close()
	infos, err := st.List(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		if infos == nil {
			infos = []checkpoint.Info{}
		}
		defer c.noteKeyErrors(keyErrs.keyErrs())
		return c.printJSON(infos)
	}
	defer c.noteKeyErrors(keyErrs.keyErrs())
	if len(infos) == 0 {
		c.noCheckpoints(ctx, c.stdout, "%s\n", t)
		return nil
	}
	tw := newTable(c.stdout)
	// The SCHEMA column appears when a file records a schema (WithSchema).
	schemaHead := ""
	withSchema := slices.ContainsFunc(infos, func(info checkpoint.Info) bool { return info.Schema != 0 })
	if withSchema {
		schemaHead = "SCHEMA\t"
	}
	// The METRICS column appears when a checkpoint records one (WithMetric).
	metricsHead := ""
	withMetrics := slices.ContainsFunc(infos, func(info checkpoint.Info) bool { return len(info.Metrics) > 0 })
	if withMetrics {
		metricsHead = "METRICS\t"
	}
	fmt.Fprintf(tw, "STEP\tKIND\t%sTIME\tSIZE\tCOMPRESSED\tFILE\t%sMETA\n", schemaHead, metricsHead)
	for _, info := range infos {
		when, meta := c.when(info.Time), formatMeta(info.Meta)
		if info.Format == 0 {
			when, meta = "-", "(unreadable header: see checkpoint verify)"
			if err := keyErrs.of(info.Location); keyProblem(err) != "" {
				meta = "(" + keyProblem(err) + ")"
			}
		}
		if info.Payload == checkpoint.PayloadBytes {
			meta = strings.TrimSpace("(byte payload) " + meta)
		}
		metrics := ""
		if withMetrics {
			metrics = formatMetrics(info.Metrics) + "\t"
		}
		schema := ""
		switch {
		case withSchema && info.Format == 0:
			schema = "-\t"
		case withSchema:
			schema = strconv.Itoa(info.Schema) + "\t"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s%s\t%s\t%s\t%s\t%s%s\n", info.Step, info.Kind, schema, when, size(info.Size, exact), compression(info), printable(info.Name()), metrics, meta)
	}
	return tw.Flush()
}

// noCheckpoints writes to w, formatted by format, that the store t holds no
// checkpoint, then notes the subdirectories that do, for a user one level
// too high.
func (c *cli) noCheckpoints(ctx context.Context, w io.Writer, format string, t target) {
	fmt.Fprintf(w, format, fmt.Sprintf("no checkpoints in %s (layout %s)", printable(t.dir), t.layout))
	if t.remote != nil {
		if subs := c.remoteStoresBelow(ctx, t); len(subs) > 0 {
			c.notef("these prefixes hold checkpoints: %s", strings.Join(subs, ", "))
		}
	} else if subs := storesBelow(t.dir, hintEntries); len(subs) > 0 {
		c.notef("these subdirectories hold checkpoints: %s", strings.Join(subs, ", "))
	}
}

// sessionJSON is a session as ls --json prints it.
type sessionJSON struct {
	ID          string             `json:"id"`
	Dir         string             `json:"dir"`
	Created     *time.Time         `json:"created,omitempty"` // missing for a damaged session
	Updated     *time.Time         `json:"updated,omitempty"`
	Active      time.Time          `json:"active"`
	Parent      string             `json:"parent,omitempty"`
	ParentStep  *int64             `json:"parent_step,omitempty"`
	Meta        map[string]string  `json:"meta,omitempty"`
	Checkpoints int                `json:"checkpoints"`
	Size        int64              `json:"size"`
	LastStep    *int64             `json:"last_step,omitempty"`
	LastKind    checkpoint.Kind    `json:"last_kind,omitempty"`
	LastSaved   *time.Time         `json:"last_saved,omitempty"`
	LastMetrics map[string]float64 `json:"last_metrics,omitempty"`
	Error       string             `json:"error,omitempty"`
}

// toSessionJSON returns s as ls --json prints it.
func toSessionJSON(s checkpoint.Session) sessionJSON {
	j := sessionJSON{ID: s.ID, Dir: s.Dir, Active: s.Active(), Parent: s.Parent, Meta: s.Meta, Checkpoints: s.Checkpoints, Size: s.Size}
	if !s.Created.IsZero() {
		j.Created, j.Updated = &s.Created, &s.Updated
	}
	if s.Parent != "" {
		j.ParentStep = &s.ParentStep
	}
	if !s.LastSaved.IsZero() {
		j.LastStep, j.LastKind, j.LastSaved, j.LastMetrics = &s.LastStep, s.LastKind, &s.LastSaved, s.LastMetrics
	}
	if s.Err != nil {
		j.Error = s.Err.Error()
	}
	return j
}

func (c *cli) lsSessions(ctx context.Context, t target, asJSON bool) error {
	root, err := t.openSessions(ctx, t.options(checkpoint.ReadOnly())...)
	if err != nil {
		return err
	}
	defer root.Close()
	list, err := root.List(ctx)
	if err != nil {
		return err
	}
	defer c.noteKeyErrors(sessionKeyErrors(list))
	if asJSON {
		out := make([]sessionJSON, 0, len(list))
		for _, s := range list {
			out = append(out, toSessionJSON(s))
		}
		return c.printJSON(out)
	}
	if len(list) == 0 {
		fmt.Fprintf(c.stdout, "no sessions in %s\n", printable(t.dir))
		return nil
	}
	tw := newTable(c.stdout)
	fmt.Fprintln(tw, "SESSION\tCHECKPOINTS\tLAST STEP\tLAST SAVED\tCREATED\tPARENT\tMETA")
	for _, s := range list {
		last, saved := "-", "-"
		if !s.LastSaved.IsZero() {
			last, saved = strconv.FormatInt(s.LastStep, 10), c.when(s.LastSaved)
		}
		created, parent, meta := "-", "-", formatMeta(s.Meta)
		if !s.Created.IsZero() {
			created = c.when(s.Created)
		}
		if s.Parent != "" {
			parent = fmt.Sprintf("%s@%d", quoteIfNeeded(s.Parent), s.ParentStep)
		}
		if s.Err != nil {
			meta = strings.TrimSpace(meta + " (" + sessionErrText(s.Err) + ")")
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", sessionLabel(s), s.Checkpoints, last, saved, created, parent, meta)
	}
	return tw.Flush()
}

// table aligns tab-separated cells in columns, two spaces apart, without
// trailing spaces when the last cells of a line are empty.
type table struct {
	w   io.Writer
	buf bytes.Buffer
	tw  *tabwriter.Writer
}

func newTable(w io.Writer) *table {
	t := &table{w: w}
	t.tw = tabwriter.NewWriter(&t.buf, 0, 0, 2, ' ', 0)
	return t
}

func (t *table) Write(p []byte) (int, error) { return t.tw.Write(p) }

// Flush writes the table.
func (t *table) Flush() error {
	if err := t.tw.Flush(); err != nil {
		return err
	}
	var out []byte
	for line := range bytes.Lines(t.buf.Bytes()) {
		out = append(out, bytes.TrimRight(line, " \n")...)
		out = append(out, '\n')
	}
	t.buf.Reset()
	_, err := t.w.Write(out)
	return err
}

// when formats a save time for a person: UTC to the second, and how long
// before the command ran.
func (c *cli) when(t time.Time) string {
	return t.UTC().Format(time.RFC3339) + " (" + age(c.now.Sub(t)) + ")"
}

// age says how long ago d was: "45s ago", "12m ago", "3h5m ago", "2d4h
// ago"; a time ahead of the clock is "in 5m".
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "in " + span(-d)
	case d < time.Second:
		return "just now"
	}
	return span(d) + " ago"
}

// span writes d in its two largest units, rounded down.
func span(d time.Duration) string {
	two := func(a int64, ua string, b int64, ub string) string {
		s := strconv.FormatInt(a, 10) + ua
		if b > 0 {
			s += strconv.FormatInt(b, 10) + ub
		}
		return s
	}
	const day = 24 * time.Hour
	switch {
	case d < time.Minute:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	case d < time.Hour:
		return two(int64(d/time.Minute), "m", int64(d%time.Minute/time.Second), "s")
	case d < day:
		return two(int64(d/time.Hour), "h", int64(d%time.Hour/time.Minute), "m")
	}
	return two(int64(d/day), "d", int64(d%day/time.Hour), "h")
}

// size formats a size in bytes for a person (376 B, 4.2 KiB, 1.5 MiB), or
// exactly with --bytes.
func size(n int64, exact bool) string {
	if exact || n < 1024 && n > -1024 {
		if exact {
			return strconv.FormatInt(n, 10)
		}
		return strconv.FormatInt(n, 10) + " B"
	}
	v, unit := float64(n)/1024, 0
	for ; (v >= 1024 || v <= -1024) && unit < 4; unit++ {
		v /= 1024
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " " + [...]string{"KiB", "MiB", "GiB", "TiB", "PiB"}[unit]
}

// formatMeta formats labels as key=value, sorted by key, quoting values
// that need it.
func formatMeta(meta map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(meta)) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(quoteIfNeeded(k))
		b.WriteByte('=')
		b.WriteString(quoteIfNeeded(meta[k]))
	}
	return b.String()
}

// formatMetrics shows metrics as name=value pairs sorted by name, each
// value in the shortest form that reads back as the same float64; "-"
// where there is none.
func formatMetrics(metrics map[string]float64) string {
	if len(metrics) == 0 {
		return "-"
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(metrics)) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(quoteIfNeeded(k))
		b.WriteByte('=')
		b.WriteString(strconv.FormatFloat(metrics[k], 'g', -1, 64))
	}
	return b.String()
}

// sessionLabel shows the ID of s as given (see checkpoint.ValidSessionID),
// quoted if it is empty or holds a space, a quote, '=', '\\' or a
// character that is not printable, so that it stays one column; a damaged
// session whose ID is unknown (a mapped name without its session.json)
// shows its stored name in parentheses.
func sessionLabel(s checkpoint.Session) string {
	if s.ID == "" && s.Err != nil {
		return "(" + printable(path.Base(filepath.ToSlash(s.Dir))) + ")"
	}
	return quoteIfNeeded(s.ID)
}

// quoteIfNeeded returns s, or s quoted (strconv.Quote) if it is empty or
// holds a space, a quote, '=', '\\' or a character that is not printable.
func quoteIfNeeded(s string) string {
	if s == "" || strings.ContainsFunc(s, func(r rune) bool {
		return r == ' ' || r == '"' || r == '=' || r == '\\' || !unicode.IsPrint(r)
	}) {
		return strconv.Quote(s)
	}
	return s
}

// compression names a checkpoint's compression, "no" for a plain file.
func compression(info checkpoint.Info) string {
	if info.Compression == "" {
		return "no"
	}
	return info.Compression
}

// reason returns what went wrong, without the operation and path a
// *checkpoint.Error puts in front when the caller prints the path itself.
func reason(err error) string {
	if e, ok := err.(*checkpoint.Error); ok {
		return e.Err.Error()
	}
	return err.Error()
}

// The search for stores below a directory without checkpoints is a hint:
// it looks a few levels down, names a few, and reads a bounded number of
// directory entries in all, so that ls of a home directory stays quick.
const (
	hintDepth   = 3     // levels below the directory given
	hintStores  = 5     // stores named before "..."
	hintEntries = 20000 // directory entries read in all
)

// storesBelow returns the directories below dir, down to hintDepth levels
// and shallowest first, that hold checkpoint files or sessions (a root of
// sessions is named once, marked, not each of its sessions), at most
// hintStores of them and then "...", as a hint for a user a level or a few
// too high. It never follows a symbolic link and skips hidden directories
// (a crashed fork's staging among them). It reads each directory once, and
// stops, ending with "...", once it has read budget directory entries in
// all (hintEntries for ls).
func storesBelow(dir string, budget int) []string {
	// A directory read, kept for the next level down: what tells whether
	// it holds checkpoints or sessions also lists its subdirectories.
	type listing struct {
		dir     string
		dirents []os.DirEntry
	}
	top, complete := readDirBounded(dir, &budget)
	level := []listing{{dir, top}}
	var out []string
	for depth := 0; depth < hintDepth && len(level) > 0; depth++ {
		var next []listing
		for _, l := range level {
			for _, de := range l.dirents {
				// A DirEntry's type is the entry's own (Lstat's): a
				// symbolic link to a directory is no directory here.
				if !de.IsDir() || strings.HasPrefix(de.Name(), ".") {
					continue
				}
				sub := filepath.Join(l.dir, de.Name())
				subents, whole := readDirBounded(sub, &budget)
				switch {
				case !whole:
					return append(out, "...")
				case sessionsIn(sub, subents, true).root:
					out = append(out, sub+" (sessions)")
				case holdsCheckpoints(subents):
					out = append(out, sub)
				default:
					next = append(next, listing{sub, subents})
					continue
				}
				if len(out) == hintStores {
					return append(out, "...")
				}
			}
		}
		if !complete { // dir itself was not read whole
			return append(out, "...")
		}
		level = next
	}
	return out
}

// readDirBounded returns the entries of dir, sorted by name, reading no
// more than *budget of them and taking what it read from *budget; complete
// is false if it stopped before the end. An unreadable directory has none.
func readDirBounded(dir string, budget *int) (dirents []os.DirEntry, complete bool) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, true
	}
	defer f.Close()
	for *budget > 0 {
		batch, err := f.ReadDir(min(*budget, 256))
		*budget -= len(batch)
		dirents = append(dirents, batch...)
		if err != nil { // io.EOF at the end
			slices.SortFunc(dirents, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
			return dirents, true
		}
	}
	return dirents, false
}

// holdsCheckpoints reports whether dirents, a directory's entries, name a
// checkpoint file of any layout, as checkpoint.DetectLayouts decides it,
// without reading the directory again.
func holdsCheckpoints(dirents []os.DirEntry) bool {
	objs := make([]checkpoint.Object, len(dirents))
	for i, d := range dirents {
		// As DetectLayouts describes a directory entry: a Version set
		// says the listing tells what the object is, so nothing is
		// asked of the backend but its listing.
		objs[i] = checkpoint.Object{Name: d.Name(), Size: -1, Version: "dirent", Mode: d.Type()}
	}
	found, err := checkpoint.DetectBackendLayouts(context.Background(), listed(objs))
	return err == nil && len(found) > 0
}

// listedObjects is a Backend that is only a listing, for DetectBackendLayouts,
// which lists once and, given a Version for each object, asks nothing
// else: any other method is a nil Backend's, and would panic.
type listedObjects struct {
	checkpoint.Backend
	objs []checkpoint.Object
}

func listed(objs []checkpoint.Object) listedObjects { return listedObjects{objs: objs} }

func (l listedObjects) List(context.Context) ([]checkpoint.Object, error) { return l.objs, nil }

// remoteStoresBelow is storesBelow for a remote location: the child
// prefixes of t that hold checkpoints, at most a few. It is a hint, so a
// failure to list is no error.
func (c *cli) remoteStoresBelow(ctx context.Context, t target) []string {
	b, err := t.remote.Open(ctx, t.dir)
	if err != nil {
		return nil
	}
	defer b.Close()
	children, err := b.Children(ctx)
	if err != nil {
		return nil
	}
	slices.Sort(children)
	var out []string
	for _, name := range children {
		sub, err := b.Sub(ctx, name, false)
		if err != nil {
			continue
		}
		found, err := checkpoint.DetectBackendLayouts(ctx, sub)
		sub.Close()
		if err == nil && len(found) > 0 {
			if out = append(out, joinName(t.dir, name)); len(out) == 5 {
				return append(out, "...")
			}
		}
	}
	return out
}
