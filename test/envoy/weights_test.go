//go:build envoy

package envoy

import (
	"fmt"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	corev1 "k8s.io/api/core/v1"
)

// step is one SetWeight of a walk and the split every weighted rule must
// then carry in Envoy.
type step struct {
	weight int32
	exp    []v1alpha1.WeightDestination
	want   map[string]int64
}

func (s step) String() string {
	if len(s.exp) == 0 {
		return fmt.Sprintf("SetWeight(%d)", s.weight)
	}
	return fmt.Sprintf("SetWeight(%d, experiment %d/%d)", s.weight, s.exp[0].Weight, s.exp[1].Weight)
}

// walk runs the steps on route r of the scenario: after each, Envoy's split
// of rule 0, Envoy Gateway's status of the route, and VerifyWeight fed
// that status.
func walk(t *testing.T, s *scenario, ro *v1alpha1.Rollout, r ref, steps []step) {
	t.Helper()
	walkRules(t, s, ro, r, []int{0}, steps)
}

// walkRules is walk with the split checked on each of the weighted rules.
func walkRules(t *testing.T, s *scenario, ro *v1alpha1.Rollout, r ref, weighted []int, steps []step) {
	t.Helper()
	for _, st := range steps {
		name := st.String()
		if p := ro.Status.Canary.StablePingPong; p != "" {
			name = fmt.Sprintf("%s stable: %s", p, name)
		}
		must(t, name, s.plugin.SetWeight(ro, st.weight, st.exp))
		tr := s.translate()
		for _, rule := range weighted {
			s.check(name, fmt.Sprintf("weights of rule %d", rule), checkWeights(tr.envoy, s.ns, r, rule, st.want))
		}
		s.check(name, "Accepted, ResolvedRefs", checkAccepted(tr, r))
		s.verify(name, ro, st.weight, st.exp, r, tr)
	}
}

func canary(stable, canary int64) map[string]int64 {
	return map[string]int64{"stable": stable, "canary": canary}
}

// A canary walk up and back on every route kind: Envoy's split is the
// route's at every step, the canary absent where its weight is 0.
func TestCanaryWalkOnEveryKind(t *testing.T) {
	for _, kind := range []string{"HTTPRoute", "GRPCRoute", "TCPRoute", "TLSRoute", "UDPRoute"} {
		t.Run(kind, func(t *testing.T) {
			var proto corev1.Protocol
			if kind == "UDPRoute" {
				proto = corev1.ProtocolUDP
			}
			s := newScenario(t, "canary walk, "+kind, proto, "stable", "canary")
			s.create(routeYAML(kind, 100))
			ro := s.rollout(fmt.Sprintf(`{%q: "route", "verifyWeight": true}`, configKey(kind)))
			var steps []step
			for _, w := range []int64{0, 10, 30, 60, 100, 60, 30, 0} {
				steps = append(steps, step{weight: int32(w), want: canary(100-w, w)})
			}
			walk(t, s, ro, ref{kind, "route"}, steps)
		})
	}
}

// Two weighted rules and one of another team's: both weighted rules carry
// each step's split, experiment backends included; the other rule keeps
// its one backend.
func TestTwoWeightedRules(t *testing.T) {
	s := newScenario(t, "two weighted rules and another, HTTPRoute", "", "stable", "canary", "exp-baseline", "exp-canary", "static")
	s.create(`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: route}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /a}}]
    backendRefs:
    - {name: stable, port: 80, weight: 100}
    - {name: canary, port: 80, weight: 0}
  - matches: [{path: {type: PathPrefix, value: /b}}]
    backendRefs:
    - {name: stable, port: 80, weight: 100}
    - {name: canary, port: 80, weight: 0}
  - matches: [{path: {type: PathPrefix, value: /static}}]
    backendRefs: [{name: static, port: 80}]
`)
	ro := s.rollout(`{"httpRoute": "route", "verifyWeight": true}`)
	r := ref{"HTTPRoute", "route"}
	walkRules(t, s, ro, r, []int{0, 1}, []step{
		{30, nil, canary(70, 30)},
		{30, experiment(5, 25), map[string]int64{"stable": 40, "canary": 30, "exp-baseline": 5, "exp-canary": 25}},
		{100, nil, canary(0, 100)},
		{0, nil, canary(100, 0)},
	})
	tr := s.translate()
	s.check("SetWeight(0)", "weights of rule 2", checkWeights(tr.envoy, s.ns, r, 2, map[string]int64{"static": 1}))
}

// maxTrafficWeight 1000: the weights and Envoy's total are of 1000.
func TestMaxTrafficWeight1000(t *testing.T) {
	s := newScenario(t, "maxTrafficWeight 1000, HTTPRoute", "", "stable", "canary")
	s.create(routeYAML("HTTPRoute", 1000))
	ro := s.rollout(`{"httpRoute": "route", "verifyWeight": true}`)
	max := int32(1000)
	ro.Spec.Strategy.Canary.TrafficRouting.MaxTrafficWeight = &max
	var steps []step
	for _, w := range []int64{0, 5, 300, 999, 1000, 0} {
		steps = append(steps, step{weight: int32(w), want: canary(1000-w, w)})
	}
	walk(t, s, ro, ref{"HTTPRoute", "route"}, steps)
}

func experiment(baseline, canary int32) []v1alpha1.WeightDestination {
	return []v1alpha1.WeightDestination{
		{ServiceName: "exp-baseline", PodTemplateHash: "aaa", Weight: baseline},
		{ServiceName: "exp-canary", PodTemplateHash: "bbb", Weight: canary},
	}
}

// An experiment adds two backends beside stable and canary, then leaves.
func TestExperiment(t *testing.T) {
	for _, kind := range []string{"HTTPRoute", "TCPRoute"} {
		t.Run(kind, func(t *testing.T) {
			s := newScenario(t, "experiment, "+kind, "", "stable", "canary", "exp-baseline", "exp-canary")
			s.create(routeYAML(kind, 100))
			ro := s.rollout(fmt.Sprintf(`{%q: "route", "verifyWeight": true}`, configKey(kind)))
			walk(t, s, ro, ref{kind, "route"}, []step{
				{20, experiment(5, 25), map[string]int64{"stable": 50, "canary": 20, "exp-baseline": 5, "exp-canary": 25}},
				{0, experiment(5, 25), map[string]int64{"stable": 70, "canary": 0, "exp-baseline": 5, "exp-canary": 25}},
				{20, experiment(10, 10), map[string]int64{"stable": 60, "canary": 20, "exp-baseline": 10, "exp-canary": 10}},
				{20, nil, canary(80, 20)},
				{0, nil, canary(100, 0)},
			})
		})
	}
}

// Ping-pong: the Services swap roles at the promotion; Envoy follows.
func TestPingPong(t *testing.T) {
	s := newScenario(t, "ping-pong, HTTPRoute", "", "ping", "pong")
	s.create(`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: route}
spec:
  parentRefs: [{name: gw}]
  rules:
  - backendRefs:
    - {name: ping, port: 80, weight: 100}
    - {name: pong, port: 80, weight: 0}
`)
	ro := s.rollout(`{"httpRoute": "route", "verifyWeight": true}`)
	ro.Spec.Strategy.Canary.StableService, ro.Spec.Strategy.Canary.CanaryService = "", ""
	ro.Spec.Strategy.Canary.PingPong = &v1alpha1.PingPongSpec{PingService: "ping", PongService: "pong"}
	r := ref{"HTTPRoute", "route"}
	for _, st := range []struct {
		stable v1alpha1.PingPongType
		step
	}{
		{v1alpha1.PPPing, step{30, nil, map[string]int64{"ping": 70, "pong": 30}}},
		{v1alpha1.PPPing, step{100, nil, map[string]int64{"ping": 0, "pong": 100}}},
		{v1alpha1.PPPong, step{0, nil, map[string]int64{"ping": 0, "pong": 100}}},
		{v1alpha1.PPPong, step{30, nil, map[string]int64{"ping": 30, "pong": 70}}},
		{v1alpha1.PPPong, step{0, nil, map[string]int64{"ping": 0, "pong": 100}}},
	} {
		ro.Status.Canary.StablePingPong = st.stable
		walk(t, s, ro, r, []step{st.step})
	}
}
