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
