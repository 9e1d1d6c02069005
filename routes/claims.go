package routes

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
)

// ClaimsAnnotation is the annotation in which the plugin records, on the route
// itself, what each Rollout added to it. It is owned by the plugin's field
// manager and goes away when no Rollout has anything left on the route. Kept
// on the route, it survives plugin and controller restarts, a lost Rollout
// status, and a Rollout deleted and recreated under the same name.
const ClaimsAnnotation = "gatewayapi-ssa.dev/claims"

// Claims maps "<rollout namespace>/<rollout name>" to what that Rollout has
// on the route.
type Claims map[string]Claim

// Claim is what one Rollout has on one route.
type Claim struct {
	// Cluster names the cluster of the Rollout that made the claim: a fleet
	// runs the same Rollout (namespace and name) in several member clusters,
	// and one member's Rollout must not take over another's. Only a call on
	// routes in a route cluster names its cluster; "" in the claims a
	// cluster's Rollouts make on its own routes, and in claims written
	// before the plugin recorded it.
	Cluster string `json:"cluster,omitempty"`
	// ClusterUID is the UID of the kube-system namespace of the cluster
	// Cluster names, which no other cluster has: it tells a member that was
	// renamed, and two members given one name, apart. "" in claims written
	// before the plugin recorded it.
	ClusterUID string `json:"clusterUID,omitempty"`
	// CanaryWeight is the canary weight the Rollout last set (0 is not recorded).
	CanaryWeight int64 `json:"canaryWeight,omitempty"`
	// Backends are the experiment backendRefs the plugin added for the Rollout.
	Backends []AddedBackend `json:"backends,omitempty"`
	// Rules are the names of the rules the plugin added for the Rollout.
	Rules []string `json:"rules,omitempty"`
	// Weights are the weights the plugin last set for the Rollout, so that a
	// change by another owner can be told from the plugin's own.
	Weights []RecordedWeight `json:"weights,omitempty"`
	// RuleDigests maps the name of each rule the plugin added to a digest of
	// its content as the plugin wrote it, for the same purpose.
	RuleDigests map[string]string `json:"ruleDigests,omitempty"`
	// Unnamed are the rules among Rules that are stored without a name (the
	// CRD had none when the plugin wrote them): known by their digest
	// (unnamed.go).
	Unnamed []string `json:"unnamed,omitempty"`
	// MirrorFilters are the RequestMirror filters the plugin added to weighted
	// rules for setMirrorRoute steps in filter mode.
	MirrorFilters []AddedFilter `json:"mirrorFilters,omitempty"`
	// StickyRules are the rules among Rules that stickyCanary added (the
	// cookie rules): SetWeight keeps them, RemoveManagedRoutes leaves them.
	StickyRules []string `json:"stickyRules,omitempty"`
	// RefFilters are the filters the plugin added to backendRefs of weighted
	// rules: stickyCanary's Set-Cookie.
	RefFilters []AddedRefFilter `json:"refFilters,omitempty"`
	// CanaryRefs are the canary backendRefs the plugin added to rules that
	// held only the stable one (addCanaryBackendRef).
	CanaryRefs []AddedCanary `json:"canaryRefs,omitempty"`
}

// AddedCanary is a canary backendRef the plugin added to a rule that held
// only the stable one: a copy of the stable backendRef, named for the canary.
type AddedCanary struct {
	AddedBackend
	// StableWeight is the stable backendRef's weight before: it gets it back
	// when the canary's goes, so the rule ends as it began.
	StableWeight int64 `json:"stableWeight"`
}

// RecordedWeight is one weight the plugin set: a backend in a rule.
type RecordedWeight struct {
	Rule     int    `json:"rule"`
	RuleName string `json:"ruleName,omitempty"`
	// Service is "<namespace>/<name>" of the backend Service.
	Service string `json:"service"`
	Weight  int64  `json:"weight"`
}

// Empty says the claim records nothing. A claim that is not active may still
// record the weights the plugin set (after RemoveManagedRoutes took the last
// rule, until the SetWeight that follows): it stays on the route until then.
func (c Claim) Empty() bool {
	return !c.Active() && len(c.Weights) == 0
}

// ManagedRules are the rules among Rules that the Rollout's managed routes
// added (header and mirror rules): all but stickyCanary's.
func (c Claim) ManagedRules() []string {
	var out []string
	for _, n := range c.Rules {
		if !slices.Contains(c.StickyRules, n) {
			out = append(out, n)
		}
	}
	return out
}

// Active says whether the Rollout still has anything on the route.
func (c Claim) Active() bool {
	return c.CanaryWeight > 0 || len(c.Backends) > 0 || len(c.Rules) > 0 || len(c.MirrorFilters) > 0 || len(c.RefFilters) > 0 || len(c.CanaryRefs) > 0
}

// AddedBackend is a backendRef the plugin added to a rule.
type AddedBackend struct {
	// Rule is the rule's index when it was added; RuleName its name, if any,
	// which wins over the index when the rules are reordered.
	Rule     int    `json:"rule"`
	RuleName string `json:"ruleName,omitempty"`
	Group    string `json:"group,omitempty"`
	Kind     string `json:"kind"`
	// Namespace is the backend's namespace (the route's when the ref names none).
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Others counts the backendRefs to the same backend that were in the rule
	// when the plugin added its own (appended after them): while the rule holds
	// more than that, the last one is the plugin's; otherwise the plugin's is gone
	// and the ones left belong to someone else.
	Others int `json:"others,omitempty"`
}

// Target is the backend the added ref points at.
func (a AddedBackend) Target() ObjectRef {
	return ObjectRef{Group: a.Group, Kind: a.Kind, Namespace: a.Namespace, Name: a.Name}
}

// ReadClaims parses the claims annotation of a route.
func ReadClaims(r Route) (Claims, error) {
	raw, ok := r.Annotations[ClaimsAnnotation]
	if !ok || raw == "" {
		return Claims{}, nil
	}
	var c Claims
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		return nil, fmt.Errorf("%s: annotation %s is not what the plugin wrote (%v): restore it from the route's history, or remove it and the backends and rules it listed", r.Ref, ClaimsAnnotation, err)
	}
	if c == nil {
		c = Claims{}
	}
	return c, nil
}

// Annotations returns the annotations that record the claims: none when no
// claim records anything, so the plugin stops applying the annotation.
func (c Claims) Annotations() map[string]string {
	kept := Claims{}
	for k, v := range c {
		if !v.Empty() {
			kept[k] = v
		}
	}
	if len(kept) == 0 {
		return nil
	}
	data, _ := json.Marshal(kept) // map keys marshal sorted: the value is stable
	return map[string]string{ClaimsAnnotation: string(data)}
}

// AddedRules are the names of the rules the plugin added for any Rollout:
// such rules are never weighted rules.
func (c Claims) AddedRules() map[string]bool {
	out := map[string]bool{}
	for _, claim := range c {
		for _, n := range claim.Rules {
			out[n] = true
		}
	}
	return out
}

// AddedFilters are the filters the plugin added for any Rollout: rules it
// generates from a weighted rule do not copy them.
func (c Claims) AddedFilters() []map[string]any {
	var out []map[string]any
	for _, claim := range c {
		for _, f := range claim.MirrorFilters {
			out = append(out, f.Filter)
		}
	}
	return out
}

// AddedRefFilters are the backendRef filters the plugin added for any
// Rollout: rules it generates from a weighted rule do not copy them.
func (c Claims) AddedRefFilters() []map[string]any {
	var out []map[string]any
	for _, claim := range c {
		for _, f := range claim.RefFilters {
			out = append(out, f.Filter)
		}
	}
	return out
}

// Rollouts lists the Rollouts with an active claim, sorted.
func (c Claims) Rollouts() []string {
	var out []string
	for k, v := range c {
		if v.Active() {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// AddedFilter is a RequestMirror filter the plugin added to a weighted rule.
type AddedFilter struct {
	// Entry is the managedRoutes entry the filter belongs to. Its key stays
	// "set", as claims on live routes hold it.
	Entry string `json:"set"`
	// Rule is the rule's index when it was added; RuleName its name, if any,
	// which wins over the index.
	Rule     int    `json:"rule"`
	RuleName string `json:"ruleName,omitempty"`
	// Filter is the filter as written.
	Filter map[string]any `json:"filter"`
	// Others counts the equal filters the rule held before the plugin added
	// its own.
	Others int `json:"others,omitempty"`
}

// AddedRefFilter is a filter the plugin added to a backendRef of a weighted
// rule (stickyCanary's Set-Cookie on the stable and the canary backendRef).
type AddedRefFilter struct {
	// Rule is the rule's index when it was added; RuleName its name, if any,
	// which wins over the index.
	Rule     int    `json:"rule"`
	RuleName string `json:"ruleName,omitempty"`
	// Backend is "<namespace>/<name>" of the Service the backendRef goes to
	// (the first backendRef of the rule to it).
	Backend string `json:"backend"`
	// Filter is the filter as written.
	Filter map[string]any `json:"filter"`
	// Others counts the equal filters the backendRef held before the plugin
	// added its own.
	Others int `json:"others,omitempty"`
}

// LocateRule finds a rule the plugin recorded: by name when it had one, else
// by index; -1 when it is gone.
func LocateRule(rules []Rule, index int, name string) int {
	if name != "" {
		for i, r := range rules {
			if r.Name() == name {
				return i
			}
		}
		return -1
	}
	if index >= 0 && index < len(rules) {
		return index
	}
	return -1
}
