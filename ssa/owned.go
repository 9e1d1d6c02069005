package ssa

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ownedFields returns the field set the manager owns through Apply, as the
// nested "f:..." map the apiserver records in managedFields.
func ownedFields(entries []metav1.ManagedFieldsEntry, manager string) map[string]any {
	for _, e := range entries {
		if e.Manager != manager || e.Operation != metav1.ManagedFieldsOperationApply || e.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		if json.Unmarshal(e.FieldsV1.Raw, &fields) == nil {
			return fields
		}
	}
	return nil
}

// OwnedLabels lists the label keys the manager owns through Apply.
func OwnedLabels(entries []metav1.ManagedFieldsEntry, manager string) []string {
	return ownedMetadataKeys(entries, manager, "f:labels")
}

// OwnedAnnotations lists the annotation keys the manager owns through Apply.
func OwnedAnnotations(entries []metav1.ManagedFieldsEntry, manager string) []string {
	return ownedMetadataKeys(entries, manager, "f:annotations")
}

func ownedMetadataKeys(entries []metav1.ManagedFieldsEntry, manager, field string) []string {
	meta, _ := ownedFields(entries, manager)["f:metadata"].(map[string]any)
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

// OwnsRules says whether the manager owns spec.rules through Apply.
func OwnsRules(entries []metav1.ManagedFieldsEntry, manager string) bool {
	spec, _ := ownedFields(entries, manager)["f:spec"].(map[string]any)
	_, ok := spec["f:rules"]
	return ok
}

// RulesOwners lists the other managers that own spec.rules, as
// "name (Apply)" or "name (Update, apiVersion)".
func RulesOwners(entries []metav1.ManagedFieldsEntry, except string) []string {
	var out []string
	for _, e := range entries {
		if e.Manager == except || e.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		if json.Unmarshal(e.FieldsV1.Raw, &fields) != nil {
			continue
		}
		spec, _ := fields["f:spec"].(map[string]any)
		if _, ok := spec["f:rules"]; !ok {
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

// ownsAnything says whether the manager has any managedFields entry.
func ownsAnything(entries []metav1.ManagedFieldsEntry, manager string) bool {
	for _, e := range entries {
		if e.Manager == manager {
			return true
		}
	}
	return false
}
