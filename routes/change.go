package routes

import (
	"fmt"
	"strings"
)

// Change is one thing a write changes on a route: what its log line says
// (Text), and what kind of change it is, by which the Events on the route
// are told (Kind).
type Change struct {
	Kind ChangeKind
	// Rule is the name of the rule a change of an added rule is about.
	Rule string
	Text string
}

func (c Change) String() string { return c.Text }

// ChangeKind is what a change is of.
type ChangeKind uint8

const (
	// WeightChanged: a weight of a stable, canary or experiment backendRef.
	WeightChanged ChangeKind = iota + 1
	// BackendAdded, BackendRemoved: an experiment backendRef.
	BackendAdded
	BackendRemoved
	// RuleAdded, RuleChanged, RuleRemoved: a header, mirror or sticky rule
	// the plugin added; RuleAdopted: one the argoproj-labs plugin added,
	// taken into a claim.
	RuleAdded
	RuleChanged
	RuleRemoved
	RuleAdopted
	// MirrorFilterAdded, MirrorFilterRemoved: a RequestMirror filter on a
	// weighted rule (mirrorMode: filter).
	MirrorFilterAdded
	MirrorFilterRemoved
	// CookieAdded, CookieRemoved: stickyCanary's Set-Cookie filter on a
	// backendRef.
	CookieAdded
	CookieRemoved
	// RulesTakenOver: conflictPolicy Force took spec.rules from others.
	RulesTakenOver
	// Bookkeeping: the plugin's label or claims annotation.
	Bookkeeping
)

// Reason is the Event reason a change of kind k is told under (package
// events); "" for Bookkeeping, which is not told.
func (k ChangeKind) Reason() string { return changeReasons[k] }

var changeReasons = map[ChangeKind]string{
	WeightChanged: "WeightsChanged", BackendAdded: "ExperimentBackendsAdded", BackendRemoved: "ExperimentBackendsRemoved",
	RuleAdded: "RulesAdded", RuleChanged: "RulesChanged", RuleRemoved: "RulesRemoved", RuleAdopted: "RulesAdopted",
	MirrorFilterAdded: "MirrorFiltersAdded", MirrorFilterRemoved: "MirrorFiltersRemoved",
	CookieAdded: "StickyCookiesAdded", CookieRemoved: "StickyCookiesRemoved", RulesTakenOver: "RulesTakenOver",
}

// toldInOrder are the kinds of change told in Events, in the order a
// write's Events are recorded: a take-over first, then the weights, the
// experiment's backends, the rules, the filters.
var toldInOrder = []ChangeKind{
	RulesTakenOver, WeightChanged, BackendAdded, BackendRemoved, RuleAdopted, RuleAdded, RuleChanged, RuleRemoved,
	MirrorFilterAdded, MirrorFilterRemoved, CookieAdded, CookieRemoved,
}

// Changes are what one write changed.
type Changes []Change

// Note is what the changes of one Event reason say: their texts joined by
// "; ".
type Note struct{ Reason, Text string }

// Notes are the changes' Notes, one per Event reason among them, in the
// order a write's Events are recorded. Bookkeeping is not told.
func (cs Changes) Notes() []Note {
	var out []Note
	for _, k := range toldInOrder {
		var texts []string
		for _, c := range cs {
			if c.Kind == k {
				texts = append(texts, c.Text)
			}
		}
		if len(texts) > 0 {
			out = append(out, Note{Reason: k.Reason(), Text: strings.Join(texts, "; ")})
		}
	}
	return out
}

// RuleChange is a change of the added rule name: RuleAdded ("+ rule n"),
// RuleChanged ("~ rule n") or RuleRemoved ("− rule n").
func RuleChange(kind ChangeKind, name string) Change {
	sign := map[ChangeKind]string{RuleAdded: "+", RuleChanged: "~", RuleRemoved: "−"}[kind]
	return Change{Kind: kind, Rule: name, Text: sign + " rule " + name}
}

// Changef is a change of kind, its text formatted.
func Changef(kind ChangeKind, format string, args ...any) Change {
	return Change{Kind: kind, Text: fmt.Sprintf(format, args...)}
}

// JoinChanges is the changes' texts, "; "-separated: a write's log line.
func JoinChanges(cs []Change) string { return strings.Join(ChangeTexts(cs), "; ") }

// ChangeTexts are the changes' texts.
func ChangeTexts(cs []Change) []string {
	if cs == nil {
		return nil
	}
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Text
	}
	return out
}
