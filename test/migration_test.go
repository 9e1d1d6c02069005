package test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	plugin := fieldManager
	runScenario(t, []step{
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
