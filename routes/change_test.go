package routes

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A write's changes are told one reason at a time, in the order its Events
// are recorded, whatever order the decision wrote them in; the plugin's
// bookkeeping is not told.
func TestChangesAreToldByReasonInTheEventsOrder(t *testing.T) {
	changes := Changes{
		Changef(CookieAdded, "rule 0 + sticky cookie on Service shop/canary"),
		RuleChange(RuleAdded, "web-sticky-canary"),
		Changef(WeightChanged, "rule 0 Service shop/stable 100→70"),
		Changef(Bookkeeping, "annotation gatewayapi-ssa.dev/claims"),
		Changef(WeightChanged, "rule 0 Service shop/canary 0→30"),
		RuleChange(RuleAdded, "web-sticky-stable"),
		Changef(RulesTakenOver, "spec.rules taken from argocd"),
	}
	want := []Note{
		{"RulesTakenOver", "spec.rules taken from argocd"},
		{"WeightsChanged", "rule 0 Service shop/stable 100→70; rule 0 Service shop/canary 0→30"},
		{"RulesAdded", "+ rule web-sticky-canary; + rule web-sticky-stable"},
		{"StickyCookiesAdded", "rule 0 + sticky cookie on Service shop/canary"},
	}
	if diff := cmp.Diff(want, changes.Notes()); diff != "" {
		t.Errorf("told (-want +got):\n%s", diff)
	}
}

// Every kind of change but the bookkeeping is told, under a reason of its
// own.
func TestEveryKindOfChangeHasAReasonOfItsOwn(t *testing.T) {
	seen := map[string]ChangeKind{}
	for kind := WeightChanged; kind < Bookkeeping; kind++ {
		why := kind.Reason()
		if why == "" {
			t.Errorf("change kind %d is told under no reason", kind)
		}
		if other, ok := seen[why]; ok {
			t.Errorf("change kinds %d and %d share reason %s", other, kind, why)
		}
		seen[why] = kind
		if notes := (Changes{{Kind: kind, Text: "x"}}).Notes(); len(notes) != 1 {
			t.Errorf("a change of kind %d (%s) is not told", kind, why)
		}
	}
	if why := Bookkeeping.Reason(); why != "" {
		t.Errorf("bookkeeping is told under %s", why)
	}
}
