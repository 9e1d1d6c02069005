package orchestrator

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/rollout"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// A route is decided in the Env of its target: a named route in its own,
// even when a selector finds it too, and a route only a selector finds in
// the one they share; on the routes of a route cluster, each with the name
// of the controller's cluster.
func TestARouteIsDecidedInTheEnvOfItsTarget(t *testing.T) {
	ref := func(name string) routes.Ref { return routes.Ref{Kind: routes.HTTPRoute, Namespace: "shop", Name: name} }
	c := rollout.Call{
		Envs: rollout.Envs{
			Named:    map[routes.Ref]desired.Env{ref("ruled"): {Rollout: "shop/web", RuleName: "api"}},
			Selected: desired.Env{Rollout: "shop/web", TakesHeaderRoutes: true},
		},
		Member: rollout.Member{Name: "east", UID: "0d2c", Source: "-cluster-name"},
	}
	for _, tc := range []struct {
		name string
		ref  routes.Ref
		want desired.Env
	}{
		{"named, and found by a selector too", ref("ruled"),
			desired.Env{Rollout: "shop/web", RuleName: "api", Cluster: "east", ClusterUID: "0d2c", ClusterSource: "-cluster-name"}},
		{"found by a selector only", ref("found"),
			desired.Env{Rollout: "shop/web", TakesHeaderRoutes: true, Cluster: "east", ClusterUID: "0d2c", ClusterSource: "-cluster-name"}},
	} {
		if diff := cmp.Diff(tc.want, EnvOf(c, tc.ref)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
	if c.Envs.Selected.Cluster != "" || c.Envs.Named[ref("ruled")].Cluster != "" {
		t.Errorf("the call's Envs were changed: %+v", c.Envs)
	}
}
