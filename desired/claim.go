package desired

import (
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/transform"
)

// What a claim records of what the plugin wrote, so that a later call can
// tell a change by another owner from its own (checkConflict).

// recordWeights lists the weights of stable, canary and the experiment
// backends in every weighted rule of the rules as written.
func recordWeights(namespace string, rules []routes.Rule, split transform.Split, backends []routes.AddedBackend, t transform.Targeting) []routes.RecordedWeight {
	targets := []routes.ObjectRef{split.Stable, split.Canary}
	for _, b := range backends {
		targets = append(targets, b.Target())
	}
	var out []routes.RecordedWeight
	for _, i := range transform.WeightedRules(namespace, rules, split.Stable, split.Canary, t) {
		for _, t := range targets {
			if j := rules[i].LastRef(namespace, t); j >= 0 {
				out = append(out, routes.RecordedWeight{Rule: i, RuleName: rules[i].Name(), Service: t.Namespace + "/" + t.Name, Weight: rules[i].BackendRefs()[j].Weight()})
			}
		}
	}
	return out
}

// digestRules records, for each named rule of the view (rules), the digest
// of the rule as stored (stored: the same rules as the call applies them).
func digestRules(rules, stored []routes.Rule, names []string) map[string]string {
	if len(names) == 0 {
		return nil
	}
	out := map[string]string{}
	for i, r := range rules {
		for _, n := range names {
			if r.Name() == n {
				out[n] = routes.RuleDigest(stored[i])
			}
		}
	}
	return out
}
