package routes

import (
	"fmt"
	"strings"
)

// A Rollout reaches the routes of its own namespace. A route in another
// namespace it reaches only where that namespace grants it, the way Gateway
// API lets an object of one namespace refer to one of another: a
// ReferenceGrant in the route's namespace, from Rollouts of the Rollout's
// namespace, to the route's kind (all of them, or the one it names).

// rolloutGroup and rolloutKind name Argo Rollouts' Rollout in a
// ReferenceGrant's from.
const (
	rolloutGroup = "argoproj.io"
	rolloutKind  = "Rollout"
)

// ReferenceGrant is what the plugin reads of a Gateway API ReferenceGrant.
type ReferenceGrant struct {
	Namespace string        `json:"-"`
	Name      string        `json:"-"`
	From      []GrantFrom   `json:"from"`
	To        []GrantTarget `json:"to"`
}

// GrantFrom is one entry of a ReferenceGrant's from.
type GrantFrom struct {
	Group     string `json:"group"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
}

// GrantTarget is one entry of a ReferenceGrant's to; Name nil grants every
// object of the kind.
type GrantTarget struct {
	Group string  `json:"group"`
	Kind  string  `json:"kind"`
	Name  *string `json:"name,omitempty"`
}

// Grants says whether the grant lets Rollouts of namespace rollouts reach
// the routes of kind in the grant's namespace: the one named name, or with
// name "" every one of them (what a label selector reaches).
func (g ReferenceGrant) Grants(rollouts string, kind Kind, name string) bool {
	from := false
	for _, f := range g.From {
		if f.Group == rolloutGroup && f.Kind == rolloutKind && f.Namespace == rollouts {
			from = true
			break
		}
	}
	if !from {
		return false
	}
	for _, t := range g.To {
		if t.Group != Group || t.Kind != string(kind) {
			continue
		}
		if t.Name == nil || *t.Name == "" || (name != "" && *t.Name == name) {
			return true
		}
	}
	return false
}

// Reach says which of a Rollout's targets lie in a namespace that does not
// grant them to the Rollout's namespace: for each namespace other than the
// Rollout's, grants holds the ReferenceGrants read there. A named route
// needs a grant of its kind (or of it by name); a selector one of its whole
// kind, since a grant by name does not say which routes a selector may see.
func Reach(rollouts string, t Targets, grants map[string][]ReferenceGrant) []*NotGrantedError {
	var out []*NotGrantedError
	granted := func(ns string, kind Kind, name string) bool {
		for _, g := range grants[ns] {
			if g.Grants(rollouts, kind, name) {
				return true
			}
		}
		return false
	}
	for _, ref := range t.Named {
		if ref.Namespace != rollouts && !granted(ref.Namespace, ref.Kind, ref.Name) {
			out = append(out, &NotGrantedError{Rollouts: rollouts, Namespace: ref.Namespace, Kind: ref.Kind, Name: ref.Name})
		}
	}
	for _, sel := range t.Selectors {
		if sel.Namespace != rollouts && !granted(sel.Namespace, sel.Kind, "") {
			out = append(out, &NotGrantedError{Rollouts: rollouts, Namespace: sel.Namespace, Kind: sel.Kind, Selector: sel.Selector.String()})
		}
	}
	return out
}

// ForeignNamespaces are the namespaces of the targets other than the
// Rollout's, each once, in the order the targets name them.
func ForeignNamespaces(rollouts string, t Targets) []string {
	var out []string
	add := func(ns string) {
		if ns == rollouts {
			return
		}
		for _, seen := range out {
			if seen == ns {
				return
			}
		}
		out = append(out, ns)
	}
	for _, ref := range t.Named {
		add(ref.Namespace)
	}
	for _, sel := range t.Selectors {
		add(sel.Namespace)
	}
	return out
}

// NotGrantedError says a Rollout's config names a route (Name), or selects
// routes (Selector), in a namespace that grants Rollouts of the Rollout's
// namespace nothing of that kind: nothing of that namespace was read or
// written.
type NotGrantedError struct {
	// Rollouts is the Rollout's namespace; Namespace the routes'.
	Rollouts, Namespace string
	Kind                Kind
	Name, Selector      string
}

// Grant is the ReferenceGrant that would grant what e refused.
func (e *NotGrantedError) Grant() ReferenceGrant {
	to := GrantTarget{Group: Group, Kind: string(e.Kind)}
	if e.Name != "" {
		name := e.Name
		to.Name = &name
	}
	return ReferenceGrant{Namespace: e.Namespace, Name: "rollouts-of-" + e.Rollouts,
		From: []GrantFrom{{Group: rolloutGroup, Kind: rolloutKind, Namespace: e.Rollouts}}, To: []GrantTarget{to}}
}

// Reason is the Event reason of the error (package events).
func (e *NotGrantedError) Reason() string { return "ReferenceGrantMissing" }

func (e *NotGrantedError) Error() string {
	var b strings.Builder
	if e.Name != "" {
		fmt.Fprintf(&b, "%s %s/%s", e.Kind, e.Namespace, e.Name)
	} else {
		fmt.Fprintf(&b, "%s selector %q in namespace %s", e.Kind, e.Selector, e.Namespace)
	}
	fmt.Fprintf(&b, ": namespace %s does not grant Rollouts of namespace %s its %ss, so the plugin reads and writes nothing there; "+
		"its owners grant it with a ReferenceGrant in namespace %s: from [{group: %s, kind: %s, namespace: %s}] to [{group: %s, kind: %s",
		e.Namespace, e.Rollouts, e.Kind, e.Namespace, rolloutGroup, rolloutKind, e.Rollouts, Group, e.Kind)
	if e.Name != "" {
		fmt.Fprintf(&b, ", name: %s}] (or without name, for every %s there)", e.Name, e.Kind)
	} else {
		fmt.Fprintf(&b, "}] (a selector needs the whole kind: a grant naming routes does not cover it)")
	}
	b.WriteString("; or name a route in the Rollout's own namespace")
	return b.String()
}
