package routes

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/labels"
)

// grantOf is a ReferenceGrant in namespace ns from Rollouts of namespace
// from to kind (name: "" for every one).
func grantOf(ns, from string, kind Kind, name string) ReferenceGrant {
	to := GrantTarget{Group: Group, Kind: string(kind)}
	if name != "" {
		to.Name = &name
	}
	return ReferenceGrant{Namespace: ns, Name: "rollouts", From: []GrantFrom{{Group: rolloutGroup, Kind: rolloutKind, Namespace: from}}, To: []GrantTarget{to}}
}

func TestReachNeedsAGrantOutsideTheRolloutsNamespace(t *testing.T) {
	shared := Ref{Kind: HTTPRoute, Namespace: "shared", Name: "store"}
	own := Ref{Kind: HTTPRoute, Namespace: "shop", Name: "store"}
	selectShared := Selection{Kind: HTTPRoute, Namespace: "shared", Selector: labels.SelectorFromSet(labels.Set{"team": "shop"})}
	named := func(refs ...Ref) Targets { return Targets{Named: refs} }
	serviceGrant := ReferenceGrant{Namespace: "shared", From: []GrantFrom{{Group: Group, Kind: "HTTPRoute", Namespace: "shop"}}, To: []GrantTarget{{Kind: "Service"}}}
	otherNamespace := grantOf("shared", "other", HTTPRoute, "")
	cases := []struct {
		name    string
		targets Targets
		grants  map[string][]ReferenceGrant
		want    []*NotGrantedError
	}{
		{"its own namespace needs nothing", named(own), nil, nil},
		{"another namespace without a grant", named(shared), nil,
			[]*NotGrantedError{{Rollouts: "shop", Namespace: "shared", Kind: HTTPRoute, Name: "store"}}},
		{"a grant of the kind", named(shared), map[string][]ReferenceGrant{"shared": {grantOf("shared", "shop", HTTPRoute, "")}}, nil},
		{"a grant of the route by name", named(shared), map[string][]ReferenceGrant{"shared": {grantOf("shared", "shop", HTTPRoute, "store")}}, nil},
		{"a grant of another route by name", named(shared), map[string][]ReferenceGrant{"shared": {grantOf("shared", "shop", HTTPRoute, "cart")}},
			[]*NotGrantedError{{Rollouts: "shop", Namespace: "shared", Kind: HTTPRoute, Name: "store"}}},
		{"a grant of another kind", named(shared), map[string][]ReferenceGrant{"shared": {grantOf("shared", "shop", GRPCRoute, "")}},
			[]*NotGrantedError{{Rollouts: "shop", Namespace: "shared", Kind: HTTPRoute, Name: "store"}}},
		{"a grant to Rollouts of another namespace", named(shared), map[string][]ReferenceGrant{"shared": {otherNamespace}},
			[]*NotGrantedError{{Rollouts: "shop", Namespace: "shared", Kind: HTTPRoute, Name: "store"}}},
		{"Gateway API's own grant for backendRefs is not one for Rollouts", named(shared), map[string][]ReferenceGrant{"shared": {serviceGrant}},
			[]*NotGrantedError{{Rollouts: "shop", Namespace: "shared", Kind: HTTPRoute, Name: "store"}}},
		{"a selector with a grant of the kind", Targets{Selectors: []Selection{selectShared}}, map[string][]ReferenceGrant{"shared": {grantOf("shared", "shop", HTTPRoute, "")}}, nil},
		{"a selector with a grant by name only", Targets{Selectors: []Selection{selectShared}}, map[string][]ReferenceGrant{"shared": {grantOf("shared", "shop", HTTPRoute, "store")}},
			[]*NotGrantedError{{Rollouts: "shop", Namespace: "shared", Kind: HTTPRoute, Selector: "team=shop"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Reach("shop", c.targets, c.grants)
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestForeignNamespacesAreTheTargetsOutsideTheRolloutsNamespaceOnce(t *testing.T) {
	sel := Selection{Kind: TCPRoute, Namespace: "b", Selector: labels.Everything()}
	targets := Targets{Named: []Ref{{Kind: HTTPRoute, Namespace: "shop", Name: "x"}, {Kind: HTTPRoute, Namespace: "b", Name: "y"},
		{Kind: GRPCRoute, Namespace: "a", Name: "z"}}, Selectors: []Selection{sel}}
	if diff := cmp.Diff([]string{"b", "a"}, ForeignNamespaces("shop", targets)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestNotGrantedErrorSaysWhichGrantToCreate(t *testing.T) {
	named := &NotGrantedError{Rollouts: "shop", Namespace: "shared", Kind: HTTPRoute, Name: "store"}
	want := "HTTPRoute shared/store: namespace shared does not grant Rollouts of namespace shop its HTTPRoutes, so the plugin reads and writes nothing there; " +
		"its owners grant it with a ReferenceGrant in namespace shared: from [{group: argoproj.io, kind: Rollout, namespace: shop}] " +
		"to [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: store}] (or without name, for every HTTPRoute there); or name a route in the Rollout's own namespace"
	if diff := cmp.Diff(want, named.Error()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
