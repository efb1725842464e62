package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/gocheckpoint/checkpoint"
)

var verifyCommand = command{
	name:    "verify",
	args:    "DIR",
	summary: "check every checkpoint file: checksum, format version, header, state",
	flags: func(fs *flag.FlagSet) func(context.Context, *cli, []string) error {
		asJSON := fs.Bool("json", false, "print a JSON report instead of lines")
		verbose := fs.Bool("v", false, "print the good files too")
		schema := fs.Int("schema", -1, "the schema `VERSION` the program reads (WithSchema): files of a newer schema are reported as such, not as bad; -1 reads every schema")
		layout := layoutFlag(fs)
		return func(ctx context.Context, c *cli, args []string) error {
			if *schema < -1 || *schema > maxSchema {
				return usagef("--schema %d: want a schema version from 0 to %d", *schema, maxSchema)
			}
			t, err := c.oneDir(ctx, args, *layout)
			if err != nil {
				return err
			}
			r := verifyReport{Dir: t.dir, Layout: t.layout.String(), Files: []fileResult{}, Notes: []fileNote{}, schema: *schema}
			r.meter = c.newMeter("checkpoints", false, false)
			if t.sessions {
				err = r.verifySessions(ctx, t)
			} else {
				err = r.verifyStore(ctx, t, t.dir, "")
			}
			r.meter.stop()
			if err != nil {
				return err
			}
			// Nothing checked is no proof that anything is good: a wrong
			// directory, or a store one level down, must not pass.
			r.OK = r.Bad == 0 && r.Checked > 0
			if *asJSON {
				err = c.printJSON(r)
			} else {
				r.print(c, *verbose)
			}
			if len(r.keyErrs) > 0 {
				fmt.Fprintf(c.stderr, "checkpoint verify: %s\n", c.keyHint(errors.Join(r.keyErrs...)))
			}
			switch {
			case err != nil:
				return err
			case r.Checked == 0 && t.sessions:
				fmt.Fprintf(c.stderr, "checkpoint verify: no sessions in %s: nothing to verify\n", printable(t.dir))
				return exitCode(exitFailed)
			case r.Checked == 0:
				c.noCheckpoints(ctx, c.stderr, "checkpoint verify: %s: nothing to verify\n", t)
				return exitCode(exitFailed)
			case !r.OK:
				return exitCode(exitFound)
			}
			return nil
		}
	},
}

// verifyReport is what verify found; --json prints it as it is.
type verifyReport struct {
	Dir     string       `json:"dir"`
	Layout  string       `json:"layout"`
	OK      bool         `json:"ok"` // no bad file
	Checked int          `json:"checked"`
	Bad     int          `json:"bad"`
	Newer   int          `json:"newer_schema"` // files of a newer schema than --schema: not bad
	Files   []fileResult `json:"files"`
	Notes   []fileNote   `json:"notes"`

	schema  int     // --schema; -1 reads every schema
	keyErrs []error // the files no identity opens, or plaintext

	// meter shows the progress on a terminal: done of the total of the
	// stores listed so far.
	meter       *meter
	done, total int
}

// appendKeyErr appends err to errs if it is ErrNoKey or ErrPlaintext.
func appendKeyErr(errs []error, err error) []error {
	if keyProblem(err) != "" {
		return append(errs, err)
	}
	return errs
}

// fileResult is the verdict on one checkpoint file, or on a session's
// metadata (Kind "session").
type fileResult struct {
	Path    string `json:"path"`
	Session string `json:"session,omitempty"`
	Step    *int64 `json:"step,omitempty"`
	Kind    string `json:"kind"`
	Schema  int    `json:"schema,omitempty"`
	OK      bool   `json:"ok"`
	Newer   bool   `json:"newer_schema,omitempty"` // not OK, but not bad: see --schema
	// Problem says why a bad file is bad: "damaged" (ErrCorrupt: an
	// encrypted file that fails authentication among them), "no_key" (no
	// identity given opens it: ErrNoKey), "plaintext" (ErrPlaintext:
	// a plaintext file read with identities), or "error" (any other).
	Problem string `json:"problem,omitempty"`
	Error   string `json:"error,omitempty"`
}

// problem classifies the error of a bad file for fileResult.Problem.
func problem(err error) string {
	switch {
	case errors.Is(err, checkpoint.ErrNoKey):
		return "no_key"
	case errors.Is(err, checkpoint.ErrPlaintext):
		return "plaintext"
	case errors.Is(err, checkpoint.ErrCorrupt):
		return "damaged"
	}
	return "error"
}

// fileNote is a file that is not a checkpoint but worth knowing about.
type fileNote struct {
	Path    string `json:"path"`
	Session string `json:"session,omitempty"`
	Note    string `json:"note"`
}

const (
	noteTemp        = "temporary file of a save: in progress, or left by a crash (checkpoint gc removes it)"
	noteQuarantined = "damaged checkpoint moved aside by a save (checkpoint gc removes it)"
)

// verifyStore loads every checkpoint of the store in dir in full.
func (r *verifyReport) verifyStore(ctx context.Context, t target, dir, session string) error {
	st, infos, err := openAnySchema(ctx, t, dir, r.schema, t.options(checkpoint.ReadOnly())...)
	if err != nil {
		return err
	}
	defer st.Close()
	r.total += len(infos)
	for _, info := range infos {
		err := verifyCheckpoint(ctx, st, info)
		r.done++
		r.meter.set(r.done, r.total, -1)
		if errors.Is(err, checkpoint.ErrNotFound) {
			continue // removed or replaced by a writer since the listing
		}
		res := fileResult{Path: info.Location, Session: session, Step: &info.Step, Kind: string(info.Kind), Schema: info.Schema, OK: err == nil}
		switch {
		case errors.Is(err, checkpoint.ErrNewerSchema):
			// Verified, but for a newer release of the program.
			res.Newer, res.Error = true, reason(err)
			r.Newer++
		case err != nil:
			res.Error, res.Problem = reason(err), problem(err)
			r.Bad++
			r.keyErrs = appendKeyErr(r.keyErrs, err)
		}
		r.Checked++
		r.Files = append(r.Files, res)
	}
	left, err := st.Leftovers(ctx)
	if err != nil {
		return err
	}
	for _, p := range left.Temps {
		r.Notes = append(r.Notes, fileNote{Path: p, Session: session, Note: noteTemp})
	}
	for _, p := range left.Quarantined {
		r.Notes = append(r.Notes, fileNote{Path: p, Session: session, Note: noteQuarantined})
	}
	return nil
}

// verifyCheckpoint reads the checkpoint info of st in full, which
// verifies it: its checksum, header and state, or its byte payload.
func verifyCheckpoint(ctx context.Context, st *checkpoint.Store[json.RawMessage], info checkpoint.Info) error {
	_, _, err := st.LoadExact(ctx, info)
	if errors.Is(err, checkpoint.ErrPayloadMismatch) {
		// A byte payload: read to its end, which verifies it.
		var r io.ReadCloser
		if r, _, err = st.OpenPayloadExact(ctx, info); err == nil {
			_, err = io.Copy(io.Discard, r)
			r.Close()
		}
	}
	return err
}

// verifySessions verifies each session's metadata and store.
func (r *verifyReport) verifySessions(ctx context.Context, t target) error {
	root, err := t.openSessions(ctx, t.options(checkpoint.ReadOnly())...)
	if err != nil {
		return err
	}
	defer root.Close()
	list, err := root.List(ctx)
	if err != nil {
		return err
	}
	for _, s := range list {
		meta := fileResult{Path: joinName(s.Dir, "session.json"), Session: s.ID, Kind: "session", OK: true}
		if s.Err != nil {
			meta.Path = pathOf(s.Err, s.Dir)
			meta.OK, meta.Error, meta.Problem = false, reason(s.Err), problem(s.Err)
			r.Bad++
			r.keyErrs = appendKeyErr(r.keyErrs, s.Err)
		}
		r.Checked++
		r.Files = append(r.Files, meta)
		if err := r.verifyStore(ctx, t, s.Dir, s.ID); err != nil && s.Err == nil {
			// One unreadable session does not hide the others (s.Err,
			// if set, already says why it is unreadable).
			r.Files = append(r.Files, fileResult{Path: pathOf(err, s.Dir), Session: s.ID, Kind: "session", Error: reason(err), Problem: problem(err)})
			r.keyErrs = appendKeyErr(r.keyErrs, err)
			r.Bad++
			r.Checked++
		}
	}
	return nil
}

func (r verifyReport) print(c *cli, verbose bool) {
	tw := newTable(c.stdout)
	for _, f := range r.Files {
		switch {
		case f.Newer:
			fmt.Fprintf(tw, "newer schema\t%s\t%s\n", printable(f.Path), printable(f.Error))
		case f.Problem == "no_key":
			fmt.Fprintf(tw, "NO KEY\t%s\t%s\n", printable(f.Path), printable(f.Error))
		case f.Problem == "plaintext":
			fmt.Fprintf(tw, "PLAINTEXT\t%s\t%s\n", printable(f.Path), printable(f.Error))
		case !f.OK:
			fmt.Fprintf(tw, "BAD\t%s\t%s\n", printable(f.Path), printable(f.Error))
		case verbose:
			fmt.Fprintf(tw, "ok\t%s\t\n", printable(f.Path))
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(tw, "note\t%s\t%s\n", printable(n.Path), n.Note)
	}
	tw.Flush()
	if r.Checked == 0 {
		return // the command says why on stderr
	}
	newer := ""
	if r.Newer > 0 {
		newer = fmt.Sprintf(", %d of a newer schema", r.Newer)
	}
	noKey, plain := 0, 0
	for _, f := range r.Files {
		switch f.Problem {
		case "no_key":
			noKey++
		case "plaintext":
			plain++
		}
	}
	if noKey > 0 {
		newer += fmt.Sprintf(", %d encrypted to a key no identity given opens", noKey)
	}
	if plain > 0 {
		newer += fmt.Sprintf(", %d not encrypted", plain)
	}
	fmt.Fprintf(c.stdout, "%s checked in %s (layout %s): %d ok, %d bad%s\n", files(r.Checked), printable(r.Dir), r.Layout, r.Checked-r.Bad-r.Newer, r.Bad, newer)
}

// pathOf returns the path an error names, or else dflt.
func pathOf(err error, dflt string) string {
	var e *checkpoint.Error
	if errors.As(err, &e) && e.Path != "" {
		return e.Path
	}
	return dflt
}
