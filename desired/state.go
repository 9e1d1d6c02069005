package desired

import (
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/transform"
)

// state is what every call reads from the live route first: the claims,
// parsed once.
type state struct {
	// live is the route as decisions see it: the rules the plugin added
	// without a name carry their names (routes.Claims.Named); stored is the
	// route as read.
	live, stored routes.Route
	env          Env
	claims       routes.Claims
	// claim is the Rollout's claim as the live route records it: none when
	// it is another cluster's (cluster, below).
	claim routes.Claim
	// fleet is the claim of a Rollout of the same namespace and name that
	// another cluster of a fleet recorded on the route, while it is active:
	// that Rollout walks the route, and this one may not take it.
	fleet routes.Claim
	// added are the rules the plugin added for any Rollout.
	added map[string]bool
	// located are the rules added without a name that are on the route as
	// the plugin wrote them.
	located map[string]bool
	// owned is what the plugin's field manager owns on the live route.
	owned routes.Owned
	// adoptions say which rules of the argoproj-labs plugin the claim
	// adopted (adopt.go), for the write's changes.
	adoptions []routes.Change
}

// decide reads the live route and hands it to a call's decision.
func decide(live routes.Route, env Env, call func(state) (Result, error)) (Result, error) {
	s, err := read(live, env, false)
	if err != nil {
		return Result{}, err
	}
	return call(s)
}

// read parses the live route for a call of env; undo takes the claim the
// calling cluster made under an earlier name as its own (whose).
func read(live routes.Route, env Env, undo bool) (state, error) {
	claims, err := routes.ReadClaims(live)
	if err != nil {
		return state{}, invalid(err)
	}
	adopted, adoptions := env.Predecessor.adopt(live, claims, env.Rollout)
	if len(adopted.Rules) > 0 {
		claims = maps.Clone(claims)
		claims[env.Rollout] = adopted
	}
	view, located, err := claims.Named(live)
	if err != nil {
		return state{}, invalid(err)
	}
	s := state{live: view, stored: live, env: env, claims: claims, claim: claims[env.Rollout], added: claims.AddedRules(),
		located: located, owned: live.ManagedFields.Owned(env.FieldManager), adoptions: adoptions}
	mine, err := whose(live.Ref, s.claim, env, undo)
	if err != nil {
		return state{}, err
	}
	if !mine {
		if s.claim.Active() {
			s.fleet = s.claim
		}
		s.claim = routes.Claim{}
	}
	return s, nil
}

// ruleInput is what the header and mirror transforms need on this route.
func (s state) ruleInput(r transform.RolloutServices) transform.RuleInput {
	return transform.RuleInput{RolloutServices: r, Claimed: s.claim.Rules,
		Targeting: s.targeting(), AddedFilters: s.claims.AddedFilters(),
		AddedRefFilters: s.claims.AddedRefFilters()}
}

// targeting says which rules of the route are weighted rules for the Rollout.
func (s state) targeting() transform.Targeting {
	return transform.Targeting{Added: s.added, RuleName: s.env.RuleName}
}

// finishRules is finish for the calls that change added rules and mirror
// filters: the claim records the rules' names with a digest of each as
// written, and the filters.
func (s state) finishRules(res transform.RulesResult, filters []routes.AddedFilter) (Result, error) {
	claim := s.claim
	claim.Rules = res.Claimed
	claim.MirrorFilters = filters
	claim, res.Changes = s.recordRules(res.Rules, claim, res.Changes)
	// Not the release: the controller calls SetWeight right after, in the
	// same reconcile, and that call lets go. While the canary has no
	// available pods the controller calls RemoveManagedRoutes and then
	// SetHeaderRoute on every reconcile; letting go in between would cost an
	// Update and hand spec.rules to nobody and back, every time.
	return s.finish(res.Rules, res.Changes, claim, false)
}

// recordRules records in the claim the digest of each rule it names as the
// rules store it, and which of them are stored without a name; the changes
// then name those by what they are.
func (s state) recordRules(rules []routes.Rule, claim routes.Claim, changes []routes.Change) (routes.Claim, []routes.Change) {
	stored, unnamed := s.store(rules, claim)
	claim.RuleDigests = digestRules(rules, stored, claim.Rules)
	claim.Unnamed = s.unnamedAfter(rules, claim.Rules, unnamed)
	return claim, withoutNames(changes, unnamed)
}

// finish is what every call does with the rules it computed: refuse (or, with
// TakeOver, announce) overwriting another manager's change, record the claim,
// and derive the labels and annotations, whether anything changes and, for
// a call that may (mayRelease), whether the plugin lets go of the route. It
// is the one place the claims are updated.
//
// A Rollout that has nothing on the route and nothing to set there leaves
// it untouched, labels and annotations included: the route may be shared
// with Rollouts of other namespaces, whose in-progress label it is.
func (s state) finish(rules []routes.Rule, changes []routes.Change, claim routes.Claim, mayRelease bool) (Result, error) {
	takeover, err := s.checkConflict(rules)
	if err != nil {
		return Result{}, err
	}
	if !claim.Empty() {
		// On the cluster's own routes (no Cluster) a claim names none: a
		// name recorded there before goes.
		claim.Cluster, claim.ClusterUID = s.env.Cluster, s.env.ClusterUID
	}
	claims := maps.Clone(s.claims)
	claims[s.env.Rollout] = claim
	noneLeft := len(claims.Rollouts()) == 0
	stored, _ := s.store(rules, claim)
	if s.claim.Empty() && claim.Empty() && sameRules(s.stored.Rules, stored) {
		return Result{Rules: stored, Unchanged: true, Release: noneLeft && mayRelease}, nil
	}
	if s.fleet.Active() {
		return Result{}, &FleetConflictError{Route: s.live.Ref, Rollout: s.env.Rollout, Cluster: s.env.Cluster, Walking: s.fleet.Cluster}
	}
	r := Result{
		Rules:       stored,
		Annotations: claims.Annotations(),
		Claim:       claim,
		Release:     noneLeft && mayRelease,
		Changes:     slices.Concat(s.adoptions, changes, takeover),
		Needs:       s.introduced(rules, claim),
	}
	if !noneLeft {
		if r.Labels, err = s.labels(); err != nil {
			return Result{}, err
		}
	}
	ownedLabels, ownedAnnotations := s.owned.Labels, s.owned.Annotations
	r.Unchanged = sameRules(s.stored.Rules, stored) &&
		sameKeys(s.live.Labels, r.Labels, ownedLabels) && sameKeys(s.live.Annotations, r.Annotations, ownedAnnotations)
	r.Changes = append(r.Changes, keyChanges("label", s.live.Labels, r.Labels, ownedLabels)...)
	r.Changes = append(r.Changes, keyChanges("annotation", s.live.Annotations, r.Annotations, ownedAnnotations)...)
	return r, nil
}

// labels are the in-progress labels the plugin applies while any Rollout has
// a claim on the route: the calling Rollout's, and those the plugin applies
// now, which other Rollouts on the route set with keys this call cannot
// know; one left out would be deleted. A key of the calling Rollout's that
// another manager owns with another value is refused: the apply that starts a
// rollout is forced and would take it, and the label would go when the
// rollout ends. The same value is shared, and stays when the plugin lets go. The
// argoproj-labs plugin's in-progress label is this plugin's to take.
func (s state) labels() (map[string]string, error) {
	out := ownedLabels(s.stored, s.owned.Labels)
	for k, v := range s.env.InProgressLabel {
		if live, ok := s.stored.Labels[k]; ok && live != v && !slices.Contains(s.owned.Labels, k) {
			if others := s.stored.ManagedFields.LabelOwners(k, s.env.FieldManager, s.env.PredecessorManager); len(others) > 0 {
				return nil, &LabelOwnedError{Route: s.live.Ref, Rollout: s.env.Rollout, Key: k, Managers: others}
			}
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out, nil
}

// checkConflict tells whether the desired rules would overwrite values
// another manager changed since the plugin set them, while the Rollout is in
// progress on the route. With ReportConflicts that is a ConflictError; with
// TakeOver the plugin writes anyway and says so in the write's log line.
func (s state) checkConflict(desired []routes.Rule) ([]routes.Change, error) {
	if !s.claim.Active() || s.owned.Rules {
		// Not in progress here, or nobody has changed spec.rules since the plugin's last apply.
		return nil, nil
	}
	drift := findDrift(s.live.Namespace, s.live.Rules, desired, s.claim.Weights)
	ruleDrift := append(findRuleDrift(s.live.Rules, desired, s.claim, s.located), findFilterDrift(s.live.Rules, desired, s.claim.MirrorFilters)...)
	ruleDrift = append(ruleDrift, findRefFilterDrift(s.live.Namespace, s.live.Rules, desired, s.claim.RefFilters)...)
	if len(drift) == 0 && len(ruleDrift) == 0 {
		return nil, nil
	}
	conflict := &ConflictError{Route: s.live.Ref, Rollout: s.env.Rollout,
		Managers: s.live.ManagedFields.RulesOwners(s.env.FieldManager), Drift: drift, Rules: ruleDrift}
	if s.env.ConflictPolicy != TakeOver {
		return nil, conflict
	}
	return []routes.Change{routes.Changef(routes.RulesTakenOver, "conflictPolicy Force: took spec.rules over from %s", strings.Join(conflict.Managers, ", "))}, nil
}

func sameRules(live, desired []routes.Rule) bool {
	if len(live) != len(desired) {
		return false
	}
	for i := range live {
		if !equalJSON(map[string]any(live[i]), map[string]any(desired[i])) {
			return false
		}
	}
	return true
}

// equalJSON is reflect.DeepEqual of two values in their JSON form (maps,
// lists, strings, numbers, booleans, nil), without the allocations
// DeepEqual makes to walk maps; any other type is left to DeepEqual.
func equalJSON(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || (x == nil) != (y == nil) || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !equalJSON(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || (x == nil) != (y == nil) || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalJSON(x[i], y[i]) {
				return false
			}
		}
		return true
	case string:
		y, ok := b.(string)
		return ok && x == y
	case int64:
		y, ok := b.(int64)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case nil:
		return b == nil
	}
	return reflect.DeepEqual(a, b)
}

// sameKeys says whether live holds every wanted key with its value and the
// manager owns no key it no longer wants.
func sameKeys(live, want map[string]string, owned []string) bool {
	for k, v := range want {
		if got, ok := live[k]; !ok || got != v {
			return false
		}
	}
	for _, k := range owned {
		if _, keep := want[k]; !keep {
			return false
		}
	}
	return true
}

// keyChanges says which of the plugin's labels or annotations a write sets
// or stops applying.
func keyChanges(what string, live, want map[string]string, owned []string) []routes.Change {
	var out []routes.Change
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if got, ok := live[k]; !ok || got != want[k] {
			out = append(out, routes.Changef(routes.Bookkeeping, "%s %s set", what, k))
		}
	}
	for _, k := range owned {
		if _, keep := want[k]; !keep {
			out = append(out, routes.Changef(routes.Bookkeeping, "%s %s no longer applied", what, k))
		}
	}
	return out
}
