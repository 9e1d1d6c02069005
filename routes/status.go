package routes

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Route status conditions VerifyStatus checks (Gateway API RouteConditionType).
const (
	ConditionAccepted     = "Accepted"
	ConditionResolvedRefs = "ResolvedRefs"
	// ConditionPartiallyInvalid True means the controller dropped some rules
	// (or fell back to an older generation, which shows as Accepted for that
	// generation).
	ConditionPartiallyInvalid = "PartiallyInvalid"
)

// Parents is what a route says about its parents: the ones spec.parentRefs
// names and what the gateway controllers reported in status.parents.
type Parents struct {
	// Refs is spec.parentRefs with defaults resolved.
	Refs []ParentRef
	// Status is status.parents, one entry per parent and controller.
	Status []ParentStatus
}

// ParentRef is a parentRef with Gateway API's defaults resolved: group
// gateway.networking.k8s.io and kind Gateway when not given, the route's
// namespace when no namespace is given. An empty SectionName and a zero Port
// mean "not set". Two ParentRefs name the same parent only if all fields match.
type ParentRef struct {
	Group       string
	Kind        string
	Namespace   string
	Name        string
	SectionName string
	Port        int64
}

func (p ParentRef) String() string {
	s := fmt.Sprintf("%s %s/%s", p.Kind, p.Namespace, p.Name)
	if p.Group != Group {
		s = fmt.Sprintf("%s.%s %s/%s", p.Kind, p.Group, p.Namespace, p.Name)
	}
	if p.SectionName != "" {
		s += " sectionName " + p.SectionName
	}
	if p.Port != 0 {
		s += fmt.Sprintf(" port %d", p.Port)
	}
	return s
}

// ParentStatus is one entry of status.parents.
type ParentStatus struct {
	ParentRef      ParentRef
	ControllerName string
	Conditions     []Condition
}

// Condition is one condition of a status.parents entry.
type Condition struct {
	Type               string
	Status             string // "True", "False" or "Unknown"
	Reason             string
	Message            string
	ObservedGeneration int64
}

// parentsFromUnstructured reads spec.parentRefs and status.parents. Entries
// that are not objects are skipped: the CRD schema does not allow them, and
// they would name no parent anyway.
func parentsFromUnstructured(u *unstructured.Unstructured) Parents {
	refs, _, _ := unstructured.NestedSlice(u.Object, "spec", "parentRefs")
	statuses, _, _ := unstructured.NestedSlice(u.Object, "status", "parents")
	return ParentsFrom(u.GetNamespace(), refs, statuses)
}

// ParentsFrom reads spec.parentRefs (refs) and status.parents (statuses) in
// their JSON form, of a route in namespace ns (kube reads a served route so).
func ParentsFrom(ns string, refs, statuses []any) Parents {
	var p Parents
	for _, item := range refs {
		if m, ok := item.(map[string]any); ok {
			p.Refs = append(p.Refs, parentRefFrom(m, ns))
		}
	}
	for _, item := range statuses {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		ref, _ := m["parentRef"].(map[string]any)
		ps := ParentStatus{ParentRef: parentRefFrom(ref, ns)}
		ps.ControllerName, _ = m["controllerName"].(string)
		conds, _ := m["conditions"].([]any)
		for _, c := range conds {
			cm, ok := c.(map[string]any)
			if !ok {
				continue
			}
			cond := Condition{ObservedGeneration: toInt64(cm["observedGeneration"])}
			cond.Type, _ = cm["type"].(string)
			cond.Status, _ = cm["status"].(string)
			cond.Reason, _ = cm["reason"].(string)
			cond.Message, _ = cm["message"].(string)
			ps.Conditions = append(ps.Conditions, cond)
		}
		p.Status = append(p.Status, ps)
	}
	return p
}

// parentRefFrom resolves a parentRef's defaults. An absent group means
// gateway.networking.k8s.io; a group given as "" is the core group (a Service
// parent, as in GAMMA), so it stays "".
func parentRefFrom(m map[string]any, routeNamespace string) ParentRef {
	o := objectRef(m, ObjectRef{Group: Group, Kind: "Gateway", Namespace: routeNamespace})
	ref := ParentRef{Group: o.Group, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name}
	ref.SectionName, _ = m["sectionName"].(string)
	ref.Port = toInt64(m["port"])
	return ref
}

func toInt64(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case int32:
		return int64(n)
	case int:
		return int64(n)
	case float64:
		return int64(n)
	}
	return 0
}
