package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
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
			lines, exact := diffStates(states[0], states[1])
			if !exact {
				c.notef("the states are too big or their arrays too deeply nested for an edit script: arrays are compared index by index")
			}
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
// shows both indexes, old->new. When that would cost too much (see
// diffChanges), exact is false and arrays are compared index by index.
func diffStates(a, b any) (lines []string, exact bool) {
	changes, exact := diffChanges(a, b)
	for _, c := range changes {
		switch c.Op {
		case "added":
			lines = append(lines, "+ "+c.JQ+": "+*c.B)
		case "removed":
			lines = append(lines, "- "+c.JQ+": "+*c.A)
		default:
			lines = append(lines, "~ "+c.JQ+": "+*c.A+" -> "+*c.B)
		}
	}
	return lines, exact
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

// maxDiffSteps and maxDiffTime bound the values go-cmp may compare for one
// diff, and for how long. Its edit script of an array compares elements
// pairwise, each in full, so that arrays nested in arrays cost
// exponentially in their depth (two 20-deep arrays: minutes). Past either
// bound, the diff is made again by a walker, which compares arrays index
// by index: linear in the states' size.
const (
	maxDiffSteps = 1 << 20
	maxDiffTime  = 500 * time.Millisecond
)

// errDiffBudget stops go-cmp once maxDiffSteps values were compared.
var errDiffBudget = errors.New("diff: too many comparisons for an edit script")

// diffChanges compares two decoded JSON values as diffStates does and
// returns the differences, and whether they are go-cmp's (exact) rather
// than walkDiff's.
func diffChanges(a, b any) (changes []change, exact bool) {
	left, deadline := maxDiffSteps, time.Now().Add(maxDiffTime)
	budget := cmp.FilterValues(func(x, y any) bool {
		if left--; left < 0 || left%4096 == 0 && time.Now().After(deadline) {
			panic(errDiffBudget)
		}
		return false
	}, cmp.Ignore())
	func() {
		defer func() {
			if p := recover(); p != nil && p != errDiffBudget {
				panic(p)
			}
		}()
		var r pathReporter
		cmp.Equal(a, b, cmp.Reporter(&r), budget)
		changes, exact = r.changes, true
	}()
	if !exact {
		var w walker
		w.walk(a, b, true, true)
		changes = w.changes
	}
	return changes, exact
}

// walker compares two decoded JSON values: objects key by key, in sorted
// order, arrays index by index.
type walker struct {
	jq, pa, pb []byte   // the current path, in jq syntax and as pointers
	marks      [][3]int // their lengths before each push
	changes    []change
}

func (w *walker) walk(a, b any, inA, inB bool) {
	switch {
	case !inA || !inB:
		w.report(a, b, inA, inB)
	default:
		ma, oka := a.(map[string]any)
		mb, okb := b.(map[string]any)
		if oka && okb {
			keys := make([]string, 0, len(ma)+len(mb))
			for k := range ma {
				keys = append(keys, k)
			}
			for k := range mb {
				if _, ok := ma[k]; !ok {
					keys = append(keys, k)
				}
			}
			slices.Sort(keys)
			for _, k := range keys {
				va, ia := ma[k]
				vb, ib := mb[k]
				w.push(jqKey(k), pointerToken(k), pointerToken(k))
				w.walk(va, vb, ia, ib)
				w.pop()
			}
			return
		}
		sa, oka := a.([]any)
		sb, okb := b.([]any)
		if oka && okb {
			for i := range max(len(sa), len(sb)) {
				var va, vb any
				if i < len(sa) {
					va = sa[i]
				}
				if i < len(sb) {
					vb = sb[i]
				}
				n := strconv.Itoa(i)
				w.push("["+n+"]", n, n)
				w.walk(va, vb, i < len(sa), i < len(sb))
				w.pop()
			}
			return
		}
		if !reflect.DeepEqual(a, b) {
			w.report(a, b, true, true)
		}
	}
}

func (w *walker) push(jq, ta, tb string) {
	w.marks = append(w.marks, [3]int{len(w.jq), len(w.pa), len(w.pb)})
	w.jq = append(w.jq, jq...)
	w.pa = append(append(w.pa, '/'), ta...)
	w.pb = append(append(w.pb, '/'), tb...)
}

// pop undoes the last push.
func (w *walker) pop() {
	m := w.marks[len(w.marks)-1]
	w.marks = w.marks[:len(w.marks)-1]
	w.jq, w.pa, w.pb = w.jq[:m[0]], w.pa[:m[1]], w.pb[:m[2]]
}

func (w *walker) report(a, b any, inA, inB bool) {
	c := change{JQ: jqPath(w.jq), Op: "changed"}
	if inA {
		s, p := formatValue(reflect.ValueOf(&a).Elem()), string(w.pa)
		c.A, c.APath = &s, &p
	} else {
		c.Op = "added"
	}
	if inB {
		s, p := formatValue(reflect.ValueOf(&b).Elem()), string(w.pb)
		c.B, c.BPath = &s, &p
	} else {
		c.Op = "removed"
	}
	w.changes = append(w.changes, c)
}

// jqPath returns a path built of jq segments, "." for the whole state.
func jqPath(b []byte) string {
	if len(b) == 0 || b[0] == '[' {
		return "." + string(b)
	}
	return string(b)
}

// jqKey returns the jq segment of an object key: .key, or ["odd key"]
// (jqPath puts a dot before one that begins a path).
func jqKey(key string) string {
	if identifier.MatchString(key) {
		return "." + key
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // <, > and & are printed as they are
	enc.Encode(key)
	return "[" + string(safeJSON(bytes.TrimSuffix(b.Bytes(), []byte("\n")))) + "]"
}

// pointerToken escapes an object key as a JSON Pointer token.
func pointerToken(key string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
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
	var pa, pb []byte
	for _, s := range r.steps {
		switch s := s.(type) {
		case cmp.MapIndex:
			k := pointerToken(s.Key().String())
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
			b = append(b, jqKey(s.Key().String())...)
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
	return jqPath(b)
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
