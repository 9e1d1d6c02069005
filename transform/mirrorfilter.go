package transform

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"k8s.io/apimachinery/pkg/runtime"
)

// Mirroring in filter mode: a setMirrorRoute step adds a RequestMirror
// filter, with the step's percentage, to every weighted rule, instead of a
// rule of its own. The filter mirrors every request the weighted rule
// carries: the step's matches only say that the step adds mirroring (Argo
// Rollouts requires them); to mirror some requests only, use rule mode.
//
// Filters have no names, so the plugin records each one it added in the
// Rollout's claim (Claim.MirrorFilters) with its content and how many equal
// filters the rule already held, and removes exactly that one: the last equal
// filter, while the rule holds more than it did before.

// FiltersResult is the outcome of a filter-mode mirror step on one route.
type FiltersResult struct {
	Rules []routes.Rule
	// Claimed are the filters the plugin has added for the Rollout on this
	// route, after the change.
	Claimed []routes.AddedFilter
	Changes []routes.Change
}

// SetMirrorFilters returns the route with the RequestMirror filters of
// managedRoutes entry name as the step asks: one per weighted rule, to that
// rule's canary backendRef, mirroring percent (nil: 100) of its requests; not
// adding removes them. claimed are the filters the Rollout's claim records;
// those of other entries stay.
func SetMirrorFilters(r routes.Route, in RuleInput, claimed []routes.AddedFilter, name string, percent *int32, adding bool) (FiltersResult, error) {
	pct, err := mirrorPercent(name, percent)
	if err != nil {
		return FiltersResult{}, err
	}
	rules := routes.CopyRules(r.Rules)
	res := FiltersResult{Rules: rules}
	var weighted []int
	if adding {
		if weighted, err = mirrorFilterRules(r, in, rules, name, pct); err != nil {
			return FiltersResult{}, err
		}
	}
	want := map[int]map[string]any{}
	for _, i := range weighted {
		canary, _ := rules[i].CopyRef(r.Namespace, in.Canary)
		want[i] = mirrorFilter(canary, pct, r.Schema)
	}
	kept := res.keepOrRemove(claimed, name, want)
	for _, i := range weighted {
		if kept[i] {
			continue
		}
		f := routes.AddedFilter{Entry: name, Rule: i, RuleName: rules[i].Name(), Filter: want[i], Others: countFilters(rules[i], want[i])}
		filters, _ := rules[i]["filters"].([]any)
		rules[i]["filters"] = append(filters, runtime.DeepCopyJSONValue(want[i]))
		res.Claimed = append(res.Claimed, f)
		res.Changes = append(res.Changes, routes.Changef(routes.MirrorFilterAdded, "rule %d + mirror filter %s %d%%", i, strconv.Quote(name), pct))
	}
	if err := checkLimits(r.Kind, rules); err != nil {
		return FiltersResult{}, fmt.Errorf("mirror route %q: %w", name, err)
	}
	return res, nil
}

// mirrorFilterRules are the weighted rules of the route (rules, a copy of
// its rules) that take the RequestMirror filters of mirror route name,
// mirroring pct %; an error when the kind has no filters, the route's CRD
// cannot carry that percentage, or no rule is weighted.
func mirrorFilterRules(r routes.Route, in RuleInput, rules []routes.Rule, name string, pct int64) ([]int, error) {
	if !r.Kind.HasMatches() {
		return nil, fmt.Errorf("a %s has no filters, so it cannot take mirror route %q", r.Kind, name)
	}
	if err := checkMirrorPercent(r, name, pct); err != nil {
		return nil, err
	}
	weighted := WeightedRules(r.Namespace, rules, in.Stable, in.Canary, in.Targeting)
	if len(weighted) == 0 {
		return nil, in.Targeting.noWeightedRule(r, rules, in.Stable, in.Canary)
	}
	return weighted, nil
}

// keepOrRemove goes through the claimed filters: those of other entries
// stay claimed, those of entry name that are there as want has them stay
// in place (kept, by rule), and the others are removed from res.Rules.
func (res *FiltersResult) keepOrRemove(claimed []routes.AddedFilter, name string, want map[int]map[string]any) (kept map[int]bool) {
	kept = map[int]bool{}
	for _, f := range claimed {
		i := routes.LocateRule(res.Rules, f.Rule, f.RuleName)
		if f.Entry != name {
			res.Claimed = append(res.Claimed, f)
			continue
		}
		if w, ok := want[i]; ok && !kept[i] && sameJSON(w, f.Filter) && countFilters(res.Rules[i], f.Filter) > f.Others {
			kept[i] = true // already there as the step wants it: leave it in place
			f.Rule, f.RuleName = i, res.Rules[i].Name()
			res.Claimed = append(res.Claimed, f)
			continue
		}
		res.Changes = append(res.Changes, removeFilter(res.Rules, f)...)
	}
	return kept
}

// RemoveMirrorFilters removes from a copy of the rules every filter claimed
// records, and says what it removed.
func RemoveMirrorFilters(rules []routes.Rule, claimed []routes.AddedFilter) ([]routes.Rule, []routes.Change) {
	rules = routes.CopyRules(rules)
	var changes []routes.Change
	for _, f := range claimed {
		changes = append(changes, removeFilter(rules, f)...)
	}
	return rules, changes
}

// HasFilter says whether the rules still hold the filter the plugin added.
func HasFilter(rules []routes.Rule, f routes.AddedFilter) bool {
	i := routes.LocateRule(rules, f.Rule, f.RuleName)
	return i >= 0 && countFilters(rules[i], f.Filter) > f.Others
}

func removeFilter(rules []routes.Rule, f routes.AddedFilter) []routes.Change {
	i := routes.LocateRule(rules, f.Rule, f.RuleName)
	if i < 0 || !removeLastFilter(rules[i], f.Filter, f.Others) {
		return nil
	}
	return []routes.Change{routes.Changef(routes.MirrorFilterRemoved, "rule %d − mirror filter %s", i, strconv.Quote(f.Entry))}
}

// mirrorFilter is a RequestMirror filter to the canary backendRef, with the
// CRD's defaults written out so that the applied rule equals the stored one.
func mirrorFilter(canary routes.BackendRef, pct int64, s routes.Schema) map[string]any {
	ref := map[string]any{"group": "", "kind": "Service"}
	for _, k := range []string{"group", "kind", "name", "namespace", "port"} {
		if v, ok := canary[k]; ok {
			ref[k] = v
		}
	}
	return map[string]any{"type": "RequestMirror", "requestMirror": requestMirror(ref, pct, s)}
}

// requestMirror is a RequestMirror filter's body: the backend, and the
// percentage where the CRD has the field (without it the filter mirrors
// every request, which is what 100 means; checkMirrorPercent refuses any
// other percentage there).
func requestMirror(backendRef map[string]any, pct int64, s routes.Schema) map[string]any {
	if s.LacksMirrorPercent {
		return map[string]any{"backendRef": backendRef}
	}
	return map[string]any{"backendRef": backendRef, "percent": pct}
}

// mirrorPercent is the percentage a setMirrorRoute step mirrors (nil: every
// request), refused outside 0..100.
func mirrorPercent(name string, percent *int32) (int64, error) {
	if err := CheckMirrorPercent(percent); err != nil {
		return 0, fmt.Errorf("mirror route %q: %w", name, err)
	}
	if percent == nil {
		return 100, nil
	}
	return int64(*percent), nil
}

// checkMirrorPercent refuses a percentage other than 100 on a route whose
// CRD has no requestMirror.percent: the filter would mirror every request.
func checkMirrorPercent(r routes.Route, name string, pct int64) error {
	if pct == 100 || !r.Schema.LacksMirrorPercent {
		return nil
	}
	return &routes.SchemaError{Kind: r.Kind, Version: r.Version,
		Field: "spec.rules[].filters[].requestMirror.percent", Since: routes.MirrorPercentSince,
		Need:    fmt.Sprintf("mirror route %q: mirroring %d%% of the requests", name, pct),
		Instead: "mirror every request (leave the step's percentage out, or set it to 100)"}
}

func countFilters(rule routes.Rule, f map[string]any) int {
	filters, _ := rule["filters"].([]any)
	n := 0
	for _, x := range filters {
		if sameJSON(x, f) {
			n++
		}
	}
	return n
}

// removeLastFilter removes the rule's last filter equal to f, if the rule
// holds more of them than others (the count before the plugin added its own).
func removeLastFilter(rule routes.Rule, f map[string]any, others int) bool {
	if countFilters(rule, f) <= others {
		return false
	}
	filters := rule["filters"].([]any)
	for j := len(filters) - 1; j >= 0; j-- {
		if sameJSON(filters[j], f) {
			rest := append(filters[:j:j], filters[j+1:]...)
			if len(rest) == 0 {
				delete(rule, "filters")
			} else {
				rule["filters"] = rest
			}
			return true
		}
	}
	return false
}

// withoutAddedFilters drops from a copied rule the filters the plugin added
// (any Rollout's), so rules generated from a weighted rule do not copy them.
func withoutAddedFilters(rule routes.Rule, added []map[string]any) {
	filters, ok := rule["filters"].([]any)
	if !ok || len(added) == 0 {
		return
	}
	var out []any
	for _, f := range filters {
		drop := false
		for _, a := range added {
			if sameJSON(f, a) {
				drop = true
				break
			}
		}
		if !drop {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		delete(rule, "filters")
		return
	}
	rule["filters"] = out
}

// sameJSON says whether two JSON values are equal as JSON: a filter read back
// from the claims annotation has float64 numbers where the served rule has
// int64 ones.
func sameJSON(a, b any) bool {
	x, errA := json.Marshal(a)
	y, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(x, y)
}
