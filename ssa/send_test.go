package ssa

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/gatewayapi-ssa/rollouts-plugin/kube/kubetest"
	"github.com/gatewayapi-ssa/rollouts-plugin/kubeclient"
	"github.com/gatewayapi-ssa/rollouts-plugin/retry"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// storedRoute is the apiserver's answer to an apply it stored;
// internalError, a 500 that an apply may be sent again after.
var (
	storedRoute   = kubetest.Canned{Code: http.StatusOK, ContentType: "application/json", Body: `{"apiVersion":"gateway.networking.k8s.io/v1","kind":"HTTPRoute","metadata":{"name":"web","namespace":"shop","resourceVersion":"43"}}`}
	internalError = kubetest.Canned{Code: http.StatusInternalServerError, ContentType: "application/json", Body: `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"try again","reason":"InternalError","code":500}`}
)

// An apply sent straight (send.go) is the request client-go's rest.Request
// sends, and each answer reads the same: the stored route, a Status refusal
// (a conflict naming the manager), a refusal in plain text with
// Retry-After, and one that is neither. Without the plugin's transport,
// rest.Request sends a refusal with Retry-After up to 10 more times; the
// transport takes the header off when it gives up (kubeclient/transport.go), so
// in the plugin neither way sends more than the transport's attempts.
func TestSenderAsTheRESTClient(t *testing.T) {
	conflict := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Apply failed with 1 conflict: conflict with \"argocd\" using gateway.networking.k8s.io/v1: .spec.rules","reason":"Conflict","details":{"name":"web","group":"gateway.networking.k8s.io","kind":"httproutes","causes":[{"type":"FieldManagerConflict","message":"conflict with \"argocd\"","field":".spec.rules"}]},"code":409}`
	answers := map[string]kubetest.Canned{
		"stored":     storedRoute,
		"conflict":   {Code: 409, ContentType: "application/json", Body: conflict},
		"throttled":  {Code: 429, ContentType: "text/plain; charset=utf-8", RetryAfter: "0", Body: "Too many requests, please try again later.\n"},
		"unexpected": {Code: 502, ContentType: "application/octet-stream", Body: "\x00\x01"},
	}
	for name, answer := range answers {
		t.Run(name, func(t *testing.T) {
			url, requests := kubetest.Answering(t, answer)
			client, err := gateway.NewForConfig(&rest.Config{Host: url, QPS: -1})
			if err != nil {
				t.Fatal(err)
			}
			want := Content{Rules: []routes.Rule{{"backendRefs": []any{map[string]any{"name": "stable", "port": int64(80), "weight": int64(70)}}}}, Labels: map[string]string{"app": "web"}}
			opts := metav1.ApplyOptions{FieldManager: "argo rollouts/gatewayapi", Force: true}
			direct := NewWriter(client, nil, opts.FieldManager, nil)
			viaRequest := NewWriter(client, nil, opts.FieldManager, nil)
			viaRequest.senders = map[kindVersion]*sender{{routes.HTTPRoute, "v1"}: nil} // rest.Request's way
			a1, _, err1 := direct.apply(context.Background(), liveHTTPRoute, want, opts, false)
			if n := len(requests()); n != 1 {
				t.Fatalf("%d requests sent straight; want 1", n)
			}
			a2, _, err2 := viaRequest.apply(context.Background(), liveHTTPRoute, want, opts, false)
			seen := requests()
			wantByRequest := 1
			if answer.RetryAfter != "" {
				wantByRequest = 11
			}
			if len(seen)-1 != wantByRequest {
				t.Fatalf("%d requests by rest.Request; want %d", len(seen)-1, wantByRequest)
			}
			if diff := cmp.Diff(seen[1], seen[0]); diff != "" {
				t.Errorf("the request sent straight differs from rest.Request's (-rest.Request +straight):\n%s", diff)
			}
			if (err1 == nil) != (err2 == nil) {
				t.Fatalf("straight: %v; rest.Request: %v", err1, err2)
			}
			if err1 != nil {
				if diff := cmp.Diff(err2.Error(), err1.Error()); diff != "" {
					t.Errorf("errors differ (-rest.Request +straight):\n%s", diff)
				}
				for _, is := range []func(error) bool{apierrors.IsConflict, apierrors.IsTooManyRequests, IsOwnershipConflict, IsStale} {
					if is(err1) != is(err2) {
						t.Errorf("the errors are told apart differently: %v and %v", err1, err2)
					}
				}
				s1, _ := apierrors.SuggestsClientDelay(err1)
				s2, _ := apierrors.SuggestsClientDelay(err2)
				if s1 != s2 {
					t.Errorf("suggested delay %d straight, %d by rest.Request", s1, s2)
				}
				return
			}
			if a1.ResourceVersion != "43" || a2.ResourceVersion != "43" {
				t.Errorf("resourceVersions %q and %q; want 43", a1.ResourceVersion, a2.ResourceVersion)
			}
			r1, err1 := a1.Route()
			r2, err2 := a2.Route()
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			if diff := cmp.Diff(r2, r1); diff != "" {
				t.Errorf("answers read differently (-rest.Request +straight):\n%s", diff)
			}
		})
	}
}

// A route whose name or namespace is no name is never applied, sent
// straight or by rest.Request: escaped, "../../other/httproutes/web" would
// stay one segment, but no name of that shape is ever sent at all.
func TestAnApplyOfARouteWhoseNameIsNoNameIsNotSent(t *testing.T) {
	url, requests := kubetest.Answering(t, storedRoute)
	client, err := gateway.NewForConfig(&rest.Config{Host: url, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	content := Content{Rules: liveHTTPRoute.Rules}
	opts := metav1.ApplyOptions{FieldManager: "argo rollouts/gatewayapi", Force: true}
	for _, name := range []string{"../../other/httproutes/web", "..", "a%2Fb", ""} {
		live := liveHTTPRoute.DeepCopy()
		live.Name = name
		for way, w := range map[string]*Writer{"straight": NewWriter(client, nil, opts.FieldManager, nil), "rest.Request": NewWriter(client, nil, opts.FieldManager, nil)} {
			if way == "rest.Request" {
				w.senders = map[kindVersion]*sender{{routes.HTTPRoute, "v1"}: nil}
			}
			if _, _, err := w.apply(context.Background(), live, content, opts, false); err == nil {
				t.Errorf("%s: applying a route named %q did not fail", way, name)
			}
		}
	}
	if got := requests(); len(got) > 0 {
		t.Errorf("requests sent: %v", got)
	}
}

// waits is a limiter that counts its Waits.
type waits struct {
	flowcontrol.RateLimiter
	n atomic.Int32
}

func (w *waits) Wait(context.Context) error {
	w.n.Add(1)
	return nil
}

// An apply goes on the wire as before kubeclient.Request built its URL:
// the URL sender.apply built by hand then (beforeURL, kept here as it was),
// and the same string spelled out, for a name and a namespace that escape
// and the query of every option; after one Wait of the client's limiter.
func TestSenderSendsWhatItSentBefore(t *testing.T) {
	host, requests := kubetest.Answering(t, storedRoute)
	beforeURL := func(s *sender, ref routes.Ref, opts metav1.PatchOptions) string {
		return s.prefix + "/namespaces/" + url.PathEscape(ref.Namespace) + "/" + ref.Kind.Resource() + "/" + url.PathEscape(ref.Name) + "?" + patchQuery(opts).Encode()
	}
	force := true
	for _, tc := range []struct {
		ref  routes.Ref
		opts metav1.PatchOptions
		want string
	}{
		{routes.Ref{Kind: routes.HTTPRoute, Namespace: "shop", Name: "web"}, metav1.PatchOptions{FieldManager: "argo rollouts/gatewayapi", Force: &force},
			"/apis/gateway.networking.k8s.io/v1/namespaces/shop/httproutes/web?fieldManager=argo+rollouts%2Fgatewayapi&force=true"},
		{routes.Ref{Kind: routes.GRPCRoute, Namespace: "a b", Name: "web;v2?x#y"}, metav1.PatchOptions{FieldManager: "m", Force: &force, DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"},
			"/apis/gateway.networking.k8s.io/v1/namespaces/a%20b/grpcroutes/web%3Bv2%3Fx%23y?dryRun=All&fieldManager=m&fieldValidation=Strict&force=true"},
	} {
		limiter := &waits{RateLimiter: flowcontrol.NewFakeAlwaysRateLimiter()}
		s := &sender{client: http.DefaultClient, prefix: host + "/apis/gateway.networking.k8s.io/v1", limiter: limiter}
		if got := beforeURL(s, tc.ref, tc.opts); got != host+tc.want {
			t.Fatalf("%s: the URL built before is %q, not %q", tc.ref, got, host+tc.want)
		}
		body := `{"kind":"HTTPRoute"}`
		n := len(requests())
		if _, err := s.apply(context.Background(), tc.ref, []byte(body), tc.opts, false); err != nil {
			t.Fatal(err)
		}
		want := []kubetest.Request{{Method: http.MethodPatch, URI: tc.want, ContentType: "application/apply-patch+yaml", Accept: "application/json, */*", Body: body}}
		if diff := cmp.Diff(want, requests()[n:], kubetest.OnTheWire); diff != "" {
			t.Errorf("%s: on the wire (-before +now):\n%s", tc.ref, diff)
		}
		if n := limiter.n.Load(); n != 1 {
			t.Errorf("%s: the limiter was waited on %d times, want 1", tc.ref, n)
		}
	}
}

// An apply is sent again after a 500 only when a second one could not
// write twice (Writer.Apply): guarded by its resourceVersion or not forced;
// a forced one without a resourceVersion, and a dry run, once. So it is
// sent straight (kubeclient.Request's Repeatable), through rest.Request,
// and unstructured (on the context SafeToRepeat marked).
func TestAnApplyIsSentAgainOnlyWhenItCannotWriteTwice(t *testing.T) {
	unknown := Content{Rules: []routes.Rule{{"aFieldOfANewerGatewayAPI": "x"}}}
	quiet := logrus.New()
	quiet.SetOutput(io.Discard)
	for _, tc := range []struct {
		name     string
		rv       string
		guard    Guard
		dryRun   bool
		attempts int
	}{
		{"guarded by the resourceVersion", "42", ByResourceVersion, false, 2},
		{"guarded by ownership", "42", ByOwnership, false, 2},
		{"forced without a resourceVersion", "", ByResourceVersion, false, 1},
		{"a dry run", "42", ByResourceVersion, true, 1},
	} {
		for _, way := range []string{"straight", "rest.Request", "unstructured"} {
			host, requests := kubetest.Answering(t, internalError, storedRoute)
			c, err := kubeclient.NewClients(&rest.Config{Host: host, QPS: -1},
				retry.Requests{Timeout: 5 * time.Second, Attempts: 3, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}, logrus.NewEntry(quiet))
			if err != nil {
				t.Fatal(err)
			}
			w := NewWriter(c.Gateway, c.Dynamic, "m", nil)
			want := Content{Rules: liveHTTPRoute.Rules}
			switch way {
			case "rest.Request":
				w.senders = map[kindVersion]*sender{{routes.HTTPRoute, "v1"}: nil}
			case "unstructured":
				want = unknown
			}
			live := liveHTTPRoute
			live.ResourceVersion = tc.rv
			var why string
			if tc.dryRun {
				err = w.DryRun(context.Background(), live, want)
			} else {
				_, why, err = w.Apply(context.Background(), live, want, tc.guard)
			}
			if !tc.dryRun && (why != "") != (way == "unstructured") {
				t.Fatalf("%s, %s: applied unstructured because %q", tc.name, way, why)
			}
			if got := len(requests()); got != tc.attempts || (err == nil) != (tc.attempts == 2) {
				t.Errorf("%s, %s: %d attempts (%v), want %d", tc.name, way, got, err, tc.attempts)
			}
		}
	}
}
