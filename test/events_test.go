package test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	rolloutsrpc "github.com/argoproj/argo-rollouts/rollout/trafficrouting/plugin/rpc"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// pluginEvents are the Events the plugin recorded about the object of kind
// and name in ns (about any object when kind is ""), oldest first
// (harness.PluginEvents); the test stops when they cannot be listed.
func pluginEvents(t *testing.T, c *harness.Cluster, ns, kind, name string) []eventsv1.Event {
	t.Helper()
	evs, err := harness.PluginEvents(context.Background(), c.Kube, fieldManager, ns, kind, name)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// seriesCount is how often an Event was seen.
func seriesCount(e eventsv1.Event) int32 {
	if e.Series != nil {
		return e.Series.Count
	}
	return 1
}

// waitForEvents polls until ok holds of the plugin's Events about the object,
// or 30 s pass (a series' count is sent at most every 5 s), and returns the
// last Events seen.
func waitForEvents(t *testing.T, c *harness.Cluster, ns, kind, name string, ok func([]eventsv1.Event) bool) []eventsv1.Event {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		evs := pluginEvents(t, c, ns, kind, name)
		if ok(evs) || time.Now().After(deadline) {
			return evs
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// describe shows Events as kubectl describe does, for failure messages.
func describe(evs []eventsv1.Event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "  %s %s x%d %s: %s\n", e.Type, e.Reason, seriesCount(e), e.Action, e.Note)
	}
	return b.String()
}

// failing is one kind of error, made to happen: setup prepares the
// namespace and returns the plugin, the Rollout and the call that fails.
type failing struct {
	reason string
	// onRoute: the route is told too (a refusal for what the route is).
	onRoute bool
	setup   func(t *testing.T, ns string, shared rolloutsrpc.TrafficRouterPlugin) (rolloutsrpc.TrafficRouterPlugin, *v1alpha1.Rollout, func(rolloutsrpc.TrafficRouterPlugin, *v1alpha1.Rollout) rpcErr)
}

func setWeightCall(w int32, d ...v1alpha1.WeightDestination) func(rolloutsrpc.TrafficRouterPlugin, *v1alpha1.Rollout) rpcErr {
	return func(p rolloutsrpc.TrafficRouterPlugin, ro *v1alpha1.Rollout) rpcErr { return p.SetWeight(ro, w, d) }
}

func headerCall(name string) func(rolloutsrpc.TrafficRouterPlugin, *v1alpha1.Rollout) rpcErr {
	return func(p rolloutsrpc.TrafficRouterPlugin, ro *v1alpha1.Rollout) rpcErr {
		return p.SetHeaderRoute(ro, &v1alpha1.SetHeaderRoute{Name: name, Match: []v1alpha1.HeaderRoutingMatch{{HeaderName: "X-Canary", HeaderValue: &v1alpha1.StringMatch{Exact: "yes"}}}})
	}
}

// withRoute creates the usual route and returns the shared plugin and a
// Rollout with config.
func withRoute(t *testing.T, standard *harness.Cluster, ns string, shared rolloutsrpc.TrafficRouterPlugin, config string) (rolloutsrpc.TrafficRouterPlugin, *v1alpha1.Rollout) {
	create(t, standard, ns, routeYAML("v1", "HTTPRoute", "route"))
	return shared, rollout(ns, config)
}

// The reasons through the binary, each from a real error on a real
// apiserver (CRDTooOld and CallFailed are unit-tested in package events:
// they need old CRDs or a route that keeps changing).
var failings = []failing{
	{reason: "InvalidConfig", setup: func(t *testing.T, ns string, shared rolloutsrpc.TrafficRouterPlugin) (rolloutsrpc.TrafficRouterPlugin, *v1alpha1.Rollout, func(rolloutsrpc.TrafficRouterPlugin, *v1alpha1.Rollout) rpcErr) {
		p, ro := withRoute(t, standard, ns, shared, `{"httpRoute": "route", "httpRout": "route"}`)
		return p, ro, setWeightCall(10)
	}},
	{reason: "InvalidStep", setup: func(t *testing.T, ns string, shared rolloutsrpc.TrafficRouterPlugin) (rolloutsrpc.TrafficRouterPlugin, *v1alpha1.Rollout, func(rolloutsrpc.TrafficRouterPlugin, *v1alpha1.Rollout) rpcErr) {
		p, ro := withRoute(t, standard, ns, shared, `{"httpRoute": "route"}`)
		return p, ro, headerCall("not-listed")
	}},
	{reason: "RouteNotFound", setup: func(t *testing.T, ns string, shared rolloutsrpc.TrafficRouterPlugin) (rolloutsrpc.TrafficRouterPlugin, *v1alpha1.Rollout, func(rolloutsrpc.TrafficRouterPlugin, *v1alpha1.Rollout) rpcErr) {
		return shared, rollout(ns, `{"httpRoute": "renamed"}`), setWeightCall(10)
	}},
	{reason: "ServiceNotFound", setup: func(t *testing.T, ns string, shared rolloutsrpc.TrafficRouterPlugin) (rolloutsrpc.TrafficRouterPlugin, *v1alpha1.Rollout, func(rolloutsrpc.TrafficRouterPlugin, *v1alpha1.Rollout) rpcErr) {
		p, ro := withRoute(t, standard, ns, shared, `{"httpRoute": "route"}`)
		return p, ro, setWeightCall(10, v1alpha1.WeightDestination{ServiceName: "exp-missing", Weight: 5})
	}},
	{reason: "RouteMismatch", onRoute: true, setup: func(t *testing.T, ns string, shared rolloutsrpc.TrafficRouterPlugin) (rolloutsrpc.TrafficRouterPlugin, *v1alpha1.Rollout, func(rolloutsrpc.TrafficRouterPlugin, *v1alpha1.Rollout) rpcErr) {
		create(t, standard, ns, strings.ReplaceAll(routeYAML("v1", "HTTPRoute", "route"), "name: canary", "name: other"))
		return shared, rollout(ns, `{"httpRoute": "route"}`), setWeightCall(10)
	}},
	{reason: "Conflict", onRoute: true, setup: func(t *testing.T, ns string, shared rolloutsrpc.TrafficRouterPlugin) (rolloutsrpc.TrafficRouterPlugin, *v1alpha1.Rollout, func(rolloutsrpc.TrafficRouterPlugin, *v1alpha1.Rollout) rpcErr) {
		p, ro := withRoute(t, standard, ns, shared, `{"httpRoute": "route"}`)
		if err := p.SetWeight(ro, 10, nil); err.HasError() {
			t.Fatal(err)
		}
		// Someone edits the canary's weight mid-rollout (kubectl edit).
		u := get(t, standard, "v1", "HTTPRoute", ns, "route")
		rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
		rules[0].(map[string]any)["backendRefs"].([]any)[1].(map[string]any)["weight"] = int64(50)
		_ = unstructured.SetNestedSlice(u.Object, rules, "spec", "rules")
		if _, err := standard.Dynamic.Resource(httpRoutes).Namespace(ns).Update(context.Background(), u, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
			t.Fatal(err)
		}
		// A plugin started after the edit has it from its first list. The
		// shared one's watch cache may not have it yet: it would then find
		// the conflict in the apiserver's answer to its apply, with the
		// same error but one request more, as the machine's timing falls
		// (which hack/compare-writes.sh would tell apart).
		return startPlugin(t, standard), ro, setWeightCall(20)
	}},
	{reason: "LimitExceeded", onRoute: true, setup: func(t *testing.T, ns string, shared rolloutsrpc.TrafficRouterPlugin) (rolloutsrpc.TrafficRouterPlugin, *v1alpha1.Rollout, func(rolloutsrpc.TrafficRouterPlugin, *v1alpha1.Rollout) rpcErr) {
		route := routeYAML("v1", "HTTPRoute", "route")
		for i := range 15 { // 16 rules, Gateway API's most: a header rule is one too many
			route += fmt.Sprintf("  - matches: [{path: {type: PathPrefix, value: /other-%d}}]\n    backendRefs: [{name: other, port: 80}]\n", i)
		}
		create(t, standard, ns, route)
		ro := rollout(ns, `{"httpRoute": "route"}`)
		ro.Spec.Strategy.Canary.TrafficRouting.ManagedRoutes = []v1alpha1.MangedRoutes{{Name: "canary-header"}}
		return shared, ro, headerCall("canary-header")
	}},
	{reason: "GatewayUnsupported", onRoute: true, setup: func(t *testing.T, ns string, shared rolloutsrpc.TrafficRouterPlugin) (rolloutsrpc.TrafficRouterPlugin, *v1alpha1.Rollout, func(rolloutsrpc.TrafficRouterPlugin, *v1alpha1.Rollout) rpcErr) {
		gatewayClass(t, standard, ns+"-traefik", traefikClassFeatures...)
		create(t, standard, ns, gatewayOfClass("traefik", ns+"-traefik"))
		create(t, standard, ns, routeWithParents("{name: traefik}"))
		ro := rollout(ns, `{"httpRoute": "route"}`)
		ro.Spec.Strategy.Canary.TrafficRouting.ManagedRoutes = []v1alpha1.MangedRoutes{{Name: "mirror"}}
		return shared, ro, func(p rolloutsrpc.TrafficRouterPlugin, ro *v1alpha1.Rollout) rpcErr {
			return p.SetMirrorRoute(ro, mirrorStep(50))
		}
	}},
	{reason: "WriteRejected", onRoute: true, setup: func(t *testing.T, ns string, shared rolloutsrpc.TrafficRouterPlugin) (rolloutsrpc.TrafficRouterPlugin, *v1alpha1.Rollout, func(rolloutsrpc.TrafficRouterPlugin, *v1alpha1.Rollout) rpcErr) {
		p, ro := withRoute(t, standard, ns, shared, `{"httpRoute": "route"}`)
		// As a CEL rule or admission refuses a write: 422, each of the three applies.
		standard.Recorder.Inject(harness.Fault{Method: "PATCH", Path: "/namespaces/" + ns + "/httproutes/route", Times: 3, Do: harness.Answer, Status: 422})
		return p, ro, setWeightCall(10)
	}},
	{reason: "ApiserverUnavailable", setup: func(t *testing.T, ns string, shared rolloutsrpc.TrafficRouterPlugin) (rolloutsrpc.TrafficRouterPlugin, *v1alpha1.Rollout, func(rolloutsrpc.TrafficRouterPlugin, *v1alpha1.Rollout) rpcErr) {
		p, ro := withRoute(t, standard, ns, shared, `{"httpRoute": "route"}`)
		// Every attempt of every apply answers 503 (the plugin's retries included).
		standard.Recorder.Inject(harness.Fault{Method: "PATCH", Path: "/namespaces/" + ns + "/httproutes/route", Do: harness.Answer, Status: 503})
		return p, ro, setWeightCall(10)
	}},
	{reason: "PermissionMissing", setup: func(t *testing.T, ns string, _ rolloutsrpc.TrafficRouterPlugin) (rolloutsrpc.TrafficRouterPlugin, *v1alpha1.Rollout, func(rolloutsrpc.TrafficRouterPlugin, *v1alpha1.Rollout) rpcErr) {
		create(t, standard, ns, routeYAML("v1", "HTTPRoute", "route"))
		kubeconfig, _ := asServiceAccount(t, standard, ns, "rollouts", without(documentedRole(t).Rules, "httproutes", "patch"))
		p, _ := startPluginWith(t, pluginBin, kubeconfig)
		return p, rollout(ns, `{"httpRoute": "route"}`), setWeightCall(10)
	}},
	{reason: "InternalError", setup: func(t *testing.T, ns string, _ rolloutsrpc.TrafficRouterPlugin) (rolloutsrpc.TrafficRouterPlugin, *v1alpha1.Rollout, func(rolloutsrpc.TrafficRouterPlugin, *v1alpha1.Rollout) rpcErr) {
		create(t, standard, ns, strings.Replace(routeYAML("v1", "HTTPRoute", "route"), "metadata:\n",
			"metadata:\n  annotations: {faultinject.gatewayapi-ssa.dev/panic: decide}\n", 1))
		p, _ := startPluginWith(t, instrumented, standard.Kubeconfig) // built by the test, before its cases run in parallel
		return p, rollout(ns, `{"httpRoute": "route"}`), setWeightCall(10)
	}},
}

// Every kind of error a call returns is exactly one Warning Event on the
// Rollout, its reason naming the kind and its note the call's own text;
// the controller's repeats of the call raise that Event's count instead of
// adding Events. A refusal for what the route is (a conflict, a limit, its
// gateway, its shape, the apiserver's 422) is a Warning on the route too.
// A call that succeeds after failing says so once.
//
// Serial: instrumentedPlugin sets GORACE (t.Setenv); its cases run in
// parallel among themselves, on the shared recorder.
func TestEveryErrorIsOneWarningOnTheRollout(t *testing.T) {
	shared := startPlugin(t, standard)
	instrumentedPlugin(t) // built before the cases run in parallel
	for _, fc := range failings {
		t.Run(fc.reason, func(t *testing.T) {
			t.Parallel()
			ns := namespace(t, standard)
			p, ro, call := fc.setup(t, ns, shared)
			ro.UID = types.UID("uid-" + ns)
			var text string
			for i := range 3 {
				err := call(p, ro)
				if !err.HasError() {
					t.Fatalf("call %d succeeded; the case must fail", i+1)
				}
				if i > 0 && err.ErrorString != text {
					t.Fatalf("the repeat answered another text:\n%s\n%s", text, err.ErrorString)
				}
				text = err.ErrorString
			}
			evs := waitForEvents(t, standard, ns, "Rollout", "demo", func(evs []eventsv1.Event) bool {
				return len(evs) == 1 && seriesCount(evs[0]) == 3
			})
			if len(evs) != 1 {
				t.Fatalf("the Rollout has %d Events of the plugin, want 1:\n%s", len(evs), describe(evs))
			}
			e := evs[0]
			method, _, _ := strings.Cut(strings.TrimPrefix(text, "rollout "+ns+"/demo: "), "(")
			want := eventsv1.Event{
				Type: "Warning", Reason: fc.reason, Note: text, Action: method,
				Regarding:           corev1.ObjectReference{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Namespace: ns, Name: "demo", UID: ro.UID},
				ReportingController: fieldManager,
			}
			got := eventsv1.Event{Type: e.Type, Reason: e.Reason, Note: e.Note, Action: e.Action, Regarding: e.Regarding, ReportingController: e.ReportingController}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the Rollout's Event (-want +got):\n%s", diff)
			}
			if seriesCount(e) != 3 || e.ReportingInstance == "" {
				t.Errorf("count %d (want 3), reportingInstance %q", seriesCount(e), e.ReportingInstance)
			}
			var warnings []eventsv1.Event
			for _, e := range pluginEvents(t, standard, ns, "HTTPRoute", "route") {
				if e.Type == "Warning" {
					warnings = append(warnings, e)
				}
			}
			if !fc.onRoute {
				if len(warnings) > 0 {
					t.Errorf("the route was told of an error that is not its own:\n%s", describe(warnings))
				}
				return
			}
			onlyWarnings := func(evs []eventsv1.Event) []eventsv1.Event {
				return slices.DeleteFunc(evs, func(e eventsv1.Event) bool { return e.Type != "Warning" })
			}
			warnings = onlyWarnings(waitForEvents(t, standard, ns, "HTTPRoute", "route", func(evs []eventsv1.Event) bool {
				w := onlyWarnings(evs)
				return len(w) == 1 && seriesCount(w[0]) == 3
			}))
			if len(warnings) != 1 || warnings[0].Reason != fc.reason || seriesCount(warnings[0]) != 3 ||
				!strings.HasPrefix(warnings[0].Note, "rollout "+ns+"/demo: ") || warnings[0].Related == nil || warnings[0].Related.Name != "demo" {
				t.Errorf("the route's Warnings, want one %s seen 3 times naming the Rollout:\n%s", fc.reason, describe(warnings))
			}
		})
	}
}

// After errors, the first call that works says so on the Rollout, once.
func TestACallThatWorksAgainSaysSo(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	p := startPlugin(t, standard)
	create(t, standard, ns, routeYAML("v1", "HTTPRoute", "route"))
	bad := rollout(ns, `{"httpRoute": "route", "httpRout": "route"}`)
	for range 2 {
		if err := p.SetWeight(bad, 10, nil); !err.HasError() {
			t.Fatal("the bad config was taken")
		}
	}
	fixed := rollout(ns, `{"httpRoute": "route"}`)
	for range 3 {
		if err := p.SetWeight(fixed, 10, nil); err.HasError() {
			t.Fatal(err)
		}
	}
	evs := waitForEvents(t, standard, ns, "Rollout", "demo", func(evs []eventsv1.Event) bool { return len(evs) == 2 })
	if len(evs) != 2 || evs[1].Type != "Normal" || evs[1].Reason != "Recovered" || seriesCount(evs[1]) != 1 ||
		!strings.HasPrefix(evs[1].Note, "rollout "+ns+"/demo: SetWeight(10): succeeded after 2 failed SetWeight calls since ") ||
		!strings.HasSuffix(evs[1].Note, "(the last with reason InvalidConfig)") {
		t.Errorf("the Rollout's Events, want the Warning then one Recovered:\n%s", describe(evs))
	}
}

// A walk leaves on the route one Normal Event per kind of change of each
// write, naming the Rollout and the call, and one when the plugin gives the
// route back; nothing on the Rollout. With -route-events=false the route is
// told nothing.
func TestAWalkIsToldOnTheRoute(t *testing.T) {
	standard := parallel(t)
	walk := func(t *testing.T, args ...string) (string, []eventsv1.Event) {
		ns := namespace(t, standard)
		service(t, standard, ns, "exp-baseline", "http:80")
		service(t, standard, ns, "exp-canary", "http:80")
		create(t, standard, ns, routeYAML("v1", "HTTPRoute", "route"))
		p := startPlugin(t, standard, args...)
		ro := rollout(ns, `{"httpRoute": "route"}`)
		ro.Spec.Strategy.Canary.TrafficRouting.ManagedRoutes = []v1alpha1.MangedRoutes{{Name: "canary-header"}, {Name: "mirror"}}
		for _, step := range rbacWalk {
			if err := step.do(p, ro); err.HasError() {
				t.Fatalf("%s: %s", step.name, err)
			}
		}
		time.Sleep(2 * time.Second) // the Recorder sends within a second or so; more would be a bug
		if evs := pluginEvents(t, standard, ns, "Rollout", "demo"); len(evs) > 0 {
			t.Errorf("a walk without errors left Events on the Rollout:\n%s", describe(evs))
		}
		return ns, pluginEvents(t, standard, ns, "HTTPRoute", "route")
	}
	ns, evs := walk(t)
	rollout := "rollout " + ns + "/demo: "
	svc := func(name string) string { return "Service " + ns + "/" + name }
	want := []string{
		"WeightsChanged SetWeight: " + rollout + "SetWeight(10): rule 0 " + svc("stable") + " 100→90; rule 0 " + svc("canary") + " 0→10",
		"WeightsChanged SetWeight: " + rollout + "SetWeight(20, exp-baseline=5,exp-canary=5): rule 0 " + svc("stable") + " 90→70; rule 0 " + svc("canary") + " 10→20",
		"ExperimentBackendsAdded SetWeight: " + rollout + "SetWeight(20, exp-baseline=5,exp-canary=5): rule 0 + " + svc("exp-baseline") + " weight 5; rule 0 + " + svc("exp-canary") + " weight 5",
		"RulesAdded SetHeaderRoute: " + rollout + "SetHeaderRoute(canary-header): + rule canary-header",
		"RulesAdded SetMirrorRoute: " + rollout + "SetMirrorRoute(mirror): + rule mirror",
		"RulesRemoved RemoveManagedRoutes: " + rollout + "RemoveManagedRoutes: − rule canary-header; − rule mirror",
		"WeightsChanged SetWeight: " + rollout + "SetWeight(0): rule 0 " + svc("stable") + " 70→100; rule 0 " + svc("canary") + " 20→0",
		"ExperimentBackendsRemoved SetWeight: " + rollout + "SetWeight(0): rule 0 − " + svc("exp-baseline") + "; rule 0 − " + svc("exp-canary"),
		"OwnershipReleased SetWeight: " + rollout + "SetWeight(0): the plugin gave its ownership of spec.rules back, removing its managedFields entry (Apply); " +
			"every value kept: GitOps tools see the route's own changes again",
	}
	var got []string
	for _, e := range evs {
		if e.Type != "Normal" || seriesCount(e) != 1 || e.Related == nil || e.Related.Kind != "Rollout" || e.Related.Name != "demo" || e.Regarding.UID == "" {
			t.Errorf("Event %s: type %s, count %d, related %v, regarding %v", e.Name, e.Type, seriesCount(e), e.Related, e.Regarding)
		}
		got = append(got, e.Reason+" "+e.Action+": "+e.Note)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the route's Events (-want +got):\n%s", diff)
	}

	t.Run("-route-events=false", func(t *testing.T) {
		if _, evs := walk(t, "-route-events=false"); len(evs) > 0 {
			t.Errorf("with -route-events=false the route was told:\n%s", describe(evs))
		}
	})
}

// Without permission to create Events every call works as before, and the
// plugin says so once in its log, however many Events it could not record.
//
// In parallel, though its ServiceAccount's plugin keeps its Lease in
// ControllerNamespace: the only test in parallel whose plugin does.
func TestWithoutEventsPermissionCallsWork(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	service(t, standard, ns, "exp-baseline", "http:80")
	service(t, standard, ns, "exp-canary", "http:80")
	create(t, standard, ns, routeYAML("v1", "HTTPRoute", "route"))
	kubeconfig, _ := asServiceAccount(t, standard, ns, "rollouts", without(documentedRole(t).Rules, "events", "create"))
	p, log := startPluginWith(t, pluginBin, kubeconfig)
	ro := rollout(ns, `{"httpRoute": "route"}`)
	ro.Spec.Strategy.Canary.TrafficRouting.ManagedRoutes = []v1alpha1.MangedRoutes{{Name: "canary-header"}, {Name: "mirror"}}
	for range 2 {
		for _, step := range rbacWalk {
			if err := step.do(p, ro); err.HasError() {
				t.Fatalf("%s without Events permission: %s", step.name, err)
			}
		}
		// An error too: a Warning it cannot record either.
		if err := p.SetWeight(rollout(ns, `{"httpRoute": "missing"}`), 10, nil); !err.HasError() {
			t.Fatal("a missing route was found")
		}
	}
	eventually(t, "the log to say the plugin may not record Events", func() bool { return log.Count("the plugin may not record Events") > 0 })
	time.Sleep(2 * time.Second)
	if n := log.Count("the plugin may not record Events", "events.events.k8s.io"); n != 1 {
		t.Errorf("the log says %d times that the plugin may not record Events, want once", n)
	}
	if u := get(t, standard, "v1", "HTTPRoute", ns, "route"); weights(u)["0/stable"] != 100 {
		t.Errorf("after the walks: %v", weights(u))
	}
	// The plugin's Events, about any object: the apiserver records its own
	// in the namespace now and then (its ClusterIP repair loop about a
	// Service created a moment before it ran, for one).
	if recorded := pluginEvents(t, standard, ns, "", ""); len(recorded) > 0 {
		t.Errorf("%d Events recorded without permission:\n%s", len(recorded), describe(recorded))
	}
}
