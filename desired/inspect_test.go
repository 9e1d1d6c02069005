package desired

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
