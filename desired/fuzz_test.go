package desired

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes/routestest"
	"github.com/gatewayapi-ssa/rollouts-plugin/transform"
)

// Fuzz targets, one per route transform, each through the call that runs it
// (SetWeight: transform.SetWeights and transform.SetExperimentRefs; SetHeader:
// transform.SetHeaderRules; SetMirror: transform.SetMirrorRule; RemoveManaged:
// transform.RemoveAddedRules), on the in-memory server of fixture_test.go. The
// fuzzer picks the route (kinds, rules weighted or not, names, matches,
// filters, a field no Gateway API release has) and the call's values. For
// every input:
//
//   - the call answers, or fails with one of the core's typed errors; it
//     never panics and never changes the live route it was given;
//   - only managed values change: the weights of stable and canary in the
//     weighted rules, the experiment backendRefs, the added rules;
//   - the same call twice is the call once: the second decides Unchanged;
//   - removal restores the original: the end of the rollout (or the step
//     without a match, or RemoveManagedRoutes) leaves the rules exactly as
//     they were, and lets go of the route.
//
// `go test` runs the seeds; `make fuzz` runs each target for FUZZTIME.

// choices reads fuzz bytes as a sequence of choices; past the end every
// choice is the first option.
type choices struct {
	b []byte
	i int
}

func (c *choices) n(k int) int {
	if k <= 1 || c.i >= len(c.b) {
		return 0
	}
	v := int(c.b[c.i]) % k
	c.i++
	return v
}

func (c *choices) pick(opts ...string) string { return opts[c.n(len(opts))] }

// fuzzRules is a route's rules as served: 1 to 5, each weighted (stable at
// max, canary at 0, maybe another team's backend), stable only, or another
// team's; with or without a name, a path match (HTTPRoute), a filter, a field
// this build does not know.
func fuzzRules(c *choices, kind routes.Kind, max int64) []routes.Rule {
	n := 1 + c.n(5)
	rules := make([]routes.Rule, 0, n)
	for i := range n {
		path := ""
		if kind == routes.HTTPRoute {
			path = fmt.Sprintf("/p%d", c.n(4))
		}
		var r routes.Rule
		switch c.n(4) {
		case 0, 1:
			refs := []map[string]any{routestest.BackendOn("stable", 80, max), routestest.BackendOn("canary", 80, 0)}
			if c.n(2) == 1 {
				refs = append(refs, routestest.BackendOn("legacy", 80, int64(c.n(50))))
			}
			if c.n(2) == 1 {
				slices.Reverse(refs)
			}
			r = routestest.Rule(path, refs...)
		case 2:
			r = routestest.Rule(path, routestest.BackendOn("stable", 80, int64(1+c.n(9))))
		default:
			r = routestest.Rule(path, routestest.BackendOn("static", 80, int64(1+c.n(9))))
		}
		if c.n(2) == 1 {
			r["name"] = fmt.Sprintf("rule-%d", i)
		}
		if c.n(3) == 0 {
			r["filters"] = []any{map[string]any{"type": "RequestHeaderModifier",
				"requestHeaderModifier": map[string]any{"add": []any{map[string]any{"name": "x-team", "value": "web"}}}}}
		}
		if c.n(4) == 0 {
			r["futureField"] = map[string]any{"mode": c.pick("a", "b")}
		}
		rules = append(rules, r)
	}
	return rules
}

func fuzzKind(c *choices, kinds ...routes.Kind) routes.Kind { return kinds[c.n(len(kinds))] }

func fuzzEnv() Env {
	return Env{Rollout: "shop/demo", FieldManager: plugin, ConflictPolicy: ReportConflicts,
		InProgressLabel: map[string]string{"rollouts.argoproj.io/gatewayapi-canary": "in-progress"}, TakesHeaderRoutes: true}
}

// decideAndApply runs a call as the plugin does (decide, apply unless
// Unchanged, release when told) and checks that it never touches its input
// and fails only with a typed error.
func decideAndApply(t *testing.T, s *server, c Intent) (Result, error) {
	t.Helper()
	live := s.live()
	before := live.DeepCopy()
	r, err := c.Desired(live, fuzzEnv())
	if diff := cmp.Diff(before, live); diff != "" {
		t.Fatalf("the call changed the live route it was given (-before +after):\n%s", diff)
	}
	if err != nil {
		var invalid *InvalidError
		var limit *transform.LimitError
		var conflict *ConflictError
		if !errors.As(err, &invalid) && !errors.As(err, &limit) && !errors.As(err, &conflict) {
			t.Fatalf("an error of type %T, not one of the core's: %v", err, err)
		}
		return Result{}, err
	}
	if !r.Unchanged {
		s.pluginApply(r)
	}
	if r.Release {
		s.release()
	}
	return r, nil
}

// twiceIsOnce runs the call again on what the first left and requires that it
// has nothing left to do.
func twiceIsOnce(t *testing.T, s *server, c Intent) {
	t.Helper()
	writes := s.writes
	r, err := decideAndApply(t, s, c)
	if err != nil {
		t.Fatalf("the same call again failed: %v", err)
	}
	if !r.Unchanged || s.writes != writes {
		t.Fatalf("the same call again changed the route: %v", r.Changes)
	}
}

// restored requires the rules to be the original ones and the plugin to own
// nothing on the route any more.
func restored(t *testing.T, s *server, original []routes.Rule, what string) {
	t.Helper()
	if diff := cmp.Diff(original, s.route.Rules); diff != "" {
		t.Fatalf("%s did not restore the original rules (-original +now):\n%s", what, diff)
	}
	if _, owns := s.owners[plugin]; owns {
		t.Fatalf("%s left the plugin an owner of the route", what)
	}
	if _, has := s.route.Annotations[routes.ClaimsAnnotation]; has {
		t.Fatalf("%s left the claims annotation", what)
	}
}

func newFuzzServer(t *testing.T, kind routes.Kind, rules []routes.Rule) *server {
	return newFuzzServerOn(t, kind, routes.Schema{}, rules)
}

// newFuzzServerOn is a server whose CRD has schema; on one without rule
// names, the rules lose theirs (no one could have written them).
func newFuzzServerOn(t *testing.T, kind routes.Kind, schema routes.Schema, rules []routes.Rule) *server {
	s := newServer(t, kind)
	s.schema = schema
	if schema.LacksRuleNames {
		for _, r := range rules {
			delete(r, "name")
		}
	}
	s.setRules(kubectl, metav1.ManagedFieldsOperationUpdate, rules)
	s.bump()
	return s
}

// fuzzSchema is the installed CRD: the newest, or the standard channel of
// v1.3 (no rule names) or v1.2 (no mirror percentage either).
func fuzzSchema(crd uint8) routes.Schema {
	return []routes.Schema{{}, {LacksRuleNames: true}, {LacksRuleNames: true, LacksMirrorPercent: true}}[crd%3]
}

// weighted lists the indexes of the rules holding both stable and canary.
func weighted(rules []routes.Rule) []int {
	var out []int
	for i, r := range rules {
		if r.CountRefs(ns, svc("stable")) > 0 && r.CountRefs(ns, svc("canary")) > 0 {
			out = append(out, i)
		}
	}
	return out
}

// unmanaged is the rules without what SetWeight manages: the stable and
// canary weights of the weighted rules, and the experiment backendRefs.
func unmanaged(rules []routes.Rule, weightedRules []int) []routes.Rule {
	out := routes.CopyRules(rules)
	for _, i := range weightedRules {
		refs, _ := out[i]["backendRefs"].([]any)
		kept := []any{}
		for _, b := range refs {
			ref := routes.BackendRef(b.(map[string]any))
			switch ref.Target(ns) {
			case svc("stable"), svc("canary"):
				ref["weight"] = "managed"
			case svc("exp-a"), svc("exp-b"):
				continue
			}
			kept = append(kept, b)
		}
		out[i]["backendRefs"] = kept
	}
	return out
}

func FuzzSetWeights(f *testing.F) {
	for _, seed := range [][]byte{
		{}, {0, 1, 0, 0, 30}, {0, 3, 1, 1, 1, 0, 2, 3, 50, 2, 10, 20}, {2, 2, 0, 1, 0, 1, 1, 1, 99, 1, 5},
		{1, 4, 3, 2, 1, 0, 3, 2, 1, 0, 0, 0, 100, 2, 60, 60}, {3, 1, 0, 0, 0, 0, 0, 0, 1, 1, 200},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := &choices{b: data}
		kind := fuzzKind(c, routes.HTTPRoute, routes.GRPCRoute, routes.TCPRoute, routes.TLSRoute, routes.UDPRoute)
		max := []int64{100, 1000, transform.MaxBackendWeight}[c.n(3)]
		original := fuzzRules(c, kind, max)
		s := newFuzzServer(t, kind, original)
		call := SetWeight{
			Split:      transform.Split{Stable: svc("stable"), Canary: svc("canary"), CanaryWeight: max * int64(c.n(101)) / 100, MaxWeight: max},
			Experiment: transform.ExperimentInput{RolloutNamespace: ns, Stable: svc("stable"), Canary: svc("canary")},
		}
		for _, name := range []string{"exp-a", "exp-b"}[:c.n(3)] {
			d := transform.ExperimentDestination{Service: name, Weight: max * int64(c.n(60)) / 100, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}
			call.Experiment.Destinations = append(call.Experiment.Destinations, d)
			call.Split.Reserved += d.Weight
		}
		if _, err := decideAndApply(t, s, call); err != nil {
			return
		}
		w := weighted(original)
		if diff := cmp.Diff(unmanaged(original, w), unmanaged(s.route.Rules, w)); diff != "" {
			t.Fatalf("SetWeight changed what it does not manage (-original +now):\n%s", diff)
		}
		for _, i := range w {
			r := s.route.Rules[i]
			stable := r.BackendRefs()[r.LastRef(ns, svc("stable"))].Weight()
			canary := r.BackendRefs()[r.LastRef(ns, svc("canary"))].Weight()
			if stable != call.Split.StableWeight() || canary != call.Split.CanaryWeight {
				t.Fatalf("rule %d: stable %d canary %d, want %d and %d", i, stable, canary, call.Split.StableWeight(), call.Split.CanaryWeight)
			}
			for _, d := range call.Experiment.Destinations {
				if n := r.CountRefs(ns, svc(d.Service)); n != 1 {
					t.Fatalf("rule %d holds %d backendRefs to %s, want 1", i, n, d.Service)
				}
			}
		}
		twiceIsOnce(t, s, call)
		end := call
		end.Split.CanaryWeight, end.Split.Reserved, end.Experiment.Destinations = 0, 0, nil
		if _, err := decideAndApply(t, s, end); err != nil {
			t.Fatalf("the end of the rollout failed: %v", err)
		}
		restored(t, s, original, "SetWeight(0) without the experiment")
	})
}

// stringValues are the values a fuzzed string match picks from, valid ones
// first.
type stringValues struct{ prefix, exact, regex []string }

var (
	headerValues = stringValues{
		prefix: []string{"be", "a.b*", ""},
		exact:  []string{"yes", "beta", "a b", " yes", "x\ny"},
		regex:  []string{"^(yes|true)$", `\d+`, "([", "(?=x)"},
	}
	pathValues = stringValues{
		prefix: []string{"/api", "/svc.v1.Greeter/", "/p1", "/p2/x", "/a//b", "api"},
		exact:  []string{"/api/v1", "/svc.v1.Greeter/Hello", "/p0/login", "/a/../b", "/svc-x/Get"},
		regex:  []string{"/api/v[0-9]+", "/api/(v1"},
	}
)

// fuzzStringMatch is a step's string match: a prefix, exact or regex value,
// valid or not, two of them at once, or none.
func fuzzStringMatch(c *choices, v stringValues) *transform.StringMatch {
	switch c.n(6) {
	case 0:
		return &transform.StringMatch{Prefix: c.pick(v.prefix...)}
	case 1:
		return &transform.StringMatch{Exact: c.pick(v.exact...)}
	case 2:
		return &transform.StringMatch{Regex: c.pick(v.regex...)}
	case 3:
		return &transform.StringMatch{Exact: v.exact[0], Prefix: v.prefix[0]}
	case 4:
		return nil
	}
	return &transform.StringMatch{}
}

// removal takes the added rules away again, by the step without a match or
// by RemoveManagedRoutes.
func removal(c *choices, step Intent) Intent {
	if c.n(2) == 0 {
		return RemoveManaged{}
	}
	return step
}

func FuzzSetHeaderRules(f *testing.F) {
	for _, seed := range [][]byte{{}, {0, 2, 0, 0, 1, 0, 0, 0}, {1, 3, 1, 0, 0, 2, 1, 0, 1, 2}, {0, 1, 0, 0, 0, 0, 0, 1, 2, 1}, {0, 4, 1, 1, 2, 3, 0, 0, 2, 0, 0},
		{0, 2, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 1}} {
		for crd := range uint8(3) {
			f.Add(seed, crd)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, crd uint8) {
		c := &choices{b: data}
		kind := fuzzKind(c, routes.HTTPRoute, routes.GRPCRoute)
		original := fuzzRules(c, kind, 100)
		step := SetHeader{Name: "beta", Rules: ruleServices}
		for range 1 + c.n(3) {
			step.Match = append(step.Match, transform.HeaderMatch{Name: c.pick("X-Canary", "x-beta", "X Canary", ""), Value: fuzzStringMatch(c, headerValues)})
		}
		s := newFuzzServerOn(t, kind, fuzzSchema(crd), original)
		off := step
		off.Match = nil
		addedThenRemoved(t, s, original, step, removal(c, off), "the header rules")
	})
}

func FuzzSetMirrorRule(f *testing.F) {
	for _, seed := range [][]byte{{}, {0, 2, 0, 0, 1, 2, 1, 0, 1}, {1, 3, 1, 0, 0, 1, 0, 1, 0, 2}, {0, 1, 0, 0, 0, 3, 5, 0, 1, 1},
		{0, 2, 0, 0, 1, 2, 1, 0, 3, 0, 0, 0, 0, 1, 1}} {
		for crd := range uint8(3) {
			f.Add(seed, crd)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, crd uint8) {
		c := &choices{b: data}
		kind := fuzzKind(c, routes.HTTPRoute, routes.GRPCRoute)
		original := fuzzRules(c, kind, 100)
		percents := []*int32{nil, new(int32(0)), new(int32(50)), new(int32(100)), new(int32(150)), new(int32(-1))}
		step := SetMirror{Name: "mirror", Rules: ruleServices, Percent: percents[c.n(len(percents))]}
		for range 1 + c.n(2) {
			m := transform.RequestMatch{Path: fuzzStringMatch(c, pathValues)}
			if c.n(3) == 0 {
				m.Method = &transform.StringMatch{Exact: c.pick("GET", "POST", "FETCH")}
			}
			if c.n(3) == 0 {
				if v := fuzzStringMatch(c, headerValues); v != nil {
					m.Headers = map[string]transform.StringMatch{c.pick("X-Mirror", "Bad Name"): *v}
				}
			}
			step.Match = append(step.Match, m)
		}
		s := newFuzzServerOn(t, kind, fuzzSchema(crd), original)
		off := step
		off.Match = nil
		addedThenRemoved(t, s, original, step, removal(c, off), "the mirror rule")
	})
}

// addedThenRemoved runs a step that adds rules: if it succeeds, it added
// rules and changed nothing else, doing it again changes nothing, and
// removing them restores the original.
func addedThenRemoved(t *testing.T, s *server, original []routes.Rule, step, remove Intent, what string) {
	t.Helper()
	res, err := decideAndApply(t, s, step)
	if err != nil {
		return
	}
	addedOnly(t, original, s.route.Rules, res.Claim)
	confined(t, s.route.Kind, original, s.route.Rules[len(original):])
	twiceIsOnce(t, s, step)
	if _, err := decideAndApply(t, s, remove); err != nil {
		t.Fatalf("removing %s failed: %v", what, err)
	}
	// The controller's SetWeight after the removal lets go of the route; a
	// call that only releases (Undo, with no claim left) does the same here.
	if _, err := decideAndApply(t, s, Undo{}); err != nil {
		t.Fatalf("releasing after removing %s failed: %v", what, err)
	}
	restored(t, s, original, "removing "+what)
}

// confined requires every match of the added rules of an HTTPRoute to have
// a path within the path of a weighted rule (the fuzzed rules match by
// PathPrefix), so that no added rule takes another rule's requests.
func confined(t *testing.T, kind routes.Kind, original, added []routes.Rule) {
	t.Helper()
	if kind != routes.HTTPRoute {
		return
	}
	var prefixes []string
	for _, i := range weighted(original) {
		for _, m := range original[i]["matches"].([]any) {
			prefixes = append(prefixes, m.(map[string]any)["path"].(map[string]any)["value"].(string))
		}
	}
	for _, r := range added {
		for j, m := range r["matches"].([]any) {
			path := m.(map[string]any)["path"].(map[string]any)
			value := path["value"].(string)
			within := path["type"] != "RegularExpression" && slices.ContainsFunc(prefixes, func(p string) bool {
				return value == p || strings.HasPrefix(value, p+"/")
			})
			if !within {
				t.Fatalf("added rule %q match %d has path %v, within no weighted rule's prefix %v", r.Name(), j, path, prefixes)
			}
		}
	}
}

// addedOnly requires the rules to be the original ones followed by the added
// rules, each named by the claim, or, stored without a name, known to it by
// its digest.
func addedOnly(t *testing.T, original, now []routes.Rule, claim routes.Claim) {
	t.Helper()
	if len(now) < len(original) {
		t.Fatalf("%d rules, fewer than the original %d", len(now), len(original))
	}
	if diff := cmp.Diff(original, now[:len(original)]); diff != "" {
		t.Fatalf("the step changed rules it did not add (-original +now):\n%s", diff)
	}
	for _, r := range now[len(original):] {
		if r.Name() == "" {
			if !slices.ContainsFunc(claim.Unnamed, func(n string) bool { return claim.RuleDigests[n] == routes.RuleDigest(r) }) {
				t.Fatalf("added rule %v is unnamed and its digest is none of the claim's unnamed rules %v (%v)", r, claim.Unnamed, claim.RuleDigests)
			}
			continue
		}
		if !slices.Contains(claim.Rules, r.Name()) || slices.Contains(claim.Unnamed, r.Name()) {
			t.Fatalf("added rule %q is not in the claim %v as a named rule (unnamed: %v)", r.Name(), claim.Rules, claim.Unnamed)
		}
	}
	if len(now)-len(original) != len(claim.Rules) {
		t.Fatalf("%d rules added, %d claimed", len(now)-len(original), len(claim.Rules))
	}
}
