package transform

import (
	"errors"
	"strings"
	"testing"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes/routestest"
	"github.com/google/go-cmp/cmp"
)

// The rules below are in the form the apiserver serves them through
// unstructured: JSON objects as map[string]any, lists as []any, numbers as
// int64, server defaults (group "", kind Service, weight 1) included.

const wtNS = "shop"

var (
	wtStable = routes.ServiceRef(wtNS, "web-stable")
	wtCanary = routes.ServiceRef(wtNS, "web-canary")
)

// gkeImport is a backendRef to the ServiceImport of a GKE fleet (multi-cluster
// Gateways), as served.
func gkeImport(name string, weight int64) map[string]any {
	return map[string]any{"group": "net.gke.io", "kind": "ServiceImport", "name": name, "port": int64(8080), "weight": weight}
}

// wtBackendNoWeight is a backendRef as written by a client that left out the
// weight (and, as in older fixtures, the group and kind defaults).
func wtBackendNoWeight(name string) map[string]any {
	return map[string]any{"name": name, "port": int64(8080)}
}

// wtWith returns a copy of m with the given keys set.
func wtWith(m map[string]any, kv ...any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

func wtRoute(rules ...routes.Rule) routes.Route {
	return routes.Route{Ref: routes.Ref{Kind: routes.HTTPRoute, Namespace: wtNS, Name: "web"}, Version: "v1", Rules: rules}
}

func TestSetWeights(t *testing.T) {
	serviceImport := map[string]any{"group": "multicluster.x-k8s.io", "kind": "ServiceImport", "name": "web-canary", "port": int64(8080), "weight": int64(7)}
	mcsGroup := map[string]any{"group": "multicluster.x-k8s.io", "kind": "Service", "name": "web-canary", "port": int64(8080), "weight": int64(8)}
	otherNS := wtWith(routestest.Backend("web-canary", 9), "namespace", "elsewhere")

	tests := []struct {
		name        string
		route       func() routes.Route // built fresh, so the input can be compared after the call
		split       Split
		wantRules   []routes.Rule
		wantChanges []Change
	}{
		{
			name: "stable and canary in one rule: canary gets w, stable max-w",
			route: func() routes.Route {
				return wtRoute(routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 100), routestest.Backend("web-canary", 0)))
			},
			split: Split{Stable: wtStable, Canary: wtCanary, CanaryWeight: 30, MaxWeight: 100},
			wantRules: []routes.Rule{
				routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 70), routestest.Backend("web-canary", 30)),
			},
			wantChanges: []Change{
				{Rule: 0, Backend: wtStable, From: 100, To: 70},
				{Rule: 0, Backend: wtCanary, From: 0, To: 30},
			},
		},
		{
			name: "order of backendRefs does not matter",
			route: func() routes.Route {
				return wtRoute(routestest.RuleWithUnmanaged("/", routestest.Backend("web-canary", 10), routestest.Backend("web-stable", 90)))
			},
			split: Split{Stable: wtStable, Canary: wtCanary, CanaryWeight: 25, MaxWeight: 100},
			wantRules: []routes.Rule{
				routestest.RuleWithUnmanaged("/", routestest.Backend("web-canary", 25), routestest.Backend("web-stable", 75)),
			},
			wantChanges: []Change{
				{Rule: 0, Backend: wtCanary, From: 10, To: 25},
				{Rule: 0, Backend: wtStable, From: 90, To: 75},
			},
		},
		{
			name: "a third backendRef in the managed rule keeps its weight",
			route: func() routes.Route {
				return wtRoute(routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 100), routestest.Backend("web-canary", 0), routestest.Backend("web-legacy", 5)))
			},
			split: Split{Stable: wtStable, Canary: wtCanary, CanaryWeight: 40, MaxWeight: 100},
			wantRules: []routes.Rule{
				routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 60), routestest.Backend("web-canary", 40), routestest.Backend("web-legacy", 5)),
			},
			wantChanges: []Change{
				{Rule: 0, Backend: wtStable, From: 100, To: 60},
				{Rule: 0, Backend: wtCanary, From: 0, To: 40},
			},
		},
		{
			name: "a rule without both Services keeps everything",
			route: func() routes.Route {
				return wtRoute(
					routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 100), routestest.Backend("web-canary", 0)),
					routestest.RuleWithUnmanaged("/admin", routestest.Backend("web-stable", 100)),
					routestest.RuleWithUnmanaged("/preview", routestest.Backend("web-canary", 3)),
				)
			},
			split: Split{Stable: wtStable, Canary: wtCanary, CanaryWeight: 20, MaxWeight: 100},
			wantRules: []routes.Rule{
				routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 80), routestest.Backend("web-canary", 20)),
				routestest.RuleWithUnmanaged("/admin", routestest.Backend("web-stable", 100)),
				routestest.RuleWithUnmanaged("/preview", routestest.Backend("web-canary", 3)),
			},
			wantChanges: []Change{
				{Rule: 0, Backend: wtStable, From: 100, To: 80},
				{Rule: 0, Backend: wtCanary, From: 0, To: 20},
			},
		},
		{
			name: "two managed rules both change",
			route: func() routes.Route {
				return wtRoute(
					routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 100), routestest.Backend("web-canary", 0)),
					routestest.RuleWithUnmanaged("/static", routestest.Backend("cdn", 1)),
					routestest.RuleWithUnmanaged("/api", routestest.Backend("web-canary", 10), routestest.Backend("web-stable", 90)),
				)
			},
			split: Split{Stable: wtStable, Canary: wtCanary, CanaryWeight: 50, MaxWeight: 100},
			wantRules: []routes.Rule{
				routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 50), routestest.Backend("web-canary", 50)),
				routestest.RuleWithUnmanaged("/static", routestest.Backend("cdn", 1)),
				routestest.RuleWithUnmanaged("/api", routestest.Backend("web-canary", 50), routestest.Backend("web-stable", 50)),
			},
			wantChanges: []Change{
				{Rule: 0, Backend: wtStable, From: 100, To: 50},
				{Rule: 0, Backend: wtCanary, From: 0, To: 50},
				{Rule: 2, Backend: wtCanary, From: 10, To: 50},
				{Rule: 2, Backend: wtStable, From: 90, To: 50},
			},
		},
		{
			// GKE's multi-cluster Gateways, the Multi-Cluster Services API and
			// AWS Lattice route to a ServiceImport named like the Service.
			name: "a ServiceImport of the stable or canary Service is that Service's backend",
			route: func() routes.Route {
				return wtRoute(
					routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 100), serviceImport),
					routestest.RuleWithUnmanaged("/gke", gkeImport("web-stable", 100), gkeImport("web-canary", 0)),
					routestest.RuleWithUnmanaged("/lattice", wtWith(gkeImport("web-stable", 100), "group", "application-networking.k8s.aws"), mcsGroup),
				)
			},
			split: Split{Stable: wtStable, Canary: wtCanary, CanaryWeight: 10, MaxWeight: 100},
			wantRules: []routes.Rule{
				routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 90), wtWith(serviceImport, "weight", int64(10))),
				routestest.RuleWithUnmanaged("/gke", gkeImport("web-stable", 90), gkeImport("web-canary", 10)),
				routestest.RuleWithUnmanaged("/lattice", wtWith(gkeImport("web-stable", 100), "group", "application-networking.k8s.aws"), mcsGroup),
			},
			wantChanges: []Change{
				{Rule: 0, Backend: wtStable, From: 100, To: 90},
				{Rule: 0, Backend: routes.ObjectRef{Group: "multicluster.x-k8s.io", Kind: "ServiceImport", Namespace: wtNS, Name: "web-canary"}, From: 7, To: 10},
				{Rule: 1, Backend: routes.ObjectRef{Group: "net.gke.io", Kind: "ServiceImport", Namespace: wtNS, Name: "web-stable"}, From: 100, To: 90},
				{Rule: 1, Backend: routes.ObjectRef{Group: "net.gke.io", Kind: "ServiceImport", Namespace: wtNS, Name: "web-canary"}, From: 0, To: 10},
			},
		},
		{
			name: "a ServiceImport of a group that is not a Multi-Cluster Services API is not the Service",
			route: func() routes.Route {
				return wtRoute(routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 100), routestest.Backend("web-canary", 0), wtWith(serviceImport, "group", "example.com")))
			},
			split: Split{Stable: wtStable, Canary: wtCanary, CanaryWeight: 10, MaxWeight: 100},
			wantRules: []routes.Rule{
				routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 90), routestest.Backend("web-canary", 10), wtWith(serviceImport, "group", "example.com")),
			},
			wantChanges: []Change{
				{Rule: 0, Backend: wtStable, From: 100, To: 90},
				{Rule: 0, Backend: wtCanary, From: 0, To: 10},
			},
		},
		{
			name: "a backend of group multicluster.x-k8s.io named like the canary is not the canary",
			route: func() routes.Route {
				return wtRoute(
					routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 100), routestest.Backend("web-canary", 0), mcsGroup),
					routestest.RuleWithUnmanaged("/mc", routestest.Backend("web-stable", 100), mcsGroup),
				)
			},
			split: Split{Stable: wtStable, Canary: wtCanary, CanaryWeight: 10, MaxWeight: 100},
			wantRules: []routes.Rule{
				routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 90), routestest.Backend("web-canary", 10), mcsGroup),
				routestest.RuleWithUnmanaged("/mc", routestest.Backend("web-stable", 100), mcsGroup),
			},
			wantChanges: []Change{
				{Rule: 0, Backend: wtStable, From: 100, To: 90},
				{Rule: 0, Backend: wtCanary, From: 0, To: 10},
			},
		},
		{
			name: "a Service named like the canary in another namespace is not the canary",
			route: func() routes.Route {
				return wtRoute(
					routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 100), routestest.Backend("web-canary", 0), otherNS),
					routestest.RuleWithUnmanaged("/other", routestest.Backend("web-stable", 100), otherNS),
				)
			},
			split: Split{Stable: wtStable, Canary: wtCanary, CanaryWeight: 10, MaxWeight: 100},
			wantRules: []routes.Rule{
				routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 90), routestest.Backend("web-canary", 10), otherNS),
				routestest.RuleWithUnmanaged("/other", routestest.Backend("web-stable", 100), otherNS),
			},
			wantChanges: []Change{
				{Rule: 0, Backend: wtStable, From: 100, To: 90},
				{Rule: 0, Backend: wtCanary, From: 0, To: 10},
			},
		},
		{
			name: "the route's own namespace spelled out is the same Service",
			route: func() routes.Route {
				return wtRoute(routestest.RuleWithUnmanaged("/", wtWith(routestest.Backend("web-stable", 100), "namespace", wtNS), routestest.Backend("web-canary", 0)))
			},
			split: Split{Stable: wtStable, Canary: wtCanary, CanaryWeight: 10, MaxWeight: 100},
			wantRules: []routes.Rule{
				routestest.RuleWithUnmanaged("/", wtWith(routestest.Backend("web-stable", 90), "namespace", wtNS), routestest.Backend("web-canary", 10)),
			},
			wantChanges: []Change{
				{Rule: 0, Backend: wtStable, From: 100, To: 90},
				{Rule: 0, Backend: wtCanary, From: 0, To: 10},
			},
		},
		{
			name: "missing weight means 1, and a third backendRef without weight stays without",
			route: func() routes.Route {
				return wtRoute(routestest.RuleWithUnmanaged("/", wtBackendNoWeight("web-stable"), wtBackendNoWeight("web-canary"), wtBackendNoWeight("web-legacy")))
			},
			split: Split{Stable: wtStable, Canary: wtCanary, CanaryWeight: 0, MaxWeight: 100},
			wantRules: []routes.Rule{
				routestest.RuleWithUnmanaged("/",
					wtWith(wtBackendNoWeight("web-stable"), "weight", int64(100)),
					wtWith(wtBackendNoWeight("web-canary"), "weight", int64(0)),
					wtBackendNoWeight("web-legacy")),
			},
			wantChanges: []Change{
				{Rule: 0, Backend: wtStable, From: 1, To: 100},
				{Rule: 0, Backend: wtCanary, From: 1, To: 0},
			},
		},
		{
			name: "missing weight equal to the wanted 1 is left missing",
			route: func() routes.Route {
				return wtRoute(routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 5), wtBackendNoWeight("web-canary")))
			},
			split: Split{Stable: wtStable, Canary: wtCanary, CanaryWeight: 1, MaxWeight: 100},
			wantRules: []routes.Rule{
				routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 99), wtBackendNoWeight("web-canary")),
			},
			wantChanges: []Change{
				{Rule: 0, Backend: wtStable, From: 5, To: 99},
			},
		},
		{
			name: "maxWeight 1000 with 300 gives 700/300",
			route: func() routes.Route {
				return wtRoute(routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 1000), routestest.Backend("web-canary", 0)))
			},
			split: Split{Stable: wtStable, Canary: wtCanary, CanaryWeight: 300, MaxWeight: 1000},
			wantRules: []routes.Rule{
				routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 700), routestest.Backend("web-canary", 300)),
			},
			wantChanges: []Change{
				{Rule: 0, Backend: wtStable, From: 1000, To: 700},
				{Rule: 0, Backend: wtCanary, From: 0, To: 300},
			},
		},
		{
			name: "full promotion: canary gets everything",
			route: func() routes.Route {
				return wtRoute(routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 60), routestest.Backend("web-canary", 40)))
			},
			split: Split{Stable: wtStable, Canary: wtCanary, CanaryWeight: 100, MaxWeight: 100},
			wantRules: []routes.Rule{
				routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 0), routestest.Backend("web-canary", 100)),
			},
			wantChanges: []Change{
				{Rule: 0, Backend: wtStable, From: 60, To: 0},
				{Rule: 0, Backend: wtCanary, From: 40, To: 100},
			},
		},
		{
			name: "weights already as asked: same rules, no changes",
			route: func() routes.Route {
				return wtRoute(routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 70), routestest.Backend("web-canary", 30)))
			},
			split:       Split{Stable: wtStable, Canary: wtCanary, CanaryWeight: 30, MaxWeight: 100},
			wantRules:   []routes.Rule{routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 70), routestest.Backend("web-canary", 30))},
			wantChanges: nil,
		},
		{
			name: "one managed rule already right, the other changes",
			route: func() routes.Route {
				return wtRoute(
					routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 70), routestest.Backend("web-canary", 30)),
					routestest.RuleWithUnmanaged("/api", routestest.Backend("web-stable", 100), routestest.Backend("web-canary", 0)),
				)
			},
			split: Split{Stable: wtStable, Canary: wtCanary, CanaryWeight: 30, MaxWeight: 100},
			wantRules: []routes.Rule{
				routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 70), routestest.Backend("web-canary", 30)),
				routestest.RuleWithUnmanaged("/api", routestest.Backend("web-stable", 70), routestest.Backend("web-canary", 30)),
			},
			wantChanges: []Change{
				{Rule: 1, Backend: wtStable, From: 100, To: 70},
				{Rule: 1, Backend: wtCanary, From: 0, To: 30},
			},
		},
		{
			name: "a named TCPRoute rule: name and every other field pass through",
			route: func() routes.Route {
				r := wtRoute(routes.Rule{
					"name":        "main",
					"backendRefs": []any{routestest.Backend("web-stable", 100), routestest.Backend("web-canary", 0)},
				})
				r.Kind = routes.TCPRoute
				return r
			},
			split: Split{Stable: wtStable, Canary: wtCanary, CanaryWeight: 5, MaxWeight: 100},
			wantRules: []routes.Rule{{
				"name":        "main",
				"backendRefs": []any{routestest.Backend("web-stable", 95), routestest.Backend("web-canary", 5)},
			}},
			wantChanges: []Change{
				{Rule: 0, Backend: wtStable, From: 100, To: 95},
				{Rule: 0, Backend: wtCanary, From: 0, To: 5},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			route := tc.route()
			gotRules, gotChanges, err := SetWeights(route, tc.split, Targeting{})
			if err != nil {
				t.Fatalf("SetWeights: unexpected error: %v", err)
			}
			if diff := cmp.Diff(tc.wantRules, gotRules); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantChanges, gotChanges); diff != "" {
				t.Errorf("changes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.route().Rules, route.Rules); diff != "" {
				t.Errorf("SetWeights changed its input route's rules (-before +after):\n%s", diff)
			}
		})
	}
}

// TestSetWeightsReturnsDeepCopy changes every map and list reachable from the
// returned rules and checks the input route did not change with them.
func TestSetWeightsReturnsDeepCopy(t *testing.T) {
	build := func() routes.Route {
		return wtRoute(
			routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 100), routestest.Backend("web-canary", 0), routestest.Backend("web-legacy", 5)),
			routestest.RuleWithUnmanaged("/admin", routestest.Backend("web-stable", 100)),
		)
	}
	route := build()
	got, _, err := SetWeights(route, Split{Stable: wtStable, Canary: wtCanary, CanaryWeight: 10, MaxWeight: 100}, Targeting{})
	if err != nil {
		t.Fatalf("SetWeights: %v", err)
	}
	for _, r := range got {
		for _, b := range r.BackendRefs() {
			b.SetWeight(12345)
			b["name"] = "mutated"
		}
		r["matches"].([]any)[0].(map[string]any)["path"].(map[string]any)["value"] = "/mutated"
		r["backendRefs"].([]any)[0] = "mutated"
		r["timeouts"] = nil
	}
	if diff := cmp.Diff(build().Rules, route.Rules); diff != "" {
		t.Errorf("changing SetWeights' result changed the input route (-before +after):\n%s", diff)
	}
}

func TestSetWeightsErrors(t *testing.T) {
	managed := func() routes.Route {
		return wtRoute(routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 100), routestest.Backend("web-canary", 0)))
	}
	tests := []struct {
		name    string
		route   func() routes.Route
		split   Split
		wantErr []string // substrings of the message
		// wantNoRule, if set, is the *NoWeightedRuleError the call must return.
		wantNoRule *NoWeightedRuleError
	}{
		{
			name:    "negative canary weight",
			route:   managed,
			split:   Split{Stable: wtStable, Canary: wtCanary, CanaryWeight: -1, MaxWeight: 100},
			wantErr: []string{"weight -1 is outside 0..100", "0..100"},
		},
		{
			name:    "canary weight above maxWeight",
			route:   managed,
			split:   Split{Stable: wtStable, Canary: wtCanary, CanaryWeight: 101, MaxWeight: 100},
			wantErr: []string{"weight 101 is outside 0..100", "0..100"},
		},
		{
			name:    "canary weight above a maxWeight of 1000",
			route:   managed,
			split:   Split{Stable: wtStable, Canary: wtCanary, CanaryWeight: 1001, MaxWeight: 1000},
			wantErr: []string{"weight 1001 is outside 0..1000", "0..1000"},
		},
		{
			name: "no rule holds both Services",
			route: func() routes.Route {
				return wtRoute(routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 100)), routestest.RuleWithUnmanaged("/preview", routestest.Backend("web-canary", 100)))
			},
			split:      Split{Stable: wtStable, Canary: wtCanary, CanaryWeight: 10, MaxWeight: 100},
			wantErr:    []string{"HTTPRoute shop/web", "Service shop/web-stable", "Service shop/web-canary"},
			wantNoRule: &NoWeightedRuleError{Route: routes.Ref{Kind: routes.HTTPRoute, Namespace: wtNS, Name: "web"}, Stable: wtStable, Canary: wtCanary},
		},
		{
			name:       "a route without rules",
			route:      func() routes.Route { return wtRoute() },
			split:      Split{Stable: wtStable, Canary: wtCanary, CanaryWeight: 10, MaxWeight: 100},
			wantErr:    []string{"HTTPRoute shop/web", "Service shop/web-stable", "Service shop/web-canary"},
			wantNoRule: &NoWeightedRuleError{Route: routes.Ref{Kind: routes.HTTPRoute, Namespace: wtNS, Name: "web"}, Stable: wtStable, Canary: wtCanary},
		},
		{
			name: "the canary as a Service and as its ServiceImport in one rule",
			route: func() routes.Route {
				return wtRoute(routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 100), routestest.Backend("web-canary", 0), gkeImport("web-canary", 0)))
			},
			split: Split{Stable: wtStable, Canary: wtCanary, CanaryWeight: 10, MaxWeight: 100},
			wantErr: []string{"HTTPRoute shop/web: rule 0 sends to Service shop/web-canary through 2 backendRefs " +
				"(Service shop/web-canary, ServiceImport.net.gke.io shop/web-canary), so the plugin cannot tell which share of its weight goes where; " +
				"keep one backendRef per Service: the Service or its ServiceImport, not both"},
		},
		{
			name: "the canary only as a ServiceImport of a group that is not a Multi-Cluster Services API",
			route: func() routes.Route {
				return wtRoute(routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 100),
					map[string]any{"group": "example.com", "kind": "ServiceImport", "name": "web-canary", "weight": int64(0)}))
			},
			split:      Split{Stable: wtStable, Canary: wtCanary, CanaryWeight: 10, MaxWeight: 100},
			wantErr:    []string{"HTTPRoute shop/web", "Service shop/web-stable", "Service shop/web-canary"},
			wantNoRule: &NoWeightedRuleError{Route: routes.Ref{Kind: routes.HTTPRoute, Namespace: wtNS, Name: "web"}, Stable: wtStable, Canary: wtCanary},
		},
		{
			name: "the canary only in another namespace",
			route: func() routes.Route {
				return wtRoute(routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 100), wtWith(routestest.Backend("web-canary", 0), "namespace", "elsewhere")))
			},
			split:      Split{Stable: wtStable, Canary: wtCanary, CanaryWeight: 10, MaxWeight: 100},
			wantErr:    []string{"HTTPRoute shop/web", "Service shop/web-stable", "Service shop/web-canary"},
			wantNoRule: &NoWeightedRuleError{Route: routes.Ref{Kind: routes.HTTPRoute, Namespace: wtNS, Name: "web"}, Stable: wtStable, Canary: wtCanary},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			route := tc.route()
			rules, changes, err := SetWeights(route, tc.split, Targeting{})
			if err == nil {
				t.Fatalf("SetWeights: no error; rules %v, changes %v", rules, changes)
			}
			for _, s := range tc.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
			var noRule *NoWeightedRuleError
			isNoRule := errors.As(err, &noRule)
			switch {
			case tc.wantNoRule == nil && isNoRule:
				t.Errorf("error is a *NoWeightedRuleError, want a range error: %v", err)
			case tc.wantNoRule != nil && !isNoRule:
				t.Errorf("error is %T, want *NoWeightedRuleError: %v", err, err)
			case tc.wantNoRule != nil:
				if diff := cmp.Diff(tc.wantNoRule, noRule); diff != "" {
					t.Errorf("NoWeightedRuleError (-want +got):\n%s", diff)
				}
			}
			if rules != nil || changes != nil {
				t.Errorf("on error SetWeights returned rules %v and changes %v, want nil", rules, changes)
			}
			if diff := cmp.Diff(tc.route().Rules, route.Rules); diff != "" {
				t.Errorf("SetWeights changed its input route's rules (-before +after):\n%s", diff)
			}
		})
	}
}

func TestNoWeightedRuleErrorMessage(t *testing.T) {
	err := &NoWeightedRuleError{
		Route:  routes.Ref{Kind: routes.GRPCRoute, Namespace: "payments", Name: "api"},
		Stable: routes.ServiceRef("payments", "api-ping"),
		Canary: routes.ServiceRef("payments", "api-pong"),
	}
	want := "GRPCRoute payments/api has no rule whose backendRefs include both the stable Service payments/api-ping " +
		"and the canary Service payments/api-pong; add both backendRefs to the rule whose traffic the rollout shifts, " +
		"or set addCanaryBackendRef: true"
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("message (-want +got):\n%s", diff)
	}
}

func TestWeightedRules(t *testing.T) {
	tests := []struct {
		name  string
		route routes.Route
		want  []int
	}{
		{
			name:  "no rules",
			route: wtRoute(),
			want:  nil,
		},
		{
			name:  "one rule with both",
			route: wtRoute(routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 1), routestest.Backend("web-canary", 1))),
			want:  []int{0},
		},
		{
			name: "only the rules with both, in order",
			route: wtRoute(
				routestest.RuleWithUnmanaged("/a", routestest.Backend("web-stable", 1)),
				routestest.RuleWithUnmanaged("/b", routestest.Backend("web-canary", 1), routestest.Backend("web-stable", 1)),
				routestest.RuleWithUnmanaged("/c", routestest.Backend("web-canary", 1)),
				routestest.RuleWithUnmanaged("/d", routestest.Backend("web-stable", 1), routestest.Backend("x", 1), routestest.Backend("web-canary", 1)),
			),
			want: []int{1, 3},
		},
		{
			name:  "defaults left out still match",
			route: wtRoute(routestest.RuleWithUnmanaged("/", wtBackendNoWeight("web-stable"), wtBackendNoWeight("web-canary"))),
			want:  []int{0},
		},
		{
			name: "kind, group and namespace must all match",
			route: wtRoute(
				routestest.RuleWithUnmanaged("/kind", routestest.Backend("web-stable", 1), wtWith(routestest.Backend("web-canary", 1), "kind", "ServiceImport")),
				routestest.RuleWithUnmanaged("/group", routestest.Backend("web-stable", 1), wtWith(routestest.Backend("web-canary", 1), "group", "multicluster.x-k8s.io")),
				routestest.RuleWithUnmanaged("/ns", routestest.Backend("web-stable", 1), wtWith(routestest.Backend("web-canary", 1), "namespace", "elsewhere")),
				routestest.RuleWithUnmanaged("/stable-ns", wtWith(routestest.Backend("web-stable", 1), "namespace", "elsewhere"), routestest.Backend("web-canary", 1)),
			),
			want: nil,
		},
		{
			name: "a rule without backendRefs",
			route: wtRoute(
				routes.Rule{"matches": []any{}},
				routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 1), routestest.Backend("web-canary", 1)),
			),
			want: []int{1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := WeightedRules(tc.route.Namespace, tc.route.Rules, wtStable, wtCanary, Targeting{})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("WeightedRules (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRuleBackendRefs(t *testing.T) {
	tests := []struct {
		name string
		rule routes.Rule
		want []routes.BackendRef
	}{
		{
			name: "no backendRefs key",
			rule: routes.Rule{"matches": []any{}},
			want: []routes.BackendRef{},
		},
		{
			name: "every backendRef, in order",
			rule: routestest.RuleWithUnmanaged("/", routestest.Backend("b", 2), routestest.Backend("a", 1)),
			want: []routes.BackendRef{routestest.Backend("b", 2), routestest.Backend("a", 1)},
		},
		{
			name: "entries that are not objects are skipped",
			rule: routes.Rule{"backendRefs": []any{"junk", routestest.Backend("a", 1), nil, int64(3)}},
			want: []routes.BackendRef{routestest.Backend("a", 1)},
		},
		{
			name: "backendRefs that is not a list",
			rule: routes.Rule{"backendRefs": map[string]any{"name": "a"}},
			want: []routes.BackendRef{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.rule.BackendRefs()); diff != "" {
				t.Errorf("BackendRefs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBackendRefSetWeightChangesTheRule(t *testing.T) {
	r := routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 100), wtBackendNoWeight("web-canary"))
	refs := r.BackendRefs()
	refs[0].SetWeight(60)
	refs[1].SetWeight(40)
	want := routestest.RuleWithUnmanaged("/", routestest.Backend("web-stable", 60), wtWith(wtBackendNoWeight("web-canary"), "weight", int64(40)))
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("rule after SetWeight through BackendRefs (-want +got):\n%s", diff)
	}
}

func TestBackendRefTarget(t *testing.T) {
	tests := []struct {
		name string
		ref  routes.BackendRef
		want routes.ObjectRef
	}{
		{
			name: "defaults spelled out",
			ref:  routestest.Backend("web", 1),
			want: routes.ObjectRef{Group: "", Kind: "Service", Namespace: wtNS, Name: "web"},
		},
		{
			name: "defaults left out: core group, kind Service, the route's namespace",
			ref:  routes.BackendRef{"name": "web"},
			want: routes.ObjectRef{Group: "", Kind: "Service", Namespace: wtNS, Name: "web"},
		},
		{
			name: "empty kind and namespace mean the defaults",
			ref:  routes.BackendRef{"name": "web", "kind": "", "namespace": ""},
			want: routes.ObjectRef{Group: "", Kind: "Service", Namespace: wtNS, Name: "web"},
		},
		{
			name: "another namespace",
			ref:  routes.BackendRef{"name": "web", "namespace": "elsewhere"},
			want: routes.ObjectRef{Group: "", Kind: "Service", Namespace: "elsewhere", Name: "web"},
		},
		{
			name: "ServiceImport",
			ref:  routes.BackendRef{"group": "multicluster.x-k8s.io", "kind": "ServiceImport", "name": "web"},
			want: routes.ObjectRef{Group: "multicluster.x-k8s.io", Kind: "ServiceImport", Namespace: wtNS, Name: "web"},
		},
		{
			name: "a group with the default kind",
			ref:  routes.BackendRef{"group": "multicluster.x-k8s.io", "name": "web"},
			want: routes.ObjectRef{Group: "multicluster.x-k8s.io", Kind: "Service", Namespace: wtNS, Name: "web"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.ref.Target(wtNS)); diff != "" {
				t.Errorf("Target (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBackendRefWeight(t *testing.T) {
	tests := []struct {
		name string
		ref  routes.BackendRef
		want int64
	}{
		{name: "int64 as unstructured gives it", ref: routes.BackendRef{"weight": int64(42)}, want: 42},
		{name: "zero", ref: routes.BackendRef{"weight": int64(0)}, want: 0},
		{name: "the largest Gateway API weight", ref: routes.BackendRef{"weight": int64(1000000)}, want: 1000000},
		{name: "float64 as encoding/json gives it", ref: routes.BackendRef{"weight": float64(7)}, want: 7},
		{name: "missing means 1", ref: routes.BackendRef{"name": "web"}, want: 1},
		{name: "null means 1", ref: routes.BackendRef{"weight": nil}, want: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.ref.Weight(); got != tc.want {
				t.Errorf("Weight = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestChangeString(t *testing.T) {
	tests := []struct {
		change Change
		want   string
	}{
		{Change{Rule: 0, Backend: wtStable, From: 100, To: 70}, "rule 0 Service shop/web-stable 100→70"},
		{
			Change{Rule: 3, Backend: routes.ObjectRef{Group: "multicluster.x-k8s.io", Kind: "ServiceImport", Namespace: wtNS, Name: "web"}, From: 1, To: 0},
			"rule 3 ServiceImport.multicluster.x-k8s.io shop/web 1→0",
		},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, tc.change.String()); diff != "" {
			t.Errorf("Change.String (-want +got):\n%s", diff)
		}
	}
}

// With ruleName, only the rule of that name is a weighted rule: another rule
// holding the same two Services keeps its weights.
func TestSetWeightsOnTheNamedRuleOnly(t *testing.T) {
	named := func(name string, stable, canary int64) routes.Rule {
		r := routestest.RuleWithUnmanaged("/"+name, routestest.Backend("web-stable", stable), routestest.Backend("web-canary", canary))
		r["name"] = name
		return r
	}
	live := wtRoute(named("live", 100, 0), named("split", 100, 0), routestest.RuleWithUnmanaged("/other", routestest.Backend("web-stable", 100), routestest.Backend("web-canary", 0)))
	got, changes, err := SetWeights(live, Split{Stable: wtStable, Canary: wtCanary, CanaryWeight: 30, MaxWeight: 100}, Targeting{RuleName: "split"})
	if err != nil {
		t.Fatal(err)
	}
	want := []routes.Rule{named("live", 100, 0), named("split", 70, 30), routestest.RuleWithUnmanaged("/other", routestest.Backend("web-stable", 100), routestest.Backend("web-canary", 0))}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	if len(changes) != 2 || changes[0].Rule != 1 {
		t.Errorf("changes %v, want two in rule 1", changes)
	}

	// A name no rule has: the error lists the names the route has (not the
	// plugin's added rules) and how many rules are unnamed.
	withAdded := wtRoute(named("live", 100, 0), named("beta", 0, 1), routestest.RuleWithUnmanaged("/x", routestest.Backend("web-stable", 1)))
	_, _, err = SetWeights(withAdded, Split{Stable: wtStable, Canary: wtCanary, CanaryWeight: 30, MaxWeight: 100},
		Targeting{RuleName: "spilt", Added: map[string]bool{"beta": true}})
	var missing *NoRuleNamedError
	if !errors.As(err, &missing) {
		t.Fatalf("error %v, want a NoRuleNamedError", err)
	}
	want2 := `HTTPRoute shop/web has no rule named "spilt" (ruleName in the Rollout's plugin config): it has rules named live and 1 unnamed; set ruleName to one of them, or give the rule a name`
	if diff := cmp.Diff(want2, err.Error()); diff != "" {
		t.Errorf("message (-want +got):\n%s", diff)
	}

	// The named rule exists but does not hold both Services.
	_, _, err = SetWeights(wtRoute(named("static", 1, 0), named("live", 100, 0)), Split{Stable: wtStable, Canary: routes.ServiceRef(wtNS, "other"), CanaryWeight: 30, MaxWeight: 100},
		Targeting{RuleName: "static"})
	var noRule *NoWeightedRuleError
	if !errors.As(err, &noRule) || !strings.Contains(err.Error(), `rule "static" (the ruleName of the Rollout's plugin config) does not send traffic to both`) {
		t.Errorf("error %v, want a NoWeightedRuleError naming the rule", err)
	}
}

// A weight change is told as the write's log line and the route's Event
// say it: one note of kind WeightChanged per change, in order.
func TestWeightChangesAreNotedInOrder(t *testing.T) {
	changes := []Change{{Rule: 0, Backend: wtStable, From: 100, To: 70}, {Rule: 2, Backend: wtCanary, From: 0, To: 30}}
	want := []routes.Change{
		{Kind: routes.WeightChanged, Text: "rule 0 " + wtStable.String() + " 100→70"},
		{Kind: routes.WeightChanged, Text: "rule 2 " + wtCanary.String() + " 0→30"},
	}
	if diff := cmp.Diff(want, notes(changes)); diff != "" {
		t.Errorf("notes (-want +got):\n%s", diff)
	}
}

// Check says which of its two refusals a split meets, in the same words as
// ever.
func TestSplitCheckSaysWhichRefusal(t *testing.T) {
	for _, tc := range []struct {
		name  string
		split Split
		want  *SplitError
		text  string
	}{
		{name: "carried", split: Split{CanaryWeight: 30, MaxWeight: 100, Reserved: 70}},
		{name: "canary weight out of range, whatever is reserved", split: Split{CanaryWeight: 101, MaxWeight: 100, Reserved: 5},
			want: &SplitError{Split: Split{CanaryWeight: 101, MaxWeight: 100, Reserved: 5}},
			text: "weight 101 is outside 0..100 (spec.strategy.canary.trafficRouting.maxTrafficWeight)"},
		{name: "no room left for stable", split: Split{CanaryWeight: 80, MaxWeight: 100, Reserved: 25},
			want: &SplitError{Split: Split{CanaryWeight: 80, MaxWeight: 100, Reserved: 25}, Exceeds: true},
			text: "canary weight 80 plus experiment weights 25 exceed maxTrafficWeight 100"},
		{name: "a negative reserve", split: Split{CanaryWeight: 10, MaxWeight: 100, Reserved: -1},
			want: &SplitError{Split: Split{CanaryWeight: 10, MaxWeight: 100, Reserved: -1}, Exceeds: true},
			text: "canary weight 10 plus experiment weights -1 exceed maxTrafficWeight 100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.split.Check()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Check: %v, want none", err)
				}
				return
			}
			var got *SplitError
			if !errors.As(err, &got) {
				t.Fatalf("Check: %v, want a *SplitError", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Check (-want +got):\n%s", diff)
			}
			if err.Error() != tc.text {
				t.Errorf("Check says %q, want %q", err.Error(), tc.text)
			}
		})
	}
}
