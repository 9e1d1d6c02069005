package transform

import "github.com/gatewayapi-ssa/rollouts-plugin/routes"

// WeighInput is one SetWeight call's view of one route, built once by the
// decision: everything Weigh needs.
type WeighInput struct {
	// Live is the route as the decision sees it.
	Live  routes.Route
	Split Split
	// Experiment are the experiment Services the call asks for; Weigh gives
	// it Targeting.
	Experiment ExperimentInput
	// Targeting says which rules can be weighted rules.
	Targeting Targeting
	// CanaryRefs and Backends are what the Rollout's claim records of the
	// canary backendRefs (addCanaryBackendRef) and the experiment
	// backendRefs the plugin added.
	CanaryRefs []routes.AddedCanary
	Backends   []routes.AddedBackend
	// AddedRefFilters are the backendRef filters the plugin added for any
	// Rollout (CanaryInput).
	AddedRefFilters []map[string]any
	// Ends says the call ends the rollout on the route: no canary weight, no
	// experiment.
	Ends bool
	// AddCanaryBackendRef lets the call add the canary backendRef to the
	// rules that hold only the stable one (addCanary).
	AddCanaryBackendRef bool
	// StickyNext says a sticky step (SetSticky) changes the rules after
	// Weigh: the weights are recorded on its rules (RecordWeights), and
	// Weigh records none.
	StickyNext bool
}

// WeighResult is what Weigh makes of the route.
type WeighResult struct {
	Rules []routes.Rule
	// CanaryRefs and Backends are the new records of the canary and the
	// experiment backendRefs the plugin added.
	CanaryRefs []routes.AddedCanary
	Backends   []routes.AddedBackend
	// Changes say what differs, for the write's log line: the canary
	// backendRefs added or removed, the weights, the experiment backendRefs.
	Changes []routes.Change
	// Weights are the weights of the weighted rules as written
	// (RecordWeights); none with StickyNext.
	Weights []routes.RecordedWeight
}

// Weigh does SetWeight's rule work on one route, in this order: the canary
// backendRefs addCanaryBackendRef adds while the canary or an experiment has
// weight, or takes away when the call ends the rollout (addCanary,
// RemoveCanary); the split on the weighted rules (SetWeights), nothing to
// weigh when a call that ends the rollout finds only rules that hold the
// stable backendRef alone; the experiment backendRefs (SetExperimentRefs);
// and the record of the weights written (RecordWeights).
func Weigh(in WeighInput) (WeighResult, error) {
	routed, canaryRefs, changes := in.canaryRefs()
	rules, weightChanges, err := SetWeights(routed, in.Split, in.Targeting)
	if err != nil && !in.endsOnStableOnly(routed) {
		return WeighResult{}, err
	} else if err != nil {
		rules = routed.Rules // the canary's backendRefs are gone: nothing to weigh
	}
	exp := in.Experiment
	exp.Targeting = in.Targeting
	rules, backends, expChanges, err := SetExperimentRefs(in.Live, rules, exp, in.Backends)
	if err != nil {
		return WeighResult{}, err
	}
	changes = append(changes, notes(weightChanges)...)
	changes = append(changes, expChanges...)
	res := WeighResult{Rules: rules, CanaryRefs: canaryRefs, Backends: backends, Changes: changes}
	if !in.StickyNext {
		res.Weights = RecordWeights(in.Live.Namespace, rules, in.Split, backends, in.Targeting)
	}
	return res, nil
}

// canaryRefs is the live route with the canary backendRefs
// addCanaryBackendRef adds while the canary or an experiment has weight, or
// without those the claim records when the call ends the rollout; and their
// record.
func (in WeighInput) canaryRefs() (routes.Route, []routes.AddedCanary, []routes.Change) {
	c := CanaryInput{Stable: in.Split.Stable, Canary: in.Split.Canary, Targeting: in.Targeting, AddedRefFilters: in.AddedRefFilters}
	routed := in.Live
	var changes []routes.Change
	switch {
	case in.Ends:
		routed.Rules, changes = RemoveCanary(in.Live, in.Live.Rules, c, in.CanaryRefs)
		return routed, nil, changes
	case in.AddCanaryBackendRef:
		var refs []routes.AddedCanary
		routed.Rules, refs, changes = addCanary(in.Live, in.Live.Rules, c, in.CanaryRefs)
		return routed, refs, changes
	}
	return routed, in.CanaryRefs, nil
}

// endsOnStableOnly says a call that ends the rollout finds, with
// addCanaryBackendRef, only rules that hold the stable backendRef alone:
// there is no weight to set.
func (in WeighInput) endsOnStableOnly(routed routes.Route) bool {
	s, t := in.Split, in.Targeting
	return in.Ends && (in.AddCanaryBackendRef || len(in.CanaryRefs) > 0) &&
		len(WeightedRules(routed.Namespace, routed.Rules, s.Stable, s.Canary, t)) == 0 &&
		len(StableOnly(routed.Namespace, routed.Rules, s.Stable, s.Canary, t)) > 0
}

// RecordWeights lists the weights of stable, canary and the experiment
// backends in every weighted rule of the rules as written: what a claim
// records, so that a later call can tell a change by another owner from its
// own.
func RecordWeights(namespace string, rules []routes.Rule, split Split, backends []routes.AddedBackend, t Targeting) []routes.RecordedWeight {
	targets := []routes.ObjectRef{split.Stable, split.Canary}
	for _, b := range backends {
		targets = append(targets, b.Target())
	}
	var out []routes.RecordedWeight
	for _, i := range WeightedRules(namespace, rules, split.Stable, split.Canary, t) {
		for _, t := range targets {
			if j := rules[i].LastRef(namespace, t); j >= 0 {
				out = append(out, routes.RecordedWeight{Rule: i, RuleName: rules[i].Name(), Service: t.Namespace + "/" + t.Name, Weight: rules[i].BackendRefs()[j].Weight()})
			}
		}
	}
	return out
}
