package rollout

import (
	"errors"
	"fmt"
	"slices"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/transform"
)

// Decoding the controller's calls into the core's typed values: each call is
// validated once, here, before any route is read (Decode).

// validateSplit checks a SetWeight or VerifyWeight call and returns the split
// it asks for: the canary weight within maxTrafficWeight, each experiment
// Service named once with a weight of 0 or more, and room left for stable.
func validateSplit(ro *v1alpha1.Rollout, weight int32, additional []v1alpha1.WeightDestination) (transform.Split, error) {
	stable, canary, err := rolloutServices(ro)
	if err != nil {
		return transform.Split{}, err
	}
	if ro.Spec.Strategy.Canary.TrafficRouting == nil {
		return transform.Split{}, errors.New("spec.strategy.canary.trafficRouting is not set")
	}
	max := int64(100)
	if m := ro.Spec.Strategy.Canary.TrafficRouting.MaxTrafficWeight; m != nil {
		max = int64(*m)
	}
	if max < 1 || max > transform.MaxBackendWeight {
		return transform.Split{}, fmt.Errorf("spec.strategy.canary.trafficRouting.maxTrafficWeight %d is outside 1..%d (Gateway API's largest weight); nothing was written", max, transform.MaxBackendWeight)
	}
	split := transform.Split{
		Stable:       routes.ServiceRef(ro.Namespace, stable),
		Canary:       routes.ServiceRef(ro.Namespace, canary),
		CanaryWeight: int64(weight),
		MaxWeight:    max,
	}
	seen := map[string]bool{}
	var entry error // the first additionalDestinations entry that is wrong
	for _, d := range additional {
		if entry = destinationError(d, seen); entry != nil {
			break
		}
		seen[d.ServiceName] = true
		split.Reserved += int64(d.Weight)
	}
	// One check: a canary weight out of range is reported first, then a
	// wrong entry, then weights that exceed maxTrafficWeight.
	var refused *transform.SplitError
	switch err := split.Check(); {
	case err != nil && !(errors.As(err, &refused) && refused.Exceeds):
		return transform.Split{}, err
	case entry != nil:
		return transform.Split{}, entry
	case err != nil:
		return transform.Split{}, fmt.Errorf("%w; nothing was written", err)
	}
	return split, nil
}

// destinationError says what is wrong with an additionalDestinations entry:
// no Service name or not one, a negative weight, a Service named before
// (seen).
func destinationError(d v1alpha1.WeightDestination, seen map[string]bool) error {
	switch {
	case d.ServiceName == "":
		return fmt.Errorf("additionalDestinations has an entry (weight %d) with no Service name: Argo Rollouts creates no Service for an experiment template whose pod template has no container port; give the template's container a port", d.Weight)
	case notALabel(d.ServiceName) != "":
		return fmt.Errorf("additionalDestinations: experiment Service %q is not a Service name (a DNS-1123 label): %s", d.ServiceName, notALabel(d.ServiceName))
	case d.Weight < 0:
		return fmt.Errorf("experiment Service %s has negative weight %d", d.ServiceName, d.Weight)
	case seen[d.ServiceName]:
		return fmt.Errorf("experiment Service %s is listed twice in additionalDestinations", d.ServiceName)
	}
	return nil
}

// setWeight decodes SetWeight(weight, additional). An experiment step
// needs the ports of the Services it names, which the orchestrator reads
// before any route (orchestrator.ReadPorts): here each experiment Service
// is a name and a weight.
func setWeight(ro *v1alpha1.Rollout, weight int32, additional []v1alpha1.WeightDestination) (desired.SetWeight, error) {
	split, err := validateSplit(ro, weight, additional)
	if err != nil {
		return desired.SetWeight{}, &StepError{err}
	}
	in := transform.ExperimentInput{RolloutNamespace: ro.Namespace, Stable: split.Stable, Canary: split.Canary}
	for _, d := range additional {
		in.Destinations = append(in.Destinations, transform.ExperimentDestination{Service: d.ServiceName, Weight: int64(d.Weight)})
	}
	return desired.SetWeight{Split: split, Experiment: in}, nil
}

// setHeader decodes SetHeaderRoute. A step that adds rules needs a
// route that takes them (checked when s, the Rollout's parsed config, is
// given).
func setHeader(ro *v1alpha1.Rollout, h *v1alpha1.SetHeaderRoute, s *Settings) (desired.SetHeader, error) {
	adding := len(h.Match) > 0
	services, err := ruleServices(ro, "setHeaderRoute", h.Name, adding)
	if err != nil {
		return desired.SetHeader{}, err
	}
	if adding && s != nil && !s.anyTakesHeaderRoutes() {
		return desired.SetHeader{}, errors.New("no HTTPRoute or GRPCRoute of the Rollout takes header routes: name one with httpRoute or grpcRoute, or list it under httpRoutes or grpcRoutes with useHeaderRoutes: true, or set selectedRoutesUseHeaderRoutes: true for routes found by a selector; nothing was written")
	}
	call := desired.SetHeader{Name: h.Name, Rules: services}
	for _, m := range h.Match {
		call.Match = append(call.Match, transform.HeaderMatch{Name: m.HeaderName, Value: stringMatch(m.HeaderValue)})
	}
	if err := transform.CheckHeaderMatches(call.Match); err != nil {
		return desired.SetHeader{}, invalidStep("setHeaderRoute", h.Name, err)
	}
	return call, nil
}

// invalidStep says a step's values are wrong before any route is read, in
// the core's words for input to fix.
func invalidStep(step, name string, err error) error {
	return &desired.InvalidError{Err: fmt.Errorf("%s %q: %w; fix the step in the Rollout, nothing was written", step, name, err)}
}

// setMirror decodes SetMirrorRoute.
func setMirror(ro *v1alpha1.Rollout, m *v1alpha1.SetMirrorRoute) (desired.SetMirror, error) {
	call := desired.SetMirror{Name: m.Name, Percent: m.Percentage}
	for _, rm := range m.Match {
		match := transform.RequestMatch{Method: stringMatch(rm.Method), Path: stringMatch(rm.Path)}
		for name, v := range rm.Headers {
			if match.Headers == nil {
				match.Headers = map[string]transform.StringMatch{}
			}
			match.Headers[name] = *stringMatch(&v)
		}
		call.Match = append(call.Match, match)
	}
	if err := transform.CheckMirrorPercent(m.Percentage); err != nil {
		return desired.SetMirror{}, invalidStep("setMirrorRoute", m.Name, err)
	}
	if err := transform.CheckRequestMatches(call.Match); err != nil {
		return desired.SetMirror{}, invalidStep("setMirrorRoute", m.Name, err)
	}
	services, err := ruleServices(ro, "setMirrorRoute", m.Name, len(call.Match) > 0 && (m.Percentage == nil || *m.Percentage != 0))
	call.Rules = services
	return call, err
}

func stringMatch(s *v1alpha1.StringMatch) *transform.StringMatch {
	if s == nil {
		return nil
	}
	return &transform.StringMatch{Exact: s.Exact, Prefix: s.Prefix, Regex: s.Regex}
}

// ruleServices is what the header and mirror transforms need from the
// Rollout. A step that adds a rule must name one of the Rollout's
// managedRoutes (Argo Rollouts validates that too) and needs the stable and
// canary Services; one that removes needs neither.
func ruleServices(ro *v1alpha1.Rollout, step, name string, adding bool) (transform.RolloutServices, error) {
	tr := ro.Spec.Strategy.Canary
	if tr == nil || tr.TrafficRouting == nil {
		return transform.RolloutServices{}, errors.New("spec.strategy.canary.trafficRouting is not set")
	}
	var in transform.RolloutServices
	for _, r := range tr.TrafficRouting.ManagedRoutes {
		in.ManagedRoutes = append(in.ManagedRoutes, r.Name)
	}
	if name == "" {
		return in, fmt.Errorf("the %s step has no name", step)
	}
	if !adding {
		return in, nil
	}
	if !slices.Contains(in.ManagedRoutes, name) {
		return in, fmt.Errorf("%s %q is not listed in spec.strategy.canary.trafficRouting.managedRoutes %v; add it there", step, name, in.ManagedRoutes)
	}
	stable, canary, err := rolloutServices(ro)
	if err != nil {
		return in, err
	}
	in.Stable, in.Canary = routes.ServiceRef(ro.Namespace, stable), routes.ServiceRef(ro.Namespace, canary)
	return in, nil
}
