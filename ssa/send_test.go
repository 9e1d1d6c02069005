package ssa

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/gatewayapi-ssa/rollouts-plugin/kube/kubetest"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
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
		"stored":     {Code: 200, ContentType: "application/json", Body: `{"apiVersion":"gateway.networking.k8s.io/v1","kind":"HTTPRoute","metadata":{"name":"web","namespace":"shop","resourceVersion":"43"}}`},
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
			a1, _, err1 := direct.apply(context.Background(), liveHTTPRoute, want, opts)
			if n := len(requests()); n != 1 {
				t.Fatalf("%d requests sent straight; want 1", n)
			}
			a2, _, err2 := viaRequest.apply(context.Background(), liveHTTPRoute, want, opts)
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
	url, requests := kubetest.Answering(t, kubetest.Canned{Code: 200, ContentType: "application/json",
		Body: `{"apiVersion":"gateway.networking.k8s.io/v1","kind":"HTTPRoute","metadata":{"name":"web","namespace":"shop","resourceVersion":"43"}}`})
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
			if _, _, err := w.apply(context.Background(), live, content, opts); err == nil {
				t.Errorf("%s: applying a route named %q did not fail", way, name)
			}
		}
	}
	if got := requests(); len(got) > 0 {
		t.Errorf("requests sent: %v", got)
	}
}
