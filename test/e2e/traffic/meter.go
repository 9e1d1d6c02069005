package traffic

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// MaxRequests bounds the requests of one Measure or Sampler.
const MaxRequests = 200_000

// Meter sends requests to a gateway's entrypoint, which must be on the
// loopback interface: whatever the request's Host, the Meter connects only
// there, and never through a proxy.
type Meter struct {
	entrypoint netip.AddrPort
	client     *http.Client
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
	return &Meter{entrypoint: ap, client: &http.Client{Transport: transport, Timeout: 5 * time.Second}}, nil
}

// Entrypoint is where the Meter sends its requests.
func (m *Meter) Entrypoint() string { return m.entrypoint.String() }

// Request is what the Meter sends: GET / with this Host header and these
// other headers.
type Request struct {
	Host   string
	Header map[string]string
}

func (r Request) String() string {
	s := "Host " + r.Host
	for k, v := range r.Header {
		s += fmt.Sprintf(", %s: %s", k, v)
	}
	return s
}

// Do sends one request and says who answered.
func (m *Meter) Do(ctx context.Context, r Request) Hit {
	h := Hit{At: time.Now()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.entrypoint.String()+"/", nil)
	if err != nil {
		return h
	}
	req.Host = r.Host
	for k, v := range r.Header {
		req.Header.Set(k, v)
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return h
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	h.Status = resp.StatusCode
	h.Backend = resp.Header.Get(BackendHeader)
	return h
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
