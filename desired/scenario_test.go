package desired

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes/routestest"
	"github.com/gatewayapi-ssa/rollouts-plugin/transform"
)

// Scenarios in the style of structured-merge-diff's multiple_appliers_test:
// operations by named managers on one route, and after each the route's
// weights, the plugin's answer, whether it wrote, and who owns spec.rules.

// op is one operation of a scenario; wrote says whether the plugin sent an
// apply.
type op interface {
	do(s *server) (wrote bool, err error)
}

// create is `kubectl create` of the route: an Update by manager.
type create struct {
	manager string
	rules   []routes.Rule
}

func (o create) do(s *server) (bool, error) {
	s.setRules(o.manager, metav1.ManagedFieldsOperationUpdate, o.rules)
	s.bump()
	return false, nil
}

// forceApply is a server-side apply with force, as Argo CD syncs.
type forceApply struct {
	manager string
	rules   []routes.Rule
}

func (o forceApply) do(s *server) (bool, error) {
	s.setRules(o.manager, metav1.ManagedFieldsOperationApply, o.rules)
	s.bump()
	return false, nil
}

// update is a read-modify-write of the rules by manager (kubectl edit, a controller).
type update struct {
	manager string
	edit    func(rules []routes.Rule)
}

func (o update) do(s *server) (bool, error) {
	rules := routes.CopyRules(s.route.Rules)
	o.edit(rules)
	s.setRules(o.manager, metav1.ManagedFieldsOperationUpdate, rules)
	s.bump()
	return false, nil
}

// label is an Update by manager that sets a label.
type label struct{ manager, key, value string }

func (o label) do(s *server) (bool, error) {
	if s.route.Labels == nil {
		s.route.Labels = map[string]string{}
	}
	s.route.Labels[o.key] = o.value
	s.ownerOf(o.manager, metav1.ManagedFieldsOperationUpdate).labels[o.key] = true
	s.bump()
	return false, nil
}

// call is one call of the controller for a Rollout, as the plugin carries it
// out: decide, apply unless unchanged, release when told.
type call struct {
	rollout string // default "shop/demo"
	c       Intent
	env     func(*Env)
}

func (o call) do(s *server) (bool, error) {
	env := Env{Rollout: "shop/demo", FieldManager: plugin, ConflictPolicy: ReportConflicts,
		InProgressLabel: map[string]string{"rollouts.argoproj.io/gatewayapi-canary": "in-progress"}, TakesHeaderRoutes: true}
	if o.rollout != "" {
		env.Rollout = o.rollout
	}
	if o.env != nil {
		o.env(&env)
	}
	live := s.live()
	before := live.DeepCopy()
	r, err := o.c.Desired(live, env)
	if diff := cmp.Diff(before, live); diff != "" {
		s.t.Errorf("the call changed the live route it was given (-before +after):\n%s", diff)
	}
	if err != nil {
		return false, err
	}
	if !r.Unchanged {
		s.pluginApply(r)
	}
	if r.Release {
		s.release()
	}
	return !r.Unchanged, nil
}

func force(e *Env) { e.ConflictPolicy = TakeOver }

// Calls.

func setWeight(w int64) SetWeight {
	return SetWeight{
		Split:      transform.Split{Stable: svc("stable"), Canary: svc("canary"), CanaryWeight: w, MaxWeight: 100},
		Experiment: transform.ExperimentInput{RolloutNamespace: ns, Stable: svc("stable"), Canary: svc("canary")},
	}
}

// withExperiment is SetWeight(w) with experiment Services name=weight.
func withExperiment(w int64, dests ...any) SetWeight {
	c := setWeight(w)
	for i := 0; i < len(dests); i += 2 {
		d := transform.ExperimentDestination{Service: dests[i].(string), Weight: int64(dests[i+1].(int)),
			Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}
		c.Experiment.Destinations = append(c.Experiment.Destinations, d)
		c.Split.Reserved += d.Weight
	}
	return c
}

var ruleServices = transform.RolloutServices{Stable: svc("stable"), Canary: svc("canary"), ManagedRoutes: []string{"beta", "mirror"}}

func header(name, value string) SetHeader {
	c := SetHeader{Name: "beta", Rules: ruleServices}
	if name != "" {
		c.Match = []transform.HeaderMatch{{Name: name, Value: &transform.StringMatch{Exact: value}}}
	}
	return c
}

func mirror(percent int32, path string) SetMirror {
	c := SetMirror{Name: "mirror", Percent: &percent, Rules: ruleServices}
	if path != "" {
		c.Match = []transform.RequestMatch{{Path: &transform.StringMatch{Prefix: path}}}
	}
	return c
}

// expect is the state after an operation.
type expect struct {
	weights map[string]int64
	err     []string // substrings of the error; nil: no error
	errAs   any      // a pointer to the error type the error must be (errors.As)
	wrote   bool
	owners  []string // managers owning spec.rules
	labels  map[string]string
	// claims says whether the claims annotation is on the route.
	claims bool
	// rules, if set, are the route's rules, whole.
	rules []routes.Rule
}

type step struct {
	op   op
	want expect
}

var inProgress = map[string]string{"rollouts.argoproj.io/gatewayapi-canary": "in-progress"}

func runScenario(t *testing.T, kind routes.Kind, steps []step) {
	t.Helper()
	runSteps(t, newServer(t, kind), steps)
}

func runSteps(t *testing.T, s *server, steps []step) {
	t.Helper()
	for i, st := range steps {
		where := fmt.Sprintf("step %d (%T %+v)", i+1, st.op, st.op)
		wrote, err := st.op.do(s)
		switch {
		case st.want.err == nil && err != nil:
			t.Fatalf("%s: unexpected error: %v", where, err)
		case st.want.err != nil && err == nil:
			t.Fatalf("%s: no error, want one mentioning %q", where, st.want.err)
		case err != nil:
			if w, ok := contains(err.Error(), st.want.err); !ok {
				t.Errorf("%s: error %q does not mention %q", where, err, w)
			}
			if st.want.errAs != nil && !errors.As(err, st.want.errAs) {
				t.Errorf("%s: error is %T, want %T", where, err, st.want.errAs)
			}
		}
		if wrote != st.want.wrote {
			t.Errorf("%s: wrote = %v, want %v", where, wrote, st.want.wrote)
		}
		if st.want.weights != nil {
			if diff := cmp.Diff(st.want.weights, s.weights()); diff != "" {
				t.Errorf("%s: weights (-want +got):\n%s", where, diff)
			}
		}
		if diff := cmp.Diff(st.want.owners, s.rulesOwners()); diff != "" {
			t.Errorf("%s: owners of spec.rules (-want +got):\n%s", where, diff)
		}
		if diff := cmp.Diff(st.want.labels, s.route.Labels); diff != "" {
			t.Errorf("%s: labels (-want +got):\n%s", where, diff)
		}
		if st.want.rules != nil {
			if diff := cmp.Diff(st.want.rules, s.route.Rules); diff != "" {
				t.Errorf("%s: rules (-want +got):\n%s", where, diff)
			}
		}
		if _, has := s.route.Annotations[routes.ClaimsAnnotation]; has != st.want.claims {
			t.Errorf("%s: claims annotation present = %v, want %v (%v)", where, has, st.want.claims, s.route.Annotations)
		}
	}
}

func gitWeights(stable, canary int64) map[string]int64 {
	return map[string]int64{"0/stable": stable, "0/canary": canary, "1/static": 1}
}

var (
	plugins = []string{plugin}
	argocd  = "argocd-controller"
	kubectl = "kubectl-create"
)

// The ownership table of test/ownership_test.go, decided in memory.
func TestOwnershipScenarios(t *testing.T) {
	conflictErr := new(*ConflictError)
	tests := []struct {
		name  string
		steps []step
	}{
		{"kubectl creates, the plugin walks, owns nothing after", []step{
			{create{kubectl, gitRules(100, 0)}, expect{weights: gitWeights(100, 0), owners: []string{kubectl}}},
			{call{c: setWeight(30)}, expect{weights: gitWeights(70, 30), wrote: true, owners: plugins, labels: inProgress, claims: true}},
			{call{c: setWeight(100)}, expect{weights: gitWeights(0, 100), wrote: true, owners: plugins, labels: inProgress, claims: true}},
			{call{c: setWeight(0)}, expect{weights: gitWeights(100, 0), wrote: true, owners: nil}},
		}},
		{"argocd re-applies Git mid-rollout: conflict error, Argo CD's values kept; Force takes over", []step{
			{forceApply{argocd, gitRules(100, 0)}, expect{weights: gitWeights(100, 0), owners: []string{argocd}}},
			{call{c: setWeight(30)}, expect{weights: gitWeights(70, 30), wrote: true, owners: plugins, labels: inProgress, claims: true}},
			{forceApply{argocd, gitRules(100, 0)}, expect{weights: gitWeights(100, 0), owners: []string{argocd}, labels: inProgress, claims: true}},
			{call{c: setWeight(50)}, expect{weights: gitWeights(100, 0), owners: []string{argocd}, labels: inProgress, claims: true, errAs: conflictErr,
				err: []string{"HTTPRoute shop/route: conflict", "rollout shop/demo", "argocd-controller (Apply)",
					"rule 0 Service shop/stable weight: the plugin set 70, now 100, the plugin would set 50", "conflictPolicy: Force"}}},
			{call{c: setWeight(50), env: force}, expect{weights: gitWeights(50, 50), wrote: true, owners: plugins, labels: inProgress, claims: true}},
			{call{c: setWeight(0)}, expect{weights: gitWeights(100, 0), wrote: true}},
		}},
		{"a GitOps sync to the values the rollout goes back to is no conflict", []step{
			{create{kubectl, gitRules(100, 0)}, expect{weights: gitWeights(100, 0), owners: []string{kubectl}}},
			{call{c: setWeight(30)}, expect{weights: gitWeights(70, 30), wrote: true, owners: plugins, labels: inProgress, claims: true}},
			{forceApply{argocd, gitRules(100, 0)}, expect{weights: gitWeights(100, 0), owners: []string{argocd}, labels: inProgress, claims: true}},
			// The rules stay as Argo CD left them; the plugin drops its label and claims, then lets go.
			{call{c: setWeight(0)}, expect{weights: gitWeights(100, 0), wrote: true, owners: []string{argocd}}},
		}},
		{"another controller edits an unmanaged rule mid-rollout: no conflict, its change kept", []step{
			{create{kubectl, gitRules(100, 0)}, expect{weights: gitWeights(100, 0), owners: []string{kubectl}}},
			{call{c: setWeight(30)}, expect{weights: gitWeights(70, 30), wrote: true, owners: plugins, labels: inProgress, claims: true}},
			{update{"other-controller", func(r []routes.Rule) { r[1]["filters"] = []any{map[string]any{"type": "RequestHeaderModifier"}} }},
				expect{weights: gitWeights(70, 30), owners: []string{"other-controller"}, labels: inProgress, claims: true}},
			{call{c: setWeight(50)}, expect{weights: gitWeights(50, 50), wrote: true, owners: plugins, labels: inProgress, claims: true}},
			{call{c: setWeight(0)}, expect{weights: gitWeights(100, 0), wrote: true}},
		}},
		{"a weight set again is no write; one already at 0 with nothing claimed neither", []step{
			{create{kubectl, gitRules(100, 0)}, expect{weights: gitWeights(100, 0), owners: []string{kubectl}}},
			{call{c: setWeight(0)}, expect{weights: gitWeights(100, 0), owners: []string{kubectl}}},
			{call{c: setWeight(30)}, expect{weights: gitWeights(70, 30), wrote: true, owners: plugins, labels: inProgress, claims: true}},
			{call{c: setWeight(30)}, expect{weights: gitWeights(70, 30), owners: plugins, labels: inProgress, claims: true}},
		}},
		{"a label another manager also set stays when the plugin lets go", []step{
			{create{kubectl, gitRules(100, 0)}, expect{weights: gitWeights(100, 0), owners: []string{kubectl}}},
			{label{"team", "rollouts.argoproj.io/gatewayapi-canary", "in-progress"}, expect{owners: []string{kubectl}, labels: inProgress}},
			{call{c: setWeight(30)}, expect{weights: gitWeights(70, 30), wrote: true, owners: plugins, labels: inProgress, claims: true}},
			{call{c: setWeight(0)}, expect{weights: gitWeights(100, 0), wrote: true, labels: inProgress}},
		}},
		{"an in-progress label key another manager sets otherwise is refused before any write", []step{
			{create{kubectl, gitRules(100, 0)}, expect{owners: []string{kubectl}}},
			{label{argocd, "app.kubernetes.io/instance", "shop"}, expect{owners: []string{kubectl}, labels: map[string]string{"app.kubernetes.io/instance": "shop"}}},
			{call{c: setWeight(30), env: func(e *Env) { e.InProgressLabel = map[string]string{"app.kubernetes.io/instance": "canary"} }},
				expect{owners: []string{kubectl}, labels: map[string]string{"app.kubernetes.io/instance": "shop"}, errAs: new(*LabelOwnedError),
					err: []string{"the in-progress label app.kubernetes.io/instance is set to another value by argocd-controller (Update"}}},
		}},
		{"the argoproj-labs plugin's in-progress label is taken over", []step{
			{create{kubectl, gitRules(100, 0)}, expect{owners: []string{kubectl}}},
			{label{"gatewayAPI", "rollouts.argoproj.io/gatewayapi-canary", "old"}, expect{owners: []string{kubectl}, labels: map[string]string{"rollouts.argoproj.io/gatewayapi-canary": "old"}}},
			{call{c: setWeight(30), env: func(e *Env) { e.PredecessorManager = "gatewayAPI" }},
				expect{weights: gitWeights(70, 30), wrote: true, owners: plugins, labels: inProgress, claims: true}},
		}},
		{"the in-progress label disabled: weights and claims only", []step{
			{create{kubectl, gitRules(100, 0)}, expect{owners: []string{kubectl}}},
			{call{c: setWeight(30), env: func(e *Env) { e.InProgressLabel = nil }}, expect{weights: gitWeights(70, 30), wrote: true, owners: plugins, claims: true}},
			{call{c: setWeight(0), env: func(e *Env) { e.InProgressLabel = nil }}, expect{weights: gitWeights(100, 0), wrote: true}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { runScenario(t, routes.HTTPRoute, tc.steps) })
	}
}

// Two Rollouts share one route, one rule each: neither conflicts with the
// other, and the plugin lets go only when both have ended.
func TestTwoRolloutsShareOneRoute(t *testing.T) {
	b := func(w int64) SetWeight {
		c := setWeight(w)
		c.Split.Stable, c.Split.Canary = svc("stable-b"), svc("canary-b")
		c.Experiment.Stable, c.Experiment.Canary = c.Split.Stable, c.Split.Canary
		return c
	}
	rules := []routes.Rule{
		routestest.Rule("/a", routestest.BackendOn("stable", 80, 100), routestest.BackendOn("canary", 80, 0)),
		routestest.Rule("/b", routestest.BackendOn("stable-b", 80, 100), routestest.BackendOn("canary-b", 80, 0)),
	}
	w := func(a, b int64) map[string]int64 {
		return map[string]int64{"0/stable": 100 - a, "0/canary": a, "1/stable-b": 100 - b, "1/canary-b": b}
	}
	runScenario(t, routes.HTTPRoute, []step{
		{create{kubectl, rules}, expect{weights: w(0, 0), owners: []string{kubectl}}},
		{call{c: setWeight(30)}, expect{weights: w(30, 0), wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{rollout: "shop/demo-b", c: b(10)}, expect{weights: w(30, 10), wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{c: setWeight(60)}, expect{weights: w(60, 10), wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{c: setWeight(0)}, expect{weights: w(0, 10), wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{rollout: "shop/demo-b", c: b(0)}, expect{weights: w(0, 0), wrote: true}},
	})
}

func TestExperimentScenarios(t *testing.T) {
	three := func(stable, canary, baseline, exp int64) map[string]int64 {
		return map[string]int64{"0/stable": stable, "0/canary": canary, "0/baseline": baseline, "0/exp-canary": exp, "1/static": 1}
	}
	runScenario(t, routes.HTTPRoute, []step{
		{create{kubectl, gitRules(100, 0)}, expect{owners: []string{kubectl}}},
		{call{c: withExperiment(0, "baseline", 5, "exp-canary", 25)}, expect{weights: three(70, 0, 5, 25), wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{c: withExperiment(20, "baseline", 5, "exp-canary", 25)}, expect{weights: three(50, 20, 5, 25), wrote: true, owners: plugins, labels: inProgress, claims: true}},
		// Argo CD changes an experiment backend's weight: a conflict, like any weight the plugin set.
		{update{argocd, func(r []routes.Rule) { r[0].BackendRefs()[2].SetWeight(50) }},
			expect{weights: three(50, 20, 50, 25), owners: []string{argocd}, labels: inProgress, claims: true}},
		{call{c: withExperiment(20, "baseline", 10, "exp-canary", 25)}, expect{weights: three(50, 20, 50, 25), owners: []string{argocd}, labels: inProgress, claims: true,
			errAs: new(*ConflictError), err: []string{"Service shop/baseline weight: the plugin set 5, now 50, the plugin would set 10"}}},
		{call{c: withExperiment(20, "baseline", 10, "exp-canary", 25), env: force}, expect{weights: three(45, 20, 10, 25), wrote: true, owners: plugins, labels: inProgress, claims: true}},
		// The experiment ends: exactly its backends leave.
		{call{c: setWeight(0)}, expect{weights: gitWeights(100, 0), wrote: true}},
	})
}

func TestAddedRuleScenarios(t *testing.T) {
	withHeaderRule := func(stable, canary int64) map[string]int64 {
		m := gitWeights(stable, canary)
		m["2:beta/canary"] = 1
		return m
	}
	runScenario(t, routes.HTTPRoute, []step{
		{create{kubectl, gitRules(100, 0)}, expect{owners: []string{kubectl}}},
		{call{c: setWeight(10)}, expect{weights: gitWeights(90, 10), wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{c: header("X-Canary", "yes")}, expect{weights: withHeaderRule(90, 10), wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{c: header("X-Canary", "yes")}, expect{weights: withHeaderRule(90, 10), owners: plugins, labels: inProgress, claims: true}},
		// A weight change leaves the header rule alone.
		{call{c: setWeight(50)}, expect{weights: withHeaderRule(50, 50), wrote: true, owners: plugins, labels: inProgress, claims: true}},
		// Someone edits the header rule; the plugin would rewrite it: a conflict naming the rule.
		{update{"kubectl-edit", func(r []routes.Rule) { r[2]["backendRefs"].([]any)[0].(map[string]any)["weight"] = int64(7) }},
			expect{owners: []string{"kubectl-edit"}, labels: inProgress, claims: true}},
		{call{c: header("X-Canary", "always")}, expect{owners: []string{"kubectl-edit"}, labels: inProgress, claims: true, errAs: new(*ConflictError),
			err: []string{`rule "beta": changed since the plugin wrote it`, "kubectl-edit (Update, gateway.networking.k8s.io/v1)"}}},
		// Setting weights does not touch the rule, so it is no conflict.
		{call{c: setWeight(60)}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{c: RemoveManaged{}}, expect{weights: gitWeights(40, 60), wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{c: RemoveManaged{}}, expect{weights: gitWeights(40, 60), owners: plugins, labels: inProgress, claims: true}},
		{call{c: mirror(20, "/api")}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{c: mirror(0, "/api")}, expect{weights: gitWeights(40, 60), wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{c: setWeight(0)}, expect{weights: gitWeights(100, 0), wrote: true}},
	})
}

// A header rule is the only thing a Rollout has on a route: removing it ends
// the Rollout there; the label and claims go at once, and the SetWeight the
// controller makes next in the same reconcile lets go of the route.
func TestRemovingTheLastRuleReleases(t *testing.T) {
	runScenario(t, routes.HTTPRoute, []step{
		{create{kubectl, gitRules(100, 0)}, expect{owners: []string{kubectl}}},
		{call{c: header("X-Canary", "yes")}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{c: header("", "")}, expect{weights: gitWeights(100, 0), wrote: true, owners: plugins}},
		{call{c: setWeight(0)}, expect{weights: gitWeights(100, 0)}},
	})
}

// While the canary has no available pods, the controller calls
// RemoveManagedRoutes, SetHeaderRoute and SetWeight(0) on every reconcile
// (rollout/trafficrouting.go): two applies a reconcile, and the plugin keeps
// spec.rules throughout instead of giving it away and taking it back.
func TestNoAvailableCanaryLoop(t *testing.T) {
	withRule := func() map[string]int64 {
		m := gitWeights(100, 0)
		m["2:beta/canary"] = 1
		return m
	}
	steps := []step{
		{create{kubectl, gitRules(100, 0)}, expect{owners: []string{kubectl}}},
		{call{c: header("X-Canary", "yes")}, expect{weights: withRule(), wrote: true, owners: plugins, labels: inProgress, claims: true}},
		// The first SetWeight records the weights it set (stable 100, canary 0).
		{call{c: setWeight(0)}, expect{weights: withRule(), wrote: true, owners: plugins, labels: inProgress, claims: true}},
	}
	for range 3 {
		steps = append(steps,
			// The claim keeps the weights, so the SetWeight after the header rule is back writes nothing.
			step{call{c: RemoveManaged{}}, expect{weights: gitWeights(100, 0), wrote: true, owners: plugins, claims: true}},
			step{call{c: header("X-Canary", "yes")}, expect{weights: withRule(), wrote: true, owners: plugins, labels: inProgress, claims: true}},
			step{call{c: setWeight(0)}, expect{weights: withRule(), owners: plugins, labels: inProgress, claims: true}})
	}
	runScenario(t, routes.HTTPRoute, steps)
}

// Where the route does not take header routes, a header step adds nothing,
// and removes what an earlier step added.
func TestHeaderStepOnARouteThatTakesNone(t *testing.T) {
	none := func(e *Env) { e.TakesHeaderRoutes = false }
	runScenario(t, routes.HTTPRoute, []step{
		{create{kubectl, gitRules(100, 0)}, expect{owners: []string{kubectl}}},
		{call{c: header("X-Canary", "yes"), env: none}, expect{weights: gitWeights(100, 0), owners: []string{kubectl}}},
		{call{c: header("X-Canary", "yes")}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{c: header("X-Canary", "yes"), env: none}, expect{weights: gitWeights(100, 0), wrote: true, owners: plugins}},
	})
	tcp := []routes.Rule{routestest.Rule("", routestest.BackendOn("stable", 80, 100), routestest.BackendOn("canary", 80, 0))}
	listed := func(e *Env) { e.ListedForHeaderRoutes = true }
	runScenario(t, routes.TCPRoute, []step{
		{create{kubectl, tcp}, expect{owners: []string{kubectl}}},
		{call{c: header("X-Canary", "yes")}, expect{owners: []string{kubectl}}},
		{call{c: mirror(50, "/")}, expect{owners: []string{kubectl}}},
		{call{c: header("X-Canary", "yes"), env: listed}, expect{owners: []string{kubectl}, errAs: new(*InvalidError),
			err: []string{"listed with useHeaderRoutes: true, but a TCPRoute has no matches", `header route "beta"`}}},
		{call{c: mirror(50, "/"), env: listed}, expect{owners: []string{kubectl}, errAs: new(*InvalidError),
			err: []string{"listed with useHeaderRoutes: true, but a TCPRoute has no matches", `mirror route "mirror"`}}},
	})
}

// What the user must fix comes back typed, with nothing decided.
func TestTypedErrors(t *testing.T) {
	var many []any
	for i := range 15 {
		many = append(many, fmt.Sprintf("exp-%d", i), 1)
	}
	fifteen := make([]routes.Rule, 16)
	for i := range fifteen {
		fifteen[i] = routestest.Rule(fmt.Sprintf("/r%d", i), routestest.BackendOn("stable", 80, 100), routestest.BackendOn("canary", 80, 0))
	}
	for _, tc := range []struct {
		name  string
		rules []routes.Rule
		claim string // the claims annotation, if any
		c     Intent
		errAs any
		want  []string
	}{
		{"no weighted rule", []routes.Rule{routestest.Rule("/", routestest.BackendOn("stable", 80, 100))}, "", setWeight(30),
			new(*transform.NoWeightedRuleError), []string{"has no rule whose backendRefs include both"}},
		{"an experiment over 16 backendRefs", gitRules(100, 0), "", withExperiment(0, many...),
			new(*transform.LimitError), []string{"rule 0 would hold 17 backendRefs"}},
		{"header rules over 16 rules", fifteen, "", header("X-Canary", "yes"),
			new(*transform.LimitError), []string{"at most 16 rules per HTTPRoute"}},
		{"a claims annotation that is not the plugin's", gitRules(100, 0), "{not json", setWeight(30),
			new(*InvalidError), []string{"annotation gatewayapi-ssa.dev/claims is not what the plugin wrote"}},
		{"the same on removal", gitRules(100, 0), "[]", RemoveManaged{},
			new(*InvalidError), []string{"annotation gatewayapi-ssa.dev/claims"}},
		{"a bad header name", gitRules(100, 0), "", header("X Canary", "yes"),
			new(*InvalidError), []string{`"X Canary" is not an HTTP header name`}},
		{"a mirror percentage over 100", gitRules(100, 0), "", mirror(101, "/"),
			new(*InvalidError), []string{"percentage 101 is outside 0..100"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			live := routes.Route{Ref: routes.Ref{Kind: routes.HTTPRoute, Namespace: ns, Name: "route"}, Version: "v1", Rules: tc.rules}
			if tc.claim != "" {
				live.Annotations = map[string]string{routes.ClaimsAnnotation: tc.claim}
			}
			_, err := tc.c.Desired(live, Env{Rollout: "shop/demo", FieldManager: plugin, TakesHeaderRoutes: true})
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.As(err, tc.errAs) {
				t.Errorf("error is %T, want %T: %v", err, tc.errAs, err)
			}
			var invalid *InvalidError
			if !errors.As(err, &invalid) {
				t.Errorf("error is not an InvalidError: %v", err)
			}
			if w, ok := contains(err.Error(), tc.want); !ok {
				t.Errorf("error %q does not mention %q", err, w)
			}
		})
	}
}

// The Result of one call, whole: what the writer sends and the claim it records.
func TestSetWeightResult(t *testing.T) {
	s := newServer(t, routes.HTTPRoute, gitRules(100, 0)...)
	s.ownerOf(kubectl, metav1.ManagedFieldsOperationUpdate).rules = true
	got, err := withExperiment(20, "baseline", 5).Desired(s.live(), Env{Rollout: "shop/demo", FieldManager: plugin, InProgressLabel: inProgress})
	if err != nil {
		t.Fatal(err)
	}
	claim := routes.Claim{
		CanaryWeight: 20,
		Backends:     []routes.AddedBackend{{Rule: 0, Kind: "Service", Namespace: ns, Name: "baseline"}},
		Weights: []routes.RecordedWeight{
			{Rule: 0, Service: "shop/stable", Weight: 75}, {Rule: 0, Service: "shop/canary", Weight: 20}, {Rule: 0, Service: "shop/baseline", Weight: 5},
		},
	}
	want := Result{
		Rules: []routes.Rule{
			routestest.Rule("/", routestest.BackendOn("stable", 80, 75), routestest.BackendOn("canary", 80, 20), routestest.BackendOn("baseline", 80, 5)),
			routestest.Rule("/static", routestest.BackendOn("static", 80, 1)),
		},
		Labels:      inProgress,
		Annotations: routes.Claims{"shop/demo": claim}.Annotations(),
		Claim:       claim,
		Changes: []routes.Change{
			routes.Changef(routes.WeightChanged, "rule 0 Service shop/stable 100→75"), routes.Changef(routes.WeightChanged, "rule 0 Service shop/canary 0→20"),
			routes.Changef(routes.BackendAdded, "rule 0 + Service shop/baseline weight 5"),
			routes.Changef(routes.Bookkeeping, "label rollouts.argoproj.io/gatewayapi-canary set"),
			routes.Changef(routes.Bookkeeping, "annotation gatewayapi-ssa.dev/claims set")},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Result (-want +got):\n%s", diff)
	}
	if !maps.Equal(got.Labels, inProgress) {
		t.Error("labels")
	}
}

// Values the plugin set are found again by rule name after another owner
// reordered the rules, and a rule it added that someone removed is a
// conflict too, not something to add back silently.
func TestDriftFollowsNamesAndRemovals(t *testing.T) {
	named := func(stable, canary int64) []routes.Rule {
		r := routestest.Rule("/", routestest.BackendOn("stable", 80, stable), routestest.BackendOn("canary", 80, canary))
		r["name"] = "main"
		return []routes.Rule{routestest.Rule("/static", routestest.BackendOn("static", 80, 1)), r}
	}
	w := func(stable, canary int64) map[string]int64 {
		return map[string]int64{"0/static": 1, "1:main/stable": stable, "1:main/canary": canary}
	}
	runScenario(t, routes.HTTPRoute, []step{
		{create{kubectl, named(100, 0)}, expect{owners: []string{kubectl}}},
		{call{c: setWeight(30)}, expect{weights: w(70, 30), wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{update{argocd, func(r []routes.Rule) {
			r[0], r[1] = r[1], r[0]
			r[0].BackendRefs()[0].SetWeight(90)
			r[0].BackendRefs()[1].SetWeight(10)
		}}, expect{owners: []string{argocd}, labels: inProgress, claims: true}},
		{call{c: setWeight(40)}, expect{owners: []string{argocd}, labels: inProgress, claims: true, errAs: new(*ConflictError),
			err: []string{"rule 1 Service shop/stable weight: the plugin set 70, now 90, the plugin would set 60"}}},
		{call{c: setWeight(40), env: force}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true}},
	})
	s := newServer(t, routes.HTTPRoute)
	for _, o := range []op{
		create{kubectl, gitRules(100, 0)},
		call{c: header("X-Canary", "yes")},
	} {
		if _, err := o.do(s); err != nil {
			t.Fatal(err)
		}
	}
	// kubectl edit deletes the header rule; the next header step would add it back.
	s.setRules("kubectl-edit", metav1.ManagedFieldsOperationUpdate, gitRules(100, 0))
	if _, err := (call{c: header("X-Canary", "yes")}).do(s); err == nil || !strings.Contains(err.Error(), `rule "beta": removed since the plugin added it`) {
		t.Errorf("re-adding a header rule someone removed = %v, want a conflict saying so", err)
	}
	// Removing it is what the other owner did too: no conflict.
	if _, err := (call{c: RemoveManaged{}}).do(s); err != nil {
		t.Errorf("RemoveManaged after the rule was removed: %v", err)
	}
}

func TestDriftString(t *testing.T) {
	got := Drift{Rule: 2, Service: "shop/canary", Set: 30, Live: -1, Desired: 40}.String()
	if want := "rule 2 Service shop/canary weight: the plugin set 30, now removed, the plugin would set 40"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// With ruleName the Rollout touches one rule: its weights, its experiment
// backends, and the only rule its header steps copy. Another rule holding
// the same two Services keeps every value.
func TestRuleNameTargetsOneRule(t *testing.T) {
	named := func(name string, stable, canary int64) routes.Rule {
		r := routestest.Rule("/"+name, routestest.BackendOn("stable", 80, stable), routestest.BackendOn("canary", 80, canary))
		r["name"] = name
		return r
	}
	split := func(e *Env) { e.RuleName = "split" }
	w := func(stable, canary int64, extra ...any) map[string]int64 {
		m := map[string]int64{"0:live/stable": 100, "0:live/canary": 0, "1:split/stable": stable, "1:split/canary": canary}
		for i := 0; i < len(extra); i += 2 {
			m[extra[i].(string)] = int64(extra[i+1].(int))
		}
		return m
	}
	runScenario(t, routes.HTTPRoute, []step{
		{create{kubectl, []routes.Rule{named("live", 100, 0), named("split", 100, 0)}}, expect{owners: []string{kubectl}}},
		{call{c: setWeight(30), env: split}, expect{weights: w(70, 30), wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{c: withExperiment(30, "baseline", 10), env: split}, expect{weights: w(60, 30, "1:split/baseline", 10), wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{c: header("X-Canary", "yes"), env: split}, expect{weights: w(60, 30, "1:split/baseline", 10, "2:beta/canary", 1), wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{c: RemoveManaged{}, env: split}, expect{weights: w(60, 30, "1:split/baseline", 10), wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{c: setWeight(0), env: split}, expect{weights: w(100, 0), wrote: true}},
		{call{c: setWeight(30), env: func(e *Env) { e.RuleName = "spilt" }}, expect{weights: w(100, 0), errAs: new(*transform.NoRuleNamedError),
			err: []string{`has no rule named "spilt"`, "rules named live, split"}}},
	})
}

// Mirroring in filter mode: a RequestMirror filter on the weighted rule,
// replaced when the percentage changes, removed exactly, the user's filters
// kept; header rules do not copy it; switching modes swaps filter and rule.
func TestMirrorFilterMode(t *testing.T) {
	filterMode := func(e *Env) { e.MirrorMode = MirrorFilter }
	userFilter := map[string]any{"type": "RequestHeaderModifier", "requestHeaderModifier": map[string]any{"set": []any{map[string]any{"name": "x-env", "value": "prod"}}}}
	weighted := func(stable, canary int64, filters ...map[string]any) routes.Rule {
		r := routestest.Rule("/", routestest.BackendOn("stable", 80, stable), routestest.BackendOn("canary", 80, canary))
		fs := []any{userFilter}
		for _, f := range filters {
			fs = append(fs, f)
		}
		r["filters"] = fs
		return r
	}
	mirrorTo := func(pct int64) map[string]any {
		return map[string]any{"type": "RequestMirror", "requestMirror": map[string]any{
			"backendRef": map[string]any{"group": "", "kind": "Service", "name": "canary", "port": int64(80)}, "percent": pct}}
	}
	static := routestest.Rule("/static", routestest.BackendOn("static", 80, 1))
	headerRule := routestest.Rule("/", routestest.BackendOn("canary", 80, 1))
	headerRule["name"] = "beta"
	headerRule["filters"] = []any{userFilter}
	headerRule["matches"] = []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": "/"},
		"headers": []any{map[string]any{"name": "X-Canary", "type": "Exact", "value": "yes"}}}}
	runScenario(t, routes.HTTPRoute, []step{
		{create{kubectl, []routes.Rule{weighted(100, 0), static}}, expect{owners: []string{kubectl}}},
		{call{c: setWeight(10), env: filterMode}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{c: mirror(20, "/"), env: filterMode}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true,
			rules: []routes.Rule{weighted(90, 10, mirrorTo(20)), static}}},
		{call{c: mirror(20, "/"), env: filterMode}, expect{owners: plugins, labels: inProgress, claims: true}},
		{call{c: mirror(40, "/"), env: filterMode}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true,
			rules: []routes.Rule{weighted(90, 10, mirrorTo(40)), static}}},
		{call{c: setWeight(30), env: filterMode}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true,
			rules: []routes.Rule{weighted(70, 30, mirrorTo(40)), static}}},
		{call{c: header("X-Canary", "yes"), env: filterMode}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true,
			rules: []routes.Rule{weighted(70, 30, mirrorTo(40)), static, headerRule}}},
		{call{c: header("", ""), env: filterMode}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true}},
		// Rule mode now: the filter goes, the mirror rule comes (without the filter).
		{call{c: mirror(40, "/api")}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{c: mirror(40, "/api"), env: filterMode}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true,
			rules: []routes.Rule{weighted(70, 30, mirrorTo(40)), static}}},
		// Someone removes the filter; re-adding it would fight them: a conflict.
		{update{"kubectl-edit", func(r []routes.Rule) { r[0]["filters"] = []any{userFilter} }}, expect{owners: []string{"kubectl-edit"}, labels: inProgress, claims: true}},
		{call{c: mirror(40, "/"), env: filterMode}, expect{owners: []string{"kubectl-edit"}, labels: inProgress, claims: true, errAs: new(*ConflictError),
			err: []string{`mirror filter "mirror" in rule 0: removed or changed since the plugin added it`}}},
		{call{c: mirror(40, "/"), env: func(e *Env) { filterMode(e); force(e) }}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true,
			rules: []routes.Rule{weighted(70, 30, mirrorTo(40)), static}}},
		{call{c: RemoveManaged{}, env: filterMode}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true,
			rules: []routes.Rule{weighted(70, 30), static}}},
		{call{c: setWeight(0), env: filterMode}, expect{wrote: true, rules: []routes.Rule{weighted(100, 0), static}}},
	})
}

// Undo takes back a deleted Rollout's claim and nothing else: the route is
// as it was before the rollout, another Rollout's values and label stay.
func TestUndoScenarios(t *testing.T) {
	filterMode := func(e *Env) { e.MirrorMode = MirrorFilter }
	t.Run("everything the Rollout added goes", func(t *testing.T) {
		runScenario(t, routes.HTTPRoute, []step{
			{create{kubectl, gitRules(100, 0)}, expect{owners: []string{kubectl}}},
			{call{c: withExperiment(20, "baseline", 5), env: filterMode}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true}},
			{call{c: header("X-Canary", "yes"), env: filterMode}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true}},
			{call{c: mirror(10, "/"), env: filterMode}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true}},
			{call{c: Undo{}}, expect{wrote: true, rules: gitRules(100, 0)}},
			{call{c: Undo{}}, expect{rules: gitRules(100, 0)}},
		})
	})
	t.Run("another Rollout on the route keeps its values and the label", func(t *testing.T) {
		b := setWeight(10)
		b.Split.Stable, b.Split.Canary = svc("stable-b"), svc("canary-b")
		b.Experiment.Stable, b.Experiment.Canary = b.Split.Stable, b.Split.Canary
		rules := []routes.Rule{routestest.Rule("/a", routestest.BackendOn("stable", 80, 100), routestest.BackendOn("canary", 80, 0)), routestest.Rule("/b", routestest.BackendOn("stable-b", 80, 100), routestest.BackendOn("canary-b", 80, 0))}
		custom := map[string]string{"team-b/rollout": "on"}
		both := map[string]string{"team-b/rollout": "on", "rollouts.argoproj.io/gatewayapi-canary": "in-progress"}
		runScenario(t, routes.HTTPRoute, []step{
			{create{kubectl, rules}, expect{owners: []string{kubectl}}},
			{call{c: setWeight(30)}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true}},
			// Each Rollout's label stays while any Rollout is on the route: demo-b's call keeps demo's.
			{call{rollout: "shop/demo-b", c: b, env: func(e *Env) { e.InProgressLabel = custom }}, expect{wrote: true, owners: plugins, labels: both, claims: true}},
			// demo is deleted; its cleanup cannot know demo-b's label key and keeps the labels the plugin applies.
			{call{c: Undo{}}, expect{wrote: true, owners: plugins, claims: true, labels: both,
				weights: map[string]int64{"0/stable": 100, "0/canary": 0, "1/stable-b": 90, "1/canary-b": 10}}},
			{call{rollout: "shop/demo-b", c: Undo{}}, expect{wrote: true, rules: rules}},
		})
	})
	t.Run("only the rule the Rollout targeted", func(t *testing.T) {
		named := func(name string, stable, canary int64) routes.Rule {
			r := routestest.Rule("/"+name, routestest.BackendOn("stable", 80, stable), routestest.BackendOn("canary", 80, canary))
			r["name"] = name
			return r
		}
		runScenario(t, routes.HTTPRoute, []step{
			{create{kubectl, []routes.Rule{named("live", 100, 0), named("split", 100, 0)}}, expect{owners: []string{kubectl}}},
			{call{c: setWeight(40), env: func(e *Env) { e.RuleName = "split" }}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true}},
			// Someone sets the live rule's canary to 5 by hand: the undo leaves it.
			{update{"kubectl-edit", func(r []routes.Rule) { r[0].BackendRefs()[0].SetWeight(95); r[0].BackendRefs()[1].SetWeight(5) }},
				expect{owners: []string{"kubectl-edit"}, labels: inProgress, claims: true}},
			{call{c: Undo{}}, expect{wrote: true, rules: []routes.Rule{named("live", 95, 5), named("split", 100, 0)}}},
		})
	})
	t.Run("a weight someone changed is a conflict, unless forced", func(t *testing.T) {
		runScenario(t, routes.HTTPRoute, []step{
			{create{kubectl, gitRules(100, 0)}, expect{owners: []string{kubectl}}},
			{call{c: setWeight(30)}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true}},
			{update{argocd, func(r []routes.Rule) { r[0].BackendRefs()[1].SetWeight(50) }}, expect{owners: []string{argocd}, labels: inProgress, claims: true}},
			{call{c: Undo{}}, expect{owners: []string{argocd}, labels: inProgress, claims: true, errAs: new(*ConflictError),
				err: []string{"the plugin set 30, now 50, the plugin would set 0"}}},
			{call{c: Undo{}, env: force}, expect{wrote: true, rules: gitRules(100, 0)}},
		})
	})
}

// Only calls that take back what the Rollout put on its routes count as
// undoing: they may still run where the grant was revoked.
func TestWhichCallsOnlyUndo(t *testing.T) {
	zero, half := int32(0), int32(50)
	exp := setWeight(0)
	exp.Experiment.Destinations = []transform.ExperimentDestination{{Service: "exp", Weight: 10}}
	for _, c := range []struct {
		name string
		i    Intent
		want bool
	}{
		{"RemoveManagedRoutes", RemoveManaged{}, true},
		{"cleanup's undo", Undo{}, true},
		{"SetWeight(0)", setWeight(0), true},
		{"SetWeight(0) with an experiment Service", exp, false},
		{"SetWeight(30)", setWeight(30), false},
		{"a header step's removal", SetHeader{Name: "beta"}, true},
		{"a header step", header("X-Canary", "yes"), false},
		{"a mirror step at 0 %", SetMirror{Name: "m", Match: []transform.RequestMatch{{}}, Percent: &zero}, true},
		{"a mirror step", SetMirror{Name: "m", Match: []transform.RequestMatch{{}}, Percent: &half}, false},
	} {
		if got := Undoes(c.i); got != c.want {
			t.Errorf("Undoes(%s) = %v, want %v", c.name, got, c.want)
		}
	}
}
