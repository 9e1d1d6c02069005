package routes

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// Route is a live route as the plugin sees it.
type Route struct {
	Ref
	// UID is metadata.uid: Events about the route name it, so that kubectl
	// describe finds them.
	UID types.UID
	// Version is the API version the route was read in, e.g. v1 or v1alpha2.
	Version         string
	ResourceVersion string
	Generation      int64
	Labels          map[string]string
	Annotations     map[string]string
	// ManagedFields is metadata.managedFields with who owns what in them,
	// parsed when the route was read.
	ManagedFields ManagedFields
	// Rules is spec.rules exactly as served, defaults included.
	Rules []Rule
	// Parents is spec.parentRefs and status.parents, read for VerifyStatus;
	// writes never send them.
	Parents Parents
	// Schema is what the installed CRD of the route's kind defines in
	// Version, where releases differ; a Reader fills it in.
	Schema Schema
}

// Rule is one entry of spec.rules in its JSON form. Fields the plugin does not
// manage (matches, filters, timeouts, session persistence, fields added by
// newer Gateway API releases) pass through untouched.
type Rule map[string]any

// FromUnstructured reads a route served by the apiserver. The Route shares
// nothing with u.
func FromUnstructured(u *unstructured.Unstructured) (Route, error) {
	return fromObject(u, true)
}

// FromUnstructuredNoCopy reads a route served by the apiserver without
// copying its rules: for an object the caller owns and changes no more (an
// answer just decoded, an event a watch cache keeps), so the route is read in
// one pass instead of two.
func FromUnstructuredNoCopy(u *unstructured.Unstructured) (Route, error) {
	return fromObject(u, false)
}

func fromObject(u *unstructured.Unstructured, copyRules bool) (Route, error) {
	gv, kind := u.GroupVersionKind().GroupVersion(), Kind(u.GetKind())
	r := Route{
		Ref:             Ref{Kind: kind, Namespace: u.GetNamespace(), Name: u.GetName()},
		UID:             u.GetUID(),
		Version:         gv.Version,
		ResourceVersion: u.GetResourceVersion(),
		Generation:      u.GetGeneration(),
		Labels:          u.GetLabels(),
		Annotations:     u.GetAnnotations(),
		Parents:         parentsFromUnstructured(u),
	}
	if gv.Group != Group || kind.Resource() == "" {
		return Route{}, fmt.Errorf("%s %s/%s is not a Gateway API route", u.GetKind(), r.Namespace, r.Name)
	}
	entries, err := managedFields(u)
	if err != nil {
		return Route{}, fmt.Errorf("%s: metadata.managedFields: %w", r.Ref, err)
	}
	r.ManagedFields = NewManagedFields(entries)
	raw, found, err := unstructured.NestedFieldNoCopy(u.Object, "spec", "rules")
	if err != nil {
		return Route{}, fmt.Errorf("%s: spec.rules: %w", r.Ref, err)
	}
	if !found || raw == nil {
		return r, nil
	}
	items, ok := raw.([]any)
	if !ok {
		return Route{}, fmt.Errorf("%s: spec.rules is %T, not a list", r.Ref, raw)
	}
	r.Rules = make([]Rule, len(items))
	for i, item := range items {
		m, ok := item.(map[string]any)
		if !ok {
			return Route{}, fmt.Errorf("%s: spec.rules[%d] is %T, not an object", r.Ref, i, item)
		}
		if copyRules {
			m = runtime.DeepCopyJSONValue(m).(map[string]any)
		}
		r.Rules[i] = m
	}
	return r, nil
}

// managedFields reads metadata.managedFields as GetManagedFields does, field
// by field instead of through the reflecting converter, which cost more than
// the rest of reading a route together.
func managedFields(u *unstructured.Unstructured) ([]metav1.ManagedFieldsEntry, error) {
	raw, found, _ := unstructured.NestedFieldNoCopy(u.Object, "metadata", "managedFields")
	items, ok := raw.([]any)
	if !found || !ok {
		return nil, nil
	}
	out := make([]metav1.ManagedFieldsEntry, 0, len(items))
	for i, item := range items {
		m, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("entry %d is %T, not an object", i, item)
		}
		var e metav1.ManagedFieldsEntry
		e.Manager, _ = m["manager"].(string)
		op, _ := m["operation"].(string)
		e.Operation = metav1.ManagedFieldsOperationType(op)
		e.APIVersion, _ = m["apiVersion"].(string)
		e.FieldsType, _ = m["fieldsType"].(string)
		e.Subresource, _ = m["subresource"].(string)
		if t, ok := m["time"].(string); ok {
			e.Time = &metav1.Time{}
			if err := e.Time.UnmarshalQueryParameter(t); err != nil {
				return nil, fmt.Errorf("entry %d: time: %w", i, err)
			}
		}
		if f, ok := m["fieldsV1"]; ok && f != nil {
			data, err := json.Marshal(f)
			if err != nil {
				return nil, fmt.Errorf("entry %d: fieldsV1: %w", i, err)
			}
			e.FieldsV1 = metav1.NewFieldsV1(string(data))
		}
		out = append(out, e)
	}
	return out, nil
}

// DeepCopy returns a copy of the route that shares no map, slice or rule with
// it: a Reader hands out copies, so no caller can change what another sees.
func (r Route) DeepCopy() Route {
	out := r
	out.Labels = maps.Clone(r.Labels)
	out.Annotations = maps.Clone(r.Annotations)
	out.ManagedFields = r.ManagedFields.DeepCopy()
	if r.Rules != nil {
		out.Rules = CopyRules(r.Rules)
	}
	out.Parents = Parents{Refs: slices.Clone(r.Parents.Refs), Status: make([]ParentStatus, len(r.Parents.Status))}
	for i, st := range r.Parents.Status {
		st.Conditions = slices.Clone(st.Conditions)
		out.Parents.Status[i] = st
	}
	if r.Parents.Status == nil {
		out.Parents.Status = nil
	}
	return out
}

// CopyRules returns a deep copy of rules, so a transform never changes the live route.
func CopyRules(rules []Rule) []Rule {
	out := make([]Rule, len(rules))
	for i, r := range rules {
		out[i] = runtime.DeepCopyJSONValue(map[string]any(r)).(map[string]any)
	}
	return out
}

// Name is the rule's name (sectionName), or "" for an unnamed rule.
func (r Rule) Name() string {
	name, _ := r["name"].(string)
	return name
}

// BackendRefs returns the rule's backendRefs. Changing a returned BackendRef
// changes the rule.
func (r Rule) BackendRefs() []BackendRef {
	raw, _ := r["backendRefs"].([]any)
	out := make([]BackendRef, 0, len(raw))
	for _, item := range raw {
		if m, ok := item.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// LastRef is the index of the rule's last backendRef to target's backend
// (ObjectRef.Backend), or -1. The plugin appends what it adds, so its own
// ref is the last one.
func (r Rule) LastRef(namespace string, target ObjectRef) int {
	refs := r.BackendRefs()
	for j := len(refs) - 1; j >= 0; j-- {
		if refs[j].Target(namespace).Backend() == target.Backend() {
			return j
		}
	}
	return -1
}

// FirstRef is the rule's first backendRef to target's backend, nil if none.
// Changing it changes the rule.
func (r Rule) FirstRef(namespace string, target ObjectRef) BackendRef {
	for _, b := range r.BackendRefs() {
		if b.Target(namespace).Backend() == target.Backend() {
			return b
		}
	}
	return nil
}

// CopyRef returns a deep copy of the rule's first backendRef to target's
// backend: the one a rule the plugin generates from this rule sends to, with
// its group and kind (a ServiceImport stays one).
func (r Rule) CopyRef(namespace string, target ObjectRef) (BackendRef, bool) {
	b := r.FirstRef(namespace, target)
	if b == nil {
		return nil, false
	}
	return runtime.DeepCopyJSONValue(map[string]any(b)).(map[string]any), true
}

// RefsTo lists the targets of the rule's backendRefs to target's backend, as
// they name it (a Service, its ServiceImport).
func (r Rule) RefsTo(namespace string, target ObjectRef) []ObjectRef {
	var out []ObjectRef
	for _, b := range r.BackendRefs() {
		if t := b.Target(namespace); t.Backend() == target.Backend() {
			out = append(out, t)
		}
	}
	return out
}

// CountRefs is how many of the rule's backendRefs go to target's backend.
func (r Rule) CountRefs(namespace string, target ObjectRef) int {
	n := 0
	for _, b := range r.BackendRefs() {
		if b.Target(namespace).Backend() == target.Backend() {
			n++
		}
	}
	return n
}

// BackendRef is one entry of a rule's backendRefs in its JSON form.
type BackendRef map[string]any

// Target is the object the backendRef points at, with defaults resolved: the
// core group, kind Service, and the route's namespace when none is given.
func (b BackendRef) Target(routeNamespace string) ObjectRef {
	return objectRef(b, ObjectRef{Kind: "Service", Namespace: routeNamespace})
}

// objectRef reads a reference in its JSON form (backendRef, parentRef) over
// the defaults: a group given, even "", wins; a kind or namespace only when
// not empty.
func objectRef(m map[string]any, defaults ObjectRef) ObjectRef {
	ref := defaults
	if g, ok := m["group"].(string); ok {
		ref.Group = g
	}
	if k, ok := m["kind"].(string); ok && k != "" {
		ref.Kind = k
	}
	if ns, ok := m["namespace"].(string); ok && ns != "" {
		ref.Namespace = ns
	}
	ref.Name, _ = m["name"].(string)
	return ref
}

// Weight is the backendRef's weight; Gateway API's default is 1.
func (b BackendRef) Weight() int64 {
	switch w := b["weight"].(type) {
	case int64:
		return w
	case float64:
		return int64(w)
	case nil:
		return 1
	}
	return 1
}

// SetWeight sets the backendRef's weight.
func (b BackendRef) SetWeight(w int64) { b["weight"] = w }

// ObjectRef identifies an object by group, kind, namespace and name. Two
// backendRefs go to the same backend when their Backend is the same: all
// four match, or one names a Service and the other its ServiceImport.
type ObjectRef struct {
	Group     string
	Kind      string
	Namespace string
	Name      string
}

// ServiceRef is a core Service in a namespace.
func ServiceRef(namespace, name string) ObjectRef {
	return ObjectRef{Kind: "Service", Namespace: namespace, Name: name}
}

// serviceImportGroups are the API groups whose ServiceImport carries the
// traffic of the Services of its namespace and name that clusters export:
// the Multi-Cluster Services API, GKE fleets (multi-cluster Gateways), and
// AWS's Gateway API controller for VPC Lattice.
var serviceImportGroups = []string{"multicluster.x-k8s.io", "net.gke.io", "application-networking.k8s.aws"}

// IsServiceImport says whether o is a ServiceImport of one of
// serviceImportGroups.
func (o ObjectRef) IsServiceImport() bool {
	return o.Kind == "ServiceImport" && slices.Contains(serviceImportGroups, o.Group)
}

// Backend is what o routes to, by which backendRefs are told apart: for a
// ServiceImport of serviceImportGroups the Service of its namespace and name
// (so a Rollout's stable Service is found on a route that names its import),
// for anything else o itself.
func (o ObjectRef) Backend() ObjectRef {
	if o.IsServiceImport() {
		return ServiceRef(o.Namespace, o.Name)
	}
	return o
}

func (o ObjectRef) String() string {
	if o.Group == "" && o.Kind == "Service" {
		return fmt.Sprintf("Service %s/%s", o.Namespace, o.Name)
	}
	return fmt.Sprintf("%s.%s %s/%s", o.Kind, o.Group, o.Namespace, o.Name)
}

// APIVersion is the apiVersion of a route read in version v: a constant for
// the versions the plugin serves, so that what keeps it (an Event series)
// holds no copy.
func APIVersion(v string) string {
	switch v {
	case "v1":
		return Group + "/v1"
	case "v1beta1":
		return Group + "/v1beta1"
	case "v1alpha2":
		return Group + "/v1alpha2"
	}
	return Group + "/" + v
}

// NewerVersion says resourceVersion a is newer than b, comparing them the
// way client-go's mutation cache does: as integers where both parse;
// otherwise it says no (what the cache holds wins).
func NewerVersion(a, b string) bool {
	ai, errA := strconv.ParseUint(a, 10, 64)
	bi, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && ai > bi
}
