package test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// oldPlugin is the argoproj-labs/gatewayAPI plugin's write, reproduced: a
// read-modify-write Update under its manager "gatewayAPI" that sets the
// weights of the rule with both Services and its in-progress label.
func oldPlugin(stable, canary int64) update {
	return update{"gatewayAPI", func(u *unstructured.Unstructured) {
		rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
		refs := rules[0].(map[string]any)["backendRefs"].([]any)
		refs[0].(map[string]any)["weight"] = stable
		refs[1].(map[string]any)["weight"] = canary
		_ = unstructured.SetNestedSlice(u.Object, rules, "spec", "rules")
		labels := u.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels["rollouts.argoproj.io/gatewayapi-canary"] = "in-progress"
		u.SetLabels(labels)
	}}
}

// The binary is switched from the argoproj-labs plugin to this one while a
// rollout is in progress on a route the old plugin wrote (Update, manager
// gatewayAPI, its label): the new plugin takes the next step without a
// conflict (it has no record of its own yet, so nothing of its own was
// changed), and at the end releases spec.rules as usual. The old plugin's
// label stays: it is the old manager's field, which the new plugin shared
// and never owned alone, so docs/migration.md says to remove it.
func TestSwitchFromArgoprojLabsMidRollout(t *testing.T) {
	standard := parallel(t)
	plugin := fieldManager
	runScenario(t, standard, []step{
		{oldPlugin(70, 30), expect{weights: weightsAB(70, 30), owners: []string{"gatewayAPI"}}},
		{setWeight{weight: 50}, expect{weights: weightsAB(50, 50), owners: []string{plugin}}},
		{setWeight{weight: 100}, expect{weights: weightsAB(0, 100), owners: []string{plugin}}},
		{setWeight{weight: 0}, expect{weights: weightsAB(100, 0), owners: nil, extra: func(t *testing.T, u *unstructured.Unstructured) {
			for _, e := range u.GetManagedFields() {
				if e.Manager == plugin {
					t.Errorf("the plugin still has a managedFields entry after the rollout ended: %s %s", e.Operation, e.FieldsV1.GetRawBytes())
				}
			}
			if _, ok := u.GetAnnotations()["gatewayapi-ssa.dev/claims"]; ok {
				t.Errorf("claims annotation left: %v", u.GetAnnotations())
			}
			if diff := cmp.Diff(map[string]string{"rollouts.argoproj.io/gatewayapi-canary": "in-progress"}, u.GetLabels()); diff != "" {
				t.Errorf("labels after the switch and the rollout's end (-want +got):\n%s", diff)
			}
		}}},
	})
}

// oldHeaderRule is the header rule the argoproj-labs plugin adds for entry
// beta on gitRoute: the weighted rule's match (the CRD's default) with the
// header added, and the canary alone, its weight left to the CRD's default.
// From its v0.13 on the rule is named after the entry.
func oldHeaderRule(named bool) map[string]any {
	r := map[string]any{
		"matches": []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": "/"},
			"headers": []any{map[string]any{"type": "Exact", "name": "X-Canary", "value": "yes"}}}},
		"backendRefs": []any{map[string]any{"group": "", "kind": "Service", "name": "canary", "port": int64(80)}},
	}
	if named {
		r["name"] = "beta"
	}
	return r
}

// oldSetHeaderRoute is the argoproj-labs plugin's SetHeaderRoute(beta),
// reproduced: an Update as gatewayAPI that appends its header rule.
func oldSetHeaderRoute(named bool) update {
	return update{"gatewayAPI", func(u *unstructured.Unstructured) {
		rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
		_ = unstructured.SetNestedSlice(u.Object, append(rules, oldHeaderRule(named)), "spec", "rules")
	}}
}

// The binary is switched while the argoproj-labs plugin has a rollout at
// 70/30 with a header route on the route (its mirror step wrote nothing: its
// SetMirrorRoute does nothing). Up to its v0.12 its header rule has no name
// and its ConfigMap lists it by index; from v0.13 on the rule is named after
// the entry. plan, run before the switch, says the rule will be adopted; this
// plugin then adopts it at its first call, and 60, RemoveManagedRoutes and 0
// leave the route's spec exactly as it was before the rollout.
func TestSwitchFromArgoprojLabsAdoptsItsHeaderRules(t *testing.T) {
	standard := parallel(t)
	for _, version := range []string{"v0.12", "v0.15"} {
		t.Run(version, func(t *testing.T) {
			ns := namespace(t, standard)
			begin := create(t, standard, ns, gitRoute)
			s := &scenario{c: standard, ns: ns}
			oldPlugin(70, 30).run(t, s)
			oldSetHeaderRoute(version != "v0.12").run(t, s)
			if version == "v0.12" {
				cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
					"metadata": map[string]any{"name": "argo-gatewayapi-configmap", "namespace": ns},
					"data":     map[string]any{"httpManagedRoutes": `{"beta":{"route":2}}`}}}
				if _, err := standard.Dynamic.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(ns).
					Create(context.Background(), cm, metav1.CreateOptions{FieldManager: "gatewayAPI"}); err != nil {
					t.Fatal(err)
				}
			}
			ro := rollout(ns, `{"httpRoute": "route"}`)
			ro.Spec.Strategy.Canary.TrafficRouting.ManagedRoutes = []v1alpha1.MangedRoutes{{Name: "beta"}, {Name: "mirror"}}
			out, _ := planCmd(t, standard, planRollout(ns, "route"))
			if !strings.Contains(out, "adopted rule beta: the argoproj-labs/gatewayAPI plugin added it") {
				t.Errorf("plan before the switch does not say it adopts rule beta:\n%s", out)
			}

			p := startPlugin(t, standard)
			must(t, "SetWeight(60)", p.SetWeight(ro, 60, nil))
			u := get(t, standard, "v1", "HTTPRoute", ns, "route")
			if got := claimsOn(t, u)[ns+"/demo"].Rules; !slices.Equal(got, []string{"beta"}) {
				t.Errorf("after the switch's first call the claim lists rules %v, want the adopted beta", got)
			}
			must(t, "RemoveManagedRoutes", p.RemoveManagedRoutes(ro))
			must(t, "SetWeight(0)", p.SetWeight(ro, 0, nil))
			end := get(t, standard, "v1", "HTTPRoute", ns, "route")
			if diff := cmp.Diff(normalizeJSON(t, begin.Object["spec"]), normalizeJSON(t, end.Object["spec"])); diff != "" {
				t.Errorf("the route's spec after the rollout differs from before it (-before +after):\n%s", diff)
			}
			// The plugin gave everything back; the old plugin's label stays
			// with it (docs/migration.md: remove it once the rollout ended).
			for _, e := range end.GetManagedFields() {
				if e.Manager == fieldManager {
					t.Errorf("the plugin still has a managedFields entry: %s %s", e.Operation, e.FieldsV1.GetRawBytes())
				}
			}
			if _, ok := end.GetAnnotations()[claimsAnnotation]; ok {
				t.Errorf("claims annotation left: %v", end.GetAnnotations())
			}
		})
	}
}
