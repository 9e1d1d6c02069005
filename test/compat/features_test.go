package compat

import (
	"context"
	"fmt"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/argoproj/argo-rollouts/utils/plugin/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// feature is one column of the matrix: a scenario of the controller's calls,
// as the controller makes them for the steps of a Rollout.
type feature struct {
	name string
	// matchesOnly says the scenario adds rules or filters with matches,
	// which TCP, TLS and UDP routes do not have: n/a there.
	matchesOnly bool
	run         func(x *cell)
}

// features are the matrix's columns, in the page's order.
var features = []feature{
	{"weights", false, weightWalk},
	{"experiment", false, experimentStep},
	{"ping-pong", false, pingPong},
	{"header", true, headerRoute},
	{"mirror rule", true, mirror("rule", 0, 100)},
	{"mirror rule 50 %", true, mirror("rule", 50)},
	{"mirror filter", true, mirror("filter", 0, 100)},
	{"mirror filter 50 %", true, mirror("filter", 50)},
	{"RemoveManagedRoutes", false, removeManagedRoutes},
	{"VerifyWeight", false, verifyWeight},
	{"ruleName", false, ruleNameTargeting},
}

// The canary walks 0 → 30 → 100 → 0: one apply per change, none for the
// first step, which changes nothing; the plugin owns spec.rules while the
// canary has traffic and gives them back with one more write at the end.
func weightWalk(x *cell) {
	x.create(route{stable: "stable", canary: "canary"})
	ro := x.rollout(x.config())
	for _, step := range []struct {
		weight         int32
		stable, canary int64
		writes         int
	}{
		{0, 100, 0, 0},
		{30, 70, 30, 1},
		{100, 0, 100, 1},
		{0, 100, 0, 2},
	} {
		mark := x.c.Recorder.Count()
		x.setWeight(ro, step.weight)
		after := fmt.Sprintf("SetWeight(%d)", step.weight)
		want := x.expected().weights(0, map[string]int64{"stable": step.stable, "canary": step.canary})
		if step.canary > 0 {
			want.inProgress()
		}
		x.expectRoute(after, want)
		x.expectWrites(after, mark, step.writes)
		if step.canary > 0 {
			x.expectOwnsRules(after)
		}
	}
	x.expectReleased("the walk")
}

// An experiment step gives two experiment Services their weights beside the
// canary's, in the weighted rule; the step after it ends the experiment and
// its backendRefs leave; another team's backendRef keeps its weight.
func experimentStep(x *cell) {
	x.create(route{stable: "stable", canary: "canary"})
	ro := x.rollout(x.config())
	experiment := []v1alpha1.WeightDestination{
		{ServiceName: "exp-baseline", PodTemplateHash: "aaa", Weight: 5},
		{ServiceName: "exp-canary", PodTemplateHash: "bbb", Weight: 25},
	}
	x.setWeight(ro, 20, experiment...)
	x.expectRoute("the experiment step", x.expected().
		weights(0, map[string]int64{"stable": 50, "canary": 20}).
		backendRefs(0, `{group: "", kind: Service, name: exp-baseline, port: 80, weight: 5}`,
			`{group: "", kind: Service, name: exp-canary, port: 80, weight: 25}`).
		inProgress())
	x.setWeight(ro, 20)
	x.expectRoute("the step after the experiment", x.expected().weights(0, map[string]int64{"stable": 80, "canary": 20}).inProgress())
	x.setWeight(ro, 0)
	x.expectRoute("SetWeight(0)", x.expected())
	x.expectReleased("the rollout")
}

// Ping-pong: status.canary.stablePingPong says which Service is stable; the
// plugin moves weight between ping and pong, and after the promotion (pong
// stable) back.
func pingPong(x *cell) {
	x.create(route{stable: "ping", canary: "pong"})
	ro := x.rollout(x.config())
	ro.Spec.Strategy.Canary.StableService, ro.Spec.Strategy.Canary.CanaryService = "", ""
	ro.Spec.Strategy.Canary.PingPong = &v1alpha1.PingPongSpec{PingService: "ping", PongService: "pong"}
	for _, step := range []struct {
		stable     v1alpha1.PingPongType
		weight     int32
		ping, pong int64
		inProgress bool
	}{
		{v1alpha1.PPPing, 30, 70, 30, true},
		{v1alpha1.PPPing, 100, 0, 100, true},
		// The promotion: Argo Rollouts flips stablePingPong; pong is stable now.
		{v1alpha1.PPPong, 0, 0, 100, false},
		{v1alpha1.PPPong, 30, 30, 70, true},
		{v1alpha1.PPPong, 0, 0, 100, false},
	} {
		ro.Status.Canary.StablePingPong = step.stable
		x.setWeight(ro, step.weight)
		want := x.expected().weights(0, map[string]int64{"ping": step.ping, "pong": step.pong})
		if step.inProgress {
			want.inProgress()
		}
		x.expectRoute(fmt.Sprintf("SetWeight(%d) with %s stable", step.weight, step.stable), want)
	}
	x.expectReleased("the rollout")
}

func headerStep(match bool) *v1alpha1.SetHeaderRoute {
	step := &v1alpha1.SetHeaderRoute{Name: "beta"}
	if match {
		step.Match = []v1alpha1.HeaderRoutingMatch{{HeaderName: "X-Canary", HeaderValue: &v1alpha1.StringMatch{Exact: "yes"}}}
	}
	return step
}

// A setHeaderRoute step adds its rule once (the controller repeats the call
// on every reconcile: nothing more is written); a step without match removes
// it; the SetWeight after that gives spec.rules back.
func headerRoute(x *cell) {
	x.create(route{stable: "stable", canary: "canary"})
	ro := x.rollout(x.config(), "beta")
	x.setHeaderRoute(ro, headerStep(true))
	withRule := x.expected().added(x.kind.headerRule()).inProgress()
	x.expectRoute("SetHeaderRoute", withRule)
	mark := x.c.Recorder.Count()
	x.setHeaderRoute(ro, headerStep(true))
	x.expectWrites("SetHeaderRoute again", mark, 0)
	x.setHeaderRoute(ro, headerStep(false))
	x.expectRoute("SetHeaderRoute without match", x.expected())
	x.setWeight(ro, 0)
	x.expectRoute("SetWeight(0)", x.expected())
	x.expectReleased("the rollout")
}

// mirrorStep is a setMirrorRoute step named mirror with a percentage (0:
// none given), or without match (which removes it).
func (k routeKind) mirrorStep(percent int32, match bool) *v1alpha1.SetMirrorRoute {
	step := &v1alpha1.SetMirrorRoute{Name: "mirror"}
	if percent != 0 {
		step.Percentage = &percent
	}
	if !match {
		return step
	}
	if k.Kind == "GRPCRoute" {
		step.Match = []v1alpha1.RouteMatch{{Headers: map[string]v1alpha1.StringMatch{"X-Mirror": {Exact: "yes"}}}}
	} else {
		step.Match = []v1alpha1.RouteMatch{{Method: &v1alpha1.StringMatch{Exact: "GET"}, Path: &v1alpha1.StringMatch{Prefix: "/api"}}}
	}
	return step
}

// mirror is a setMirrorRoute step in a mirrorMode (rule: a rule of its own;
// filter: a RequestMirror filter on the weighted rule), given with each of
// percents in turn (0: none given) and then removed by a step without match.
// The first step writes once; a later percentage that mirrors the same share
// writes nothing.
func mirror(mode string, percents ...int32) func(x *cell) {
	return func(x *cell) {
		x.create(route{stable: "stable", canary: "canary"})
		ro := x.rollout(x.config(`"mirrorMode": "`+mode+`"`), "mirror")
		for i, pct := range percents {
			mark := x.c.Recorder.Count()
			x.setMirrorRoute(ro, x.kind.mirrorStep(pct, true))
			want := x.expected().inProgress()
			if mode == "rule" {
				want.added(x.kind.mirrorRule(pct))
			} else {
				want.filter(0, x.kind.mirrorFilter(pct))
			}
			after := fmt.Sprintf("SetMirrorRoute (%s mode, percentage %d)", mode, pct)
			x.expectRoute(after, want)
			if i > 0 {
				x.expectWrites(after, mark, 0)
			}
		}
		x.setMirrorRoute(ro, x.kind.mirrorStep(0, false))
		x.expectRoute("SetMirrorRoute without match", x.expected())
		x.setWeight(ro, 0)
		x.expectRoute("SetWeight(0)", x.expected())
		x.expectReleased("the rollout")
	}
}

// RemoveManagedRoutes (full promotion, abort) takes away every rule the
// Rollout added and leaves the weights to the SetWeight after it; called
// again, it writes nothing. On a kind without matches there is nothing to
// remove and nothing is written.
func removeManagedRoutes(x *cell) {
	x.create(route{stable: "stable", canary: "canary"})
	ro := x.rollout(x.config(), "beta", "mirror")
	x.setWeight(ro, 30)
	weighted := x.expected().weights(0, map[string]int64{"stable": 70, "canary": 30}).inProgress()
	if x.kind.Matches {
		x.setHeaderRoute(ro, headerStep(true))
		x.setMirrorRoute(ro, x.kind.mirrorStep(0, true))
		x.expectRoute("SetHeaderRoute and SetMirrorRoute", x.expected().
			weights(0, map[string]int64{"stable": 70, "canary": 30}).
			added(x.kind.headerRule(), x.kind.mirrorRule(0)).inProgress())
	}
	x.removeManagedRoutes(ro)
	x.expectRoute("RemoveManagedRoutes", weighted)
	mark := x.c.Recorder.Count()
	x.removeManagedRoutes(ro)
	x.expectWrites("RemoveManagedRoutes again", mark, 0)
	x.setWeight(ro, 0)
	x.expectRoute("SetWeight(0)", x.expected())
	x.expectReleased("the rollout")
}

// With verifyWeight: true, VerifyWeight answers from the route's
// status.parents as a gateway controller writes it through the status
// subresource: NotVerified before, Verified once Accepted and ResolvedRefs
// are True for the generation the plugin's write produced, NotVerified for a
// weight the spec does not carry. It never writes.
func verifyWeight(x *cell) {
	x.create(route{stable: "stable", canary: "canary"})
	ro := x.rollout(x.config(`"verifyWeight": true`))
	x.setWeight(ro, 30)
	mark := x.c.Recorder.Count()
	x.verifyWeight(ro, 30, types.NotVerified)
	status := x.gatewayAccepts()
	x.verifyWeight(ro, 30, types.Verified)
	x.verifyWeight(ro, 60, types.NotVerified)
	x.expectWrites("VerifyWeight", mark, 0)
	x.expectRoute("VerifyWeight", x.expected().weights(0, map[string]int64{"stable": 70, "canary": 30}).status(status).inProgress())
	x.setWeight(ro, 0)
	x.expectRoute("SetWeight(0)", x.expected().status(status))
	x.expectReleased("the rollout")
}

// gatewayAccepts writes the route's status as a gateway controller does
// for its current generation: Accepted and ResolvedRefs True for its parent.
// It returns the status as stored.
func (x *cell) gatewayAccepts() any {
	u := x.get()
	parents, _, _ := unstructured.NestedSlice(u.Object, "spec", "parentRefs")
	now := metav1.Now().UTC().Format("2006-01-02T15:04:05Z")
	condition := func(typ string) map[string]any {
		return map[string]any{"type": typ, "status": "True", "reason": typ, "message": "by the test's gateway",
			"observedGeneration": u.GetGeneration(), "lastTransitionTime": now}
	}
	u.Object["status"] = map[string]any{"parents": []any{map[string]any{
		"parentRef":      parents[0],
		"controllerName": "example.com/gateway-controller",
		"conditions":     []any{condition("Accepted"), condition("ResolvedRefs")},
	}}}
	out, err := x.c.Dynamic.Resource(x.gvr()).Namespace(x.ns).UpdateStatus(context.Background(), u, metav1.UpdateOptions{FieldManager: "gateway-controller"})
	if err != nil {
		x.failf("writing the status of %s %s/route: %v", x.kind.Kind, x.ns, err)
	}
	return out.Object["status"]
}

// ruleName: of two weighted rules the Rollout's config targets the one named
// main; the other keeps its weights. A kind whose version allows one rule
// has only main.
func ruleNameTargeting(x *cell) {
	x.create(route{stable: "stable", canary: "canary", twoWeighted: true})
	ro := x.rollout(fmt.Sprintf(`{"%ss": [{"name": "route", "ruleName": "main"}]}`, x.kind.key()))
	x.setWeight(ro, 30)
	x.expectRoute("SetWeight(30)", x.expected().weights(0, map[string]int64{"stable": 70, "canary": 30}).inProgress())
	x.setWeight(ro, 0)
	x.expectRoute("SetWeight(0)", x.expected())
	x.expectReleased("the rollout")
}
