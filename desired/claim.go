package desired

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// What a claim records of what the plugin wrote, so that a later call can
// tell a change by another owner from its own (checkConflict).

// recordWeights lists the weights of stable, canary and the experiment
// backends in every weighted rule of the rules as written.
func recordWeights(namespace string, rules []routes.Rule, split routes.Split, backends []routes.AddedBackend, t routes.Targeting) []routes.RecordedWeight {
	targets := []routes.ObjectRef{split.Stable, split.Canary}
	for _, b := range backends {
		targets = append(targets, b.Target())
	}
	var out []routes.RecordedWeight
	for _, i := range routes.WeightedRules(namespace, rules, split.Stable, split.Canary, t) {
		for _, t := range targets {
			if j := rules[i].LastRef(namespace, t); j >= 0 {
				out = append(out, routes.RecordedWeight{Rule: i, RuleName: rules[i].Name(), Service: t.Namespace + "/" + t.Name, Weight: rules[i].BackendRefs()[j].Weight()})
			}
		}
	}
	return out
}

// ruleDigest is a short digest of a rule's content (JSON with sorted keys).
func ruleDigest(r routes.Rule) string {
	data, _ := json.Marshal(map[string]any(r))
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// digestRules records the digest of each named rule as written.
func digestRules(rules []routes.Rule, names []string) map[string]string {
	if len(names) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, r := range rules {
		for _, n := range names {
			if r.Name() == n {
				out[n] = ruleDigest(r)
			}
		}
	}
	return out
}
