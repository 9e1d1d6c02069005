package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"
	"k8s.io/client-go/rest"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
)

// parentServer is an apiserver holding GatewayClasses, Gateways and
// ListenerSets: it answers LISTs, and watches (streamed initial events with
// their closing bookmark, or none after a LIST) that stay open; a namespace
// in refused answers 403. It counts the requests per path, and the watches
// open and opened so far per path, telling changed (when set) each time one
// opens or ends.
type parentServer struct {
	objects map[string][]map[string]any // collection path → objects
	refused string
	changed chan struct{}
	mu      sync.Mutex
	served  map[string]int
	open    map[string]int
	opened  map[string]int
}

func (s *parentServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.served[r.URL.Path]++
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if s.refused != "" && strings.Contains(r.URL.Path, "/namespaces/"+s.refused+"/") {
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,"message":"gateways is forbidden"}`)
		return
	}
	if items, ok := s.objects[r.URL.Path]; ok {
		q := r.URL.Query()
		switch {
		case q.Get("watch") != "true":
			_ = json.NewEncoder(w).Encode(map[string]any{"metadata": map[string]any{"resourceVersion": "10"}, "items": items})
			return
		case q.Get("sendInitialEvents") == "true":
			for _, o := range items {
				_ = json.NewEncoder(w).Encode(map[string]any{"type": "ADDED", "object": o})
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"type": "BOOKMARK", "object": map[string]any{
				"metadata": map[string]any{"resourceVersion": "10", "annotations": map[string]any{"k8s.io/initial-events-end": "true"}}}})
		}
		w.(http.Flusher).Flush()
		s.watching(r.URL.Path, 1)
		<-r.Context().Done()
		s.watching(r.URL.Path, -1)
		return
	}
	// One object of a collection: its GET.
	i := strings.LastIndex(r.URL.Path, "/")
	for _, o := range s.objects[r.URL.Path[:i]] {
		if o["metadata"].(map[string]any)["name"] == r.URL.Path[i+1:] {
			_ = json.NewEncoder(w).Encode(o)
			return
		}
	}
	w.WriteHeader(http.StatusNotFound)
	fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"%s not found"}`, r.URL.Path[i+1:])
}

// watching counts a watch of path that opens (1) or ends (-1).
func (s *parentServer) watching(path string, n int) {
	s.mu.Lock()
	if s.open == nil {
		s.open, s.opened = map[string]int{}, map[string]int{}
	}
	s.open[path] += n
	if n > 0 {
		s.opened[path] += n
	}
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// await waits until cond holds of the watches open and opened so far per
// path, checking each time one opens or ends; after 30 s it fails the test.
func (s *parentServer) await(t *testing.T, what string, cond func(open, opened map[string]int) bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		s.mu.Lock()
		ok := cond(s.open, s.opened)
		open := fmt.Sprint(s.open)
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-s.changed:
		case <-deadline:
			t.Fatalf("waited 30 s for %s; open watches: %s", what, open)
		}
	}
}

func (s *parentServer) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range s.served {
		n += v
	}
	return n
}

func object(apiVersion, kind, namespace, name string, spec, status map[string]any) map[string]any {
	meta := map[string]any{"name": name, "resourceVersion": "10"}
	if namespace != "" {
		meta["namespace"] = namespace
	}
	return map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": meta, "spec": spec, "status": status}
}

// Each kind of parent leads to its class: a Gateway's own, a ListenerSet's
// (v1, and the experimental XListenerSet) through its Gateway. A class
// publishes features as objects (Gateway API v1.4 on) or as names (the
// experimental channel before), or nothing. A parent that cannot be read
// says why. Once the watch caches hold them, asking again sends nothing.
func TestGatewaysFindEachParentsClass(t *testing.T) {
	const v1 = routes.Group + "/v1"
	api := &parentServer{refused: "locked", served: map[string]int{}, objects: map[string][]map[string]any{
		"/apis/" + routes.Group + "/v1/gatewayclasses": {
			object(v1, "GatewayClass", "", "traefik", map[string]any{"controllerName": "traefik.io/gateway-controller"},
				map[string]any{"supportedFeatures": []any{map[string]any{"name": "HTTPRoute"}, map[string]any{"name": "HTTPRouteMethodMatching"}}}),
			object(v1, "GatewayClass", "", "older", map[string]any{"controllerName": "example.com/older"},
				map[string]any{"supportedFeatures": []any{"HTTPRoute", "HTTPRouteRequestMirror"}}),
			object(v1, "GatewayClass", "", "silent", map[string]any{"controllerName": "example.com/silent"}, nil),
		},
		"/apis/" + routes.Group + "/v1/namespaces/shop/gateways": {
			object(v1, "Gateway", "shop", "edge", map[string]any{"gatewayClassName": "traefik"}, nil),
			object(v1, "Gateway", "shop", "old", map[string]any{"gatewayClassName": "older"}, nil),
			object(v1, "Gateway", "shop", "quiet", map[string]any{"gatewayClassName": "silent"}, nil),
		},
		"/apis/" + routes.Group + "/v1/namespaces/shop/listenersets": {
			object(v1, "ListenerSet", "shop", "team", map[string]any{"parentRef": map[string]any{"name": "edge"}}, nil),
		},
		"/apis/gateway.networking.x-k8s.io/v1alpha1/namespaces/shop/xlistenersets": {
			object("gateway.networking.x-k8s.io/v1alpha1", "XListenerSet", "shop", "xteam",
				map[string]any{"parentRef": map[string]any{"name": "old", "namespace": "shop", "kind": "Gateway", "group": routes.Group}}, nil),
		},
	}}
	srv := httptest.NewServer(api)
	defer srv.Close()
	gw, err := gateway.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	c := NewCluster(gw.GatewayV1().RESTClient(), logrus.NewEntry(logrus.New()))
	defer c.Close()
	parent := func(group, kind, ns, name string) routes.ParentRef {
		return routes.ParentRef{Group: group, Kind: kind, Namespace: ns, Name: name}
	}
	known := []routes.ParentRef{
		parent(routes.Group, "Gateway", "shop", "edge"),
		parent(routes.Group, "ListenerSet", "shop", "team"),
		parent("gateway.networking.x-k8s.io", "XListenerSet", "shop", "xteam"),
		parent(routes.Group, "Gateway", "shop", "quiet"),
	}
	unknown := []routes.ParentRef{
		parent(routes.Group, "Gateway", "locked", "gw"),
		parent("", "Service", "shop", "mesh"),
		parent(routes.Group, "Gateway", "shop", "gone"),
	}
	got := c.Gateways(context.Background(), routes.Parents{Refs: append(append([]routes.ParentRef(nil), known...), unknown...)})
	traefik := []string{"HTTPRoute", "HTTPRouteMethodMatching"}
	want := []routes.Gateway{
		{Parent: known[0], Class: "traefik", Features: traefik, Publishes: true},
		{Parent: known[1], Class: "traefik", Features: traefik, Publishes: true},
		{Parent: known[2], Class: "older", Features: []string{"HTTPRoute", "HTTPRouteRequestMirror"}, Publishes: true},
		{Parent: known[3], Class: "silent"},
		{Parent: unknown[0], Unknown: "reading Gateway locked/gw was refused: grant the plugin's ServiceAccount get, list and watch on gateways.gateway.networking.k8s.io (docs/install.md)"},
		{Parent: unknown[1], Unknown: "a Service parent belongs to a mesh, which publishes no GatewayClass (an XMesh, which the plugin does not read); not checked"},
		{Parent: unknown[2], Unknown: "reading Gateway shop/gone: gone not found"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Gateways (-want +got):\n%s", diff)
	}
	before := api.requests()
	if diff := cmp.Diff(want[:4], c.Gateways(context.Background(), routes.Parents{Refs: known})); diff != "" {
		t.Errorf("Gateways again (-want +got):\n%s", diff)
	}
	if n := api.requests() - before; n != 0 {
		t.Errorf("asking again sent %d requests; the watch caches hold every parent", n)
	}
}

// A plan's files: the same answers from the objects given.
func TestParentIndexAnswersFromFiles(t *testing.T) {
	var ix ParentIndex
	for _, o := range []map[string]any{
		object(routes.Group+"/v1", "GatewayClass", "", "traefik", nil, map[string]any{"supportedFeatures": []any{map[string]any{"name": "HTTPRoute"}}}),
		object(routes.Group+"/v1", "Gateway", "shop", "edge", map[string]any{"gatewayClassName": "traefik"}, nil),
		object("v1", "Service", "shop", "web", nil, nil),
	} {
		data, _ := json.Marshal(o)
		if _, err := ix.Add(data); err != nil {
			t.Fatal(err)
		}
	}
	edge := routes.ParentRef{Group: routes.Group, Kind: "Gateway", Namespace: "shop", Name: "edge"}
	other := routes.ParentRef{Group: routes.Group, Kind: "Gateway", Namespace: "shop", Name: "other"}
	want := []routes.Gateway{
		{Parent: edge, Class: "traefik", Features: []string{"HTTPRoute"}, Publishes: true},
		{Parent: other, Unknown: "the files given hold no Gateway shop/other"},
	}
	if diff := cmp.Diff(want, ix.Gateways(context.Background(), routes.Parents{Refs: []routes.ParentRef{edge, other}})); diff != "" {
		t.Errorf("Gateways (-want +got):\n%s", diff)
	}
}
