package routes

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// Added rules on a CRD without rule names (the standard channel before
// Gateway API v1.4) are written without a name. The claim still gives each
// one the name it would have had (Claim.Rules), lists it among Claim.Unnamed,
// and records a digest of the rule as stored (Claim.RuleDigests): that digest
// is how the plugin finds the rule again, never its shape or its place. A
// user's rule that only looks like it (the same matches, other backends or
// filters) has another digest and is never taken for it; one that is equal
// byte for byte is indistinguishable from it, and taking either away leaves
// the same rules.
//
// Every decision works on a view of the route in which those rules carry
// their names (Claims.Named), so that the transforms know added rules by name
// as on any other route; what a call applies leaves the names out again.

// RuleDigest is a short digest of a rule's content (JSON with sorted keys).
func RuleDigest(r Rule) string {
	data, _ := json.Marshal(map[string]any(r))
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// Named is the route as decisions see it: each rule the claims list as added
// without a name carries that name again. located are the names found; a
// name whose rule is gone or was changed by someone else (its digest no
// longer matches any unnamed rule) is not. The route is not changed; the
// view shares every rule but the named ones with it.
func (c Claims) Named(r Route) (Route, map[string]bool, error) {
	var located map[string]bool
	var digests []string // of the route's unnamed rules, computed once
	for _, key := range slices.Sorted(maps.Keys(c)) {
		claim := c[key]
		for _, name := range claim.Unnamed {
			if i := slices.IndexFunc(r.Rules, func(rule Rule) bool { return rule.Name() == name }); i >= 0 {
				return Route{}, nil, fmt.Errorf("%s: rule %d is named %q, the name the plugin gave a rule it added without a name for rollout %s; rename rule %d", r.Ref, i, name, key, i)
			}
			if digests == nil {
				digests = make([]string, len(r.Rules))
				for i, rule := range r.Rules {
					if _, hasName := rule["name"]; !hasName {
						digests[i] = RuleDigest(rule)
					}
				}
			}
			want := claim.RuleDigests[name]
			// The last equal rule: the plugin puts the rules it adds after the user's.
			for i := len(r.Rules) - 1; i >= 0; i-- {
				if want == "" || digests[i] != want {
					continue
				}
				if located == nil {
					located = map[string]bool{}
					r.Rules = slices.Clone(r.Rules)
				}
				rule := maps.Clone(r.Rules[i])
				rule["name"] = name
				r.Rules[i] = rule
				digests[i] = "" // taken
				located[name] = true
				break
			}
		}
	}
	return r, located, nil
}
