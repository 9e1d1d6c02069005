package rollout

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// Each route of a Rollout is decided in an Env built once from its config:
// a named route in its own (its header routes, its list entry, its rule),
// a route only a selector finds in the one they share (which of the two a
// route takes: orchestrator.EnvOf).
func TestEachRouteIsDecidedInTheEnvOfItsTarget(t *testing.T) {
	ro := cfgRollout("argoproj-labs/gatewayAPI", `{"httpRoute": "single", "httpRoutes": [{"name": "listed", "useHeaderRoutes": true}, {"name": "ruled", "ruleName": "api"}],
		"httpRouteSelector": {"matchLabels": {"app": "web"}}, "selectedRoutesUseHeaderRoutes": true, "conflictPolicy": "Force", "mirrorMode": "filter",
		"inProgressLabelKey": "rollout"}`)
	s, envs, err := (*Configs)(nil).Parse(ro, "argoproj-labs/gatewayAPI", "argo-rollouts-gatewayapi")
	if err != nil {
		t.Fatal(err)
	}
	base := desired.Env{Rollout: "shop/web", FieldManager: "argo-rollouts-gatewayapi", ConflictPolicy: s.ConflictPolicy,
		InProgressLabel: s.InProgressLabel, MirrorMode: desired.MirrorFilter, PredecessorManager: "gatewayAPI"}
	with := func(f func(*desired.Env)) desired.Env { e := base; f(&e); return e }
	ref := func(name string) routes.Ref {
		return routes.Ref{Kind: routes.HTTPRoute, Namespace: cfgRolloutNS, Name: name}
	}
	want := Envs{
		Named: map[routes.Ref]desired.Env{
			ref("single"): with(func(e *desired.Env) { e.TakesHeaderRoutes = true }),
			ref("listed"): with(func(e *desired.Env) { e.TakesHeaderRoutes, e.ListedForHeaderRoutes = true, true }),
			ref("ruled"):  with(func(e *desired.Env) { e.RuleName = "api" }),
		},
		Selected: with(func(e *desired.Env) { e.TakesHeaderRoutes = true }),
	}
	if diff := cmp.Diff(want, envs); diff != "" {
		t.Errorf("Envs (-want +got):\n%s", diff)
	}
}
