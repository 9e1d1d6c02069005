package kubeclient

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/flowcontrol"
)

// waits is a limiter that counts its Waits and answers them with err.
type waits struct {
	flowcontrol.RateLimiter
	n   atomic.Int32
	err error
}

func (w *waits) Wait(context.Context) error {
	w.n.Add(1)
	return w.err
}

func newWaits(err error) *waits {
	return &waits{RateLimiter: flowcontrol.NewFakeAlwaysRateLimiter(), err: err}
}

var routesResource = schema.GroupResource{Group: "gateway.networking.k8s.io", Resource: "httproutes"}

// anApply is a server-side apply of shop/web, as package ssa sends it.
func anApply(prefix string) Request {
	return Request{
		Method:      http.MethodPatch,
		Prefix:      prefix + "/apis/gateway.networking.k8s.io/v1",
		Namespace:   "shop",
		Resource:    routesResource,
		Name:        "web",
		Query:       url.Values{"fieldManager": {"argo rollouts/gatewayapi"}, "force": {"true"}, "dryRun": {"All"}},
		ContentType: "application/apply-patch+yaml",
		Body:        []byte(`{"apiVersion":"gateway.networking.k8s.io/v1","kind":"HTTPRoute"}`),
	}
}

// A request is sent to the URL built from its checked segments, each
// escaped as one path segment, with its query, headers and body as given,
// once the limiter gave it a token; the answer's body is returned.
func TestARequestIsSentToItsURL(t *testing.T) {
	type seen struct{ method, uri, contentType, accept string }
	var mu sync.Mutex
	var got []seen
	s := newServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, seen{r.Method, r.RequestURI, r.Header.Get("Content-Type"), r.Header.Get("Accept")})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"HTTPRoute"}`))
	})
	escaped := anApply(s.URL)
	escaped.Namespace, escaped.Name = "a b", "web;v2?x#y"
	aCreate := Request{Method: http.MethodPost, Prefix: s.URL + "/apis/events.k8s.io/v1", Namespace: "shop",
		Resource: schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, Collection: true, ContentType: "application/json", Body: []byte(`{}`)}
	for _, tc := range []struct {
		name string
		r    Request
		want string
	}{
		{"a namespaced apply with a query", anApply(s.URL), "/apis/gateway.networking.k8s.io/v1/namespaces/shop/httproutes/web?dryRun=All&fieldManager=argo+rollouts%2Fgatewayapi&force=true"},
		{"names to escape", escaped, "/apis/gateway.networking.k8s.io/v1/namespaces/a%20b/httproutes/web%3Bv2%3Fx%23y?dryRun=All&fieldManager=argo+rollouts%2Fgatewayapi&force=true"},
		{"a create without a query", aCreate, "/apis/events.k8s.io/v1/namespaces/shop/events"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			got = nil
			mu.Unlock()
			if u := tc.r.url(); u != s.URL+tc.want {
				t.Errorf("url %q, want %q", u, s.URL+tc.want)
			}
			limiter := newWaits(nil)
			raw, err := tc.r.Send(context.Background(), s.Client(), limiter)
			if err != nil {
				t.Fatal(err)
			}
			if string(raw) != `{"kind":"HTTPRoute"}` {
				t.Errorf("answer %q", raw)
			}
			if n := limiter.n.Load(); n != 1 {
				t.Errorf("the limiter was waited on %d times, want 1", n)
			}
			want := seen{tc.r.Method, tc.want, tc.r.ContentType, "application/json, */*"}
			mu.Lock()
			if len(got) != 1 || got[0] != want {
				t.Errorf("sent %+v, want one %+v", got, want)
			}
			mu.Unlock()
			s.mu.Lock()
			if len(s.bodies) == 0 || s.bodies[len(s.bodies)-1] != string(tc.r.Body) {
				t.Errorf("bodies sent %q, want the last %q", s.bodies, tc.r.Body)
			}
			s.mu.Unlock()
		})
	}
}

// A namespace or name that is no path segment is refused with
// CheckPathSegments' error before anything is sent, the limiter's token
// included; and a limiter that gives no token sends nothing either.
func TestARequestWhoseNameIsNoSegmentIsNotSent(t *testing.T) {
	s := newServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) })
	for _, tc := range []struct{ namespace, name string }{
		{"shop", "../../other/httproutes/web"},
		{"shop", "a/b"},
		{"shop", ".."},
		{"shop", "."},
		{"shop", "a%2Fb"},
		{"shop", ""},
		{"..", "web"},
		{"", "web"},
	} {
		r := anApply(s.URL)
		r.Namespace, r.Name = tc.namespace, tc.name
		limiter := newWaits(nil)
		_, err := r.Send(context.Background(), s.Client(), limiter)
		want := CheckPathSegments(tc.namespace, tc.name)
		if want == nil {
			t.Fatalf("%q/%q: CheckPathSegments lets it pass", tc.namespace, tc.name)
		}
		if err == nil || err.Error() != want.Error() {
			t.Errorf("%q/%q: error %v, want %v", tc.namespace, tc.name, err, want)
		}
		if n := limiter.n.Load(); n != 0 {
			t.Errorf("%q/%q: the limiter was waited on %d times before the refusal", tc.namespace, tc.name, n)
		}
	}
	// A collection's path has no name: its namespace alone is checked.
	create := Request{Method: http.MethodPost, Prefix: s.URL, Namespace: "a/b", Resource: routesResource, Collection: true}
	if _, err := create.Send(context.Background(), s.Client(), nil); err == nil || err.Error() != CheckPathSegments("a/b").Error() {
		t.Errorf("a create in namespace a/b: %v", err)
	}
	refused := errors.New("rate: Wait(n=1) would exceed context deadline")
	_, err := anApply(s.URL).Send(context.Background(), s.Client(), newWaits(refused))
	if want := "client rate limiter Wait returned an error: " + refused.Error(); err == nil || err.Error() != want || !errors.Is(err, refused) {
		t.Errorf("limiter refused: error %v, want %q", err, want)
	}
	if n := s.hits.Load(); n != 0 {
		t.Errorf("%d requests reached the server", n)
	}
}

// A Repeatable request is sent again after a 500 (the transport's
// SafeToRepeat), any other only once.
func TestARepeatableRequestIsSentAgain(t *testing.T) {
	for _, repeatable := range []bool{true, false} {
		s := newServer(t, func(n int, w http.ResponseWriter, _ *http.Request) {
			if n == 1 {
				status(500, "")(w)
				return
			}
			w.WriteHeader(200)
		})
		client := &http.Client{Transport: newTransport(http.DefaultTransport, flowcontrol.NewFakeAlwaysRateLimiter(), testPolicy, quietLog(), nil)}
		r := anApply(s.URL)
		r.Repeatable = repeatable
		_, err := r.Send(context.Background(), client, nil)
		want := int32(1)
		if repeatable {
			want = 2
		}
		if n := s.hits.Load(); n != want || (err == nil) != repeatable {
			t.Errorf("repeatable %v: %d attempts (%v), want %d", repeatable, n, err, want)
		}
		s.mu.Lock()
		for i, b := range s.bodies {
			if b != string(r.Body) {
				t.Errorf("repeatable %v: attempt %d sent %q", repeatable, i+1, b)
			}
		}
		s.mu.Unlock()
	}
}
