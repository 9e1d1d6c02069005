package kube

import (
	"context"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// granting is a reader whose namespaces hold the given grants; it records
// every read: "grants NS", "get REF", "list KIND NS".
type granting struct {
	grants map[string][]routes.ReferenceGrant
	reads  []string
}

func (g *granting) ReferenceGrants(_ context.Context, ns string) ([]routes.ReferenceGrant, error) {
	g.reads = append(g.reads, "grants "+ns)
	return g.grants[ns], nil
}

func (g *granting) Get(_ context.Context, ref routes.Ref) (routes.Route, error) {
	g.reads = append(g.reads, "get "+ref.String())
	return routes.Route{Ref: ref}, nil
}

func (g *granting) List(_ context.Context, kind routes.Kind, ns string, _ labels.Selector) ([]routes.Route, error) {
	g.reads = append(g.reads, "list "+string(kind)+" "+ns)
	return []routes.Route{{Ref: routes.Ref{Kind: kind, Namespace: ns, Name: "found"}}}, nil
}

// A Rollout's routes are read only when every one is within its reach: the
// grants of each other namespace first, and then, all granted, the routes;
// one not granted and no route is read, the refusal says which. Reaching
// every namespace, no grant is read.
func TestRoutesAreReadOnlyWithinTheRolloutsReach(t *testing.T) {
	ctx := context.Background()
	ref := func(ns, name string) routes.Ref { return routes.Ref{Kind: routes.HTTPRoute, Namespace: ns, Name: name} }
	targets := routes.Targets{
		Named:     []routes.Ref{ref(wtNS, "front"), ref("shared", "back")},
		Selectors: []routes.Selection{{Kind: routes.HTTPRoute, Namespace: "shared", Selector: labels.Everything()}},
	}
	grant := routes.ReferenceGrant{Namespace: "shared", Name: "shop-rollouts",
		From: []routes.GrantFrom{{Group: "argoproj.io", Kind: "Rollout", Namespace: wtNS}},
		To:   []routes.GrantTarget{{Group: "gateway.networking.k8s.io", Kind: "HTTPRoute"}}}
	for _, tc := range []struct {
		name        string
		reach       Reachable
		grants      map[string][]routes.ReferenceGrant
		reads       []string
		refused     int
		routesFound int
	}{
		{"granted", Reachable{From: wtNS}, map[string][]routes.ReferenceGrant{"shared": {grant}},
			[]string{"grants shared", "get HTTPRoute shop/front", "get HTTPRoute shared/back", "list HTTPRoute shared"}, 0, 3},
		{"not granted", Reachable{From: wtNS}, nil, []string{"grants shared"}, 2, 0},
		{"every namespace within reach", Reachable{From: wtNS, Any: true}, nil,
			[]string{"get HTTPRoute shop/front", "get HTTPRoute shared/back", "list HTTPRoute shared"}, 0, 3},
	} {
		r := &granting{grants: tc.grants}
		res, refused, err := ResolveInReach(ctx, r, tc.reach, targets)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !slices.Equal(r.reads, tc.reads) {
			t.Errorf("%s: read %q, want %q", tc.name, r.reads, tc.reads)
		}
		if len(refused) != tc.refused || len(res.Routes) != tc.routesFound || res.Err() != nil {
			t.Errorf("%s: %d refused, %d routes, %v; want %d refused, %d routes", tc.name, len(refused), len(res.Routes), res.Err(), tc.refused, tc.routesFound)
		}
	}
}
