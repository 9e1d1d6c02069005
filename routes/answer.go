package routes

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sync"
)

// Answer is the apiserver's answer to the plugin's write of a route: the
// route as stored, read from its JSON only when something needs more of it
// than its resourceVersion. The watch event of the write carries the same
// object, which the watch cache reads anyway, so most answers are never
// read beyond their resourceVersion: a write costs one reading of the route,
// not two.
type Answer struct {
	Ref             Ref
	ResourceVersion string

	once  sync.Once
	raw   []byte
	route Route
	err   error
}

// AnswerOf is the answer raw to a write of the route ref. It reads only the
// resourceVersion.
func AnswerOf(ref Ref, raw []byte) (*Answer, error) {
	rv, err := ResourceVersionOf(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	return &Answer{Ref: ref, ResourceVersion: rv, raw: raw}, nil
}

// Answered is the answer of a write whose route has been read already.
func Answered(r Route) *Answer {
	a := &Answer{Ref: r.Ref, ResourceVersion: r.ResourceVersion, route: r}
	a.once.Do(func() {})
	return a
}

// Route reads the answer once (Decode) and returns the route it holds. The
// route is shared by every caller of Route: read it, do not change it
// (DeepCopy it first).
func (a *Answer) Route() (Route, error) {
	a.once.Do(func() {
		a.route, a.err = Decode(a.raw)
		a.raw = nil
	})
	return a.route, a.err
}

// ResourceVersionOf reads metadata.resourceVersion of a JSON object, and
// nothing after metadata: the apiserver's answers and the plugin's apply
// configurations put metadata before spec and status.
func ResourceVersionOf(r io.Reader) (string, error) {
	dec := json.NewDecoder(r)
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", errors.New("not a JSON object")
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return "", err
		}
		if key != "metadata" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return "", err
			}
			continue
		}
		var meta struct {
			ResourceVersion string `json:"resourceVersion"`
		}
		if err := dec.Decode(&meta); err != nil {
			return "", err
		}
		if meta.ResourceVersion == "" {
			break
		}
		return meta.ResourceVersion, nil
	}
	return "", errors.New("no metadata.resourceVersion")
}
