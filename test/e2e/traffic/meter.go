package traffic

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
)

// MaxRequests bounds the requests of one Measure or Sampler.
const MaxRequests = 200_000

// Meter sends requests to a gateway's entrypoint, which must be on the
// loopback interface: whatever the request's Host, the Meter connects only
// there, and never through a proxy.
type Meter struct {
	entrypoint netip.AddrPort
	client     *http.Client
	dialer     *net.Dialer

	mu    sync.Mutex
	grpcs map[string]*grpc.ClientConn // by entrypoint and authority
}

// NewMeter returns a Meter for the entrypoint (e.g. 127.0.0.1:18000).
func NewMeter(entrypoint string) (*Meter, error) {
	ap, err := netip.ParseAddrPort(entrypoint)
	if err != nil {
		return nil, fmt.Errorf("entrypoint %q: %w", entrypoint, err)
	}
	if !ap.Addr().IsLoopback() {
		return nil, fmt.Errorf("entrypoint %s is not a loopback address: the meter sends requests to 127.0.0.1 only", ap)
	}
	dialer := &net.Dialer{Timeout: 2 * time.Second}
	transport := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "tcp", ap.String())
		},
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	return &Meter{entrypoint: ap, dialer: dialer, client: &http.Client{Transport: transport, Timeout: 5 * time.Second}}, nil
}

// Entrypoint is where the Meter sends its requests.
func (m *Meter) Entrypoint() string { return m.entrypoint.String() }

// Request is what the Meter sends, by Protocol: GET / with this Host header
// and these other headers (HTTP); a unary gRPC call with Host as authority
// and the headers as metadata (GRPC); a new TCP connection (TCP); a new TLS
// connection with Host as SNI (TLS). A TCP or TLS connection sends one line
// and reads the backend's answer.
type Request struct {
	Host   string
	Header map[string]string
	// Protocol is what is sent (default HTTP).
	Protocol Protocol
	// Entrypoint is where it is sent, when not the Meter's own (loopback only).
	Entrypoint string
}

func (r Request) String() string {
	s := "Host " + r.Host
	if r.Protocol != HTTP {
		s = fmt.Sprintf("%s to %s, %s", r.Protocol, r.Entrypoint, s)
	}
	for k, v := range r.Header {
		s += fmt.Sprintf(", %s: %s", k, v)
	}
	return s
}

// Do sends one request and says who answered.
func (m *Meter) Do(ctx context.Context, r Request) Hit {
	ap := m.entrypoint
	if r.Entrypoint != "" {
		var err error
		if ap, err = netip.ParseAddrPort(r.Entrypoint); err != nil || !ap.Addr().IsLoopback() {
			return Hit{At: time.Now()} // never anywhere but loopback
		}
	}
	switch r.Protocol {
	case GRPC:
		return m.doGRPC(ctx, ap, r)
	case TCP, TLS:
		return m.doConn(ctx, ap, r)
	}
	return m.doHTTP(ctx, ap, r)
}

func (m *Meter) doHTTP(ctx context.Context, ap netip.AddrPort, r Request) Hit {
	h := Hit{At: time.Now()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ap.String()+"/", nil)
	if err != nil {
		return h
	}
	req.Host = r.Host
	for k, v := range r.Header {
		req.Header.Set(k, v)
	}
	client := m.client
	if ap != m.entrypoint {
		client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true,
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return m.dialer.DialContext(ctx, "tcp", ap.String())
			}}}
	}
	resp, err := client.Do(req)
	if err != nil {
		return h
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	h.Status = resp.StatusCode
	h.Backend = resp.Header.Get(BackendHeader)
	h.SetCookie = resp.Header.Get("Set-Cookie")
	return h
}

// doConn opens a new TCP (or TLS, Host as SNI) connection, sends one line
// and reads the answer: the backend's name, a space, the line.
func (m *Meter) doConn(ctx context.Context, ap netip.AddrPort, r Request) Hit {
	h := Hit{At: time.Now()}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	c, err := m.dialer.DialContext(ctx, "tcp", ap.String())
	if err != nil {
		return h
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if r.Protocol == TLS {
		// The backend's certificate is one the test made; what proves the
		// route is the backend's answer inside the session.
		tc := tls.Client(c, &tls.Config{ServerName: r.Host, InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec
		if err := tc.HandshakeContext(ctx); err != nil {
			return h
		}
		c = tc
	}
	if _, err := io.WriteString(c, "hello\n"); err != nil {
		return h
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	name, rest, ok := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
	if err != nil || !ok || rest != "hello" {
		return h
	}
	h.Status, h.Backend = http.StatusOK, name
	return h
}

// doGRPC makes one unary call (grpc.testing.TestService/UnaryCall): a new
// stream on a connection kept per entrypoint and authority, so every call is
// routed anew. A call the gateway or backend fails counts as status 502.
func (m *Meter) doGRPC(ctx context.Context, ap netip.AddrPort, r Request) Hit {
	h := Hit{At: time.Now()}
	cc, err := m.grpcConn(ap, r.Host)
	if err != nil {
		return h
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for k, v := range r.Header {
		ctx = metadata.AppendToOutgoingContext(ctx, strings.ToLower(k), v)
	}
	var md metadata.MD
	_, err = testgrpc.NewTestServiceClient(cc).UnaryCall(ctx, &testgrpc.SimpleRequest{}, grpc.Header(&md))
	if v := md.Get(grpcBackendKey); len(v) > 0 {
		h.Backend = v[0]
	}
	h.Status = http.StatusOK
	if err != nil {
		h.Status = http.StatusBadGateway
	}
	return h
}

// grpcConn is the Meter's gRPC connection to ap with authority host: h2c,
// dialed only to ap, never through a proxy.
func (m *Meter) grpcConn(ap netip.AddrPort, host string) (*grpc.ClientConn, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := ap.String() + "/" + host
	if cc, ok := m.grpcs[key]; ok {
		return cc, nil
	}
	cc, err := dialGRPC(ap, host)
	if err != nil {
		return nil, err
	}
	if m.grpcs == nil {
		m.grpcs = map[string]*grpc.ClientConn{}
	}
	m.grpcs[key] = cc
	return cc, nil
}

// dialGRPC is a gRPC client connection over h2c to ap (loopback), with
// authority host.
func dialGRPC(ap netip.AddrPort, host string) (*grpc.ClientConn, error) {
	dialer := &net.Dialer{Timeout: 2 * time.Second}
	return grpc.NewClient("passthrough:///"+ap.String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithAuthority(host),
		grpc.WithNoProxy(),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "tcp", ap.String())
		}))
}

// Close closes the Meter's gRPC connections.
func (m *Meter) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, cc := range m.grpcs {
		cc.Close()
		delete(m.grpcs, k)
	}
}

// Measure sends n requests one after the other (at most MaxRequests) and
// returns their answers. It stops early, with an error, when ctx ends.
func (m *Meter) Measure(ctx context.Context, r Request, n int) ([]Hit, error) {
	if n <= 0 || n > MaxRequests {
		return nil, fmt.Errorf("measure %d requests: want 1..%d", n, MaxRequests)
	}
	out := make([]Hit, 0, n)
	for range n {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		out = append(out, m.Do(ctx, r))
	}
	return out, nil
}

// Convergence is what Converge measured.
type Convergence struct {
	// Counts are the n requests that matched the weights.
	Counts Counts
	// Moved is when the traffic followed the weights, after since (MovedAt
	// over every request Converge sent: an upper bound, precise to a window
	// of DefaultWindow requests).
	Moved time.Duration
	// Already: the first requests Converge sent already followed the
	// weights, so Moved is only when the measurement began.
	Already bool
	// Matched is when the n matching requests had been answered, after since.
	Matched time.Duration
	// Requests is how many requests Converge sent in all.
	Requests int
}

// Converge measures rounds of n requests until one matches the weights
// within Tolerance, or timeout passes or MaxRequests were sent (an error
// with the last round's split). since is the moment the times are counted
// from: when the route was seen to change.
func (m *Meter) Converge(ctx context.Context, r Request, weights map[string]int64, n int, since time.Time, timeout time.Duration) (Convergence, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var all []Hit
	var last Counts // the last whole round
	for {
		round, err := m.Measure(ctx, r, n)
		all = append(all, round...)
		counts := Count(round)
		if err == nil && len(counts.Mismatches(weights, Tolerance)) == 0 {
			c := Convergence{Counts: counts, Matched: time.Since(since), Requests: len(all)}
			at, ok := MovedAt(all, weights, DefaultWindow)
			if !ok {
				at = round[0].At
			}
			c.Moved, c.Already = at.Sub(since), at.Equal(all[0].At)
			return c, nil
		}
		if err == nil {
			last = counts
		}
		if err != nil || len(all) >= MaxRequests {
			return Convergence{Requests: len(all)}, fmt.Errorf("%s: the split did not match %v within %s or %d requests (%d sent); last round: %s",
				r, weights, timeout, MaxRequests, len(all), last.Describe(weights))
		}
	}
}

// Sampler sends requests in the background and keeps every answer, so a
// test can ask afterwards what the gateway carried at a given moment.
type Sampler struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	hits   []Hit
}

// Sample starts sending r one request after the other, at most one every
// `every` (0: back to back), until Stop, ctx ends, or max requests (at most
// MaxRequests) were sent.
func (m *Meter) Sample(ctx context.Context, r Request, max int, every time.Duration) *Sampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &Sampler{cancel: cancel, done: make(chan struct{})}
	max = min(max, MaxRequests)
	go func() {
		defer close(s.done)
		next := time.Now()
		for range max {
			if every > 0 {
				if wait := time.Until(next); wait > 0 {
					select {
					case <-ctx.Done():
						return
					case <-time.After(wait):
					}
				}
				next = time.Now().Add(every)
			}
			if ctx.Err() != nil {
				return
			}
			h := m.Do(ctx, r)
			if ctx.Err() != nil && h.Status == 0 {
				return // cut off by Stop, not an answer
			}
			s.mu.Lock()
			s.hits = append(s.hits, h)
			s.mu.Unlock()
		}
	}()
	return s
}

// Hits returns the answers so far, oldest first.
func (s *Sampler) Hits() []Hit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Hit(nil), s.hits...)
}

// Stop ends the sampling and returns every answer.
func (s *Sampler) Stop() []Hit {
	s.cancel()
	<-s.done
	return s.Hits()
}

// WaitFor waits until the sampler has at least n answers sent at or after t,
// ctx ends, or the sampler stops (an error unless those answers are there).
func (s *Sampler) WaitFor(ctx context.Context, t time.Time, n int) ([]Hit, error) {
	for {
		got := After(s.Hits(), t, n)
		if len(got) >= n {
			return got, nil
		}
		select {
		case <-ctx.Done():
			return got, fmt.Errorf("%d of %d answers after %s: %w", len(got), n, t.Format(time.StampMilli), ctx.Err())
		case <-s.done:
			if got = After(s.Hits(), t, n); len(got) >= n {
				return got, nil
			}
			return got, fmt.Errorf("the sampler stopped with %d of %d answers after %s", len(got), n, t.Format(time.StampMilli))
		case <-time.After(20 * time.Millisecond):
		}
	}
}
