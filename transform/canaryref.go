package transform

import (
	"reflect"
	"strconv"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// The canary backendRef the plugin adds, with addCanaryBackendRef, to the
// rules that hold only the stable one: recorded and removed as experiment
// backendRefs are (locate, lastOf, removeLast), and weighed by
// SetWeights once it is there.

// CanaryInput is what addCanary and RemoveCanary need besides the route.
type CanaryInput struct {
	Stable, Canary routes.ObjectRef
	// Targeting says which rules can be weighted rules.
	Targeting Targeting
	// AddedRefFilters are the backendRef filters the plugin added for any
	// Rollout (stickyCanary's): the copy of the stable backendRef leaves
	// them out.
	AddedRefFilters []map[string]any
}

// StableOnly returns the indexes of the rules t targets that hold one
// backendRef to stable and none to canary.
func StableOnly(ns string, rules []routes.Rule, stable, canary routes.ObjectRef, t Targeting) []int {
	var out []int
	for i, r := range rules {
		if t.Targets(r) && r.CountRefs(ns, stable) == 1 && r.CountRefs(ns, canary) == 0 {
			out = append(out, i)
		}
	}
	return out
}

// addCanary returns rules in which every stable-only rule (StableOnly) ends
// with a copy of its stable backendRef named for the canary, weight 0 (the
// split weighs it), and the record of the canary backendRefs the plugin
// added: those claimed that are still its own, and the new ones. A claimed
// one someone removed is added again with the stable weight first recorded.
func addCanary(route routes.Route, rules []routes.Rule, in CanaryInput, claimed []routes.AddedCanary) ([]routes.Rule, []routes.AddedCanary, []routes.Change) {
	rules = routes.CopyRules(rules)
	ns := route.Namespace
	var kept []routes.AddedCanary
	before := map[string]int64{} // stable weights recorded, by rule name or index
	for _, c := range claimed {
		before[ruleKey(c.Rule, c.RuleName)] = c.StableWeight
		if i := ownCanary(rules, ns, c, in); i >= 0 {
			c.Rule, c.RuleName = i, rules[i].Name()
			kept = append(kept, c)
		}
	}
	var changes []routes.Change
	for _, i := range StableOnly(ns, rules, in.Stable, in.Canary, in.Targeting) {
		rule := rules[i]
		j := rule.LastRef(ns, in.Stable)
		stable := routes.BackendRef(rule.BackendRefs()[j])
		ref := canaryCopy(stable, in)
		refs, _ := rule["backendRefs"].([]any)
		rule["backendRefs"] = append(refs, ref)
		target := routes.BackendRef(ref).Target(ns)
		w, ok := before[ruleKey(i, rule.Name())]
		if !ok {
			w = stable.Weight()
		}
		kept = append(kept, routes.AddedCanary{StableWeight: w, AddedBackend: routes.AddedBackend{Rule: i, RuleName: rule.Name(),
			Group: target.Group, Kind: target.Kind, Namespace: target.Namespace, Name: target.Name}})
		changes = append(changes, routes.Changef(routes.BackendAdded, "rule %d + %s (addCanaryBackendRef)", i, target))
	}
	return rules, kept, changes
}

// RemoveCanary returns rules without the canary backendRefs the plugin added
// (claimed) that are still its own, each rule's stable backendRef back at the
// weight it had before.
func RemoveCanary(route routes.Route, rules []routes.Rule, in CanaryInput, claimed []routes.AddedCanary) ([]routes.Rule, []routes.Change) {
	if len(claimed) == 0 {
		return rules, nil
	}
	rules = routes.CopyRules(rules)
	ns := route.Namespace
	var changes []routes.Change
	for _, c := range claimed {
		if c.Target().Backend() != in.Canary.Backend() {
			continue // not the canary now (ping-pong swapped them): taking it out would leave the rule without its stable
		}
		i := ownCanary(rules, ns, c, in)
		if i < 0 || !removeLast(rules[i], ns, c.Target()) {
			continue // someone removed it: the rule is theirs as they left it
		}
		changes = append(changes, routes.Changef(routes.BackendRemoved, "rule %d − %s (addCanaryBackendRef)", i, c.Target()))
		if j := rules[i].LastRef(ns, in.Stable); j >= 0 {
			if b := rules[i].BackendRefs()[j]; b.Weight() != c.StableWeight {
				changes = append(changes, Change{Rule: i, Backend: b.Target(ns), From: b.Weight(), To: c.StableWeight}.Note())
				b.SetWeight(c.StableWeight)
			}
		}
	}
	return rules, changes
}

// ownCanary is the rule that still holds the canary backendRef c records, or
// -1 when it is gone.
func ownCanary(rules []routes.Rule, ns string, c routes.AddedCanary, in CanaryInput) int {
	weighted, related := map[int]bool{}, map[int]bool{}
	for _, i := range WeightedRules(ns, rules, in.Stable, in.Canary, in.Targeting) {
		weighted[i] = true
	}
	for i, r := range rules {
		related[i] = r.CountRefs(ns, in.Stable) > 0 || r.CountRefs(ns, in.Canary) > 0
	}
	i := locate(rules, ns, c.AddedBackend, weighted, related)
	if i < 0 || rules[i].CountRefs(ns, c.Target()) <= c.Others || lastOf(rules[i], ns, c.Target()) < 0 {
		return -1
	}
	return i
}

// canaryCopy is the stable backendRef named for the canary, with its port,
// group, kind and namespace as stored (defaults included, so the applied
// list equals the stored one), weight 0, and without the plugin's filters.
func canaryCopy(stable routes.BackendRef, in CanaryInput) map[string]any {
	ref := routes.CopyRules([]routes.Rule{routes.Rule(stable)})[0]
	ref["name"] = in.Canary.Name
	ref["weight"] = int64(0)
	if filters, ok := ref["filters"].([]any); ok {
		var own []any
		for _, f := range filters {
			if !isAdded(f, in.AddedRefFilters) {
				own = append(own, f)
			}
		}
		switch {
		case len(own) == len(filters):
		case len(own) == 0:
			delete(ref, "filters")
		default:
			ref["filters"] = own
		}
	}
	return ref
}

func isAdded(f any, added []map[string]any) bool {
	for _, a := range added {
		if reflect.DeepEqual(f, any(a)) {
			return true
		}
	}
	return false
}

func ruleKey(index int, name string) string {
	if name != "" {
		return "name:" + name
	}
	return "index:" + strconv.Itoa(index)
}
