package routes

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// RecordWeights lists the weights of the given Services in every rule that
// holds both stable and canary: what the plugin records as set by it.
func RecordWeights(namespace string, rules []Rule, stable, canary ObjectRef, others []ObjectRef) []RecordedWeight {
	var out []RecordedWeight
	targets := append([]ObjectRef{stable, canary}, others...)
	for _, i := range ManagedRules(Route{Ref: Ref{Namespace: namespace}, Rules: rules}, stable, canary) {
		for _, t := range targets {
			if j := rules[i].LastRef(namespace, t); j >= 0 {
				out = append(out, RecordedWeight{Rule: i, RuleName: rules[i].Name(), Service: t.Namespace + "/" + t.Name, Weight: rules[i].BackendRefs()[j].Weight()})
			}
		}
	}
	return out
}

// Drift is a value the plugin set that someone else has changed since, and
// that the plugin's next write would change again.
type Drift struct {
	Rule    int
	Service string
	// Set is what the plugin set; Live what the route has now (-1: the
	// backendRef or its rule is gone); Desired what the plugin would set.
	Set, Live, Desired int64
}

func (d Drift) String() string {
	live := fmt.Sprint(d.Live)
	if d.Live < 0 {
		live = "removed"
	}
	return fmt.Sprintf("rule %d Service %s weight: the plugin set %d, now %s, the plugin would set %d", d.Rule, d.Service, d.Set, live, d.Desired)
}

// FindDrift compares what the plugin recorded as set with the live rules and
// the rules it wants: a value someone else changed is drift only if the
// plugin would change it again, so a change that agrees with the plugin
// (e.g. a GitOps sync to the weights the rollout goes back to) is not.
func FindDrift(namespace string, live, desired []Rule, recorded []RecordedWeight) []Drift {
	var out []Drift
	for _, rec := range recorded {
		target := serviceFromKey(rec.Service)
		liveW := weightOf(namespace, live, rec, target)
		if liveW == rec.Weight {
			continue
		}
		desiredW := weightOf(namespace, desired, rec, target)
		if desiredW == liveW {
			continue
		}
		out = append(out, Drift{Rule: rec.Rule, Service: rec.Service, Set: rec.Weight, Live: liveW, Desired: desiredW})
	}
	return out
}

func serviceFromKey(key string) ObjectRef {
	ns, name, _ := strings.Cut(key, "/")
	return ServiceRef(ns, name)
}

// weightOf is the weight of target in the recorded rule, -1 if it is gone.
func weightOf(namespace string, rules []Rule, rec RecordedWeight, target ObjectRef) int64 {
	i := -1
	switch {
	case rec.RuleName != "":
		for k, r := range rules {
			if r.Name() == rec.RuleName {
				i = k
			}
		}
	case rec.Rule < len(rules):
		i = rec.Rule
	}
	if i < 0 {
		return -1
	}
	j := rules[i].LastRef(namespace, target)
	if j < 0 {
		return -1
	}
	return rules[i].BackendRefs()[j].Weight()
}

// RuleDigest is a short digest of a rule's content (JSON with sorted keys).
func RuleDigest(r Rule) string {
	data, _ := json.Marshal(map[string]any(r))
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// DigestRules records the digest of each named rule.
func DigestRules(rules []Rule, names []string) map[string]string {
	if len(names) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, r := range rules {
		for _, n := range names {
			if r.Name() == n {
				out[n] = RuleDigest(r)
			}
		}
	}
	return out
}

// FindRuleDrift lists the rules the plugin added that someone else changed or
// removed since, and that the plugin would change again.
func FindRuleDrift(live, desired []Rule, recorded map[string]string) []string {
	byName := func(rules []Rule, name string) (Rule, bool) {
		for _, r := range rules {
			if r.Name() == name {
				return r, true
			}
		}
		return nil, false
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(recorded)) {
		liveRule, inLive := byName(live, name)
		if inLive && RuleDigest(liveRule) == recorded[name] {
			continue
		}
		desiredRule, inDesired := byName(desired, name)
		if inLive == inDesired && (!inLive || RuleDigest(liveRule) == RuleDigest(desiredRule)) {
			continue // the plugin would leave it as the other owner left it
		}
		if inLive {
			out = append(out, fmt.Sprintf("rule %q: changed since the plugin wrote it", name))
		} else {
			out = append(out, fmt.Sprintf("rule %q: removed since the plugin added it", name))
		}
	}
	return out
}
