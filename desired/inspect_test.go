package desired

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

func TestInspect(t *testing.T) {
	s := newServer(t, "HTTPRoute")
	for _, o := range []op{create{kubectl, gitRules(100, 0)}, call{c: setWeight(30)}, call{c: header("X-Canary", "yes")}} {
		if _, err := o.do(s); err != nil {
			t.Fatal(err)
		}
	}
	ignoreOwners := cmpopts.IgnoreFields(Inspection{}, "Owners")
	got, err := Inspect(s.live(), plugin)
	if err != nil {
		t.Fatal(err)
	}
	mid := Inspection{
		Route: "HTTPRoute shop/route", RulesOwners: []string{plugin}, PluginOwnsRules: true,
		Claims: []ClaimState{{Rollout: "shop/demo", Active: true, CanaryWeight: 30,
			Weights: []WeightState{{Rule: 0, Service: "shop/stable", Set: 70, Now: 70}, {Rule: 0, Service: "shop/canary", Set: 30, Now: 30}},
			Rules:   []RuleState{{Name: "beta", Present: true}}}},
	}
	if diff := cmp.Diff(mid, got, ignoreOwners); diff != "" {
		t.Errorf("mid-rollout (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]Owner{{Manager: plugin, Operation: "Apply", APIVersion: "gateway.networking.k8s.io/v1",
		Fields: []string{"metadata.annotations.gatewayapi-ssa.dev/claims", "metadata.labels.rollouts.argoproj.io/gatewayapi-canary", "spec.rules"}}}, got.Owners); diff != "" {
		t.Errorf("owners (-want +got):\n%s", diff)
	}

	// Argo CD syncs Git's rules: the plugin no longer owns them, and what it set is gone.
	if _, err := (forceApply{argocd, gitRules(100, 0)}).do(s); err != nil {
		t.Fatal(err)
	}
	got, _ = Inspect(s.live(), plugin)
	after := mid
	after.RulesOwners, after.PluginOwnsRules = []string{argocd}, false
	after.Claims = []ClaimState{{Rollout: "shop/demo", Active: true, CanaryWeight: 30,
		Weights: []WeightState{{Rule: 0, Service: "shop/stable", Set: 70, Now: 100}, {Rule: 0, Service: "shop/canary", Set: 30, Now: 0}},
		Rules:   []RuleState{{Name: "beta"}},
		Changed: []string{"rule 0 Service shop/stable weight: the plugin set 70, now 100", "rule 0 Service shop/canary weight: the plugin set 30, now 0",
			`rule "beta": removed since the plugin wrote it`}}}
	if diff := cmp.Diff(after, got, ignoreOwners); diff != "" {
		t.Errorf("after Argo CD's sync (-want +got):\n%s", diff)
	}

	// No claim left, the plugin still owns its label and annotation: the next call releases.
	s.route.Annotations = nil
	got, _ = Inspect(s.live(), plugin)
	if !got.Release {
		t.Error("with no claim left and fields still owned, the next call should release")
	}
	delete(s.owners, plugin)
	s.ownerOf("other", metav1.ManagedFieldsOperationUpdate)
	if got, _ = Inspect(s.live(), plugin); got.Release {
		t.Error("owning nothing, there is nothing to release")
	}
}

// inspect shows stickyCanary's rules among the added rules and its cookie
// filters, and a cookie filter someone removed.
func TestInspectShowsStickyCookies(t *testing.T) {
	s := newServer(t, "HTTPRoute")
	for _, o := range []op{create{kubectl, gitRules(100, 0)}, call{c: sticky(20, "bbb")}} {
		if _, err := o.do(s); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Inspect(s.live(), plugin)
	if err != nil {
		t.Fatal(err)
	}
	want := []ClaimState{{Rollout: "shop/demo", Active: true, CanaryWeight: 20,
		Weights: []WeightState{{Rule: 0, Service: "shop/stable", Set: 80, Now: 80}, {Rule: 0, Service: "shop/canary", Set: 20, Now: 20}},
		Rules:   []RuleState{{Name: "demo-sticky-canary", Present: true}, {Name: "demo-sticky-stable", Present: true}},
		Cookies: []string{"on Service shop/canary in rule 0", "on Service shop/stable in rule 0"}}}
	if diff := cmp.Diff(want, got.Claims); diff != "" {
		t.Errorf("claims (-want +got):\n%s", diff)
	}

	if _, err := (update{"kubectl-edit", func(r []routes.Rule) { delete(r[0]["backendRefs"].([]any)[1].(map[string]any), "filters") }}).do(s); err != nil {
		t.Fatal(err)
	}
	got, _ = Inspect(s.live(), plugin)
	if diff := cmp.Diff([]string{"sticky cookie filter on Service shop/canary in rule 0: removed or changed since the plugin added it"}, got.Claims[0].Changed); diff != "" {
		t.Errorf("changed by others (-want +got):\n%s", diff)
	}
}
