package harness

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"strings"
	"sync/atomic"
)

// The recorder as a fault injector: a Fault picks requests by method and
// path and does one of the things an apiserver under load, or the network in
// front of it, does. Watches are picked only by a fault that says so (an
// informer's watch is long lived; a fault is about one request). Faults are
// checked in the order they were injected; the first that matches and has
// requests left takes it.

// Action is what a fault does to a request.
type Action string

const (
	// Answer answers Status (with RetryAfter) without forwarding.
	Answer Action = "answer"
	// Hold keeps the request unanswered until the client gives up; it is
	// never forwarded, as an apiserver that hangs.
	Hold Action = "hold"
	// DropAnswer forwards the request, so the apiserver does it, then closes
	// the connection without the answer: the write happened, the client
	// never hears.
	DropAnswer Action = "drop-answer"
	// Reset closes the connection with a TCP reset without forwarding.
	Reset Action = "reset"
)

// Fault is a fault to inject.
type Fault struct {
	// Method ("" any), Path (a substring of the URL path, "" any) and
	// PathEnd (how the URL path ends, "" any: "/httproutes" picks the lists
	// of a namespace's routes, not the routes) pick the requests.
	Method, Path, PathEnd string
	// Times is how many requests get it; 0 is every one that matches.
	Times int
	// Watches makes the fault pick watches too (a watch cache's first
	// watch, which with client-go's watch-list is also its list).
	Watches bool
	Do      Action
	// Status and RetryAfter are what Answer answers.
	Status     int
	RetryAfter string
}

// Injected is a fault in force.
type Injected struct {
	Fault
	hits atomic.Int32
}

// Hits is how many requests got the fault.
func (i *Injected) Hits() int { return int(i.hits.Load()) }

// Inject puts a fault in force until ClearFaults.
func (r *Recorder) Inject(f Fault) *Injected {
	r.mu.Lock()
	defer r.mu.Unlock()
	in := &Injected{Fault: f}
	r.faults = append(r.faults, in)
	return in
}

// ClearFaults removes every fault.
func (r *Recorder) ClearFaults() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults = nil
}

// faultFor picks the fault for a request and counts it; called with the
// recorder's lock held.
func (r *Recorder) faultFor(req *http.Request) *Injected {
	q := req.URL.Query().Get("watch")
	watch := q == "true" || q == "1"
	for _, f := range r.faults {
		if watch && !f.Watches {
			continue
		}
		if f.Method != "" && f.Method != req.Method || !strings.Contains(req.URL.Path, f.Path) || !strings.HasSuffix(req.URL.Path, f.PathEnd) {
			continue
		}
		if f.Times > 0 && f.Hits() >= f.Times {
			continue
		}
		f.hits.Add(1)
		return f
	}
	return nil
}

func (r *Recorder) inflict(f *Injected, proxy *httputil.ReverseProxy, w http.ResponseWriter, req *http.Request) {
	switch f.Do {
	case Answer:
		if f.RetryAfter != "" {
			w.Header().Set("Retry-After", f.RetryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(f.Status)
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected fault: %d for %s %s","reason":%q,"code":%d}`,
			f.Status, req.Method, req.URL.Path, reasonFor(f.Status), f.Status)
	case Hold:
		select {
		case <-req.Context().Done():
		case <-r.closed:
		}
	case DropAnswer:
		proxy.ServeHTTP(httptest.NewRecorder(), req)
		hangUp(w, false)
	case Reset:
		hangUp(w, true)
	}
}

// hangUp closes the client's connection, with a TCP reset if reset.
func hangUp(w http.ResponseWriter, reset bool) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	if tcp, ok := conn.(*net.TCPConn); ok && reset {
		_ = tcp.SetLinger(0)
	}
	conn.Close()
}

func reasonFor(status int) string {
	switch status {
	case http.StatusTooManyRequests:
		return "TooManyRequests"
	case http.StatusServiceUnavailable:
		return "ServiceUnavailable"
	case http.StatusGatewayTimeout:
		return "Timeout"
	case http.StatusForbidden:
		return "Forbidden"
	case http.StatusUnprocessableEntity:
		return "Invalid"
	}
	return "InternalError"
}
