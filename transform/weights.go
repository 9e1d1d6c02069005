package transform

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// MaxBackendWeight is the largest weight Gateway API allows a backendRef.
const MaxBackendWeight = 1_000_000

// Split is the traffic a rollout asks for on its weighted rules.
type Split struct {
	Stable routes.ObjectRef
	Canary routes.ObjectRef
	// CanaryWeight goes to the canary; Reserved to other backends (experiment
	// Services); stable gets the rest of MaxWeight.
	CanaryWeight int64
	MaxWeight    int64
	Reserved     int64
}

// StableWeight is what is left for stable.
func (s Split) StableWeight() int64 { return s.MaxWeight - s.CanaryWeight - s.Reserved }

// Check refuses a split no route can carry (a *SplitError): a canary weight
// outside 0..MaxWeight, or more for the canary and the other backends than
// MaxWeight holds.
func (s Split) Check() error {
	if s.CanaryWeight < 0 || s.CanaryWeight > s.MaxWeight {
		return &SplitError{Split: s}
	}
	if s.Reserved < 0 || s.StableWeight() < 0 {
		return &SplitError{Split: s, Exceeds: true}
	}
	return nil
}

// SplitError is a split Check refuses: its canary weight is outside
// 0..MaxWeight, or (Exceeds) the canary and the other backends ask for more
// than MaxWeight holds.
type SplitError struct {
	Split   Split
	Exceeds bool
}

func (e *SplitError) Error() string {
	s := e.Split
	if e.Exceeds {
		return fmt.Sprintf("canary weight %d plus experiment weights %d exceed maxTrafficWeight %d", s.CanaryWeight, s.Reserved, s.MaxWeight)
	}
	return fmt.Sprintf("weight %d is outside 0..%d (spec.strategy.canary.trafficRouting.maxTrafficWeight)", s.CanaryWeight, s.MaxWeight)
}

// CheckMirrorPercent refuses a mirror percentage outside 0..100 (nil:
// every request).
func CheckMirrorPercent(percent *int32) error {
	if percent != nil && (*percent < 0 || *percent > 100) {
		return fmt.Errorf("percentage %d is outside 0..100", *percent)
	}
	return nil
}

// Change is one weight a transform changed, for the log line of the write.
type Change struct {
	Rule    int
	Backend routes.ObjectRef
	From    int64
	To      int64
}

func (c Change) String() string {
	return fmt.Sprintf("rule %d %s %d→%d", c.Rule, c.Backend, c.From, c.To)
}

// Note is the change as the write's log line and Events tell it.
func (c Change) Note() routes.Change {
	return routes.Change{Kind: routes.WeightChanged, Text: c.String()}
}

// notes are the changes as the write's log line and Events tell them.
func notes(changes []Change) []routes.Change {
	out := make([]routes.Change, len(changes))
	for i, c := range changes {
		out[i] = c.Note()
	}
	return out
}

// NoWeightedRuleError says a route has no rule that sends traffic to both
// the stable and the canary Service, so there is nothing to shift.
type NoWeightedRuleError struct {
	Route          routes.Ref
	Stable, Canary routes.ObjectRef
	// RuleName is the rule the Rollout targets (ruleName), if it does.
	RuleName string
}

func (e *NoWeightedRuleError) Error() string {
	if e.RuleName != "" {
		return fmt.Sprintf("%s: rule %q (the ruleName of the Rollout's plugin config) does not send traffic to both the stable %s and the canary %s; "+
			"add both backendRefs to that rule, or name the rule that holds them", e.Route, e.RuleName, e.Stable, e.Canary)
	}
	return fmt.Sprintf("%s has no rule whose backendRefs include both the stable %s and the canary %s; "+
		"add both backendRefs to the rule whose traffic the rollout shifts, or set addCanaryBackendRef: true", e.Route, e.Stable, e.Canary)
}

// NoRuleNamedError says a route has no rule with the name the Rollout
// targets.
type NoRuleNamedError struct {
	Route    routes.Ref
	RuleName string
	// Names are the rule names the route has; Unnamed counts its rules without one.
	Names   []string
	Unnamed int
}

func (e *NoRuleNamedError) Error() string {
	has := "no named rules"
	if len(e.Names) > 0 {
		has = "rules named " + strings.Join(e.Names, ", ")
	}
	return fmt.Sprintf("%s has no rule named %q (ruleName in the Rollout's plugin config): it has %s and %d unnamed; "+
		"set ruleName to one of them, or give the rule a name", e.Route, e.RuleName, has, e.Unnamed)
}

// Targeting says which rules of a route can be weighted rules for a Rollout.
type Targeting struct {
	// Added are the names of the rules the plugin added for any Rollout:
	// never weighted rules.
	Added map[string]bool
	// RuleName, when set, is the one rule the Rollout targets on the route
	// (ruleName in its plugin config): no other rule is a weighted rule,
	// even one holding both Services.
	RuleName string
}

// check refuses a route without the rule the targeting names; on a CRD
// without rule names, with the release that has them.
func (t Targeting) check(r routes.Route, rules []routes.Rule) error {
	if t.RuleName == "" {
		return nil
	}
	if r.Schema.LacksRuleNames && !slices.ContainsFunc(rules, func(rule routes.Rule) bool { return rule.Name() == t.RuleName }) {
		return &routes.SchemaError{Kind: r.Kind, Version: r.Version, Field: "rule names (spec.rules[].name)", Since: routes.RuleNamesSince,
			Need:    fmt.Sprintf("ruleName %q in the Rollout's plugin config", t.RuleName),
			Instead: "remove ruleName: the plugin then sets the weights of every rule that holds both the stable and the canary Service"}
	}
	e := &NoRuleNamedError{Route: r.Ref, RuleName: t.RuleName}
	for _, rule := range rules {
		switch n := rule.Name(); {
		case n == t.RuleName:
			return nil
		case n == "":
			e.Unnamed++
		case !t.Added[n]:
			e.Names = append(e.Names, n)
		}
	}
	return e
}

// noWeightedRule is the error for a route whose targeted rules hold no
// weighted rule.
func (t Targeting) noWeightedRule(r routes.Route, rules []routes.Rule, stable, canary routes.ObjectRef) error {
	if err := t.check(r, rules); err != nil {
		return err
	}
	return &NoWeightedRuleError{Route: r.Ref, Stable: stable, Canary: canary, RuleName: t.RuleName}
}

// Targets says whether rule can be a weighted rule: not one the plugin
// added, and the ruleName rule if the Rollout names one.
func (t Targeting) Targets(rule routes.Rule) bool {
	n := rule.Name()
	return !(n != "" && t.Added[n]) && (t.RuleName == "" || n == t.RuleName)
}

// WeightedRules returns the indexes of the weighted rules: the rules whose
// backendRefs include both the stable and the canary backend, where the
// rollout sets the weights. Backends match on group, kind, namespace and
// name, never on name alone. A rule the plugin added for a header or mirror
// step (its name is in t.Added, the names every Rollout's claim records) is
// never a weighted rule, so no weight or experiment change touches it; with
// t.RuleName only the rule of that name can be one.
func WeightedRules(namespace string, rules []routes.Rule, stable, canary routes.ObjectRef, t Targeting) []int {
	var out []int
	for i, rule := range rules {
		if !t.Targets(rule) {
			continue
		}
		var hasStable, hasCanary bool
		for _, b := range rule.BackendRefs() {
			switch b.Target(namespace).Backend() {
			case stable.Backend():
				hasStable = true
			case canary.Backend():
				hasCanary = true
			}
		}
		if hasStable && hasCanary {
			out = append(out, i)
		}
	}
	return out
}

// SetWeights returns a copy of the route's rules in which, in every weighted
// rule, the canary backendRef has CanaryWeight and the stable one
// StableWeight(). Every other backendRef and every other rule is left as it
// is. t says which rules can be weighted rules (WeightedRules).
func SetWeights(r routes.Route, s Split, t Targeting) ([]routes.Rule, []Change, error) {
	if err := s.Check(); err != nil {
		return nil, nil, err
	}
	weighted := WeightedRules(r.Namespace, r.Rules, s.Stable, s.Canary, t)
	if len(weighted) == 0 {
		return nil, nil, t.noWeightedRule(r, r.Rules, s.Stable, s.Canary)
	}
	for _, i := range weighted {
		for _, ref := range []routes.ObjectRef{s.Stable, s.Canary} {
			if err := oneRefTo(r, i, ref); err != nil {
				return nil, nil, err
			}
		}
	}
	rules := routes.CopyRules(r.Rules)
	want := map[routes.ObjectRef]int64{s.Stable.Backend(): s.StableWeight(), s.Canary.Backend(): s.CanaryWeight}
	var changes []Change
	for _, i := range weighted {
		for _, b := range rules[i].BackendRefs() {
			target := b.Target(r.Namespace)
			w, ok := want[target.Backend()]
			if !ok || b.Weight() == w {
				continue
			}
			changes = append(changes, Change{Rule: i, Backend: target, From: b.Weight(), To: w})
			b.SetWeight(w)
		}
	}
	return rules, changes, nil
}

// oneRefTo refuses a weighted rule i that sends to service's backend through
// more than one backendRef: no split of weights between them adds up. A
// Service and its ServiceImport in one rule are two such refs: the plugin
// cannot tell which share goes to which.
func oneRefTo(r routes.Route, i int, service routes.ObjectRef) error {
	if r.Rules[i].CountRefs(r.Namespace, service) < 2 {
		return nil
	}
	refs := r.Rules[i].RefsTo(r.Namespace, service)
	if !slices.ContainsFunc(refs, routes.ObjectRef.IsServiceImport) {
		return fmt.Errorf("%s: rule %d lists %s %d times, so no weight split adds up; keep one backendRef per Service",
			r.Ref, i, service, len(refs))
	}
	names := make([]string, len(refs))
	for j, ref := range refs {
		names[j] = ref.String()
	}
	return fmt.Errorf("%s: rule %d sends to %s through %d backendRefs (%s), so the plugin cannot tell which share of its weight goes where; "+
		"keep one backendRef per Service: the Service or its ServiceImport, not both", r.Ref, i, service, len(refs), strings.Join(names, ", "))
}
