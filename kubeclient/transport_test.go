package kubeclient

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/gatewayapi-ssa/rollouts-plugin/retry"
)

// The transport on a loopback server that answers what each test tells it
// to, attempt by attempt. The figures are bounds, not timings: what the
// tests assert holds however slow the machine is.

var testPolicy = retry.Requests{Timeout: 300 * time.Millisecond, Attempts: 4, BaseDelay: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond}

// server answers the n-th request (from 1) with answer(n, w, r).
type server struct {
	*httptest.Server
	hits   atomic.Int32
	mu     sync.Mutex
	bodies []string
}

func newServer(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request)) *server {
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.bodies = append(s.bodies, string(body))
		s.mu.Unlock()
		answer(int(s.hits.Add(1)), w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func quietLog() *logrus.Entry {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return logrus.NewEntry(l)
}

func send(t *testing.T, ctx context.Context, policy retry.Requests, req *http.Request) (*http.Response, error) {
	t.Helper()
	client := &http.Client{Transport: newTransport(http.DefaultTransport, flowcontrol.NewFakeAlwaysRateLimiter(), policy, quietLog(), nil)}
	resp, err := client.Do(req.WithContext(ctx))
	if err == nil {
		t.Cleanup(func() { resp.Body.Close() })
	}
	return resp, err
}

func get(t *testing.T, url string) *http.Request {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func status(code int, retryAfter string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.WriteHeader(code)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure"}`))
	}
}

func TestRetriesServerErrorsUntilAnAnswer(t *testing.T) {
	for _, code := range []int{500, 502, 503, 504, 429} {
		s := newServer(t, func(n int, w http.ResponseWriter, _ *http.Request) {
			if n < 3 {
				status(code, "")(w)
				return
			}
			w.WriteHeader(200)
		})
		resp, err := send(t, context.Background(), testPolicy, get(t, s.URL))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%d twice: got %v, %v; want 200 on the third attempt", code, resp, err)
		}
		if n := s.hits.Load(); n != 3 {
			t.Errorf("%d twice: %d attempts, want 3", code, n)
		}
	}
}

// What is not a fault of the moment is answered at once.
func TestDoesNotRetryAnswers(t *testing.T) {
	for _, code := range []int{400, 403, 404, 409, 422, 501} {
		s := newServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) { status(code, "")(w) })
		resp, err := send(t, context.Background(), testPolicy, get(t, s.URL))
		if err != nil || resp.StatusCode != code || s.hits.Load() != 1 {
			t.Errorf("%d: got %v, %v after %d attempts; want it back after one", code, resp, err, s.hits.Load())
		}
	}
}

// A request that always fails gets Attempts attempts and then its last
// answer, without Retry-After, so client-go does not start over.
func TestAttemptsAreBounded(t *testing.T) {
	s := newServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) { status(503, "0")(w) })
	resp, err := send(t, context.Background(), testPolicy, get(t, s.URL))
	if err != nil || resp.StatusCode != 503 {
		t.Fatalf("got %v, %v; want the last 503", resp, err)
	}
	if n := s.hits.Load(); n != int32(testPolicy.Attempts) {
		t.Errorf("%d attempts, want %d", n, testPolicy.Attempts)
	}
	if h := resp.Header.Get("Retry-After"); h != "" {
		t.Errorf("Retry-After %q passed on: client-go would retry again on top", h)
	}
}

func TestHonoursRetryAfter(t *testing.T) {
	s := newServer(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			status(429, "1")(w)
			return
		}
		w.WriteHeader(200)
	})
	start := time.Now()
	resp, err := send(t, context.Background(), testPolicy, get(t, s.URL))
	elapsed := time.Since(start)
	t.Logf("429 with Retry-After: 1 answered after %s", elapsed)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("got %v, %v", resp, err)
	}
	if elapsed < time.Second {
		t.Errorf("retried after %s, before the Retry-After of 1s", elapsed)
	}
}

// Retry-After comes as seconds or as an HTTP date (Envoy and some proxies
// in front of the apiserver send dates); both are waited for, from the
// moment the answer came.
func TestRetryAfterReadsSecondsAndDates(t *testing.T) {
	now := time.Date(2026, 12, 2, 15, 0, 0, 0, time.UTC)
	for header, want := range map[string]time.Duration{
		"2":   2 * time.Second,
		" 7 ": 7 * time.Second,
		now.Add(3 * time.Second).Format(http.TimeFormat): 3 * time.Second,
		"Wed, 02 Dec 2026 15:01:30 GMT":                  90 * time.Second,
		"Wednesday, 02-Dec-26 15:00:05 GMT":              5 * time.Second, // RFC 850, which HTTP still accepts
		"Wed Dec  2 15:00:04 2026":                       4 * time.Second, // asctime
		now.Add(-time.Minute).Format(http.TimeFormat):    0,
		"-1":   0,
		"":     0,
		"soon": 0,
		"1.5":  0,
	} {
		resp := &http.Response{Header: http.Header{"Retry-After": {header}}}
		if got := retryAfter(resp, now); got != want {
			t.Errorf("Retry-After %q: waits %s, want %s", header, got, want)
		}
	}
}

// A 429 whose Retry-After is a date two seconds ahead is retried once that
// date has come (the date has whole seconds, so at least one second later).
func TestHonoursRetryAfterAsADate(t *testing.T) {
	s := newServer(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			status(429, time.Now().Add(2*time.Second).UTC().Format(http.TimeFormat))(w)
			return
		}
		w.WriteHeader(200)
	})
	start := time.Now()
	resp, err := send(t, context.Background(), testPolicy, get(t, s.URL))
	elapsed := time.Since(start)
	t.Logf("429 with Retry-After two seconds ahead as a date answered after %s", elapsed)
	if err != nil || resp.StatusCode != 200 || s.hits.Load() != 2 {
		t.Fatalf("got %v, %v after %d attempts", resp, err, s.hits.Load())
	}
	if elapsed < time.Second {
		t.Errorf("retried after %s, before the date of Retry-After", elapsed)
	}
}

// A Retry-After past the call's deadline is not waited for: the answer comes
// back at once.
func TestRetryAfterPastTheDeadlineGivesUp(t *testing.T) {
	s := newServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) { status(429, "30")(w) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	resp, err := send(t, ctx, testPolicy, get(t, s.URL))
	t.Logf("429 with Retry-After: 30 in a call with 5s left answered after %s", time.Since(start))
	if err != nil || resp.StatusCode != 429 || s.hits.Load() != 1 {
		t.Fatalf("got %v, %v after %d attempts; want the 429 after one", resp, err, s.hits.Load())
	}
	if ctx.Err() != nil {
		t.Error("waited until the deadline")
	}
}

// A request the server holds is abandoned after its Timeout and sent again.
func TestAbandonsAHeldRequest(t *testing.T) {
	s := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			<-r.Context().Done() // held until the client gives up
			return
		}
		w.WriteHeader(200)
	})
	start := time.Now()
	resp, err := send(t, context.Background(), testPolicy, get(t, s.URL))
	elapsed := time.Since(start)
	t.Logf("held first attempt: answered after %s (attempt timeout %s)", elapsed, testPolicy.Timeout)
	if err != nil || resp.StatusCode != 200 || s.hits.Load() != 2 {
		t.Fatalf("got %v, %v after %d attempts; want 200 on the second", resp, err, s.hits.Load())
	}
	if elapsed < testPolicy.Timeout {
		t.Errorf("answered after %s, before the first attempt's timeout", elapsed)
	}
}

// When the server never answers, the request ends with the call: its error
// says how many attempts went unanswered, in words client-go does not retry.
func TestNeverAnsweredEndsWithTheCall(t *testing.T) {
	s := newServer(t, func(_ int, _ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	policy := testPolicy
	policy.Attempts = 100
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	_, err := send(t, ctx, policy, get(t, s.URL))
	elapsed := time.Since(start)
	t.Logf("never answered: gave up after %s and %d attempts in a call of 1s: %v", elapsed, s.hits.Load(), err)
	if err == nil {
		t.Fatal("no error")
	}
	if elapsed > 3*time.Second {
		t.Errorf("took %s in a call of 1s", elapsed)
	}
	if s.hits.Load() < 2 {
		t.Errorf("%d attempts; want the held one abandoned and retried", s.hits.Load())
	}
}

// A connection closed before the answer is retried; the give-up error does not
// read as a connection reset (client-go would retry a GET ten more times).
func TestRetriesClosedConnections(t *testing.T) {
	s := newServer(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n < 3 {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		w.WriteHeader(200)
	})
	resp, err := send(t, context.Background(), testPolicy, get(t, s.URL))
	if err != nil || resp.StatusCode != 200 || s.hits.Load() != 3 {
		t.Fatalf("got %v, %v after %d attempts; want 200 on the third", resp, err, s.hits.Load())
	}
	closed := newServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
	})
	_, err = send(t, context.Background(), testPolicy, get(t, closed.URL))
	var re *requestError
	if !errors.As(err, &re) || strings.Contains(err.Error(), "reset by peer") || strings.Contains(err.Error(), "EOF") {
		t.Errorf("error %v: want a requestError that client-go does not retry", err)
	}
}

// Writes are sent again only when their writer marked them safe to repeat,
// and then with the same body.
func TestRepeatsOnlyWritesMarkedSafe(t *testing.T) {
	body := `{"metadata":{"name":"web","resourceVersion":"42"},"spec":{}}`
	for _, tc := range []struct {
		name     string
		marked   bool
		attempts int32
	}{
		{"marked safe to repeat", true, 2},
		{"not marked", false, 1},
	} {
		s := newServer(t, func(n int, w http.ResponseWriter, _ *http.Request) {
			if n == 1 {
				status(500, "")(w)
				return
			}
			w.WriteHeader(200)
		})
		ctx := context.Background()
		if tc.marked {
			ctx = SafeToRepeat(ctx)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPatch, s.URL, bytes.NewReader([]byte(body)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err = send(t, ctx, testPolicy, req); err != nil {
			t.Fatal(err)
		}
		if n := s.hits.Load(); n != tc.attempts {
			t.Errorf("%s: %d attempts, want %d", tc.name, n, tc.attempts)
		}
		for i, b := range s.bodies {
			if b != body {
				t.Errorf("%s: attempt %d sent %q, want %q", tc.name, i+1, b, body)
			}
		}
	}
}

// A watch is not cut by the attempt timeout.
func TestWatchesHaveNoAttemptTimeout(t *testing.T) {
	s := newServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		time.Sleep(2 * testPolicy.Timeout)
		_, _ = w.Write([]byte("event"))
	})
	resp, err := send(t, context.Background(), testPolicy, get(t, s.URL+"/apis/x/v1/things?watch=true"))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil || string(body) != "event" {
		t.Errorf("watch read %q, %v; want the event sent after twice the attempt timeout", body, err)
	}
}

// Every client the plugin builds draws from one token bucket: four callers
// (typed applies, the dynamic client, the route reader's REST calls, access
// reviews) hammering a server for two seconds at QPS 1, burst 1 get about
// three requests through together, where a bucket each would let eight or
// more through.
func TestClientsShareOneTokenBucket(t *testing.T) {
	s := newServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	})
	c, err := NewClients(&rest.Config{Host: s.URL, QPS: 1, Burst: 1}, testPolicy, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	gvr := schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"}
	callers := []func(){
		func() { _, _ = c.Gateway.GatewayV1().HTTPRoutes("ns").Get(ctx, "a", metav1.GetOptions{}) },
		func() { _, _ = c.Dynamic.Resource(gvr).Namespace("ns").Get(ctx, "a", metav1.GetOptions{}) },
		func() { _ = c.Gateway.GatewayV1().RESTClient().Get().AbsPath("/apis").Do(ctx) },
		func() {
			_, _ = c.Reviews.Create(ctx, &authorizationv1.SelfSubjectAccessReview{}, metav1.CreateOptions{})
		},
	}
	start := time.Now()
	var wg sync.WaitGroup
	for _, call := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				call()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	// burst + QPS·elapsed, plus one for the edge of the window.
	most := int32(1 + elapsed.Seconds() + 1)
	t.Logf("4 clients, QPS 1, burst 1, %s: %d requests reached the server (shared bucket allows at most %d)", elapsed.Round(time.Millisecond), s.hits.Load(), most)
	if n := s.hits.Load(); n > most {
		t.Errorf("%d requests in %s; one shared bucket allows at most %d", n, elapsed, most)
	}
}

// Only requests that cannot do anything twice are repeated: reads, access
// reviews, and what the writer marked safe to repeat, whatever its body
// says: the transport does not read it.
func TestSafeToRepeat(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		marked, want bool
	}{
		{http.MethodGet, "/apis/gateway.networking.k8s.io/v1/namespaces/shop/httproutes/web", false, true},
		{http.MethodPost, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", false, true},
		{http.MethodPost, "/api/v1/namespaces/shop/services", false, false},
		{http.MethodPatch, "/apis/x?fieldManager=m", false, false},
		{http.MethodPatch, "/apis/x?fieldManager=m&force=true", true, true},
		{http.MethodPut, "/apis/x", true, true},
		{http.MethodDelete, "/apis/x", false, false},
	} {
		ctx := context.Background()
		if tc.marked {
			ctx = SafeToRepeat(ctx)
		}
		req, err := http.NewRequestWithContext(ctx, tc.method, "http://apiserver"+tc.path, strings.NewReader(`{"metadata":{"resourceVersion":"4"}}`))
		if err != nil {
			t.Fatal(err)
		}
		if got := safeToRepeat(req); got != tc.want {
			t.Errorf("%s %s (marked %v): safe to repeat %v, want %v", tc.method, tc.path, tc.marked, got, tc.want)
		}
	}
	for query, want := range map[string]bool{"watch=true&resourceVersion=1": true, "watch=1": true, "watch=false": false, "labelSelector=watch%3Dtrue": false, "": false} {
		req, _ := http.NewRequest(http.MethodGet, "http://apiserver/apis/x?"+query, nil)
		if got := isWatch(req); got != want {
			t.Errorf("?%s: watch %v, want %v", query, got, want)
		}
	}
}
