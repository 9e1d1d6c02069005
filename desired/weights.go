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
	claim.Weights = recordWeights(live.Namespace, rules, c.Split, backends, s.targeting())
	if !claim.Active() {
		claim = routes.Claim{} // the Rollout ends here: nothing left to record
	}
	var changes []string
	for _, ch := range weightChanges {
		changes = append(changes, ch.String())
	}
	return s.finish(rules, append(changes, expChanges...), claim, true)
}
