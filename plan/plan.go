package plan

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	corev1 "k8s.io/api/core/v1"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/kube"
	"github.com/gatewayapi-ssa/rollouts-plugin/orchestrator"
	"github.com/gatewayapi-ssa/rollouts-plugin/rollout"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// Input is what a plan needs.
type Input struct {
	Rollout *v1alpha1.Rollout
	// Process is the plugin's: its -plugin-name, -field-manager, route
	// clusters and -require-reference-grants.
	Process rollout.Process
	// Reader reads the Rollout's routes as they are now.
	Reader kube.Reader
	// Services reads the ports of the Services in the Rollout's namespace;
	// experiment Services, which do not exist yet, are made up from the
	// experiment templates.
	Services kube.Services
}

// Plan is every step of a Rollout with what it does to each route.
type Plan struct {
	Rollout string       `json:"rollout"`
	Routes  []routes.Ref `json:"-"`
	Steps   []Step       `json:"steps"`
	// Problems are what would fail, step by step; none means the rollout's
	// writes pass (as far as this plan and its checks can tell).
	Problems []Problem `json:"problems"`
	// MissingGrants are the ReferenceGrants the routes' namespaces lack for
	// the Rollout: without them the plugin reads nothing there, and the
	// plan plans no step.
	MissingGrants []Manifest `json:"missingGrants,omitempty"`
	// After is each route at the end of each step, for checks against the
	// apiserver; not shown.
	After [][]routes.Route `json:"-"`
	// Writes is each route after each call that wrote it, in the order the
	// controller's calls come: what the apiserver will see, write by write.
	Writes []Write `json:"-"`
	// reported are the route errors already in Problems: a route that fails
	// the same way at every later step is listed once, at the first.
	reported map[string]bool
}

// Write is one call's write to one route.
type Write struct {
	Step  string
	Call  string
	Route routes.Route
}

// Step is one step and what it does to each route.
type Step struct {
	// Index is the step's 1-based index in spec.strategy.canary.steps; 0 for
	// the promotion and the abort.
	Index  int         `json:"index"`
	Name   string      `json:"step"`
	Calls  []string    `json:"calls"`
	Routes []RouteStep `json:"routes"`
}

// RouteStep is what one step does to one route.
type RouteStep struct {
	Route     string   `json:"route"`
	Changes   []string `json:"changes,omitempty"`
	Unchanged bool     `json:"unchanged"`
	Error     string   `json:"error,omitempty"`
	// Unchecked are the parents that could not say whether they carry
	// what the step adds (their classes publish no features, or the input
	// holds no Gateway or GatewayClass for them): written unchecked.
	Unchecked []string `json:"unchecked,omitempty"`
}

// Problem is one thing that would fail.
type Problem struct {
	Step   string `json:"step"`
	Route  string `json:"route,omitempty"`
	Reason string `json:"reason"`
}

// state is where the rollout is: the last weight, the experiment's
// destinations, and the routes as the steps so far left them.
type state struct {
	weight int32
	dests  []v1alpha1.WeightDestination
	live   []routes.Route
}

// call is one call the controller makes, as the plugin decodes it, and
// the error of that, if any.
type call struct {
	rollout.Call
	err error
}

// Compute plans every step of the Rollout's canary strategy, then its
// promotion and, from the last step, an abort.
func Compute(ctx context.Context, in Input) Plan {
	// The plan walks the steps from the start: a Rollout read from a
	// cluster mid-abort or mid-promotion is planned as if it were not (the
	// plugin does nothing for header and mirror steps then).
	ro := in.Rollout.DeepCopy()
	ro.Status.Abort, ro.Status.PromoteFull = false, false
	p := Plan{Rollout: ro.Namespace + "/" + ro.Name}
	settings, err := rollout.ParseConfig(ro, in.Process.PluginName)
	if err != nil {
		p.Problems = append(p.Problems, Problem{Step: "config", Reason: err.Error()})
		return p
	}
	if !in.Process.AnyNamespace && !p.granted(ctx, in.Reader, ro.Namespace, settings.Targets) {
		return p // the plugin reads nothing of those namespaces: neither does the plan
	}
	live, err := kube.Resolve(ctx, in.Reader, settings.Targets)
	if err != nil {
		p.Problems = append(p.Problems, Problem{Step: "routes", Reason: err.Error()})
	}
	for _, r := range live {
		p.Routes = append(p.Routes, r.Ref)
	}
	p.walk(ctx, in, ro, live)
	return p
}

// granted says whether the namespaces of the targets grant the Rollout's
// namespace their routes; where they do not, the refusals are the plan's
// problems and its MissingGrants the ReferenceGrants that would grant them.
func (p *Plan) granted(ctx context.Context, reader kube.Reader, namespace string, targets routes.Targets) bool {
	refused, err := kube.Reach(ctx, reader, namespace, targets)
	if err != nil {
		p.Problems = append(p.Problems, Problem{Step: "ReferenceGrants", Reason: err.Error()})
		return false
	}
	for _, e := range refused {
		p.Problems = append(p.Problems, Problem{Step: "ReferenceGrants", Reason: e.Error()})
	}
	if len(refused) > 0 {
		p.MissingGrants = grantsFor(refused)
		return false
	}
	return true
}

// walk runs the Rollout's steps on the live routes, in order, then the
// promotion, and the abort from where the last step left the routes.
func (p *Plan) walk(ctx context.Context, in Input, ro *v1alpha1.Rollout, live []routes.Route) {
	st := state{live: live}
	services := experimentServices(ro, in.Services)
	decoded := func(ro *v1alpha1.Rollout, l rollout.Label) call {
		c, err := rollout.Decode(in.Process, ro, l)
		if err == nil {
			c, err = orchestrator.ReadPorts(ctx, services, c)
		}
		return call{Call: c, err: err}
	}
	setWeight := func(ro *v1alpha1.Rollout, w int32, dests []v1alpha1.WeightDestination) call {
		return decoded(ro, rollout.Label{Method: rollout.SetWeight, Weight: w, Additional: dests})
	}
	for i, s := range ro.Spec.Strategy.Canary.Steps {
		name, calls := stepCalls(ro, s, &st, decoded, setWeight)
		p.run(ctx, in, &st, Step{Index: i + 1, Name: name}, calls)
	}
	last := state{weight: st.weight, dests: st.dests, live: slices.Clone(st.live)}
	// All steps done: the canary takes all traffic until it is the stable version.
	st.dests = nil
	p.run(ctx, in, &st, Step{Name: "promotion: every step done"}, []call{setWeight(ro, maxWeight(ro), nil)})
	promoted := promote(ro)
	remove := rollout.Label{Method: rollout.RemoveManagedRoutes}
	p.run(ctx, in, &st, Step{Name: "promotion: the new version is stable"}, []call{decoded(promoted, remove), setWeight(promoted, 0, nil)})
	p.run(ctx, in, &last, Step{Name: "abort (from the last step)"}, []call{decoded(ro, remove), setWeight(ro, 0, nil)})
}

// stepCalls are the calls the controller makes while step s (index i) is
// the current step, as rollout/trafficrouting.go makes them: a header or
// mirror call if the step is one, then SetWeight with the last setWeight and
// the experiment's weighted templates.
func stepCalls(ro *v1alpha1.Rollout, s v1alpha1.CanaryStep, st *state, decoded func(*v1alpha1.Rollout, rollout.Label) call,
	setWeight func(*v1alpha1.Rollout, int32, []v1alpha1.WeightDestination) call) (string, []call) {
	st.dests = nil
	var calls []call
	name := "pause"
	switch {
	case s.SetWeight != nil:
		st.weight = *s.SetWeight
		name = fmt.Sprintf("setWeight %d", *s.SetWeight)
	case s.Experiment != nil:
		var parts []string
		for _, t := range s.Experiment.Templates {
			if t.Weight != nil {
				st.dests = append(st.dests, v1alpha1.WeightDestination{ServiceName: experimentService(ro, t), Weight: *t.Weight})
				parts = append(parts, fmt.Sprintf("%s %d", t.Name, *t.Weight))
			}
		}
		name = "experiment " + strings.Join(parts, ", ")
	case s.SetHeaderRoute != nil:
		name = "setHeaderRoute " + s.SetHeaderRoute.Name
		calls = append(calls, decoded(ro, rollout.Label{Method: rollout.SetHeaderRoute, Header: s.SetHeaderRoute}))
	case s.SetMirrorRoute != nil:
		name = "setMirrorRoute " + s.SetMirrorRoute.Name
		calls = append(calls, decoded(ro, rollout.Label{Method: rollout.SetMirrorRoute, Mirror: s.SetMirrorRoute}))
	case s.Analysis != nil:
		name = "analysis"
	case s.SetCanaryScale != nil:
		name = "setCanaryScale"
	case s.Pause != nil && s.Pause.Duration != nil:
		name = "pause " + s.Pause.Duration.String()
	}
	return name, append(calls, setWeight(ro, st.weight, st.dests))
}

// run carries out a step's calls on every route and records what they do.
// As in the plugin, a call that fails on one route writes no route.
func (p *Plan) run(ctx context.Context, in Input, st *state, step Step, calls []call) {
	routeSteps := make([]RouteStep, len(st.live))
	for i, live := range st.live {
		routeSteps[i] = RouteStep{Route: live.Ref.String(), Unchanged: true}
	}
	for _, c := range calls {
		name := c.Label.String()
		step.Calls = append(step.Calls, name)
		if c.err != nil {
			p.Problems = append(p.Problems, Problem{Step: stepLabel(step), Reason: name + ": " + c.err.Error()})
			continue
		}
		if results, ok := p.decide(ctx, in, st, step, c, routeSteps); ok {
			p.record(in, st, step, name, results, routeSteps)
		}
	}
	after := make([]routes.Route, len(st.live))
	for i, live := range st.live {
		after[i] = live.DeepCopy()
	}
	step.Routes = routeSteps
	p.Steps = append(p.Steps, step)
	p.After = append(p.After, after)
}

// decide decides call c on every route as the plugin would; not ok when it
// fails on any, each failure in its route's step and, the first time a
// route fails that way, among the problems.
func (p *Plan) decide(ctx context.Context, in Input, st *state, step Step, c call, routeSteps []RouteStep) (results []desired.Result, ok bool) {
	name := c.Label.String()
	results = make([]desired.Result, len(st.live))
	ok = true
	for i, live := range st.live {
		r, err := orchestrator.Decide(ctx, in.Reader, c.Intent, live, orchestrator.EnvOf(c.Call, live.Ref))
		if err != nil {
			ok = false
			routeSteps[i].Error = name + ": " + err.Error()
			if key := live.Ref.String() + "\x00" + err.Error(); !p.reported[key] {
				if p.reported == nil {
					p.reported = map[string]bool{}
				}
				p.reported[key] = true
				p.Problems = append(p.Problems, Problem{Step: stepLabel(step), Route: live.Ref.String(), Reason: routeSteps[i].Error + " (listed at the first step it fails)"})
			}
		}
		results[i] = r
	}
	return results, ok
}

// record applies the results of call name to the routes as the plugin
// would write them, notes in each route's step what changed and what it
// could not check, and adds each write to the plan's Writes.
func (p *Plan) record(in Input, st *state, step Step, name string, results []desired.Result, routeSteps []RouteStep) {
	for i, r := range results {
		for _, u := range r.Unchecked {
			if !slices.Contains(routeSteps[i].Unchecked, u.String()) {
				routeSteps[i].Unchecked = append(routeSteps[i].Unchecked, u.String())
			}
		}
		if !r.Unchanged {
			routeSteps[i].Unchanged = false
			for _, c := range r.Changes {
				if !slices.Contains(routeSteps[i].Changes, c.Text) {
					routeSteps[i].Changes = append(routeSteps[i].Changes, c.Text)
				}
			}
		}
		st.live[i] = applied(st.live[i], r, in.Process.FieldManager)
		if !r.Unchanged {
			p.Writes = append(p.Writes, Write{Step: stepLabel(step), Call: name, Route: st.live[i].DeepCopy()})
		}
	}
}

// Manifest is an object to create, as kubectl applies it.
type Manifest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec any `json:"spec"`
}

// grantsFor are the ReferenceGrants that would grant what was refused: one
// per namespace, with every kind and route refused there.
func grantsFor(refused []*routes.NotGrantedError) []Manifest {
	var out []Manifest
	index := map[string]int{}
	var specs []routes.ReferenceGrant
	for _, e := range refused {
		g := e.Grant()
		i, ok := index[g.Namespace]
		if !ok {
			m := Manifest{APIVersion: routes.Group + "/v1beta1", Kind: "ReferenceGrant"}
			m.Metadata.Name, m.Metadata.Namespace = g.Name, g.Namespace
			index[g.Namespace], i = len(out), len(out)
			out, specs = append(out, m), append(specs, routes.ReferenceGrant{From: g.From})
		}
		for _, to := range g.To {
			if !slices.ContainsFunc(specs[i].To, func(t routes.GrantTarget) bool { return reflect.DeepEqual(t, to) }) {
				specs[i].To = append(specs[i].To, to)
			}
		}
	}
	for i := range out {
		out[i].Spec = specs[i]
	}
	return out
}

func stepLabel(s Step) string {
	if s.Index > 0 {
		return fmt.Sprintf("step %d (%s)", s.Index, s.Name)
	}
	return s.Name
}

func maxWeight(ro *v1alpha1.Rollout) int32 {
	if tr := ro.Spec.Strategy.Canary.TrafficRouting; tr != nil && tr.MaxTrafficWeight != nil {
		return *tr.MaxTrafficWeight
	}
	return 100
}

// promote is the Rollout once its new version is stable: for ping-pong, the
// other Service is stable.
func promote(ro *v1alpha1.Rollout) *v1alpha1.Rollout {
	out := ro.DeepCopy()
	if out.Spec.Strategy.Canary.PingPong != nil {
		if out.Status.Canary.StablePingPong == v1alpha1.PPPing {
			out.Status.Canary.StablePingPong = v1alpha1.PPPong
		} else {
			out.Status.Canary.StablePingPong = v1alpha1.PPPing
		}
	}
	return out
}

// experimentService is the name the plan gives an experiment template's
// Service: the template's service name if it sets one, else
// "<rollout>-<template>" (the Experiment controller names it after the
// ReplicaSet it creates, which the plan cannot know).
func experimentService(ro *v1alpha1.Rollout, t v1alpha1.RolloutExperimentTemplate) string {
	if t.Service != nil && t.Service.Name != "" {
		return t.Service.Name
	}
	return ro.Name + "-" + t.Name
}

// experimentServices answers for the experiment Services with the ports the
// Experiment controller gives them (the pod template's container ports), and
// for every other Service with services.
func experimentServices(ro *v1alpha1.Rollout, services kube.Services) kube.Services {
	planned := map[string]bool{}
	for _, s := range ro.Spec.Strategy.Canary.Steps {
		if s.Experiment != nil {
			for _, t := range s.Experiment.Templates {
				planned[experimentService(ro, t)] = true
			}
		}
	}
	var containerPorts []corev1.ServicePort
	for _, c := range ro.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			containerPorts = append(containerPorts, corev1.ServicePort{Name: p.Name, Port: p.ContainerPort, Protocol: p.Protocol})
		}
	}
	return plannedServices{planned: planned, ports: containerPorts, Services: services}
}

// plannedServices are the Services of a plan: those of its experiments
// made up (experimentServices), the others read.
type plannedServices struct {
	planned map[string]bool
	ports   []corev1.ServicePort
	kube.Services
}

func (p plannedServices) Ports(ctx context.Context, namespace, name string) ([]corev1.ServicePort, error) {
	if p.planned[name] {
		if len(p.ports) == 0 {
			return nil, errors.New("the experiment's pod template has no container port, so Argo Rollouts creates no Service for it")
		}
		return p.ports, nil
	}
	return p.Services.Ports(ctx, namespace, name)
}
