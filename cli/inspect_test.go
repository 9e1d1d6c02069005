package cli

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/kube/kubetest"
)

// In the middle of Rollout shop/demo's canary, `inspect httproute/web -n
// shop` shows who owns what, the Rollout's claim (its weights as set and as
// they are now, the header rule it added) and that nothing conflicts. It
// reads the route and writes nothing.
func TestInspectShowsTheRolloutsClaim(t *testing.T) {
	api := kubetest.New(t, midCanaryRoute)
	code, out, errOut := runCLI(t, "inspect", "httproute/web", "-n", "shop")
	if code != 0 || errOut != "" {
		t.Fatalf("inspect: exit %d, stderr %q; want 0 and nothing", code, errOut)
	}
	want := `HTTPRoute shop/web

owners:
  kubectl (Update, gateway.networking.k8s.io/v1, 2025-03-04T05:06:07Z): metadata.annotations.owner, spec.parentRefs
  argo-rollouts-gatewayapi (Apply, gateway.networking.k8s.io/v1, 2025-03-04T06:07:08Z): metadata.annotations.gatewayapi-ssa.dev/claims, metadata.labels.rollouts.argoproj.io/gatewayapi-canary, spec.rules

spec.rules is owned by: argo-rollouts-gatewayapi

Rollout shop/demo (active: true, canary weight 30):
  weight rule 0 shop/stable: set 70, now 70
  weight rule 0 shop/canary: set 30, now 30
  added rule "beta": as written
  conflict: no (argo-rollouts-gatewayapi still owns spec.rules: nobody changed them since its last write)

release at the next call: false
`
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("inspect output (-want +got):\n%s", diff)
	}
	if w := api.Writes(); len(w) > 0 {
		t.Errorf("inspect wrote: %v", w)
	}
}

// The same with -o json, for scripts: the whole inspection as an object.
func TestInspectAsJSON(t *testing.T) {
	kubetest.New(t, midCanaryRoute)
	code, out, errOut := runCLI(t, "inspect", "-n", "shop", "-o", "json", "HTTPRoute/web")
	if code != 0 || errOut != "" {
		t.Fatalf("inspect -o json: exit %d, stderr %q", code, errOut)
	}
	var got desired.Inspection
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("inspect -o json printed no inspection: %v\n%s", err, out)
	}
	const plugin = "argo-rollouts-gatewayapi"
	want := desired.Inspection{
		Route: "HTTPRoute shop/web",
		Owners: []desired.Owner{
			{Manager: "kubectl", Operation: "Update", APIVersion: "gateway.networking.k8s.io/v1", Time: "2025-03-04T05:06:07Z",
				Fields: []string{"metadata.annotations.owner", "spec.parentRefs"}},
			{Manager: plugin, Operation: "Apply", APIVersion: "gateway.networking.k8s.io/v1", Time: "2025-03-04T06:07:08Z",
				Fields: []string{"metadata.annotations.gatewayapi-ssa.dev/claims", "metadata.labels.rollouts.argoproj.io/gatewayapi-canary", "spec.rules"}},
		},
		RulesOwners: []string{plugin}, PluginOwnsRules: true,
		Claims: []desired.ClaimState{{Rollout: "shop/demo", Active: true, CanaryWeight: 30,
			Weights: []desired.WeightState{{Rule: 0, Service: "shop/stable", Set: 70, Now: 70}, {Rule: 0, Service: "shop/canary", Set: 30, Now: 30}},
			Rules:   []desired.RuleState{{Name: "beta", Present: true}}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("inspect -o json (-want +got):\n%s", diff)
	}
}

// A route no Rollout has touched: inspect says there are no claims and that
// the plugin has nothing to give up.
func TestInspectOfARouteWithoutClaims(t *testing.T) {
	kubetest.New(t, plainRoute)
	code, out, errOut := runCLI(t, "inspect", "httproute/web", "-n", "shop")
	if code != 0 || errOut != "" {
		t.Fatalf("inspect: exit %d, stderr %q", code, errOut)
	}
	want := `HTTPRoute shop/web

owners:
  kubectl (Update, gateway.networking.k8s.io/v1, 2025-03-04T05:06:07Z): metadata.annotations.owner, spec.parentRefs, spec.rules

spec.rules is owned by: kubectl

claims: none (no Rollout has anything on this route)

release at the next call: false
`
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("inspect output (-want +got):\n%s", diff)
	}
}

// A typo in the route's name: exit status 1, and the error names the route
// that is not there, as kind namespace/name.
func TestInspectOfAMissingRoute(t *testing.T) {
	api := kubetest.New(t, midCanaryRoute)
	code, out, errOut := runCLI(t, "inspect", "--kubeconfig", api.Kubeconfig, "-n", "shop", "httproute/wbe")
	if code != 1 || out != "" {
		t.Errorf("inspect of a missing route: exit %d, stdout %q; want 1 and nothing", code, out)
	}
	want := `reading HTTPRoute shop/wbe: httproutes.gateway.networking.k8s.io "wbe" not found` + "\n"
	if diff := cmp.Diff(want, errOut); diff != "" {
		t.Errorf("inspect's error (-want +got):\n%s", diff)
	}
}
