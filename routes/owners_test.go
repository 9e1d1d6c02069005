package routes

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// entry is a managedFields entry with the field set the apiserver records.
func entry(manager string, op metav1.ManagedFieldsOperationType, fields string) metav1.ManagedFieldsEntry {
	e := metav1.ManagedFieldsEntry{Manager: manager, Operation: op, APIVersion: "gateway.networking.k8s.io/v1", FieldsType: "FieldsV1"}
	if fields != "" {
		e.FieldsV1 = metav1.NewFieldsV1(fields)
	}
	return e
}

// A route as it is after the plugin's first step: the creator (kubectl,
// client-side) still owns hostnames and parentRefs, Argo CD applied a label,
// the plugin owns its label, annotation and spec.rules.
var ownedEntries = []metav1.ManagedFieldsEntry{
	entry("kubectl-client-side-apply", metav1.ManagedFieldsOperationUpdate,
		`{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}}},"f:spec":{".":{},"f:hostnames":{},"f:parentRefs":{}}}`),
	entry("argocd-controller", metav1.ManagedFieldsOperationApply,
		`{"f:metadata":{"f:labels":{"f:app.kubernetes.io/instance":{}}}}`),
	entry("rollouts-gatewayapi-ssa", metav1.ManagedFieldsOperationApply, "not json"),
	entry("rollouts-gatewayapi-ssa", metav1.ManagedFieldsOperationApply,
		`{"f:metadata":{"f:annotations":{"f:rollouts-gatewayapi-ssa/claims":{}},"f:labels":{"f:rollouts-gatewayapi-ssa/managed":{},"f:a-label":{}}},"f:spec":{"f:rules":{}}}`),
	entry("hpa-like", metav1.ManagedFieldsOperationUpdate, `{"f:spec":{"f:Rules":{}}}`),
	entry("kubectl-edit", metav1.ManagedFieldsOperationUpdate, `{"f:spec":{"f:rules":{}}}`),
	entry("no-fields", metav1.ManagedFieldsOperationApply, ""),
}

func TestOwnedByReadsTheFirstFieldSetThatParses(t *testing.T) {
	want := Owned{
		Labels:      []string{"a-label", "rollouts-gatewayapi-ssa/managed"},
		Annotations: []string{"rollouts-gatewayapi-ssa/claims"},
		Rules:       true,
	}
	if diff := cmp.Diff(want, OwnedBy(ownedEntries, "rollouts-gatewayapi-ssa")); diff != "" {
		t.Errorf("OwnedBy (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Owned{Labels: []string{"app.kubernetes.io/instance"}}, OwnedBy(ownedEntries, "argocd-controller")); diff != "" {
		t.Errorf("OwnedBy argocd-controller (-want +got):\n%s", diff)
	}
	// Update entries are not applied fields: kubectl's annotation is not its claim.
	if diff := cmp.Diff(Owned{}, OwnedBy(ownedEntries, "kubectl-client-side-apply")); diff != "" {
		t.Errorf("OwnedBy of an Update manager (-want +got):\n%s", diff)
	}
}

// OwnsRules, read without the label and annotation keys, says what OwnedBy
// says of spec.rules, for every manager: the first entry that parses
// decides ("not json" is passed over), and one without f:rules is not
// parsed at all.
func TestOwnsRulesAsOwnedBy(t *testing.T) {
	for _, manager := range []string{"kubectl-client-side-apply", "argocd-controller", "rollouts-gatewayapi-ssa", "hpa-like", "kubectl-edit", "no-fields", "nobody"} {
		if got, want := OwnsRules(ownedEntries, manager), OwnedBy(ownedEntries, manager).Rules; got != want {
			t.Errorf("OwnsRules(%s) = %v; OwnedBy says %v", manager, got, want)
		}
	}
	if !OwnsRules(ownedEntries, "rollouts-gatewayapi-ssa") {
		t.Error("the plugin owns spec.rules")
	}
}

func TestRulesOwnersNamesOtherManagersExactly(t *testing.T) {
	// f:Rules is not f:rules: field names are matched as the apiserver writes them.
	want := []string{"kubectl-edit (Update, gateway.networking.k8s.io/v1)"}
	if diff := cmp.Diff(want, RulesOwners(ownedEntries, "rollouts-gatewayapi-ssa")); diff != "" {
		t.Errorf("RulesOwners (-want +got):\n%s", diff)
	}
	want = []string{"kubectl-edit (Update, gateway.networking.k8s.io/v1)", "rollouts-gatewayapi-ssa (Apply)"}
	if diff := cmp.Diff(want, RulesOwners(ownedEntries, "argocd-controller")); diff != "" {
		t.Errorf("RulesOwners except argocd-controller (-want +got):\n%s", diff)
	}
}

// BenchmarkOwnedBy is what a decision pays to read ownership from a route's
// managedFields (go test -bench OwnedBy -benchmem ./routes/).
func BenchmarkOwnedBy(b *testing.B) {
	for b.Loop() {
		OwnedBy(ownedEntries, "rollouts-gatewayapi-ssa")
		RulesOwners(ownedEntries, "rollouts-gatewayapi-ssa")
	}
}

func TestLabelOwnersNamesTheOtherManagersOfOneKey(t *testing.T) {
	entries := slices.Concat(ownedEntries, []metav1.ManagedFieldsEntry{
		entry("kubectl-label", metav1.ManagedFieldsOperationUpdate, `{"f:metadata":{"f:labels":{".":{},"f:app.kubernetes.io/instance":{}}}}`),
		entry("gatewayAPI", metav1.ManagedFieldsOperationUpdate, `{"f:metadata":{"f:labels":{"f:a-label":{}}}}`)})
	for _, c := range []struct {
		key    string
		except []string
		want   []string
	}{
		{"app.kubernetes.io/instance", []string{"rollouts-gatewayapi-ssa"}, []string{"argocd-controller (Apply)", "kubectl-label (Update, gateway.networking.k8s.io/v1)"}},
		{"a-label", []string{"rollouts-gatewayapi-ssa"}, []string{"gatewayAPI (Update, gateway.networking.k8s.io/v1)"}},
		{"a-label", []string{"rollouts-gatewayapi-ssa", "gatewayAPI"}, nil},
		{"rollouts-gatewayapi-ssa/managed", []string{"rollouts-gatewayapi-ssa"}, nil},
		{"nobody/has-it", nil, nil},
	} {
		if diff := cmp.Diff(c.want, LabelOwners(entries, c.key, c.except...)); diff != "" {
			t.Errorf("LabelOwners(%q, except %v) (-want +got):\n%s", c.key, c.except, diff)
		}
	}
}
