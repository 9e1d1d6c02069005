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

// The parse of every entry, once: what each of the questions below reads.
func TestManagedFieldsParseEachEntryOnce(t *testing.T) {
	entries := slices.Concat(ownedEntries, []metav1.ManagedFieldsEntry{
		// A set that is not the plugin's idea of one (a label that is not
		// an object) still says whether it holds spec.rules.
		entry("odd", metav1.ManagedFieldsOperationApply, `{"f:metadata":{"f:labels":5},"f:spec":{"f:rules":{}}}`),
		// JSON that names no spec.rules parses as far as spec.rules.
		entry("odd-no-rules", metav1.ManagedFieldsOperationApply, `{"f:metadata":7}`),
		{Manager: "status-writer", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:parents":{}}}`)},
		entry("kubectl-label", metav1.ManagedFieldsOperationUpdate, `{"f:metadata":{"f:labels":{"f:app":{}}}}`),
		// A key spelled with an escape is the same key.
		entry("kubectl-escaped", metav1.ManagedFieldsOperationUpdate, `{"f:metadata":{"f:label\u0073":{"f:app":{}}}}`),
	})
	want := []owner{
		// kubectl-client-side-apply: of an Update entry that names no
		// labels only spec.rules is read, and only when it names them.
		{},
		{rulesRead: true, read: true, owned: Owned{Labels: []string{"app.kubernetes.io/instance"}}}, // argocd-controller
		{}, // rollouts-gatewayapi-ssa, "not json"
		{rules: true, rulesRead: true, read: true, owned: Owned{ // rollouts-gatewayapi-ssa
			Labels: []string{"a-label", "rollouts-gatewayapi-ssa/managed"}, Annotations: []string{"rollouts-gatewayapi-ssa/claims"}, Rules: true}},
		{},                             // hpa-like: f:Rules
		{rules: true, rulesRead: true}, // kubectl-edit
		{},                             // no-fields
		{rules: true, rulesRead: true}, // odd
		{rulesRead: true},              // odd-no-rules
		{},                             // status-writer
		{rulesRead: true, read: true, owned: Owned{Labels: []string{"app"}}}, // kubectl-label
		{rulesRead: true, read: true, owned: Owned{Labels: []string{"app"}}}, // kubectl-escaped
	}
	m := NewManagedFields(entries)
	if diff := cmp.Diff(want, m.owners(), cmp.AllowUnexported(owner{})); diff != "" {
		t.Errorf("the parse (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(entries, m.Entries()); diff != "" {
		t.Errorf("the entries (-want +got):\n%s", diff)
	}
	// The questions keep the parses apart: spec.rules is asked of the set
	// as far as it parses, the keys only of a set that parses whole.
	if !m.OwnsRules("odd") || !m.WroteRules("odd") || m.Owned("odd").Rules {
		t.Errorf("odd: OwnsRules %v, WroteRules %v, Owned %+v", m.OwnsRules("odd"), m.WroteRules("odd"), m.Owned("odd"))
	}
	if m.OwnsRules("odd-no-rules") || !m.OwnsAnything("status-writer") || m.WroteRules("status-writer") {
		t.Error("odd-no-rules owns spec.rules, or status-writer is no owner or wrote spec.rules")
	}
	if diff := cmp.Diff([]string{"kubectl-escaped (Update, gateway.networking.k8s.io/v1)", "kubectl-label (Update, gateway.networking.k8s.io/v1)"}, m.LabelOwners("app")); diff != "" {
		t.Errorf("LabelOwners(app) (-want +got):\n%s", diff)
	}
}

// A copy's entries are the caller's; changing them (as no caller should)
// leaves what the original says as it was. A parse made before the copy is
// shared, one not made yet is not.
func TestADeepCopyCannotChangeWhatTheOriginalSays(t *testing.T) {
	original := NewManagedFields(slices.Clone(ownedEntries))
	c := original.DeepCopy()
	for i := range c.Entries() {
		c.Entries()[i].FieldsV1 = metav1.NewFieldsV1("{}")
	}
	if c.OwnsRules("rollouts-gatewayapi-ssa") {
		t.Error("the copy answers from entries it no longer has")
	}
	if !original.OwnsRules("rollouts-gatewayapi-ssa") || !original.WroteRules("kubectl-edit") {
		t.Error("the copy's change reached the original's parse")
	}
	if diff := cmp.Diff(ownedEntries, original.Entries()); diff != "" {
		t.Errorf("the original's entries (-want +got):\n%s", diff)
	}
	if again := original.DeepCopy(); again.parse != original.parse || !again.OwnsRules("rollouts-gatewayapi-ssa") {
		t.Error("a copy made after the parse does not share it")
	}
}

func TestOwnedReadsTheFirstFieldSetThatParses(t *testing.T) {
	m := NewManagedFields(ownedEntries)
	want := Owned{
		Labels:      []string{"a-label", "rollouts-gatewayapi-ssa/managed"},
		Annotations: []string{"rollouts-gatewayapi-ssa/claims"},
		Rules:       true,
	}
	if diff := cmp.Diff(want, m.Owned("rollouts-gatewayapi-ssa")); diff != "" {
		t.Errorf("Owned (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Owned{Labels: []string{"app.kubernetes.io/instance"}}, m.Owned("argocd-controller")); diff != "" {
		t.Errorf("Owned argocd-controller (-want +got):\n%s", diff)
	}
	// Update entries are not applied fields: kubectl's annotation is not its claim.
	if diff := cmp.Diff(Owned{}, m.Owned("kubectl-client-side-apply")); diff != "" {
		t.Errorf("Owned of an Update manager (-want +got):\n%s", diff)
	}
}

// OwnsRules says what Owned says of spec.rules of well-formed field sets,
// for every manager: the first entry that parses decides ("not json" is
// passed over).
func TestOwnsRulesAsOwned(t *testing.T) {
	m := NewManagedFields(ownedEntries)
	for _, manager := range []string{"kubectl-client-side-apply", "argocd-controller", "rollouts-gatewayapi-ssa", "hpa-like", "kubectl-edit", "no-fields", "nobody"} {
		if got, want := m.OwnsRules(manager), m.Owned(manager).Rules; got != want {
			t.Errorf("OwnsRules(%s) = %v; Owned says %v", manager, got, want)
		}
	}
	if !m.OwnsRules("rollouts-gatewayapi-ssa") {
		t.Error("the plugin owns spec.rules")
	}
}

// WroteRules asks every entry of the manager, Update ones too; OwnsRules
// only its Apply entries.
func TestWroteRulesByAnApplyOrAnUpdate(t *testing.T) {
	m := NewManagedFields(ownedEntries)
	for manager, want := range map[string]bool{"kubectl-edit": true, "rollouts-gatewayapi-ssa": true, "hpa-like": false, "argocd-controller": false, "nobody": false} {
		if got := m.WroteRules(manager); got != want {
			t.Errorf("WroteRules(%s) = %v, want %v", manager, got, want)
		}
	}
	if m.OwnsRules("kubectl-edit") {
		t.Error("an Update is no apply: OwnsRules(kubectl-edit)")
	}
}

func TestRulesOwnersNamesOtherManagersExactly(t *testing.T) {
	m := NewManagedFields(ownedEntries)
	// f:Rules is not f:rules: field names are matched as the apiserver writes them.
	want := []string{"kubectl-edit (Update, gateway.networking.k8s.io/v1)"}
	if diff := cmp.Diff(want, m.RulesOwners("rollouts-gatewayapi-ssa")); diff != "" {
		t.Errorf("RulesOwners (-want +got):\n%s", diff)
	}
	want = []string{"kubectl-edit (Update, gateway.networking.k8s.io/v1)", "rollouts-gatewayapi-ssa (Apply)"}
	if diff := cmp.Diff(want, m.RulesOwners("argocd-controller")); diff != "" {
		t.Errorf("RulesOwners except argocd-controller (-want +got):\n%s", diff)
	}
}

func TestOwnsAnythingIsAnyEntry(t *testing.T) {
	m := NewManagedFields(ownedEntries)
	for manager, want := range map[string]bool{"no-fields": true, "hpa-like": true, "rollouts-gatewayapi-ssa": true, "nobody": false} {
		if got := m.OwnsAnything(manager); got != want {
			t.Errorf("OwnsAnything(%s) = %v, want %v", manager, got, want)
		}
	}
	if (ManagedFields{}).OwnsAnything("") {
		t.Error("no entries, and an owner")
	}
}

// BenchmarkManagedFields is what a call pays to ask a route it read who
// owns what, the first time (the parse), and every time after (go test
// -bench ManagedFields -benchmem ./routes/).
func BenchmarkManagedFields(b *testing.B) {
	ask := func(m ManagedFields) {
		m.Owned("rollouts-gatewayapi-ssa")
		m.WroteRules("gatewayAPI")
		_ = m.OwnsRules("rollouts-gatewayapi-ssa") && len(m.RulesOwners("rollouts-gatewayapi-ssa")) == 0
		m.OwnsAnything("rollouts-gatewayapi-ssa")
	}
	b.Run("first", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ask(NewManagedFields(ownedEntries))
		}
	})
	m := NewManagedFields(ownedEntries)
	b.Run("again", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ask(m)
		}
	})
}

func TestLabelOwnersNamesTheOtherManagersOfOneKey(t *testing.T) {
	m := NewManagedFields(slices.Concat(ownedEntries, []metav1.ManagedFieldsEntry{
		entry("kubectl-label", metav1.ManagedFieldsOperationUpdate, `{"f:metadata":{"f:labels":{".":{},"f:app.kubernetes.io/instance":{}}}}`),
		entry("gatewayAPI", metav1.ManagedFieldsOperationUpdate, `{"f:metadata":{"f:labels":{"f:a-label":{}}}}`)}))
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
		if diff := cmp.Diff(c.want, m.LabelOwners(c.key, c.except...)); diff != "" {
			t.Errorf("LabelOwners(%q, except %v) (-want +got):\n%s", c.key, c.except, diff)
		}
	}
}
