package ssa

import (
	"encoding/json"
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
