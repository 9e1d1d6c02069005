package desired

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/transform"
)

// checkedConditions are the conditions every parent must report True for the
// route's current generation, in the order they are checked.
var checkedConditions = []string{routes.ConditionAccepted, routes.ConditionResolvedRefs}

// Verdict is what VerifyStatus found on one route. The route is verified when
// both Behind and Failed are empty.
type Verdict struct {
	Route      routes.Ref
	Generation int64
	// Behind says what is not there yet: the spec does not carry the desired
	// weights, a parent has no status, or a condition is missing, Unknown or
	// reported for an older generation. Waiting may fix it.
	Behind []Finding
	// Failed lists the conditions a gateway controller reported False for the
	// route's current generation: waiting will not fix them.
	Failed []Finding
}

// Verified says whether every check held.
func (v Verdict) Verified() bool { return len(v.Behind) == 0 && len(v.Failed) == 0 }

// Finding is one thing VerifyStatus found wrong.
type Finding struct {
	// Parent is the parent the finding is about; nil for the spec.
	Parent *routes.ParentRef
	// ControllerName is the gateway controller that wrote the status entry.
	ControllerName string
	// Condition is the condition type, "" when the finding is not about one.
	Condition          string
	Status             string
	Reason             string
	Message            string
	ObservedGeneration int64
	// Detail says what is wrong, in words.
	Detail string
}

func (f Finding) String() string {
	var b strings.Builder
	if f.Parent != nil {
		fmt.Fprintf(&b, "parent %s: ", f.Parent)
	}
	b.WriteString(f.Detail)
	return b.String()
}

// String lists the findings, for a log line or an error.
func (v Verdict) String() string {
	var parts []string
	for _, f := range v.Failed {
		parts = append(parts, f.String())
	}
	for _, f := range v.Behind {
		parts = append(parts, f.String())
	}
	return fmt.Sprintf("%s (generation %d): %s", v.Route, v.Generation, strings.Join(parts, "; "))
}

// BackendWeight is a backend other than stable and canary (an experiment
// Service) and the weight it must have in every weighted rule.
type BackendWeight struct {
	Backend routes.ObjectRef
	Weight  int64
}

// VerifyStatus says whether a route carries a split and its gateways have
// accepted it:
//
//   - the live spec carries the split's weights in every weighted rule, and
//     the last backendRef to each extra backend there has its weight (the
//     experiment transform appends one per Service);
//   - for every parent that spec.parentRefs names, every status.parents entry
//     for that parent reports Accepted=True and ResolvedRefs=True with an
//     observedGeneration of at least the route's metadata.generation.
//
// A parent without a status entry, a missing or Unknown condition and a
// condition for an older generation put the route Behind; a condition False
// for the current generation is Failed, and so is PartiallyInvalid=True for
// it (the controller dropped rules, maybe the ones carrying the weights).
// When the spec does not carry the weights yet, that is the only finding: the
// status cannot be about them. A route whose spec.parentRefs is empty is
// Behind: no gateway serves it. Status entries for parents spec.parentRefs
// does not name are ignored. The error is the one SetWeights gives for the
// same split (no weighted rule, weight out of range).
func VerifyStatus(r routes.Route, s transform.Split, extra []BackendWeight, ruleName string) (Verdict, error) {
	v := Verdict{Route: r.Ref, Generation: r.Generation}
	// A claims annotation that does not parse hides no weighted rule here;
	// SetWeight reports it.
	claims, _ := routes.ReadClaims(r)
	if view, _, err := claims.Named(r); err == nil {
		r = view // the rules the plugin added without a name are added rules here too
	}
	descs, err := specBehind(r, s, extra, transform.Targeting{Added: claims.AddedRules(), RuleName: ruleName})
	if err != nil {
		return v, err
	}
	if len(descs) > 0 {
		v.Behind = append(v.Behind, Finding{
			Detail: "spec does not carry the desired weights yet: " + strings.Join(descs, ", "),
		})
		return v, nil
	}
	if len(r.Parents.Refs) == 0 {
		v.Behind = append(v.Behind, Finding{
			Detail: "spec.parentRefs names no parent: no gateway serves this route, so none can carry the weights",
		})
		return v, nil
	}
	seen := map[routes.ParentRef]bool{}
	for _, ref := range r.Parents.Refs {
		if !seen[ref] {
			seen[ref] = true
			behind, failed := parentFindings(r, ref)
			v.Behind, v.Failed = append(v.Behind, behind...), append(v.Failed, failed...)
		}
	}
	return v, nil
}

// specBehind says, weight by weight, where the route's spec does not carry
// the split yet (as SetWeights would change it) and where a weighted rule's
// last backendRef to an extra backend lacks its weight; the error is
// SetWeights'.
func specBehind(r routes.Route, s transform.Split, extra []BackendWeight, t transform.Targeting) ([]string, error) {
	_, changes, err := transform.SetWeights(r, s, t)
	var none *transform.NoWeightedRuleError
	if errors.As(err, &none) && s.CanaryWeight == 0 && len(extra) == 0 && len(transform.StableOnly(r.Namespace, r.Rules, s.Stable, s.Canary, t)) > 0 {
		return nil, nil // rules with stable alone (addCanaryBackendRef after the rollout) carry weight 0
	}
	if err != nil {
		return nil, err
	}
	var descs []string
	for _, c := range changes {
		descs = append(descs, fmt.Sprintf("rule %d %s has weight %d, want %d", c.Rule, c.Backend, c.From, c.To))
	}
	for _, i := range transform.WeightedRules(r.Namespace, r.Rules, s.Stable, s.Canary, t) {
		for _, want := range extra {
			j := r.Rules[i].LastRef(r.Namespace, want.Backend)
			switch {
			case j < 0:
				descs = append(descs, fmt.Sprintf("rule %d has no backendRef to %s (want weight %d)", i, want.Backend, want.Weight))
			case r.Rules[i].BackendRefs()[j].Weight() != want.Weight:
				descs = append(descs, fmt.Sprintf("rule %d %s has weight %d, want %d", i, want.Backend, r.Rules[i].BackendRefs()[j].Weight(), want.Weight))
			}
		}
	}
	return descs, nil
}

// parentFindings are what the route's status entries for one parent say:
// Behind when there is none, and each checked condition that is not True
// for the route's generation; Failed, each False for it and a
// PartiallyInvalid=True.
func parentFindings(r routes.Route, parent routes.ParentRef) (behind, failed []Finding) {
	var entries []routes.ParentStatus
	for _, st := range r.Parents.Status {
		if st.ParentRef == parent {
			entries = append(entries, st)
		}
	}
	if len(entries) == 0 {
		return []Finding{{
			Parent: &parent,
			Detail: "no status.parents entry: no gateway controller has reported on this parent yet",
		}}, nil
	}
	for _, st := range entries {
		for _, typ := range checkedConditions {
			if f, isFailed, ok := checkCondition(st, typ, r.Generation); !ok {
				f.Parent = &parent
				if isFailed {
					failed = append(failed, f)
				} else {
					behind = append(behind, f)
				}
			}
		}
		if f, dropped := droppedRules(st, r.Generation); dropped {
			f.Parent = &parent
			failed = append(failed, f)
		}
	}
	return behind, failed
}

// checkCondition checks one condition of one status entry. ok means it is True
// for the generation; otherwise failed tells False-for-this-generation from
// "not there yet".
func checkCondition(st routes.ParentStatus, typ string, generation int64) (f Finding, failed, ok bool) {
	f = Finding{ControllerName: st.ControllerName, Condition: typ}
	var cond *routes.Condition
	for i := range st.Conditions {
		if st.Conditions[i].Type == typ {
			cond = &st.Conditions[i]
			break
		}
	}
	if cond == nil {
		f.Detail = fmt.Sprintf("%s has no %s condition", controller(st), typ)
		return f, false, false
	}
	f.Status, f.Reason, f.Message, f.ObservedGeneration = cond.Status, cond.Reason, cond.Message, cond.ObservedGeneration
	if cond.ObservedGeneration < generation {
		gen := fmt.Sprintf("observedGeneration %d", cond.ObservedGeneration)
		if cond.ObservedGeneration == 0 {
			gen = "no observedGeneration"
		}
		f.Detail = fmt.Sprintf("%s reported %s=%s for an older generation (%s < generation %d)",
			controller(st), typ, cond.Status, gen, generation)
		return f, false, false
	}
	switch cond.Status {
	case "True":
		return f, false, true
	case "False":
		f.Detail = fmt.Sprintf("%s reports %s=False for generation %d: reason %s: %s",
			controller(st), typ, cond.ObservedGeneration, cond.Reason, cond.Message)
		return f, true, false
	}
	f.Detail = fmt.Sprintf("%s reports %s=%s for generation %d (reason %s: %s)",
		controller(st), typ, cond.Status, cond.ObservedGeneration, cond.Reason, cond.Message)
	return f, false, false
}

// droppedRules reports PartiallyInvalid=True for the generation: the
// controller accepted the route but dropped some of its rules, and the
// weighted rules may be among them.
func droppedRules(st routes.ParentStatus, generation int64) (Finding, bool) {
	for _, c := range st.Conditions {
		if c.Type == routes.ConditionPartiallyInvalid && c.Status == "True" && c.ObservedGeneration >= generation {
			return Finding{
				ControllerName: st.ControllerName, Condition: c.Type, Status: c.Status, Reason: c.Reason,
				Message: c.Message, ObservedGeneration: c.ObservedGeneration,
				Detail: fmt.Sprintf("%s reports PartiallyInvalid=True for generation %d (reason %s: %s): "+
					"it dropped invalid rules, which may include the ones carrying the weights",
					controller(st), c.ObservedGeneration, c.Reason, c.Message),
			}, true
		}
	}
	return Finding{}, false
}

func controller(st routes.ParentStatus) string {
	if st.ControllerName == "" {
		return "the gateway controller"
	}
	return st.ControllerName
}
