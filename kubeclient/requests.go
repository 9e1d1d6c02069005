package kubeclient

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// Requests counts the attempts the transport of one cluster's clients sent
// (transport.go), by verb and answer, for people watching the plugin
// (package metrics). Every key is from a bounded set: a Kubernetes verb and
// an HTTP status code, never a path or a name. A nil *Requests counts
// nothing.
type Requests struct {
	mu     sync.Mutex
	counts map[RequestKind]uint64
}

// RequestKind is what a request was and what came of it.
type RequestKind struct {
	// Verb is the request's Kubernetes verb: get, list, watch, create,
	// update, patch or delete (requestVerb).
	Verb string
	// Code is the HTTP status code of the answer, or "<error>" when no
	// answer came (client-go's word for it in its own metrics).
	Code string
}

// noAnswer is the Code of an attempt that got no answer.
const noAnswer = "<error>"

// Counts is how many attempts of each kind were sent so far.
func (r *Requests) Counts() map[RequestKind]uint64 {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[RequestKind]uint64, len(r.counts))
	for k, n := range r.counts {
		out[k] = n
	}
	return out
}

// count records one attempt of req and what came of it.
func (r *Requests) count(req *http.Request, resp *http.Response, err error) {
	if r == nil {
		return
	}
	code := noAnswer
	if err == nil && resp != nil {
		code = strconv.Itoa(resp.StatusCode)
	}
	k := RequestKind{Verb: requestVerb(req), Code: code}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.counts == nil {
		r.counts = map[RequestKind]uint64{}
	}
	r.counts[k]++
}

// requestVerb is the Kubernetes verb of a request, as the apiserver's audit
// log names it: a GET of a collection is a list, of one object a get
// (discovery and OpenAPI documents too), with watch=true a watch.
func requestVerb(req *http.Request) string {
	switch req.Method {
	case http.MethodGet, http.MethodHead:
		switch {
		case isWatch(req):
			return "watch"
		case isCollection(req.URL.Path):
			return "list"
		}
		return "get"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return "other"
}

// isCollection says whether path names a collection of a resource
// (/api/v1/namespaces/NS/services, /apis/G/V/RESOURCE), not one object, a
// group's discovery or anything outside the resource APIs.
func isCollection(path string) bool {
	var rest string
	switch {
	case strings.HasPrefix(path, "/api/"):
		rest = strings.TrimPrefix(path, "/api/") // v1/...
	case strings.HasPrefix(path, "/apis/"):
		rest = strings.TrimPrefix(path, "/apis/")
		_, rest, _ = strings.Cut(rest, "/") // the group
	default:
		return false
	}
	parts := strings.Split(strings.Trim(rest, "/"), "/")[1:] // after the version
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	return len(parts) == 1 && parts[0] != ""
}
