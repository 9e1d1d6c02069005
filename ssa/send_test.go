package ssa

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// sent is what an apiserver sees of a request.
type sent struct {
	Method, Path, Query, ContentType, Accept, Body string
}

// An apply sent straight (send.go) is the request client-go's rest.Request
// sends, and each answer reads the same: the stored route, a Status refusal
// (a conflict naming the manager), a refusal in plain text with
// Retry-After, and one that is neither. Without the plugin's transport,
// rest.Request sends a refusal with Retry-After up to 10 more times; the
// transport takes the header off when it gives up (kubeclient/transport.go), so
// in the plugin neither way sends more than the transport's attempts.
func TestSenderAsTheRESTClient(t *testing.T) {
	conflict := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Apply failed with 1 conflict: conflict with \"argocd\" using gateway.networking.k8s.io/v1: .spec.rules","reason":"Conflict","details":{"name":"web","group":"gateway.networking.k8s.io","kind":"httproutes","causes":[{"type":"FieldManagerConflict","message":"conflict with \"argocd\"","field":".spec.rules"}]},"code":409}`
	answers := map[string]struct {
		code        int
		contentType string
		retryAfter  string
		body        string
	}{
		"stored":     {200, "application/json", "", `{"apiVersion":"gateway.networking.k8s.io/v1","kind":"HTTPRoute","metadata":{"name":"web","namespace":"shop","resourceVersion":"43"}}`},
		"conflict":   {409, "application/json", "", conflict},
		"throttled":  {429, "text/plain; charset=utf-8", "0", "Too many requests, please try again later.\n"},
		"unexpected": {502, "application/octet-stream", "", "\x00\x01"},
	}
	for name, answer := range answers {
		t.Run(name, func(t *testing.T) {
			var seen []sent
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				seen = append(seen, sent{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Content-Type"), r.Header.Get("Accept"), string(body)})
				w.Header().Set("Content-Type", answer.contentType)
				if answer.retryAfter != "" {
					w.Header().Set("Retry-After", answer.retryAfter)
				}
				w.WriteHeader(answer.code)
				io.WriteString(w, answer.body)
			}))
			defer srv.Close()
			client, err := gateway.NewForConfig(&rest.Config{Host: srv.URL, QPS: -1})
			if err != nil {
				t.Fatal(err)
			}
			want := Content{Rules: []routes.Rule{{"backendRefs": []any{map[string]any{"name": "stable", "port": int64(80), "weight": int64(70)}}}}, Labels: map[string]string{"app": "web"}}
			opts := metav1.ApplyOptions{FieldManager: "argo rollouts/gatewayapi", Force: true}
			direct := NewWriter(client, nil, opts.FieldManager, nil)
			viaRequest := NewWriter(client, nil, opts.FieldManager, nil)
			viaRequest.senders = map[kindVersion]*sender{{routes.HTTPRoute, "v1"}: nil} // rest.Request's way
			a1, _, err1 := direct.apply(context.Background(), liveHTTPRoute, want, opts)
			if len(seen) != 1 {
				t.Fatalf("%d requests sent straight; want 1", len(seen))
			}
			a2, _, err2 := viaRequest.apply(context.Background(), liveHTTPRoute, want, opts)
			wantByRequest := 1
			if answer.retryAfter != "" {
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
