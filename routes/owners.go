package routes

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What a route's managedFields say about who owns what. The apiserver records
// ownership of the atomic spec.rules list as one field, so "owns spec.rules"
// is all or nothing; see DESIGN.md §2.

// fieldSet decodes a managedFields entry's field set, the nested "f:..." map
// the apiserver records; nil when there is none or it does not parse.
func fieldSet(e metav1.ManagedFieldsEntry) map[string]any {
	if e.FieldsV1 == nil {
		return nil
	}
	var fields map[string]any
	if json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields) != nil {
		return nil
	}
	return fields
}

// appliedFields returns the field set the manager owns through Apply.
func appliedFields(entries []metav1.ManagedFieldsEntry, manager string) map[string]any {
	for _, e := range entries {
		if e.Manager != manager || e.Operation != metav1.ManagedFieldsOperationApply {
			continue
		}
		if fields := fieldSet(e); fields != nil {
			return fields
		}
	}
	return nil
}

// Owned is what one manager owns through Apply that the plugin reads: its
// label and annotation keys and whether it owns spec.rules, read from
// managedFields in one pass.
type Owned struct {
	Labels, Annotations []string
	Rules               bool
}

// OwnedBy reads what the manager owns through Apply.
func OwnedBy(entries []metav1.ManagedFieldsEntry, manager string) Owned {
	fields := appliedFields(entries, manager)
	meta, _ := fields["f:metadata"].(map[string]any)
	return Owned{Labels: metadataKeys(meta, "f:labels"), Annotations: metadataKeys(meta, "f:annotations"), Rules: holdsRules(fields)}
}

// OwnedLabels lists the label keys the manager owns through Apply.
func OwnedLabels(entries []metav1.ManagedFieldsEntry, manager string) []string {
	return OwnedBy(entries, manager).Labels
}

// OwnedAnnotations lists the annotation keys the manager owns through Apply.
func OwnedAnnotations(entries []metav1.ManagedFieldsEntry, manager string) []string {
	return OwnedBy(entries, manager).Annotations
}

func metadataKeys(meta map[string]any, field string) []string {
	set, _ := meta[field].(map[string]any)
	var keys []string
	for k := range set {
		if key, ok := strings.CutPrefix(k, "f:"); ok {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys)
	return keys
}

// holdsRules says whether a field set includes spec.rules.
func holdsRules(fields map[string]any) bool {
	spec, _ := fields["f:spec"].(map[string]any)
	_, ok := spec["f:rules"]
	return ok
}

// OwnsRules says whether the manager owns spec.rules through Apply.
func OwnsRules(entries []metav1.ManagedFieldsEntry, manager string) bool {
	return OwnedBy(entries, manager).Rules
}

// RulesOwners lists the other managers that own spec.rules, as
// "name (Apply)" or "name (Update, apiVersion)".
func RulesOwners(entries []metav1.ManagedFieldsEntry, except string) []string {
	var out []string
	for _, e := range entries {
		if e.Manager == except || !holdsRules(fieldSet(e)) {
			continue
		}
		if e.Operation == metav1.ManagedFieldsOperationApply {
			out = append(out, fmt.Sprintf("%s (Apply)", e.Manager))
		} else {
			out = append(out, fmt.Sprintf("%s (%s, %s)", e.Manager, e.Operation, e.APIVersion))
		}
	}
	sort.Strings(out)
	return out
}

// OwnsAnything says whether the manager has any managedFields entry.
func OwnsAnything(entries []metav1.ManagedFieldsEntry, manager string) bool {
	for _, e := range entries {
		if e.Manager == manager {
			return true
		}
	}
	return false
}
