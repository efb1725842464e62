package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gocheckpoint/checkpoint"
	"github.com/google/go-cmp/cmp"
)

var diffCommand = command{
	name:    "diff",
	args:    "DIR A B",
	summary: "print the paths at which the states of steps A and B differ",
	flags: func(fs *flag.FlagSet) func(context.Context, *cli, []string) error {
		layout := layoutFlag(fs)
		return func(ctx context.Context, c *cli, args []string) error {
			if err := wantArgs(args, 3, "DIR", "A", "B"); err != nil {
				return err
			}
			var sels [2]selector
			for i, arg := range args[1:] {
				var err error
				if sels[i].step, sels[i].latest, err = parseStep(arg); err != nil {
					return err
				}
			}
			t, st, err := c.openReader(ctx, args[0], *layout)
			if err != nil {
				return err
			}
			defer st.Close()
			var states [2]any
			var infos [2]checkpoint.Info
			for i, sel := range sels {
				raw, info, err := c.load(ctx, st, t.layout, sel)
				if err != nil {
					return err
				}
				if states[i], err = decodeJSON(raw); err != nil {
					return &checkpoint.Error{Op: "diff", Step: info.Step, HasStep: true, Path: info.Location, Err: err}
				}
				infos[i] = info
			}
			c.noteSkipped()
			lines := diffStates(states[0], states[1])
			if len(lines) == 0 {
				// Silence would read as a failure to compare.
				fmt.Fprintf(c.stdout, "equal: step %d (%s) %s and step %d (%s) %s hold the same state\n",
					infos[0].Step, infos[0].Kind, printable(infos[0].Location), infos[1].Step, infos[1].Kind, printable(infos[1].Location))
				return nil
			}
			fmt.Fprintf(c.stdout, "--- step %d (%s) %s\n+++ step %d (%s) %s\n",
				infos[0].Step, infos[0].Kind, printable(infos[0].Location), infos[1].Step, infos[1].Kind, printable(infos[1].Location))
			for _, l := range lines {
				fmt.Fprintln(c.stdout, l)
			}
			return exitCode(exitFound)
		}
	},
}

// decodeJSON decodes a state into maps, slices and scalars, keeping numbers
// as they are written (json.Number), so that no precision is lost.
func decodeJSON(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decode state: %w", err)
	}
	return v, nil
}

// diffStates compares two decoded JSON values with go-cmp and returns one
// line per difference, in the order of a walk with sorted object keys:
//
//	~ PATH: OLD -> NEW   a value changed (or changed type)
//	+ PATH: NEW          a key or array element was added
//	- PATH: OLD          a key or array element was removed
//
// PATH is in jq syntax (.a.b[2], .["odd key"]). Array elements are matched
// by go-cmp's edit script, so an element inserted in the middle is one
// addition, not a change of every element after it; an element that moved
// shows both indexes, old->new.
func diffStates(a, b any) []string {
	var lines []string
	for _, c := range diffChanges(a, b) {
		switch c.Op {
		case "added":
			lines = append(lines, "+ "+c.JQ+": "+*c.B)
		case "removed":
			lines = append(lines, "- "+c.JQ+": "+*c.A)
		default:
			lines = append(lines, "~ "+c.JQ+": "+*c.A+" -> "+*c.B)
		}
	}
	return lines
}

// A change is one difference between two states, as diff prints it and
// serve sends it.
type change struct {
	Op string `json:"op"` // "changed", "added" or "removed"
	JQ string `json:"jq"` // the path in jq syntax, as diff prints it
	// APath and BPath are the path as a JSON Pointer (RFC 6901) in the
	// first and the second state; nil where the value is not there.
	APath *string `json:"a_path"`
	BPath *string `json:"b_path"`
	// A and B are the values, formatted compactly and shortened as diff
	// prints them; nil where the value is not there.
	A *string `json:"a"`
	B *string `json:"b"`
}

// diffChanges compares two decoded JSON values as diffStates does and
// returns the differences.
func diffChanges(a, b any) []change {
	var r pathReporter
	cmp.Equal(a, b, cmp.Reporter(&r))
	return r.changes
}

// pathReporter is a cmp.Reporter that lists the paths of differences.
type pathReporter struct {
	steps   []cmp.PathStep
	changes []change
}

func (r *pathReporter) PushStep(ps cmp.PathStep) { r.steps = append(r.steps, ps) }

func (r *pathReporter) PopStep() { r.steps = r.steps[:len(r.steps)-1] }

func (r *pathReporter) Report(rs cmp.Result) {
	if rs.Equal() {
		return
	}
	vx, vy := r.steps[len(r.steps)-1].Values()
	c := change{JQ: r.path()}
	pa, pb := r.pointers()
	if vx.IsValid() {
		a := formatValue(vx)
		c.A, c.APath = &a, &pa
	}
	if vy.IsValid() {
		b := formatValue(vy)
		c.B, c.BPath = &b, &pb
	}
	switch {
	case !vx.IsValid():
		c.Op = "added"
	case !vy.IsValid():
		c.Op = "removed"
	default:
		c.Op = "changed"
	}
	r.changes = append(r.changes, c)
}

// pointers returns the current path as a JSON Pointer in each state.
func (r *pathReporter) pointers() (a, b string) {
	esc := strings.NewReplacer("~", "~0", "/", "~1")
	var pa, pb []byte
	for _, s := range r.steps {
		switch s := s.(type) {
		case cmp.MapIndex:
			k := esc.Replace(s.Key().String())
			pa = append(append(pa, '/'), k...)
			pb = append(append(pb, '/'), k...)
		case cmp.SliceIndex:
			ix, iy := s.SplitKeys()
			pa = strconv.AppendInt(append(pa, '/'), int64(max(ix, 0)), 10)
			pb = strconv.AppendInt(append(pb, '/'), int64(max(iy, 0)), 10)
		}
	}
	return string(pa), string(pb)
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// path returns the current path in jq syntax; "." is the whole state.
func (r *pathReporter) path() string {
	var b []byte
	for _, s := range r.steps {
		switch s := s.(type) {
		case cmp.MapIndex:
			key := s.Key().String()
			if identifier.MatchString(key) {
				b = append(b, '.')
				b = append(b, key...)
			} else {
				k, _ := json.Marshal(key)
				b = append(b, ".["...)
				b = append(b, safeJSON(k)...)
				b = append(b, ']')
			}
		case cmp.SliceIndex:
			ix, iy := s.SplitKeys()
			b = append(b, '[')
			switch {
			case ix == iy || iy < 0:
				b = strconv.AppendInt(b, int64(ix), 10)
			case ix < 0:
				b = strconv.AppendInt(b, int64(iy), 10)
			default:
				b = strconv.AppendInt(b, int64(ix), 10)
				b = append(b, "->"...)
				b = strconv.AppendInt(b, int64(iy), 10)
			}
			b = append(b, ']')
		}
	}
	if len(b) == 0 || b[0] == '[' {
		b = append([]byte{'.'}, b...)
	}
	return string(b)
}

// maxValueLen bounds how much of a value a diff line shows.
const maxValueLen = 120

// formatValue formats a JSON value compactly, shortened to maxValueLen
// bytes (at a character boundary) with "..." if longer.
func formatValue(v reflect.Value) string {
	var x any
	if v.IsValid() && v.CanInterface() {
		x = v.Interface()
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(x); err != nil {
		return printable(fmt.Sprintf("%v", x))
	}
	b := safeJSON(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	if len(b) <= maxValueLen {
		return string(b)
	}
	s := string(b[:maxValueLen])
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return fmt.Sprintf("%s... (%d bytes)", s, len(b))
}
