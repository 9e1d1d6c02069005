package kubeclient

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/util/flowcontrol"
)

// A step as the apiserver sees it: the list of a watch cache, its watch, a
// GET of a route that is not there, an apply that meets a 503 once and is
// stored on its second attempt, an access review, and a GET that never gets
// an answer (the server is gone). Every attempt counts once, by verb and
// code; nothing of the paths (namespaces, names) is kept.
func TestRequestsCountEveryAttemptByVerbAndCode(t *testing.T) {
	s := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/missing"):
			status(404, "")(w)
		case r.Method == http.MethodPatch && n == 4:
			status(503, "")(w)
		default:
			w.WriteHeader(200)
		}
	})
	requests := &Requests{}
	client := &http.Client{Transport: newTransport(http.DefaultTransport, flowcontrol.NewFakeAlwaysRateLimiter(), testPolicy, quietLog(), requests)}
	routes := s.URL + "/apis/gateway.networking.k8s.io/v1/namespaces/shop/httproutes"
	for _, r := range []struct{ method, url, contentType string }{
		{http.MethodGet, routes, ""},
		{http.MethodGet, routes + "?watch=true&resourceVersion=1", ""},
		{http.MethodGet, routes + "/missing", ""},
		{http.MethodPatch, routes + "/shop", "application/apply-patch+yaml"},
		{http.MethodPost, s.URL + "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", "application/json"},
	} {
		// The apply marked safe to repeat, as package ssa marks its applies.
		req, err := http.NewRequestWithContext(SafeToRepeat(context.Background()), r.method, r.url, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", r.contentType)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", r.method, r.url, err)
		}
		resp.Body.Close()
	}
	gone := s.URL
	s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testPolicy.Timeout)
	defer cancel()
	if _, err := client.Do(get(t, gone+"/api/v1/namespaces/kube-system").WithContext(ctx)); err == nil {
		t.Fatal("a GET of a server that is gone got an answer")
	}
	got := requests.Counts()
	unanswered := got[RequestKind{"get", noAnswer}]
	delete(got, RequestKind{"get", noAnswer})
	want := map[RequestKind]uint64{
		{"list", "200"}:   1,
		{"watch", "200"}:  1,
		{"get", "404"}:    1,
		{"patch", "503"}:  1,
		{"patch", "200"}:  1,
		{"create", "200"}: 1,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("attempts by verb and code (-want +got):\n%s", diff)
	}
	if unanswered < 1 {
		t.Errorf("the GET of a server that is gone counted %d attempts without an answer, want at least 1", unanswered)
	}
}

// The verb is the one the apiserver's audit log would give the request.
func TestRequestVerb(t *testing.T) {
	for _, tc := range []struct{ method, path, want string }{
		{"GET", "/apis/gateway.networking.k8s.io/v1", "get"}, // discovery
		{"GET", "/openapi/v3/apis/gateway.networking.k8s.io/v1", "get"},
		{"GET", "/api/v1/namespaces", "list"},
		{"GET", "/api/v1/namespaces/kube-system", "get"},
		{"GET", "/api/v1/namespaces/shop/services/stable", "get"},
		{"GET", "/apis/gateway.networking.k8s.io/v1/namespaces/shop/httproutes", "list"},
		{"GET", "/apis/gateway.networking.k8s.io/v1/gatewayclasses", "list"},
		{"GET", "/apis/gateway.networking.k8s.io/v1/namespaces/shop/httproutes?watch=true", "watch"},
		{"GET", "/apis/gateway.networking.k8s.io/v1/watch/namespaces/shop/httproutes", "watch"},
		{"PATCH", "/apis/gateway.networking.k8s.io/v1/namespaces/shop/httproutes/shop", "patch"},
		{"POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", "create"},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/argo-rollouts/leases/x", "update"},
		{"DELETE", "/apis/coordination.k8s.io/v1/namespaces/argo-rollouts/leases/x", "delete"},
		{"OPTIONS", "/", "other"},
	} {
		req, err := http.NewRequest(tc.method, "https://apiserver"+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := requestVerb(req); got != tc.want {
			t.Errorf("%s %s: %s, want %s", tc.method, tc.path, got, tc.want)
		}
	}
}
