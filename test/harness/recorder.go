package harness

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
)

// Request is one request the recorder received.
type Request struct {
	Method      string
	Path        string
	Query       string
	ContentType string
	UserAgent   string
	// Fault is what the recorder did to it instead of forwarding it as it
	// came ("" for nothing).
	Fault Action
	// Status is the answer's HTTP status (0 while it has not come).
	Status int
}

// IsWrite says whether the request changes state. An access review is a POST
// that stores nothing: not a write; an Event is a record for people, not a
// write of what the plugin manages (IsEvent).
func (r Request) IsWrite() bool {
	if isReview(r.Path) || r.IsEvent() {
		return false
	}
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

func isReview(path string) bool { return strings.HasPrefix(path, "/apis/authorization.k8s.io/") }

// IsEvent says whether the request writes an Event (package events).
func (r Request) IsEvent() bool { return isEvent(r.Path) }

func isEvent(path string) bool { return strings.HasPrefix(path, "/apis/events.k8s.io/") }

// IsApply says whether the request is a server-side apply.
func (r Request) IsApply() bool {
	return r.Method == http.MethodPatch && strings.HasPrefix(r.ContentType, "application/apply-patch")
}

// Recorder is a plain-HTTP proxy on loopback in front of the apiserver. It
// authenticates as the envtest admin, records every request, can run a hook
// before forwarding one (to change a route between the plugin's read and its
// write), and can inject faults (faults.go).
type Recorder struct {
	URL string

	mu       sync.Mutex
	requests []Request
	before   func(r *http.Request)
	faults   []*Injected
	watches  map[*http.Request]context.CancelFunc
	server   *http.Server
	closed   chan struct{}
	close    sync.Once
}

// NewRecorder starts a recorder for the apiserver behind cfg.
func NewRecorder(cfg *rest.Config) (*Recorder, error) {
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, err
	}
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	rec := &Recorder{URL: "http://" + ln.Addr().String(), closed: make(chan struct{})}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = transport
	proxy.FlushInterval = -1 // watches stream
	rec.server = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.mu.Lock()
		fault := rec.faultFor(r)
		req := Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, ContentType: r.Header.Get("Content-Type"), UserAgent: r.UserAgent()}
		if fault != nil {
			req.Fault = fault.Do
		}
		rec.requests = append(rec.requests, req)
		index := len(rec.requests) - 1
		before := rec.before
		if dumpWrites != "" && strings.HasPrefix(r.UserAgent(), pluginUserAgent) && r.Method != http.MethodGet && !isReview(r.URL.Path) && !isEvent(r.URL.Path) && fault == nil {
			dump(r)
		}
		rec.mu.Unlock()
		if before != nil {
			before(r)
		}
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			rec.mu.Lock()
			if index < len(rec.requests) && rec.requests[index].Path == req.Path { // not forgotten by a Reset meanwhile
				rec.requests[index].Status = sw.status
			}
			rec.mu.Unlock()
		}()
		if fault != nil {
			rec.inflict(fault, proxy, sw, r)
			return
		}
		if isWatch(r) {
			ctx, cancel := context.WithCancel(r.Context())
			r = r.WithContext(ctx)
			rec.mu.Lock()
			if rec.watches == nil {
				rec.watches = map[*http.Request]context.CancelFunc{}
			}
			rec.watches[r] = cancel
			rec.mu.Unlock()
			defer func() {
				rec.mu.Lock()
				delete(rec.watches, r)
				rec.mu.Unlock()
				cancel()
			}()
		}
		proxy.ServeHTTP(sw, r)
	})}
	go rec.server.Serve(ln)
	return rec, nil
}

// statusWriter keeps the status of the answer it writes.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController flush (watches).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Hijack hands the connection over (faults that hang up).
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return w.ResponseWriter.(http.Hijacker).Hijack()
}

// dumpWrites, when set (env RECORDER_DUMP_WRITES), is a file the recorder
// appends every write of the plugin to, one line each: method, path, body.
// hack/compare-writes.sh compares two binaries' writes with it.
var dumpWrites = os.Getenv("RECORDER_DUMP_WRITES")

// pluginUserAgent starts the plugin's User-Agent (plugin.userAgent).
const pluginUserAgent = "rollouts-gatewayapi-ssa"

// dumpMu keeps the lines of the recorders of tests in parallel whole: each
// recorder holds its own lock, not the others'.
var dumpMu sync.Mutex

// dump appends the write to dumpWrites; called with the recorder's lock held.
func dump(r *http.Request) {
	dumpMu.Lock()
	defer dumpMu.Unlock()
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		body = []byte("(body not read: " + err.Error() + ")")
	}
	f, err := os.OpenFile(dumpWrites, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s %s\n", r.Method, r.URL.Path, body)
}

// CutWatches breaks the watches in flight whose path contains path, as a
// network failure or an apiserver going away does: their clients see the
// connection end in the middle of the stream. It returns how many it cut.
func (r *Recorder) CutWatches(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for req, cancel := range r.watches {
		if strings.Contains(req.URL.Path, path) {
			cancel()
			n++
		}
	}
	return n
}

// OpenWatches is how many watches whose path contains path are in flight:
// open between the plugin and the apiserver.
func (r *Recorder) OpenWatches(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for req := range r.watches {
		if strings.Contains(req.URL.Path, path) {
			n++
		}
	}
	return n
}

func isWatch(r *http.Request) bool {
	q := r.URL.Query().Get("watch")
	return q == "true" || q == "1"
}

// Close stops the proxy, and lets go of the requests it holds.
func (r *Recorder) Close() {
	r.close.Do(func() { close(r.closed) })
	r.server.Close()
}

// Requests returns what was recorded since the last Reset.
func (r *Recorder) Requests() []Request { return r.RequestsSince(0) }

// Count is how many requests Requests would return now.
func (r *Recorder) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.requests)
}

// RequestsSince returns what was recorded after the first n requests
// (Count): a caller that looks at one step's requests copies those alone.
func (r *Recorder) RequestsSince(n int) []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.requests[min(n, len(r.requests)):]...)
}

// Writes returns the recorded requests that change state.
func (r *Recorder) Writes() []Request {
	var out []Request
	for _, req := range r.Requests() {
		if req.IsWrite() {
			out = append(out, req)
		}
	}
	return out
}

// Reset forgets what was recorded.
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = nil
}

// Before sets a hook run before each request is forwarded (nil removes it).
func (r *Recorder) Before(hook func(*http.Request)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.before = hook
}
