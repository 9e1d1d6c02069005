package kube

import (
	"fmt"
	"io"

	sigsjson "sigs.k8s.io/json"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// newFrames reads r as a stream of JSON objects.
func newFrames(r io.Reader) *Frames { return &Frames{r: r} }

// Frames splits a stream of JSON objects (a watch's body) into one
// object each without decoding them: it only follows strings and nesting to
// find where each object ends.
type Frames struct {
	r   io.Reader
	buf []byte // read; buf[start:] not yet returned
	// The object being read starts at buf[start]; buf[start:pos] is scanned.
	start, pos int
	nesting
}

// Next returns the next object, valid until the following call.
func (f *Frames) Next() ([]byte, error) {
	f.buf = f.buf[:copy(f.buf, f.buf[f.start:])]
	f.pos -= f.start
	f.start = 0
	for {
		for ; f.pos < len(f.buf); f.pos++ {
			c := f.buf[f.pos]
			if f.depth == 0 && !f.inString {
				if isSpace(c) {
					f.start = f.pos + 1 // between objects
					continue
				}
				if c != '{' {
					return nil, fmt.Errorf("reading a watch event: %q where an object starts", c)
				}
			}
			f.nesting.next(c)
			if f.depth == 0 && !f.inString && c == '}' {
				f.pos++
				frame := f.buf[f.start:f.pos]
				f.start = f.pos
				return frame, nil
			}
		}
		if cap(f.buf)-len(f.buf) < 4096 {
			f.buf = append(make([]byte, 0, 2*cap(f.buf)+8192), f.buf...)
		}
		n, err := f.r.Read(f.buf[len(f.buf):cap(f.buf)])
		f.buf = f.buf[:len(f.buf)+n]
		switch {
		case n > 0:
		case err == io.EOF && f.pos > f.start:
			return nil, io.ErrUnexpectedEOF
		case err != nil:
			return nil, err
		}
	}
}

// Event is a watch event of a route, read in one pass by decodeEvent: Route
// for ADDED, MODIFIED and DELETED; ResourceVersion and Annotations for a
// BOOKMARK.
type Event struct {
	Type            string
	Route           routes.Route
	ResourceVersion string
	Annotations     map[string]string
}

// decodeEvent reads a watch event of a route, frame and object together, in
// the one pass of decodeRoute. ok is false for anything it does not read exactly
// (an error event, a route decodeRoute reads the long way, a bookmark whose
// annotations are not strings): those are read part by part.
func decodeEvent(frame []byte) (ev Event, ok bool) {
	var e struct {
		Type   string `json:"type"`
		Object served `json:"object"`
	}
	if sigsjson.UnmarshalCaseSensitivePreserveInts(frame, &e) != nil {
		return Event{}, false
	}
	switch e.Type {
	case "ADDED", "MODIFIED", "DELETED":
		r, ok := e.Object.route()
		return Event{Type: e.Type, Route: r}, ok
	case "BOOKMARK":
		annotations, ok := stringMap(e.Object.Metadata.Annotations)
		return Event{Type: e.Type, ResourceVersion: e.Object.Metadata.ResourceVersion, Annotations: annotations}, ok
	}
	return Event{}, false
}

// Identity is what a watch event says of the route it is about, and no
// more: what a cache keeps of a route nobody uses (its name, version and
// labels), read without reading the rest of the object.
type Identity struct {
	Type            string
	Ref             routes.Ref
	Version         string
	ResourceVersion string
	Labels          map[string]string
	// Annotations are a bookmark's (the end of a watch's initial events).
	Annotations map[string]string
}

// decodeEventIdentity reads the type of a watch event and the identity of
// its object, skipping its spec, status and the rest of its metadata. ok is
// false for what it cannot read exactly (as decodeEvent).
func decodeEventIdentity(frame []byte) (Identity, bool) {
	var e struct {
		Type   string `json:"type"`
		Object struct {
			servedType
			Metadata servedName `json:"metadata"`
		} `json:"object"`
	}
	if sigsjson.UnmarshalCaseSensitivePreserveInts(frame, &e) != nil {
		return Identity{}, false
	}
	m := e.Object.Metadata
	id := Identity{Type: e.Type, ResourceVersion: m.ResourceVersion}
	var ok bool
	switch e.Type {
	case "ADDED", "MODIFIED", "DELETED":
		if id.Ref, id.Version, ok = e.Object.ref(m); !ok {
			return Identity{}, false
		}
		id.Labels, ok = stringMap(m.Labels)
	case "BOOKMARK":
		id.Annotations, ok = stringMap(m.Annotations)
	}
	return id, ok
}
