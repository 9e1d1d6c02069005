package plan

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// applied is the route once the plugin's forced apply of r (and its release,
// if r says so) went through, with managedFields as the apiserver records
// them: the plugin owns spec.rules and the keys it sent; a changed spec.rules
// leaves no other owner; a key only the plugin owned and no longer sends goes.
func applied(live routes.Route, r desired.Result, fieldManager string) routes.Route {
	out := live.DeepCopy()
	entries := out.ManagedFields.Entries()
	if !r.Unchanged {
		othersLabels := ownedByOthers(live.ManagedFields.Entries(), fieldManager, "f:labels")
		othersAnnotations := ownedByOthers(live.ManagedFields.Entries(), fieldManager, "f:annotations")
		owned := live.ManagedFields.Owned(fieldManager)
		out.Labels = applyKeys(live.Labels, owned.Labels, r.Labels, othersLabels)
		out.Annotations = applyKeys(live.Annotations, owned.Annotations, r.Annotations, othersAnnotations)
		changed := !reflect.DeepEqual(live.Rules, r.Rules)
		out.Rules = routes.CopyRules(r.Rules)
		entries = nil
		for _, e := range live.ManagedFields.Entries() {
			if e.Manager == fieldManager {
				continue
			}
			if changed {
				e = withoutRules(e)
			}
			if e.FieldsV1 != nil {
				entries = append(entries, e)
			}
		}
		entries = append(entries, pluginEntry(fieldManager, r))
	}
	if r.Release {
		entries = slices.DeleteFunc(entries, func(e metav1.ManagedFieldsEntry) bool { return e.Manager == fieldManager })
	}
	out.ManagedFields = routes.NewManagedFields(entries)
	return out
}

func applyKeys(live map[string]string, owned []string, want map[string]string, others map[string]bool) map[string]string {
	out := maps.Clone(live)
	if out == nil {
		out = map[string]string{}
	}
	for _, k := range owned {
		if _, keep := want[k]; !keep && !others[k] {
			delete(out, k)
		}
	}
	maps.Copy(out, want)
	if len(out) == 0 {
		return nil
	}
	return out
}

// ownedByOthers are the metadata keys (of field "f:labels" or
// "f:annotations") some other manager owns.
func ownedByOthers(entries []metav1.ManagedFieldsEntry, fieldManager, field string) map[string]bool {
	out := map[string]bool{}
	for _, e := range entries {
		if e.Manager == fieldManager || e.FieldsV1 == nil {
			continue
		}
		var f map[string]any
		if json.Unmarshal(e.FieldsV1.GetRawBytes(), &f) != nil {
			continue
		}
		meta, _ := f["f:metadata"].(map[string]any)
		keys, _ := meta[field].(map[string]any)
		for k := range keys {
			if len(k) > 2 && k[:2] == "f:" {
				out[k[2:]] = true
			}
		}
	}
	return out
}

// withoutRules is the entry without spec.rules (nil FieldsV1 when it owned
// nothing else).
func withoutRules(e metav1.ManagedFieldsEntry) metav1.ManagedFieldsEntry {
	if e.FieldsV1 == nil {
		return e
	}
	var f map[string]any
	if json.Unmarshal(e.FieldsV1.GetRawBytes(), &f) != nil {
		return e
	}
	if spec, ok := f["f:spec"].(map[string]any); ok {
		delete(spec, "f:rules")
		if len(spec) == 0 || (len(spec) == 1 && spec["."] != nil) {
			delete(f, "f:spec")
		}
	}
	delete(f, ".")
	if len(f) == 0 {
		e.FieldsV1 = nil
		return e
	}
	data, _ := json.Marshal(f)
	e.FieldsV1 = metav1.NewFieldsV1(string(data))
	return e
}

// pluginEntry is the plugin's Apply entry after it applied r.
func pluginEntry(fieldManager string, r desired.Result) metav1.ManagedFieldsEntry {
	meta := map[string]any{}
	for field, keys := range map[string]map[string]string{"f:labels": r.Labels, "f:annotations": r.Annotations} {
		if len(keys) == 0 {
			continue
		}
		set := map[string]any{}
		for k := range keys {
			set["f:"+k] = map[string]any{}
		}
		meta[field] = set
	}
	f := map[string]any{"f:spec": map[string]any{"f:rules": map[string]any{}}}
	if len(meta) > 0 {
		f["f:metadata"] = meta
	}
	data, _ := json.Marshal(f)
	return metav1.ManagedFieldsEntry{Manager: fieldManager, Operation: metav1.ManagedFieldsOperationApply,
		APIVersion: routes.Group + "/v1", FieldsV1: metav1.NewFieldsV1(string(data))}
}
