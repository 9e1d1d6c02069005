package desired

import (
	"fmt"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/transform"
)

// Undo takes back everything a Rollout's claim records on a route, for a
// Rollout that is gone: in every rule it set weights in, the canary gets 0
// and stable the share the split had; the experiment and canary backendRefs
// (the stable one back at its weight before), rules and mirror filters it
// added go; the claim goes. Nothing else is touched: only
// the rules the claim names, whatever ruleName the Rollout had, and the
// plugin's labels stay as they are while another Rollout still has a claim.
type Undo struct{}

// Desired takes the Rollout's claim back.
func (Undo) Desired(live routes.Route, env Env) (Result, error) {
	s, err := read(live, env, true)
	if err != nil {
		return Result{}, err
	}
	return Undo{}.decide(s)
}

func (Undo) decide(s state) (Result, error) {
	live := s.live
	rules := routes.CopyRules(live.Rules)
	var changes []routes.Change
	split, err := recordedSplit(live.Namespace, s.claim.Weights)
	if err != nil {
		return Result{}, invalid(routes.RouteError(live.Ref, err))
	}
	for _, w := range s.claim.Weights {
		i := routes.LocateRule(rules, w.Rule, w.RuleName)
		if i < 0 {
			continue // the rule is gone: nothing of the Rollout's is left in it
		}
		target := serviceFromKey(w.Service)
		want := int64(-1)
		switch target {
		case split.stable:
			want = split.total[ruleKey(w)]
		case split.canary:
			want = 0
		}
		j := rules[i].LastRef(live.Namespace, target)
		if want < 0 || j < 0 {
			continue // an experiment backend (removed below), or a ref someone removed
		}
		if b := rules[i].BackendRefs()[j]; b.Weight() != want {
			changes = append(changes, transform.Change{Rule: i, Backend: b.Target(live.Namespace), From: b.Weight(), To: want}.Note())
			b.SetWeight(want)
		}
	}
	var canaryChanges []routes.Change
	rules, canaryChanges = transform.RemoveCanary(live, rules, transform.CanaryInput{Stable: split.stable, Canary: split.canary, Targeting: transform.Targeting{Added: s.added}}, s.claim.CanaryRefs)
	changes = append(changes, canaryChanges...)
	if len(s.claim.Backends) > 0 {
		in := transform.ExperimentInput{RolloutNamespace: split.stable.Namespace, Stable: split.stable, Canary: split.canary, Targeting: transform.Targeting{Added: s.added}}
		var expChanges []routes.Change
		if rules, _, expChanges, err = transform.SetExperimentRefs(live, rules, in, s.claim.Backends); err != nil {
			return Result{}, invalid(err)
		}
		changes = append(changes, expChanges...)
	}
	res := transform.RemoveAddedRules(routes.Route{Ref: live.Ref, Rules: rules}, s.claim.Rules)
	rules, filterChanges := transform.RemoveMirrorFilters(res.Rules, s.claim.MirrorFilters)
	rules, refChanges := transform.RemoveRefFilters(live.Namespace, rules, s.claim.RefFilters)
	filterChanges = append(filterChanges, refChanges...)
	s.env.InProgressLabel = ownedLabels(live, s.owned.Labels)
	return s.finish(rules, append(append(changes, res.Changes...), filterChanges...), routes.Claim{}, true)
}

// ownedLabels are the labels the plugin applies on the route now (owned,
// the keys it owns), with their values: another Rollout's in-progress label,
// whose key this call cannot know, stays as it is.
func ownedLabels(live routes.Route, owned []string) map[string]string {
	out := map[string]string{}
	for _, k := range owned {
		if v, ok := live.Labels[k]; ok {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// split is what a claim's recorded weights say about the Rollout's split.
type split struct {
	stable, canary routes.ObjectRef
	// total is, per recorded rule, the weight the split shared out.
	total map[string]int64
}

// recordedSplit reads stable, canary and the split's total per rule from the
// recorded weights: SetWeight records, per weighted rule, stable first, then
// canary, then the experiment backends (transform.RecordWeights).
func recordedSplit(namespace string, recorded []routes.RecordedWeight) (split, error) {
	s := split{total: map[string]int64{}}
	seen := map[string]int{}
	for _, w := range recorded {
		k := ruleKey(w)
		switch seen[k] {
		case 0:
			s.stable = serviceFromKey(w.Service)
		case 1:
			s.canary = serviceFromKey(w.Service)
		}
		seen[k]++
		s.total[k] += w.Weight
	}
	for k, n := range seen {
		if n < 2 {
			return split{}, fmt.Errorf("the claim's weights for rule %s name no canary; remove the claim by hand", k)
		}
	}
	return s, nil
}

func ruleKey(w routes.RecordedWeight) string {
	if w.RuleName != "" {
		return w.RuleName
	}
	return fmt.Sprint(w.Rule)
}
