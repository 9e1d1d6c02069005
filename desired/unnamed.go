package desired

import (
	"maps"
	"reflect"
	"slices"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// Decisions see the rules the plugin added without a name under their names
// (state.live, routes.Claims.Named); what a call applies is stored: those
// names left out again.

// store is the rules as the call applies them (index for index the rules of
// the view), and the added rules they hold without a name. An added rule
// goes without its name where the CRD has no rule names, and where it is the
// rule the route held without a name and the call leaves it as it is: the
// plugin does not rename a rule only because the CRDs were upgraded.
func (s state) store(rules []routes.Rule, claim routes.Claim) ([]routes.Rule, map[string]bool) {
	if !s.live.Schema.LacksRuleNames && len(s.located) == 0 {
		return rules, nil
	}
	claimed := map[string]bool{}
	for key, c := range s.claims {
		if key != s.env.Rollout {
			for _, n := range c.Rules {
				claimed[n] = true
			}
		}
	}
	for _, n := range claim.Rules {
		claimed[n] = true
	}
	var out []routes.Rule
	unnamed := map[string]bool{}
	for i, r := range rules {
		n := r.Name()
		if n == "" || !claimed[n] {
			continue
		}
		if !s.live.Schema.LacksRuleNames && !(s.located[n] && reflect.DeepEqual(map[string]any(s.viewRule(n)), map[string]any(r))) {
			continue
		}
		if out == nil {
			out = slices.Clone(rules)
		}
		stripped := maps.Clone(r)
		delete(stripped, "name")
		out[i] = stripped
		unnamed[n] = true
	}
	if out == nil {
		return rules, nil
	}
	return out, unnamed
}

// viewRule is the rule of the view with the given name, nil if none.
func (s state) viewRule(name string) routes.Rule {
	for _, r := range s.live.Rules {
		if r.Name() == name {
			return r
		}
	}
	return nil
}

// unnamedAfter are the Rollout's added rules (names) stored without a name
// after the call: those the rules hold without one, and those the claim
// listed that are no longer on the route (so that a rule someone else names
// that way later is never taken for the plugin's).
func (s state) unnamedAfter(rules []routes.Rule, names []string, unnamed map[string]bool) []string {
	var out []string
	for _, n := range names {
		present := slices.ContainsFunc(rules, func(r routes.Rule) bool { return r.Name() == n })
		if unnamed[n] || (!present && slices.Contains(s.claim.Unnamed, n)) {
			out = append(out, n)
		}
	}
	return out
}

// withoutNames says, in the changes of a call, which rules it writes
// without a name.
func withoutNames(changes []routes.Change, unnamed map[string]bool) []routes.Change {
	if len(unnamed) == 0 {
		return changes
	}
	out := slices.Clone(changes)
	for i, c := range out {
		if (c.Kind == routes.RuleAdded || c.Kind == routes.RuleChanged) && unnamed[c.Rule] {
			out[i].Text += " (without a name: the CRD has no rule names)"
		}
	}
	return out
}
