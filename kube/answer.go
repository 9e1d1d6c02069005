package kube

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// Answer is the apiserver's answer to the plugin's write of a route: the
// route as stored, read from its JSON only when something needs more of it
// than its resourceVersion (the overlay, Route; the release, Object). The
// watch event of the write carries the same object, which the watch cache
// reads anyway, so most answers are never read beyond their
// resourceVersion: a write costs one reading of the route, not two.
type Answer struct {
	Ref             routes.Ref
	ResourceVersion string

	raw    []byte
	object *unstructured.Unstructured // when the answer came as one

	once  sync.Once
	route routes.Route
	err   error
}

// AnswerOf is the answer raw to a write of the route ref. It reads only the
// resourceVersion.
func AnswerOf(ref routes.Ref, raw []byte) (*Answer, error) {
	rv, err := resourceVersionIn(raw)
	if err != nil {
		return nil, err
	}
	return &Answer{Ref: ref, ResourceVersion: rv, raw: raw}, nil
}

// Answered is the answer of a write that came as the object u (nil if it is
// not kept), whose route r has been read already; Fresh keeps what it read
// as one too.
func Answered(r routes.Route, u *unstructured.Unstructured) *Answer {
	a := &Answer{Ref: r.Ref, ResourceVersion: r.ResourceVersion, object: u, route: r}
	a.once.Do(func() {})
	return a
}

// Route reads the answer once (decodeRoute) and returns the route it holds. The
// route is shared by every caller of Route: read it, do not change it
// (DeepCopy it first).
func (a *Answer) Route() (routes.Route, error) {
	a.once.Do(func() { a.route, a.err = decodeRoute(a.raw) })
	return a.route, a.err
}

// Object is the whole object the write stored, the caller's to change; nil
// for a nil Answer, or one that kept neither its JSON nor the object.
func (a *Answer) Object() (*unstructured.Unstructured, error) {
	switch {
	case a == nil:
		return nil, nil
	case a.object != nil:
		return a.object.DeepCopy(), nil
	case a.raw == nil:
		return nil, nil
	}
	u := &unstructured.Unstructured{}
	if err := unmarshalServed(u, a.raw); err != nil {
		return nil, fmt.Errorf("reading the apiserver's answer: %w", err)
	}
	return u, nil
}

// resourceVersionIn finds metadata.resourceVersion of a JSON object by
// following its strings and nesting, without decoding what it passes over;
// nothing after metadata is read: the apiserver's answers put metadata
// before spec and status. A key or value
// with an escape in it is left to encoding/json.
func resourceVersionIn(data []byte) (string, error) {
	s := scanner{data: data}
	if !s.enter('{') {
		return "", errors.New("not a JSON object")
	}
	found, err := s.find("metadata")
	if err == nil && found && s.enter('{') {
		found, err = s.find("resourceVersion")
		if err == nil && found {
			s.space()
			if v, ok := s.str(); ok && v != "" {
				return v, nil
			}
			err = errEscaped
		}
	}
	switch {
	case err == errEscaped:
		return resourceVersionSlow(data)
	case err != nil:
		return "", err
	}
	return "", errors.New("no metadata.resourceVersion")
}

// errEscaped says the scanner met a key or value it does not read (one with
// an escape, or not a string): encoding/json decides then.
var errEscaped = errors.New("a key or value the scanner leaves to encoding/json")

// find steps, in the object just entered, to the value of the member named
// key; found is false when the object has no such member.
func (s *scanner) find(key string) (found bool, err error) {
	for s.member() {
		k, ok := s.key()
		if !ok {
			return false, errEscaped
		}
		if k == key {
			return true, nil
		}
		if !s.skip() {
			return false, errors.New("not a JSON object")
		}
	}
	return false, nil
}

// resourceVersionSlow is resourceVersionIn by encoding/json.
func resourceVersionSlow(data []byte) (string, error) {
	var obj struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(data, &obj); err != nil {
		return "", err
	}
	if obj.Metadata.ResourceVersion == "" {
		return "", errors.New("no metadata.resourceVersion")
	}
	return obj.Metadata.ResourceVersion, nil
}

// scanner walks JSON without decoding it.
type scanner struct {
	data []byte
	i    int
	// first is true right after an object was entered: its first member
	// has no comma before it.
	first bool
}

func (s *scanner) space() {
	for s.i < len(s.data) && isSpace(s.data[s.i]) {
		s.i++
	}
}

// enter steps into an object or array opened by c.
func (s *scanner) enter(c byte) bool {
	s.space()
	if s.i >= len(s.data) || s.data[s.i] != c {
		return false
	}
	s.i++
	s.first = true
	return true
}

// member says whether the object has another member, and steps to it.
func (s *scanner) member() bool {
	s.space()
	if s.i >= len(s.data) || s.data[s.i] == '}' {
		return false
	}
	if !s.first {
		if s.data[s.i] != ',' {
			return false
		}
		s.i++
	}
	s.first = false
	return true
}

// key reads a member's key and its colon; ok is false for a key with an
// escape or what is not a key.
func (s *scanner) key() (string, bool) {
	s.space()
	k, ok := s.str()
	s.space()
	if !ok || s.i >= len(s.data) || s.data[s.i] != ':' {
		return "", false
	}
	s.i++
	return k, true
}

// str reads a string without escapes.
func (s *scanner) str() (string, bool) {
	if s.i >= len(s.data) || s.data[s.i] != '"' {
		return "", false
	}
	end := bytes.IndexByte(s.data[s.i+1:], '"')
	if end < 0 {
		return "", false
	}
	v := s.data[s.i+1 : s.i+1+end]
	if bytes.IndexByte(v, '\\') >= 0 {
		return "", false
	}
	s.i += end + 2
	return string(v), true
}

// skip passes over one value.
func (s *scanner) skip() bool {
	s.space()
	var n nesting
	for start := s.i; s.i < len(s.data); s.i++ {
		c := s.data[s.i]
		if s.i > start && n.depth == 0 && !n.inString && (c == ',' || c == '}' || c == ']' || isSpace(c)) {
			return true // a number, true, false or null ended before c
		}
		n.next(c)
		if n.depth == 0 && !n.inString && (c == '"' || c == '}' || c == ']') {
			s.i++
			return true
		}
	}
	return n.depth == 0 && !n.inString
}

// nesting follows JSON text byte by byte: whether it is in a string, and
// how deeply objects and arrays are nested there. It decodes nothing.
type nesting struct {
	depth    int
	inString bool
	escaped  bool
}

func (n *nesting) next(c byte) {
	switch {
	case n.inString:
		switch {
		case n.escaped:
			n.escaped = false
		case c == '\\':
			n.escaped = true
		case c == '"':
			n.inString = false
		}
	case c == '"':
		n.inString = true
	case c == '{' || c == '[':
		n.depth++
	case c == '}' || c == ']':
		n.depth--
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }
