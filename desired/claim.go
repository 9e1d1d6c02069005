package desired

import "github.com/gatewayapi-ssa/rollouts-plugin/routes"

// What a claim records of what the plugin wrote, so that a later call can
// tell a change by another owner from its own (checkConflict); the weights
// are recorded by transform.RecordWeights.

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
