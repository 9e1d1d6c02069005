package kube

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/gatewayapi-ssa/rollouts-plugin/kube/kubetest"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"
	"k8s.io/client-go/rest"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
)

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
	api := kubetest.New(t)
	for path, objects := range map[string][]map[string]any{
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
	} {
		api.Serve(path, objects...)
	}
	locked := "/apis/" + routes.Group + "/v1/namespaces/locked/gateways"
	api.Script(locked, http.StatusForbidden, kubetest.Status(http.StatusForbidden, "Forbidden"))
	api.Script(locked+"/gw", http.StatusForbidden, kubetest.Status(http.StatusForbidden, "Forbidden"))
	gw, err := gateway.NewForConfig(&rest.Config{Host: api.URL()})
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
		{Parent: unknown[2], Unknown: `reading Gateway shop/gone: gateways.gateway.networking.k8s.io "gone" not found`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Gateways (-want +got):\n%s", diff)
	}
	before := len(api.Requests())
	if diff := cmp.Diff(want[:4], c.Gateways(context.Background(), routes.Parents{Refs: known})); diff != "" {
		t.Errorf("Gateways again (-want +got):\n%s", diff)
	}
	if n := len(api.Requests()) - before; n != 0 {
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
