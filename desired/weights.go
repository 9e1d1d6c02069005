package desired

import (
	"github.com/gatewayapi-ssa/rollouts-plugin/experiment"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/transform"
)

// Desired gives the canary its weight, each experiment Service its weight and
// stable the rest, in every weighted rule; experiment backendRefs the Rollout
// added before and no longer asks for leave.
func (c SetWeight) Desired(live routes.Route, env Env) (Result, error) {
	return decide(live, env, c.decide)
}

func (c SetWeight) decide(s state) (Result, error) {
	live := s.live
	rules, weightChanges, err := transform.SetWeights(live, c.Split, s.targeting())
	if err != nil {
		return Result{}, invalid(err)
	}
	exp := c.Experiment
	exp.Targeting = s.targeting()
	rules, backends, expChanges, err := experiment.Apply(live, rules, exp, s.claim.Backends)
	if err != nil {
		return Result{}, invalid(err)
	}
	claim := s.claim
	claim.CanaryWeight, claim.Backends = c.Split.CanaryWeight, backends
	var changes []routes.Change
	for _, ch := range weightChanges {
		changes = append(changes, routes.Changef(routes.WeightChanged, "%s", ch))
	}
	changes = append(changes, expChanges...)
	if c.Sticky != nil || len(s.claim.StickyRules) > 0 || len(s.claim.RefFilters) > 0 {
		if rules, claim, changes, err = c.sticky(s, rules, claim, changes); err != nil {
			return Result{}, err
		}
	}
	claim.Weights = recordWeights(live.Namespace, rules, c.Split, backends, s.targeting())
	if !claim.Active() {
		claim = routes.Claim{} // the Rollout ends here: nothing left to record
	}
	return s.finish(rules, changes, claim, true)
}

// sticky puts the cookie filters and rules of stickyCanary on the rules
// while the canary and stable both have weight, and takes those the claim
// records away otherwise.
func (c SetWeight) sticky(s state, rules []routes.Rule, claim routes.Claim, changes []routes.Change) ([]routes.Rule, routes.Claim, []routes.Change, error) {
	in := transform.StickyInput{Stable: c.Split.Stable, Canary: c.Split.Canary, Targeting: s.targeting(),
		ClaimedRules: s.claim.StickyRules, ClaimedFilters: s.claim.RefFilters,
		AddedFilters: s.claims.AddedFilters(), AddedRefFilters: s.claims.AddedRefFilters()}
	if c.Sticky != nil && c.Split.CanaryWeight > 0 && c.Split.StableWeight() > 0 {
		in.Sticky = c.Sticky
	}
	res, err := transform.SetSticky(s.live, rules, in)
	if err != nil {
		return nil, routes.Claim{}, nil, invalid(err)
	}
	claim.Rules, claim.StickyRules, claim.RefFilters = append(claim.ManagedRules(), res.Claimed...), res.Claimed, res.Filters
	claim, changes = s.recordRules(res.Rules, claim, append(changes, res.Changes...))
	return res.Rules, claim, changes, nil
}
