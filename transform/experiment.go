package transform

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// SetExperimentRefs adds, weighs and removes the backendRefs of experiment
// Services: with an experiment step Argo Rollouts passes the Services it
// created for the experiment's templates to SetWeight as
// additionalDestinations, each with a weight.
//
// It is pure: it gets the live rules and what the plugin recorded it had
// added for the Rollout (routes.Claim.Backends), and returns the rules with
// exactly the requested experiment backends at their weights, plus the new
// record. It removes only backendRefs it finds in that record, so a
// backendRef someone else added is never touched, even one that points at a
// Service named like an experiment Service.

// maxBackendRefs is Gateway API's limit of backendRefs per rule.
const maxBackendRefs = 16

// ExperimentDestination is one experiment Service with its weight and its ports.
type ExperimentDestination struct {
	Service string
	Weight  int64
	Ports   []corev1.ServicePort
}

// ExperimentInput is what SetExperimentRefs needs besides the route.
type ExperimentInput struct {
	// RolloutNamespace holds the Rollout and its Services.
	RolloutNamespace string
	Stable, Canary   routes.ObjectRef
	// StablePorts are the stable Service's ports, to map a backendRef's port
	// number to a port name.
	StablePorts  []corev1.ServicePort
	Destinations []ExperimentDestination
	// Targeting says which rules of the route are weighted rules (not the
	// rules the plugin added; only the ruleName rule if the Rollout sets one).
	Targeting Targeting
}

// SetExperimentRefs returns rules in which every weighted rule (one holding both stable
// and canary) holds one backendRef per destination with its weight, and no
// other backendRef the plugin added for this Rollout; the new record of added
// backendRefs; and a description of each change.
func SetExperimentRefs(route routes.Route, rules []routes.Rule, in ExperimentInput, claimed []routes.AddedBackend) ([]routes.Rule, []routes.AddedBackend, []routes.Change, error) {
	if len(in.Destinations) == 0 && len(claimed) == 0 {
		// Only a destination to add or weigh, or a recorded backendRef to
		// remove, changes rules: without either (a step with no experiment)
		// rules come back as they came (a rule holds at most 16 backendRefs,
		// as every release's CRDs say, so none is over the limit).
		return rules, nil, nil, nil
	}
	rules = routes.CopyRules(rules) // the caller's stay as they were
	s, err := newStep(route, rules, in)
	if err != nil {
		return nil, nil, nil, err
	}
	kept, have := s.settle(claimed)
	var added []routes.AddedBackend
	for i := range rules {
		if !s.weighted[i] {
			continue
		}
		more, err := s.add(i, have[i])
		if err != nil {
			return nil, nil, nil, err
		}
		added = append(added, more...)
	}
	return rules, append(kept, added...), s.changes, nil
}

// step is SetExperimentRefs at work on one route's rules.
type step struct {
	route routes.Route
	rules []routes.Rule
	in    ExperimentInput
	ns    string
	// weighted are the weighted rules; related the rules that still send to
	// stable or canary: a weighted rule someone took the canary out of is
	// one, a rule someone inserted is not.
	weighted, related map[int]bool
	// wanted are the destinations by their Service.
	wanted  map[routes.ObjectRef]ExperimentDestination
	changes []routes.Change
}

// newStep reads which rules are weighted and related, and which Services are
// wanted; a destination that is the stable or canary Service is refused.
func newStep(route routes.Route, rules []routes.Rule, in ExperimentInput) (*step, error) {
	s := &step{route: route, rules: rules, in: in, ns: route.Namespace,
		weighted: map[int]bool{}, related: map[int]bool{}, wanted: map[routes.ObjectRef]ExperimentDestination{}}
	for _, i := range WeightedRules(s.ns, rules, in.Stable, in.Canary, in.Targeting) {
		s.weighted[i] = true
	}
	for i, r := range rules {
		s.related[i] = r.CountRefs(s.ns, in.Stable) > 0 || r.CountRefs(s.ns, in.Canary) > 0
	}
	for _, d := range in.Destinations {
		target := routes.ServiceRef(in.RolloutNamespace, d.Service)
		if target == in.Stable.Backend() || target == in.Canary.Backend() {
			return nil, fmt.Errorf("experiment %s is the stable or canary Service; give the experiment its own Service", target)
		}
		s.wanted[target] = d
	}
	return s, nil
}

// settle keeps each recorded backendRef that is still the plugin's, still
// wanted and in a weighted rule, and removes the others that are still the
// plugin's. have maps each weighted rule's Services with a kept backendRef
// to that backendRef's target.
func (s *step) settle(claimed []routes.AddedBackend) (kept []routes.AddedBackend, have map[int]map[routes.ObjectRef]routes.ObjectRef) {
	have = map[int]map[routes.ObjectRef]routes.ObjectRef{}
	for _, b := range claimed {
		target := b.Target()
		i := locate(s.rules, s.ns, b, s.weighted, s.related)
		ours := i >= 0 && s.rules[i].CountRefs(s.ns, target) > b.Others && lastOf(s.rules[i], s.ns, target) >= 0
		_, stillWanted := s.wanted[target.Backend()]
		if ours && stillWanted && s.weighted[i] {
			b.Rule, b.RuleName = i, s.rules[i].Name()
			kept = append(kept, b)
			if have[i] == nil {
				have[i] = map[routes.ObjectRef]routes.ObjectRef{}
			}
			have[i][target.Backend()] = target
			continue
		}
		if ours && removeLast(s.rules[i], s.ns, target) {
			s.changes = append(s.changes, routes.Changef(routes.BackendRemoved, "rule %d − %s", i, target))
		}
	}
	return kept, have
}

// add gives the weighted rule i one backendRef per destination: a kept one
// (have: by Service, its target) gets the destination's weight, the others
// are added; it returns the added ones.
func (s *step) add(i int, have map[routes.ObjectRef]routes.ObjectRef) ([]routes.AddedBackend, error) {
	rule, ns, in := s.rules[i], s.ns, s.in
	var added []routes.AddedBackend
	for _, d := range in.Destinations {
		target := routes.ServiceRef(in.RolloutNamespace, d.Service)
		if kept, ok := have[target]; ok {
			b := routes.BackendRef(rule.BackendRefs()[lastOf(rule, ns, kept)])
			if b.Weight() != d.Weight {
				s.changes = append(s.changes, routes.Changef(routes.WeightChanged, "rule %d %s %d→%d", i, kept, b.Weight(), d.Weight))
				b.SetWeight(d.Weight)
			}
			continue
		}
		port, err := portFor(rule, ns, s.route.Kind, in, d)
		if err != nil {
			return nil, fmt.Errorf("rule %d: %w", i, err)
		}
		// The experiment's backend is named as the canary's is: a Service,
		// or its ServiceImport where the route reaches the canary through one.
		target = likeCanary(rule, ns, in.Canary, target)
		ref := map[string]any{"group": target.Group, "kind": target.Kind, "name": d.Service, "port": int64(port), "weight": d.Weight}
		if in.RolloutNamespace != ns {
			// A cross-namespace backendRef needs a ReferenceGrant in the Services' namespace.
			ref["namespace"] = in.RolloutNamespace
		}
		others := rule.CountRefs(ns, target)
		refs, _ := rule["backendRefs"].([]any)
		rule["backendRefs"] = append(refs, ref)
		added = append(added, routes.AddedBackend{Rule: i, RuleName: rule.Name(), Group: target.Group, Kind: target.Kind, Namespace: target.Namespace, Name: d.Service, Others: others})
		s.changes = append(s.changes, routes.Changef(routes.BackendAdded, "rule %d + %s weight %d", i, target, d.Weight))
	}
	if n := len(rule.BackendRefs()); n > maxBackendRefs {
		return nil, &LimitError{Msg: fmt.Sprintf("rule %d would hold %d backendRefs with the experiment's Services; Gateway API allows %d per rule", i, n, maxBackendRefs)}
	}
	return added, nil
}

// locate finds the rule a recorded backendRef was added to, or -1 when it is
// gone. A named rule is found by name (the recorded index decides between
// rules sharing a name); an unnamed one by index while that rule still sends
// to stable or canary (it may have been named since), else as the one
// weighted rule that still holds the plugin's backendRef (rules were inserted
// before it).
func locate(rules []routes.Rule, ns string, b routes.AddedBackend, weighted, related map[int]bool) int {
	if b.RuleName != "" {
		found := -1
		for i, r := range rules {
			if r.Name() != b.RuleName {
				continue
			}
			if i == b.Rule {
				return i
			}
			if found < 0 {
				found = i
			}
		}
		if found >= 0 {
			return found
		}
	}
	if b.Rule >= 0 && b.Rule < len(rules) && related[b.Rule] && (b.RuleName == "" || rules[b.Rule].Name() == "") {
		return b.Rule
	}
	found := -1
	for i := range rules {
		if weighted[i] && rules[i].CountRefs(ns, b.Target()) > b.Others {
			if found >= 0 {
				return -1 // ambiguous: touch nothing
			}
			found = i
		}
	}
	return found
}

// likeCanary is service (a Service) named as the rule names the canary: as
// the ServiceImport of the same group when the canary's backendRef is one.
func likeCanary(rule routes.Rule, ns string, canary, service routes.ObjectRef) routes.ObjectRef {
	if j := rule.LastRef(ns, canary); j >= 0 {
		if c := rule.BackendRefs()[j].Target(ns); c.IsServiceImport() {
			return routes.ObjectRef{Group: c.Group, Kind: c.Kind, Namespace: service.Namespace, Name: service.Name}
		}
	}
	return service
}

// lastOf is the index of the rule's last backendRef that names target
// exactly (a ServiceImport is not its Service here: the claim records which
// the plugin added), or -1.
func lastOf(rule routes.Rule, ns string, target routes.ObjectRef) int {
	refs := rule.BackendRefs()
	for j := len(refs) - 1; j >= 0; j-- {
		if refs[j].Target(ns) == target {
			return j
		}
	}
	return -1
}

func removeLast(rule routes.Rule, ns string, target routes.ObjectRef) bool {
	j := lastOf(rule, ns, target)
	if j < 0 {
		return false
	}
	refs := rule["backendRefs"].([]any)
	rule["backendRefs"] = append(refs[:j:j], refs[j+1:]...)
	return true
}

// portFor picks the experiment Service's port for a rule of a route of kind:
// the port with the number of the rule's stable backendRef, else the one with
// the name the stable Service gives that number, else the Service's only port
// of the route's protocol, else a single-port Service's only port. Where the
// stable Service gives the number two names (53/UDP dns, 53/TCP dns-tcp), the
// name of the route's protocol counts first.
func portFor(rule routes.Rule, ns string, kind routes.Kind, in ExperimentInput, d ExperimentDestination) (int32, error) {
	var stablePort int64 = -1
	for _, b := range rule.BackendRefs() {
		if b.Target(ns).Backend() == in.Stable.Backend() {
			if p, ok := b["port"].(int64); ok {
				stablePort = p
			}
		}
	}
	for _, p := range d.Ports {
		if int64(p.Port) == stablePort {
			return p.Port, nil
		}
	}
	proto := protocolOf(kind)
	for _, fit := range []bool{true, false} {
		for _, sp := range in.StablePorts {
			if int64(sp.Port) == stablePort && sp.Name != "" && carries(sp, proto) == fit {
				for _, p := range d.Ports {
					if p.Name == sp.Name {
						return p.Port, nil
					}
				}
			}
		}
	}
	var fitting []corev1.ServicePort
	for _, p := range d.Ports {
		if carries(p, proto) {
			fitting = append(fitting, p)
		}
	}
	if len(fitting) == 1 {
		return fitting[0].Port, nil
	}
	if len(d.Ports) == 1 {
		return d.Ports[0].Port, nil
	}
	var list []string
	for _, p := range d.Ports {
		if carries(p, corev1.ProtocolTCP) {
			list = append(list, fmt.Sprintf("%s:%d", p.Name, p.Port))
		} else {
			list = append(list, fmt.Sprintf("%s:%d/%s", p.Name, p.Port, p.Protocol))
		}
	}
	return 0, fmt.Errorf("cannot tell which port of experiment Service %s/%s to use: none has the stable backendRef's port %d or its name, and it has %d ports [%s]; give the experiment Service the same port number or name as the stable Service",
		in.RolloutNamespace, d.Service, stablePort, len(d.Ports), strings.Join(list, ", "))
}

// protocolOf is the protocol a route of kind carries to its backends: UDP
// for a UDPRoute, TCP for the others.
func protocolOf(kind routes.Kind) corev1.Protocol {
	if kind == routes.UDPRoute {
		return corev1.ProtocolUDP
	}
	return corev1.ProtocolTCP
}

// carries says whether a Service port is of protocol; a port without one is
// TCP, as the apiserver defaults it.
func carries(p corev1.ServicePort, protocol corev1.Protocol) bool {
	return p.Protocol == protocol || p.Protocol == "" && protocol == corev1.ProtocolTCP
}
