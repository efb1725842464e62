package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// The state tree: serve sends a state a node at a time, so that a page can
// open a state of any size. A node is found by its JSON Pointer (RFC 6901)
// with a scan of the state's bytes that skips every subtree off the path;
// nothing is decoded but the node's children.

// jsonNode is one node of a state.
type jsonNode struct {
	Key   *string `json:"key,omitempty"` // a child's object key or array index
	Path  string  `json:"path"`          // its JSON Pointer
	JQ    string  `json:"jq"`            // its path in jq syntax, as diff prints it
	Type  string  `json:"type"`          // object, array, string, number, bool or null
	Count *int    `json:"count,omitempty"`
	// Value is a scalar's JSON value; a string longer than maxValueChars
	// is cut, and Truncated set.
	Value     json.RawMessage `json:"value,omitempty"`
	Truncated bool            `json:"truncated,omitempty"`
}

// children is a page of a container's children.
type children struct {
	jsonNode
	Offset   int        `json:"offset"`
	Children []jsonNode `json:"children"`
	More     bool       `json:"more"`
}

// maxValueChars bounds the characters of a string value a node holds.
const maxValueChars = 2000

// maxSearchResults bounds the nodes a search returns.
const maxSearchResults = 200

// decoderOptions read what encoding/json reads: duplicate names and
// invalid UTF-8 included.
var decoderOptions = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

func newDecoder(b []byte) *jsontext.Decoder {
	return jsontext.NewDecoder(bytes.NewBuffer(b), decoderOptions...)
}

// errNoNode reports a path that is not in the state.
func errNoNode(ptr, why string) error {
	return &apiError{status: http.StatusNotFound, kind: "not_found", err: fmt.Errorf("no node %q in the state: %s", ptr, why)}
}

// locate returns the bytes of the value at ptr in state, and its path in
// jq syntax (before jqPath).
func locate(state []byte, ptr string) (_ []byte, jq string, _ error) {
	cur := bytes.TrimSpace(state)
	if ptr == "" {
		return cur, "", nil
	}
	if ptr[0] != '/' {
		return nil, "", badRequest("path %q: a JSON Pointer starts with /", ptr)
	}
	var path strings.Builder
	unesc := strings.NewReplacer("~1", "/", "~0", "~")
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = unesc.Replace(tok)
		dec := newDecoder(cur)
		kind := dec.PeekKind()
		if kind != '{' && kind != '[' {
			return nil, "", errNoNode(ptr, "a scalar has no children")
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, "", damagedState(err)
		}
		want := -1
		if kind == '{' {
			path.WriteString(jqKey(tok))
		} else {
			path.WriteString("[" + tok + "]")
		}
		if kind == '[' {
			n, err := strconv.Atoi(tok)
			if err != nil || n < 0 || strconv.Itoa(n) != tok {
				return nil, "", errNoNode(ptr, fmt.Sprintf("%q is not an array index", tok))
			}
			want = n
		}
		// An object's member is its last of that name, as encoding/json
		// decodes it (and as diff's paths mean).
		var next []byte
		for i := 0; dec.PeekKind() != '}' && dec.PeekKind() != ']'; i++ {
			match := i == want
			if kind == '{' {
				name, err := dec.ReadToken()
				if err != nil {
					return nil, "", damagedState(err)
				}
				// A name of invalid UTF-8 is sent, and so named, with
				// U+FFFD for its bad bytes, as encoding/json decodes it.
				match = strings.ToValidUTF8(name.String(), "\uFFFD") == tok
			}
			if !match {
				if err := dec.SkipValue(); err != nil {
					return nil, "", damagedState(err)
				}
				continue
			}
			v, err := dec.ReadValue()
			if err != nil {
				return nil, "", damagedState(err)
			}
			end := int(dec.InputOffset())
			next = cur[end-len(v) : end]
			if kind == '[' {
				break
			}
		}
		if cur = next; cur == nil {
			return nil, "", errNoNode(ptr, fmt.Sprintf("no member %q", tok))
		}
	}
	return cur, path.String(), nil
}

// damagedState reports a state that does not scan: it was verified when it
// was loaded, so this is a bug or a state that is not JSON.
func damagedState(err error) error {
	return &apiError{status: http.StatusUnprocessableEntity, kind: "damaged", err: fmt.Errorf("the state does not scan as JSON: %w", err)}
}

// nodeAt describes the value at ptr in state.
func nodeAt(state []byte, ptr string) (jsonNode, error) {
	v, jq, err := locate(state, ptr)
	if err != nil {
		return jsonNode{}, err
	}
	n, err := describe(v, ptr)
	n.JQ = jqPath([]byte(jq))
	return n, err
}

// describe describes the value v whose path is ptr.
func describe(v []byte, ptr string) (jsonNode, error) {
	n := jsonNode{Path: ptr}
	if len(v) == 0 {
		return n, damagedState(errors.New("empty value"))
	}
	switch v[0] {
	case '{', '[':
		n.Type = "object"
		if v[0] == '[' {
			n.Type = "array"
		}
		count, err := countChildren(v)
		if err != nil {
			return n, err
		}
		n.Count = &count
	case '"':
		n.Type = "string"
		dec := newDecoder(v)
		tok, err := dec.ReadToken()
		if err != nil {
			return n, damagedState(err)
		}
		s := strings.ToValidUTF8(tok.String(), "\uFFFD")
		if utf8.RuneCountInString(s) > maxValueChars {
			runes := 0
			for at := range s {
				if runes == maxValueChars {
					s, n.Truncated = s[:at], true
					break
				}
				runes++
			}
		}
		n.Value, _ = json.Marshal(s)
	case 't', 'f':
		n.Type, n.Value = "bool", json.RawMessage(v)
	case 'n':
		n.Type, n.Value = "null", json.RawMessage(v)
	default:
		n.Type, n.Value = "number", json.RawMessage(v)
	}
	return n, nil
}

// countChildren counts the members of an object or the elements of an
// array.
func countChildren(v []byte) (int, error) {
	dec := newDecoder(v)
	open, err := dec.ReadToken()
	if err != nil {
		return 0, damagedState(err)
	}
	n := 0
	for dec.PeekKind() != '}' && dec.PeekKind() != ']' {
		if open.Kind() == '{' {
			if _, err := dec.ReadToken(); err != nil {
				return 0, damagedState(err)
			}
		}
		if err := dec.SkipValue(); err != nil {
			return 0, damagedState(err)
		}
		n++
	}
	return n, nil
}

// childrenAt returns the children of the node at ptr from offset, at most
// limit of them, in the order they are written.
func childrenAt(state []byte, ptr string, offset, limit int) (children, error) {
	v, jq, err := locate(state, ptr)
	if err != nil {
		return children{}, err
	}
	self, err := describe(v, ptr)
	if err != nil {
		return children{}, err
	}
	self.JQ = jqPath([]byte(jq))
	out := children{jsonNode: self, Offset: offset, Children: []jsonNode{}}
	if self.Count == nil {
		return out, nil // a scalar
	}
	// offset and limit are at most the state's length from here: their
	// sum cannot overflow.
	offset = min(offset, *self.Count)
	limit = min(limit, *self.Count)
	dec := newDecoder(v)
	open, _ := dec.ReadToken()
	esc := strings.NewReplacer("~", "~0", "/", "~1")
	for i := 0; dec.PeekKind() != '}' && dec.PeekKind() != ']'; i++ {
		key := strconv.Itoa(i)
		if open.Kind() == '{' {
			name, err := dec.ReadToken()
			if err != nil {
				return out, damagedState(err)
			}
			key = strings.ToValidUTF8(name.String(), "\uFFFD")
		}
		if i < offset || i >= offset+limit {
			if err := dec.SkipValue(); err != nil {
				return out, damagedState(err)
			}
			continue
		}
		cv, err := dec.ReadValue()
		if err != nil {
			return out, damagedState(err)
		}
		child, err := describe(cv, ptr+"/"+esc.Replace(key))
		if err != nil {
			return out, err
		}
		child.Key = &key
		if open.Kind() == '{' {
			child.JQ = jqPath([]byte(jq + jqKey(key)))
		} else {
			child.JQ = jqPath([]byte(jq + "[" + key + "]"))
		}
		out.Children = append(out.Children, child)
	}
	out.More = *self.Count-offset > limit
	return out, nil
}

// searchResults are the nodes a search found.
type searchResults struct {
	Results   []jsonNode `json:"results"`
	Truncated bool       `json:"truncated"`
}

// searchState returns the nodes of state, in document order, whose key or
// scalar value contains q, ignoring case: at most limit of them. A node
// whose key matches is a result, and so are the matches inside it.
func searchState(ctx context.Context, state []byte, q string, limit int) (searchResults, error) {
	out := searchResults{Results: []jsonNode{}}
	needle := strings.ToLower(q)
	dec := newDecoder(state)
	// open are the containers whose key matched, not yet closed: each is
	// described once its end is known.
	type pending struct {
		result, depth int
		start         int64
	}
	var open []pending
	add := func(n jsonNode, key string) {
		n.Key = &key
		n.JQ = jqOf(dec)
		out.Results = append(out.Results, n)
	}
	for i := 0; ; i++ {
		if i%1024 == 0 && ctx.Err() != nil {
			return out, ctx.Err()
		}
		if len(out.Results) > limit && len(open) == 0 {
			// One more than limit was found: enough to say there are more.
			out.Results, out.Truncated = out.Results[:limit], true
			return out, nil
		}
		kind := dec.PeekKind()
		if kind == 0 {
			break // the end
		}
		depth := dec.StackDepth()
		parent, n := dec.StackIndex(depth)
		if depth > 0 && parent == '{' && n%2 == 0 && kind == '"' {
			// An object's member name.
			tok, err := dec.ReadToken()
			if err != nil {
				return out, damagedState(err)
			}
			name := strings.ToValidUTF8(tok.String(), "\uFFFD") // the token is valid until the next read
			if len(out.Results) > limit || !strings.Contains(strings.ToLower(name), needle) {
				continue
			}
			ptr := string(dec.StackPointer())
			if vk := dec.PeekKind(); vk == '{' || vk == '[' {
				// Described at its end; matches inside it follow it.
				add(jsonNode{Path: ptr}, name)
				if _, err := dec.ReadToken(); err != nil {
					return out, damagedState(err)
				}
				open = append(open, pending{result: len(out.Results) - 1, depth: dec.StackDepth(), start: dec.InputOffset() - 1})
				continue
			}
			v, err := dec.ReadValue()
			if err != nil {
				return out, damagedState(err)
			}
			node, err := describe(v, ptr)
			if err != nil {
				return out, err
			}
			add(node, name)
			continue
		}
		if kind == '{' || kind == '[' || kind == '}' || kind == ']' {
			closing := kind == '}' || kind == ']'
			if _, err := dec.ReadToken(); err != nil {
				return out, damagedState(err)
			}
			if closing && len(open) > 0 && open[len(open)-1].depth == depth {
				p := open[len(open)-1]
				open = open[:len(open)-1]
				r := &out.Results[p.result]
				node, err := describe(state[p.start:dec.InputOffset()], r.Path)
				if err != nil {
					return out, err
				}
				node.Key, node.JQ = r.Key, r.JQ
				*r = node
			}
			continue
		}
		v, err := dec.ReadValue()
		if err != nil {
			return out, damagedState(err)
		}
		if len(out.Results) > limit {
			continue
		}
		text := string(v)
		if kind == '"' {
			var s string
			if json.Unmarshal(v, &s) == nil {
				text = s
			}
		}
		if !strings.Contains(strings.ToLower(text), needle) {
			continue
		}
		ptr := dec.StackPointer()
		node, err := describe(v, string(ptr))
		if err != nil {
			return out, err
		}
		add(node, strings.ToValidUTF8(ptr.LastToken(), "\uFFFD"))
		if ptr == "" {
			out.Results[len(out.Results)-1].Key = nil
		}
	}
	if len(out.Results) > limit {
		out.Results, out.Truncated = out.Results[:limit], true
	}
	return out, nil
}

// jqOf returns the path of the value dec read last (or whose name it read
// last), in jq syntax, as diff prints it.
func jqOf(dec *jsontext.Decoder) string {
	var b strings.Builder
	depth := 1
	for tok := range dec.StackPointer().Tokens() {
		if kind, _ := dec.StackIndex(depth); kind == '[' {
			b.WriteString("[" + tok + "]")
		} else {
			b.WriteString(jqKey(strings.ToValidUTF8(tok, "\uFFFD")))
		}
		depth++
	}
	return jqPath([]byte(b.String()))
}
