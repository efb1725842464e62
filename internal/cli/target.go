package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gocheckpoint/checkpoint"
	ckptnames "github.com/gocheckpoint/checkpoint/internal/names"
)

// defaultLayout is the library's default, used for a directory without a
// checkpoint file.
var defaultLayout = checkpoint.Layout{Prefix: "step", Digits: 8}

// target is the directory a command works on, or the location of a store
// that a Remote opens (s3://bucket/prefix).
type target struct {
	dir      string
	remote   *Remote // nil for a local directory
	sessions bool    // a root of sessions, not a store
	layout   checkpoint.Layout
	// empty: no file of any layout was found and none was given; the
	// writing commands leave such a directory alone.
	empty bool
	// enc is Encrypt with the command's identities (--identity,
	// CHECKPOINT_IDENTITY), or nothing without identities.
	enc []checkpoint.Option
}

// options returns the options that open the target's stores: its layout,
// its encryption, and more.
func (t target) options(more ...checkpoint.Option) []checkpoint.Option {
	opts := append([]checkpoint.Option{t.layout.Option()}, t.enc...)
	return append(opts, more...)
}

// open opens the store in dir (t.dir, or a session's directory in it) with
// opts: a local directory with checkpoint.Open, a remote location with
// checkpoint.OpenBackend on what the remote opens.
func (t target) open(ctx context.Context, dir string, opts ...checkpoint.Option) (*checkpoint.Store[json.RawMessage], error) {
	if t.remote == nil {
		return checkpoint.Open[json.RawMessage](dir, opts...)
	}
	b, err := t.remote.Open(ctx, dir)
	if err != nil {
		return nil, err
	}
	return checkpoint.OpenBackend[json.RawMessage](b, opts...)
}

// joinName names the file name of the store dir (a directory, or a
// location such as s3://bucket/prefix/), as the store's errors do.
func joinName(dir, name string) string {
	if schemeOf(dir) != "" {
		return strings.TrimSuffix(dir, "/") + "/" + name
	}
	return filepath.Join(dir, name)
}

// schemeOf returns the scheme of a location SCHEME://..., such as s3, or
// "" for a directory (C:\dir and ./a:b included).
func schemeOf(loc string) string {
	scheme, _, ok := strings.Cut(loc, "://")
	if !ok || scheme == "" {
		return ""
	}
	for i, r := range scheme {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || i > 0 && ('0' <= r && r <= '9' || r == '+' || r == '-' || r == '.')) {
			return ""
		}
	}
	return strings.ToLower(scheme)
}

// resolve finds out what dir is, a store or a root of sessions, and the
// layout of its checkpoint files: the one given with --layout, or the one
// that names the most files, with a note on stderr if there are others.
func (c *cli) resolve(ctx context.Context, dir, layoutArg string) (target, error) {
	t := target{dir: dir}
	enc, err := c.encryption()
	if err != nil {
		return t, err
	}
	t.enc = enc
	if scheme := schemeOf(dir); scheme != "" {
		return c.resolveRemote(ctx, t, scheme, layoutArg)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("%w: no such directory", checkpoint.ErrNotFound)
		}
		return t, &checkpoint.Error{Op: c.cmd, Path: dir, Err: err}
	}
	if !fi.IsDir() {
		return t, &checkpoint.Error{Op: c.cmd, Path: dir, Err: errors.New("not a directory")}
	}
	want, err := parseLayout(layoutArg)
	if err != nil {
		return t, err
	}
	found, err := checkpoint.DetectLayouts(dir)
	if err != nil {
		return t, err
	}
	if len(found) == 0 {
		if ids, ok := sessionDirs(dir); ok {
			t.sessions = true
			if found, err = rootLayouts(ids, func(id string) ([]checkpoint.Layout, error) {
				return checkpoint.DetectLayouts(filepath.Join(dir, id))
			}); err != nil {
				return t, err
			}
		}
	}
	what := dir
	if t.sessions {
		what = "the sessions of " + dir
	}
	t.empty = len(found) == 0 && want.Prefix == ""
	t.layout, err = c.chooseLayout(what, want, found)
	return t, err
}

// resolveRemote resolves a location that the remote of scheme opens: a
// store (object storage has no roots of sessions that the library opens
// yet), whose layout is found from one listing.
func (c *cli) resolveRemote(ctx context.Context, t target, scheme, layoutArg string) (target, error) {
	i := slices.IndexFunc(c.remotes, func(r Remote) bool { return r.Scheme == scheme })
	if i < 0 || c.remotes[i].Open == nil {
		if i >= 0 && c.remotes[i].Missing != "" {
			return t, usagef("%s: this checkpoint command reads local directories only; for %s:// locations install the one with %s support: %s", t.dir, scheme, scheme, c.remotes[i].Missing)
		}
		return t, usagef("%s: unknown location scheme %q: give a directory", t.dir, scheme)
	}
	t.remote = &c.remotes[i]
	want, err := parseLayout(layoutArg)
	if err != nil {
		return t, err
	}
	b, err := t.remote.Open(ctx, t.dir)
	if err != nil {
		return t, err
	}
	defer b.Close()
	found, err := checkpoint.DetectBackendLayouts(ctx, b)
	if err != nil {
		return t, err
	}
	if len(found) == 0 {
		ids, err := remoteSessions(ctx, b)
		if err != nil {
			return t, err
		}
		if t.sessions = len(ids) > 0; t.sessions {
			found, err = rootLayouts(ids, func(id string) ([]checkpoint.Layout, error) {
				sub, err := b.Sub(ctx, id, false)
				if err != nil {
					return nil, err
				}
				defer sub.Close()
				return checkpoint.DetectBackendLayouts(ctx, sub)
			})
			if err != nil {
				return t, err
			}
		}
	}
	what := t.dir
	if t.sessions {
		what = "the sessions of " + t.dir
	}
	t.empty = len(found) == 0 && want.Prefix == ""
	t.layout, err = c.chooseLayout(what, want, found)
	return t, err
}

// remoteSessions returns the stored names of the sessions in b, a root of sessions
// on a Backend (checkpoint.OpenSessionsBackend): the child stores that
// hold a session.json. None if b is no such root.
func remoteSessions(ctx context.Context, b checkpoint.Backend) ([]string, error) {
	children, err := b.Children(ctx)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, id := range children {
		if !ckptnames.IsSessionName(id) {
			continue // not a session's stored name (see checkpoint.ValidSessionID)
		}
		sub, err := b.Sub(ctx, id, false)
		if err != nil {
			return nil, err
		}
		_, err = sub.Stat(ctx, "session.json")
		sub.Close()
		if err == nil {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// openSessions opens the root of sessions t read-only, or with opts.
func (t target) openSessions(ctx context.Context, opts ...checkpoint.Option) (*checkpoint.Sessions, error) {
	if t.remote == nil {
		return checkpoint.OpenSessions(t.dir, opts...)
	}
	b, err := t.remote.Open(ctx, t.dir)
	if err != nil {
		return nil, err
	}
	return checkpoint.OpenSessionsBackend(b, opts...)
}

// oneDir resolves the one argument, DIR, of ls, verify, prune and gc.
func (c *cli) oneDir(ctx context.Context, args []string, layoutArg string) (target, error) {
	if err := wantArgs(args, 1, "DIR"); err != nil {
		return target{}, err
	}
	return c.resolve(ctx, args[0], layoutArg)
}

// openReader resolves the store dir for show and diff and opens it
// read-only, reading every schema, recording the damaged checkpoints Latest
// passes over.
func (c *cli) openReader(ctx context.Context, dir, layoutArg string) (target, *checkpoint.Store[json.RawMessage], error) {
	t, err := c.resolve(ctx, dir, layoutArg)
	if err != nil {
		return t, nil, err
	}
	if err := t.requireStore(c.cmd); err != nil {
		return t, nil, err
	}
	st, _, err := openAnySchema(ctx, t, t.dir, -1, t.options(checkpoint.ReadOnly(), c.skippedHook())...)
	return t, st, err
}

// maxSchema bounds the schema versions the tool reads: a file that claims
// a higher one is reported as of a newer schema.
const maxSchema = 1 << 16

// openAnySchema opens the store in dir with opts, reading the states of
// every schema up to upTo as they were saved (up to the highest schema in
// dir if upTo is negative), and returns it with its checkpoints. The tool
// knows no program's state type, so it shows states unmigrated: each step
// of the chain returns its input.
func openAnySchema(ctx context.Context, t target, dir string, upTo int, opts ...checkpoint.Option) (*checkpoint.Store[json.RawMessage], []checkpoint.Info, error) {
	st, err := t.open(ctx, dir, opts...)
	if err != nil {
		return nil, nil, err
	}
	infos, err := st.List(ctx)
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	if upTo < 0 {
		for _, info := range infos {
			upTo = max(upTo, min(info.Schema, maxSchema))
		}
	}
	if upTo <= 0 {
		return st, infos, nil
	}
	st.Close()
	st, err = t.open(ctx, dir, append(opts, readSchemas(upTo))...)
	return st, infos, err
}

// readSchemas is WithSchema(upTo) with migrations that return their
// input: a store opened with it reads the states of every schema up to
// upTo as they were saved.
func readSchemas(upTo int) checkpoint.Option {
	keep := func(state json.RawMessage) (json.RawMessage, error) { return state, nil }
	chain := make([]checkpoint.Migration, upTo)
	for i := range chain {
		chain[i] = checkpoint.Migration{From: i, Migrate: keep}
	}
	return checkpoint.WithSchema(upTo, chain...)
}

// parseLayout parses --layout: PREFIX/DIGITS or PREFIX (Digits 0).
func parseLayout(s string) (checkpoint.Layout, error) {
	if s == "" {
		return checkpoint.Layout{}, nil
	}
	prefix, digits, ok := strings.Cut(s, "/")
	l := checkpoint.Layout{Prefix: prefix}
	if ok {
		n, err := strconv.Atoi(digits)
		if err != nil || n < 1 || n > 19 {
			return l, usagef("--layout %q: want PREFIX/DIGITS with DIGITS from 1 to 19, such as turn/3", s)
		}
		l.Digits = n
	}
	if prefix == "" {
		return l, usagef("--layout %q: want PREFIX/DIGITS, such as turn/3", s)
	}
	return l, nil
}

// chooseLayout picks the layout of what: want if it is complete, else the
// detected layout with the most files (of want's prefix, if given).
func (c *cli) chooseLayout(what string, want checkpoint.Layout, found []checkpoint.Layout) (checkpoint.Layout, error) {
	if want.Digits != 0 {
		return want, nil
	}
	if want.Prefix != "" {
		for _, l := range found {
			if l.Prefix == want.Prefix {
				return l, nil
			}
		}
		return checkpoint.Layout{Prefix: want.Prefix, Digits: defaultLayout.Digits}, nil
	}
	switch {
	case len(found) == 0:
		return defaultLayout, nil
	case len(found) == 1:
		return found[0], nil
	case found[0].Files == found[1].Files:
		return checkpoint.Layout{}, usagef("found as many files of layout %s as of %s in %s; choose one with --layout", found[0], found[1], what)
	}
	var others []string
	for _, l := range found[1:] {
		others = append(others, fmt.Sprintf("%s (%s)", l, files(l.Files)))
	}
	c.notef("found files of layout %s in %s too; using %s (%s); choose with --layout", strings.Join(others, ", "), what, found[0], files(found[0].Files))
	return found[0], nil
}

func files(n int) string {
	if n == 1 {
		return "1 file"
	}
	return strconv.Itoa(n) + " files"
}

// sessionDirs returns the session directories of dir and whether dir is a
// root of sessions (see sessionsIn).
func sessionDirs(dir string) ([]string, bool) {
	dirents, err := os.ReadDir(dir)
	if err != nil {
		return nil, false
	}
	s := sessionsIn(dir, dirents, false)
	return s.ids, s.root
}

// sessions is what a directory's entries say of it as a root of sessions.
type sessions struct {
	ids  []string // the session directories' names
	root bool     // the sessions lock file, or a session directory with a session.json file
}

// sessionsIn decides, from dirents, the entries of dir, whether dir is a
// root of sessions and, unless rootOnly, which session directories it has.
// It stats session.json in session directories until one makes dir a root.
func sessionsIn(dir string, dirents []os.DirEntry, rootOnly bool) sessions {
	var s sessions
	for _, d := range dirents {
		switch {
		case d.Name() == ".sessions.lock" && d.Type().IsRegular():
			s.root = true
		case d.IsDir() && ckptnames.IsSessionName(d.Name()):
			if !rootOnly {
				s.ids = append(s.ids, d.Name())
			}
			if s.root {
				continue
			}
			if fi, err := os.Lstat(filepath.Join(dir, d.Name(), "session.json")); err == nil && fi.Mode().IsRegular() {
				s.root = true
			}
		}
		if s.root && rootOnly {
			return s
		}
	}
	return s
}

// rootLayouts adds up the layouts of the sessions ids of a root, each found
// by detect: the sessions of a root share their options, layout included.
func rootLayouts(ids []string, detect func(id string) ([]checkpoint.Layout, error)) ([]checkpoint.Layout, error) {
	var all []checkpoint.Layout
	for _, id := range ids {
		found, err := detect(id)
		if err != nil {
			return nil, err
		}
		for _, l := range found {
			i := 0
			for i < len(all) && (all[i].Prefix != l.Prefix || all[i].Digits != l.Digits) {
				i++
			}
			if i == len(all) {
				all = append(all, checkpoint.Layout{Prefix: l.Prefix, Digits: l.Digits})
			}
			all[i].Files += l.Files
		}
	}
	sortLayouts(all)
	return all, nil
}

// sortLayouts orders layouts as DetectLayouts does: most files first.
func sortLayouts(ls []checkpoint.Layout) {
	slices.SortFunc(ls, func(a, b checkpoint.Layout) int {
		return cmp.Or(cmp.Compare(b.Files, a.Files), strings.Compare(a.Prefix, b.Prefix), cmp.Compare(a.Digits, b.Digits))
	})
}

// requireStore refuses a root of sessions for commands that work on one
// store.
func (t target) requireStore(cmd string) error {
	if t.sessions {
		return usagef("%s is a root of sessions; give one session's directory (checkpoint %s %s ...; checkpoint ls %s lists them)", t.dir, cmd, joinName(t.dir, "ID"), t.dir)
	}
	return nil
}

// printJSON writes v as indented JSON.
func (c *cli) printJSON(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = c.stdout.Write(append(safeJSON(b), '\n'))
	return err
}
