package desired

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/transform"
)

// ConflictError says another field manager changed values the plugin manages
// while a rollout is in progress, and the plugin's next write would change
// them back. The plugin leaves the route as it is and returns this error
// instead of fighting.
type ConflictError struct {
	Route   routes.Ref
	Rollout string
	// Managers own spec.rules now (the plugin no longer does).
	Managers []string
	Drift    []Drift
	// Rules describes changes to rules the plugin added.
	Rules []string
}

// Reason is the Event reason of the error (package events).
func (e *ConflictError) Reason() string { return "Conflict" }

func (e *ConflictError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: conflict: while rollout %s is in progress, spec.rules was changed by %s; ",
		e.Route, e.Rollout, strings.Join(e.Managers, ", "))
	var drift []string
	for _, d := range e.Drift {
		drift = append(drift, d.String())
	}
	drift = append(drift, e.Rules...)
	b.WriteString(strings.Join(drift, "; "))
	b.WriteString(". The plugin left the route as it is. Resolve it by reverting that change, by making the other owner ignore the rollout's weights " +
		"(docs/gitops.md), or by setting conflictPolicy: Force in the Rollout's plugin config to let the plugin take over")
	return b.String()
}

// FleetConflictError says a Rollout of the same namespace and name in
// another cluster of a fleet (Walking) is walking the route: its claim is
// active there. The call leaves the route as it is; it goes through once
// that rollout has ended (its claim is gone), as member clusters must never
// overwrite each other's weights.
type FleetConflictError struct {
	Route   routes.Ref
	Rollout string
	// Cluster is the calling Rollout's cluster.
	Cluster, Walking string
}

// Reason is the Event reason of the error (package events).
func (e *FleetConflictError) Reason() string { return "Conflict" }

func (e *FleetConflictError) Error() string {
	this := "this cluster (" + e.Cluster + ")"
	if e.Cluster == "" {
		this = "this cluster, whose own route it is,"
	}
	return fmt.Sprintf("%s: conflict: rollout %s of cluster %s is in progress on this route, so the same rollout of %s leaves it as it is "+
		"until that one has ended; the members of a fleet must not walk one route at once: let one member drive the shared route, or give each member a route "+
		"of its own (docs/multicluster.md)", e.Route, e.Rollout, e.Walking, this)
}

// LabelOwnedError says the Rollout's in-progress label key is a label another
// manager owns on the route, with another value: the plugin would take it with the forced apply
// that starts a rollout, and delete it when the rollout ends.
type LabelOwnedError struct {
	Route    routes.Ref
	Rollout  string
	Key      string
	Managers []string
}

// Reason is the Event reason of the error (package events).
func (e *LabelOwnedError) Reason() string { return "Conflict" }

func (e *LabelOwnedError) Error() string {
	return fmt.Sprintf("%s: rollout %s: the in-progress label %s is set to another value by %s on this route, and the plugin would take it over and delete it when the rollout ends; "+
		"nothing was written. Set inProgressLabelKey to a key of the plugin's own (default rollouts.argoproj.io/gatewayapi-canary), or disableInProgressLabel: true",
		e.Route, e.Rollout, e.Key, strings.Join(e.Managers, ", "))
}

// InvalidError says the call cannot be carried out on the route as it is: the
// route lacks what the call needs, or the call asks for something Gateway API
// does not allow. Its message says what to fix. A *transform.LimitError inside
// says a Gateway API limit would be exceeded.
type InvalidError struct{ Err error }

// Reason is the Event reason of the error (package events).
func (e *InvalidError) Reason() string { return "RouteMismatch" }

func (e *InvalidError) Error() string { return e.Err.Error() }
func (e *InvalidError) Unwrap() error { return e.Err }

func invalid(err error) error {
	var already *InvalidError
	if errors.As(err, &already) {
		return err
	}
	return &InvalidError{Err: err}
}

// Drift is a weight the plugin set that someone else has changed since, and
// that the plugin's next write would change again.
type Drift struct {
	Rule    int
	Service string
	// Set is what the plugin set; Live what the route has now (-1: the
	// backendRef or its rule is gone); Desired what the plugin would set.
	Set, Live, Desired int64
}

func (d Drift) String() string {
	return fmt.Sprintf("%s, the plugin would set %d", d.changed(), d.Desired)
}

// changed says what the drift is, without what the next call would set.
func (d Drift) changed() string {
	now := fmt.Sprint(d.Live)
	if d.Live < 0 {
		now = "removed"
	}
	return fmt.Sprintf("rule %d Service %s weight: the plugin set %d, now %s", d.Rule, d.Service, d.Set, now)
}

// findDrift compares what the plugin recorded as set with the live rules and
// the rules it wants: a value someone else changed is drift only if the
// plugin would change it again, so a change that agrees with the plugin
// (e.g. a GitOps sync to the weights the rollout goes back to) is not.
func findDrift(namespace string, live, desired []routes.Rule, recorded []routes.RecordedWeight) []Drift {
	var out []Drift
	for _, rec := range recorded {
		target := serviceFromKey(rec.Service)
		liveW := weightOf(namespace, live, rec, target)
		if liveW == rec.Weight {
			continue
		}
		desiredW := weightOf(namespace, desired, rec, target)
		if desiredW == liveW {
			continue
		}
		out = append(out, Drift{Rule: rec.Rule, Service: rec.Service, Set: rec.Weight, Live: liveW, Desired: desiredW})
	}
	return out
}

func serviceFromKey(key string) routes.ObjectRef {
	ns, name, _ := strings.Cut(key, "/")
	return routes.ServiceRef(ns, name)
}

// weightOf is the weight of target in the recorded rule, -1 if it is gone.
func weightOf(namespace string, rules []routes.Rule, rec routes.RecordedWeight, target routes.ObjectRef) int64 {
	i := routes.LocateRule(rules, rec.Rule, rec.RuleName)
	if i < 0 {
		return -1
	}
	j := rules[i].LastRef(namespace, target)
	if j < 0 {
		return -1
	}
	return rules[i].BackendRefs()[j].Weight()
}

// findFilterDrift lists the mirror filters the plugin added that someone
// else removed or changed since, and that the plugin would add again.
func findFilterDrift(live, desired []routes.Rule, recorded []routes.AddedFilter) []string {
	var out []string
	for _, f := range recorded {
		if !transform.HasFilter(live, f) && transform.HasFilter(desired, f) {
			out = append(out, filterChanged(f))
		}
	}
	return out
}

// findRefFilterDrift lists the backendRef filters the plugin added that
// someone else removed or changed since, and that the plugin would add again.
func findRefFilterDrift(namespace string, live, desired []routes.Rule, recorded []routes.AddedRefFilter) []string {
	var out []string
	for _, f := range recorded {
		if !transform.HasRefFilter(namespace, live, f) && transform.HasRefFilter(namespace, desired, f) {
			out = append(out, refFilterChanged(f))
		}
	}
	return out
}

// refFilterChanged says that a backendRef filter the plugin added is gone or
// no longer what it added.
func refFilterChanged(f routes.AddedRefFilter) string {
	return fmt.Sprintf("sticky cookie filter on Service %s in rule %d: removed or changed since the plugin added it", f.Backend, f.Rule)
}

// findRuleDrift lists the rules the plugin added that someone else changed or
// removed since, and that the plugin would change again. A rule added without
// a name is on the route only as the plugin wrote it (located): changed, it
// is no longer known as the plugin's.
func findRuleDrift(live, desired []routes.Rule, claim routes.Claim, located map[string]bool) []string {
	byName := func(rules []routes.Rule, name string) (routes.Rule, bool) {
		for _, r := range rules {
			if r.Name() == name {
				return r, true
			}
		}
		return nil, false
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(claim.RuleDigests)) {
		liveRule, inLive := byName(live, name)
		if inLive && (located[name] || routes.RuleDigest(liveRule) == claim.RuleDigests[name]) {
			continue
		}
		desiredRule, inDesired := byName(desired, name)
		if inLive == inDesired && (!inLive || routes.RuleDigest(liveRule) == routes.RuleDigest(desiredRule)) {
			continue // the plugin would leave it as the other owner left it
		}
		switch {
		case inLive:
			out = append(out, fmt.Sprintf("rule %q: changed since the plugin wrote it", name))
		case slices.Contains(claim.Unnamed, name):
			out = append(out, fmt.Sprintf("rule %q (written without a name, as the CRD has no rule names): changed or removed since the plugin added it", name))
		default:
			out = append(out, fmt.Sprintf("rule %q: removed since the plugin added it", name))
		}
	}
	return out
}

// filterChanged says that a mirror filter the plugin added is gone or no
// longer what it added.
func filterChanged(f routes.AddedFilter) string {
	return fmt.Sprintf("mirror filter %q in rule %d: removed or changed since the plugin added it", f.Entry, f.Rule)
}
