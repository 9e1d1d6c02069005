package routes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsjson "sigs.k8s.io/json"
)

// What a route's managedFields say about who owns what. The apiserver records
// ownership of the atomic spec.rules list as one field, so "owns spec.rules"
// is all or nothing; see DESIGN.md §2.

// fieldSet is what the plugin reads of a managedFields entry's field set
// (the nested "f:..." object the apiserver records): the keys under
// f:metadata's f:labels and f:annotations, and whether f:spec holds f:rules.
// Decoding into it skips the rest of the set instead of building a map of
// every field, as a decode into map[string]any would.
type fieldSet struct {
	Metadata struct {
		Labels      map[string]struct{} `json:"f:labels"`
		Annotations map[string]struct{} `json:"f:annotations"`
	} `json:"f:metadata"`
	Spec struct {
		Rules *struct{} `json:"f:rules"`
	} `json:"f:spec"`
}

// readFieldSet decodes an entry's field set; false when there is none or it
// does not parse. Keys are matched case-sensitively, as the apiserver
// writes them.
func readFieldSet(e metav1.ManagedFieldsEntry) (fieldSet, bool) {
	var fields fieldSet
	if e.FieldsV1 == nil {
		return fields, false
	}
	if sigsjson.UnmarshalCaseSensitivePreserveInts(e.FieldsV1.GetRawBytes(), &fields) != nil {
		return fields, false
	}
	return fields, true
}

// appliedFields returns the field set the manager owns through Apply.
func appliedFields(entries []metav1.ManagedFieldsEntry, manager string) fieldSet {
	for _, e := range entries {
		if e.Manager != manager || e.Operation != metav1.ManagedFieldsOperationApply {
			continue
		}
		if fields, ok := readFieldSet(e); ok {
			return fields
		}
	}
	return fieldSet{}
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
	return Owned{Labels: fieldKeys(fields.Metadata.Labels), Annotations: fieldKeys(fields.Metadata.Annotations), Rules: fields.Spec.Rules != nil}
}

// OwnedLabels lists the label keys the manager owns through Apply.
func OwnedLabels(entries []metav1.ManagedFieldsEntry, manager string) []string {
	return OwnedBy(entries, manager).Labels
}

// OwnedAnnotations lists the annotation keys the manager owns through Apply.
func OwnedAnnotations(entries []metav1.ManagedFieldsEntry, manager string) []string {
	return OwnedBy(entries, manager).Annotations
}

// fieldKeys lists the names of a field set's "f:<name>" keys, sorted.
func fieldKeys(set map[string]struct{}) []string {
	var keys []string
	for k := range set {
		if key, ok := strings.CutPrefix(k, "f:"); ok {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys)
	return keys
}

// rulesSet is what holdsRules reads of a field set: whether f:spec holds
// f:rules, with nothing of f:metadata (OwnsRules and RulesOwners are asked
// on every write).
type rulesSet struct {
	Spec struct {
		Rules *struct{} `json:"f:rules"`
	} `json:"f:spec"`
}

// rulesKey is what a field set holding spec.rules names somewhere: a set
// without it is not parsed to find out.
var rulesKey = []byte(`"f:rules"`)

// holdsRules says whether the entry's field set holds spec.rules; a set
// that does not parse holds nothing.
func holdsRules(e metav1.ManagedFieldsEntry) bool {
	if e.FieldsV1 == nil || !bytes.Contains(e.FieldsV1.GetRawBytes(), rulesKey) {
		return false
	}
	holds, _ := parseRules(e.FieldsV1.GetRawBytes())
	return holds
}

// readsRules is holdsRules, and whether the field set parses at all: a set
// that does not name f:rules is only checked to be JSON.
func readsRules(e metav1.ManagedFieldsEntry) (holds, parses bool) {
	if e.FieldsV1 == nil {
		return false, false
	}
	raw := e.FieldsV1.GetRawBytes()
	if !bytes.Contains(raw, rulesKey) {
		return false, json.Valid(raw)
	}
	return parseRules(raw)
}

// parseRules reads whether a field set holds spec.rules.
func parseRules(raw []byte) (holds, parses bool) {
	var fields rulesSet
	if sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &fields) != nil {
		return false, false
	}
	return fields.Spec.Rules != nil, true
}

// OwnsRules says whether the manager owns spec.rules through Apply: what
// OwnedBy says of it (the first of its Apply entries that parses), read
// without the label and annotation keys.
func OwnsRules(entries []metav1.ManagedFieldsEntry, manager string) bool {
	for _, e := range entries {
		if e.Manager != manager || e.Operation != metav1.ManagedFieldsOperationApply {
			continue
		}
		if holds, parses := readsRules(e); parses {
			return holds
		}
	}
	return false
}

// WroteRules says whether manager owns spec.rules, by an apply or an
// update: the rules are as it last wrote them (anyone who changed them since
// took them from it).
func WroteRules(entries []metav1.ManagedFieldsEntry, manager string) bool {
	for _, e := range entries {
		if e.Manager == manager && holdsRules(e) {
			return true
		}
	}
	return false
}

// RulesOwners lists the other managers that own spec.rules, as
// "name (Apply)" or "name (Update, apiVersion)".
func RulesOwners(entries []metav1.ManagedFieldsEntry, except string) []string {
	var out []string
	for _, e := range entries {
		if e.Manager == except {
			continue
		}
		if !holdsRules(e) {
			continue
		}
		out = append(out, ownerName(e))
	}
	sort.Strings(out)
	return out
}

// ownerName names an entry's manager as "name (Apply)" or
// "name (Update, apiVersion)".
func ownerName(e metav1.ManagedFieldsEntry) string {
	if e.Operation == metav1.ManagedFieldsOperationApply {
		return fmt.Sprintf("%s (Apply)", e.Manager)
	}
	return fmt.Sprintf("%s (%s, %s)", e.Manager, e.Operation, e.APIVersion)
}

// LabelOwners lists the managers but those in except that own label key,
// by an apply or an update, named as RulesOwners names them.
func LabelOwners(entries []metav1.ManagedFieldsEntry, key string, except ...string) []string {
	var out []string
	for _, e := range entries {
		if slices.Contains(except, e.Manager) {
			continue
		}
		if fields, ok := readFieldSet(e); ok {
			if _, owns := fields.Metadata.Labels["f:"+key]; owns {
				out = append(out, ownerName(e))
			}
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
