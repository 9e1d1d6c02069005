package test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/google/go-cmp/cmp"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// The tests of this file are serial: they check durations against the
// plugin's deadlines and Retry-After, which CPU taken by tests beside them
// would stretch.

// Fault injection: the recorder in front of the apiserver answers 500 and
// 429, resets connections, holds requests, drops answers after forwarding,
// and fails one route for good, while the real plugin binary is called over
// RPC. No assertion is about how fast anything is: durations are checked
// against the deadlines the plugin was given, with slack, and printed.

// faults puts the standard cluster's recorder in fault mode for the test.
func faults(t *testing.T) *harness.Recorder {
	t.Cleanup(standard.Recorder.ClearFaults)
	return standard.Recorder
}

// patchesOf counts the plugin's PATCH requests to a route that reached the
// apiserver (no fault, or a fault that forwards).
func patchesOf(route string) (forwarded, faulted int) {
	for _, r := range standard.Recorder.Requests() {
		if r.Method != http.MethodPatch || !strings.HasSuffix(r.Path, "/"+route) {
			continue
		}
		switch r.Fault {
		case "", harness.DropAnswer:
			forwarded++
		}
		if r.Fault != "" {
			faulted++
		}
	}
	return forwarded, faulted
}

// 500s, 429s with Retry-After and connection resets are retried within the
// call: each step succeeds, its weights are exact, and one apply landed.
func TestTransientFaultsAreRetried(t *testing.T) {
	ns := namespace(t, standard)
	create(t, standard, ns, routeYAML("v1", "HTTPRoute", "route"))
	p := startPlugin(t, standard)
	ro := rollout(ns, `{"httpRoute": "route"}`)
	if err := p.SetWeight(ro, 10, nil); err.HasError() {
		t.Fatal(err)
	}
	rec := faults(t)
	for i, tc := range []struct {
		name   string
		faults []harness.Fault
		least  time.Duration // the Retry-After the plugin must honour
	}{
		{"two 500s", []harness.Fault{{Method: "PATCH", Path: "/route", Times: 2, Do: harness.Answer, Status: 500}}, 0},
		{"503 then 504", []harness.Fault{{Method: "PATCH", Path: "/route", Times: 1, Do: harness.Answer, Status: 503}, {Method: "PATCH", Path: "/route", Times: 1, Do: harness.Answer, Status: 504}}, 0},
		{"429 with Retry-After: 1", []harness.Fault{{Method: "PATCH", Path: "/route", Times: 1, Do: harness.Answer, Status: 429, RetryAfter: "1"}}, time.Second},
		{"two connection resets", []harness.Fault{{Method: "PATCH", Path: "/route", Times: 2, Do: harness.Reset}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec.ClearFaults()
			rec.Reset()
			injected := 0
			for _, f := range tc.faults {
				rec.Inject(f)
				injected += f.Times
			}
			weight := int32(20 + 10*i)
			start := time.Now()
			err := p.SetWeight(ro, weight, nil)
			elapsed := time.Since(start)
			forwarded, faulted := patchesOf("route")
			t.Logf("%s: SetWeight(%d) answered after %s; %d faulted attempts, %d forwarded", tc.name, weight, elapsed.Round(time.Millisecond), faulted, forwarded)
			if err.HasError() {
				t.Fatalf("SetWeight(%d): %s", weight, err)
			}
			if want := map[string]int64{"0/stable": int64(100 - weight), "0/canary": int64(weight)}; !cmp.Equal(want, weights(get(t, standard, "v1", "HTTPRoute", ns, "route"))) {
				t.Errorf("weights %v, want %v", weights(get(t, standard, "v1", "HTTPRoute", ns, "route")), want)
			}
			if faulted != injected || forwarded != 1 {
				t.Errorf("%d faulted and %d forwarded applies; want every fault retried and one apply", faulted, forwarded)
			}
			if elapsed < tc.least {
				t.Errorf("retried after %s, before the Retry-After of %s", elapsed, tc.least)
			}
		})
	}
}

// A write the apiserver holds is abandoned after -request-timeout and sent
// again, well within the call's deadline.
func TestHeldWriteIsAbandonedAndRetried(t *testing.T) {
	ns := namespace(t, standard)
	create(t, standard, ns, routeYAML("v1", "HTTPRoute", "route"))
	const requestTimeout, callTimeout = 2 * time.Second, 20 * time.Second
	p := startPlugin(t, standard, "-request-timeout="+requestTimeout.String(), "-call-timeout="+callTimeout.String())
	ro := rollout(ns, `{"httpRoute": "route"}`)
	if err := p.SetWeight(ro, 10, nil); err.HasError() {
		t.Fatal(err)
	}
	held := faults(t).Inject(harness.Fault{Method: "PATCH", Path: "/route", Times: 1, Do: harness.Hold})
	start := time.Now()
	err := p.SetWeight(ro, 30, nil)
	elapsed := time.Since(start)
	t.Logf("first apply held: SetWeight(30) answered after %s (request timeout %s, call deadline %s)", elapsed.Round(time.Millisecond), requestTimeout, callTimeout)
	if err.HasError() {
		t.Fatalf("SetWeight(30): %s", err)
	}
	if held.Hits() != 1 || elapsed < requestTimeout || elapsed >= callTimeout {
		t.Errorf("held %d, answered after %s: want the held apply abandoned after %s and the call done before %s", held.Hits(), elapsed, requestTimeout, callTimeout)
	}
	if diff := cmp.Diff(map[string]int64{"0/stable": 70, "0/canary": 30}, weights(get(t, standard, "v1", "HTTPRoute", ns, "route"))); diff != "" {
		t.Errorf("weights (-want +got):\n%s", diff)
	}
}

// When the apiserver answers nothing at all, the call still returns within
// its deadline, with an RpcError that names the deadline and every route not
// written, and no other; once the apiserver answers, the same call converges.
func TestCallReturnsWithinItsDeadline(t *testing.T) {
	ns := namespace(t, standard)
	for _, name := range []string{"a", "b", "c"} {
		create(t, standard, ns, routeYAML("v1", "HTTPRoute", name))
	}
	const requestTimeout, callTimeout, slack = 2 * time.Second, 6 * time.Second, 2 * time.Second
	p := startPlugin(t, standard, "-request-timeout="+requestTimeout.String(), "-call-timeout="+callTimeout.String())
	ro := rollout(ns, `{"httpRoutes": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}`)
	if err := p.SetWeight(ro, 10, nil); err.HasError() {
		t.Fatal(err)
	}
	rec := faults(t)
	for _, tc := range []struct {
		name    string
		hold    []string // routes whose writes the apiserver holds; nil: every request
		weight  int32
		failed  []string
		written []string
	}{
		{"the apiserver answers nothing", nil, 20, []string{"a", "b", "c"}, nil},
		{"one route's write hangs", []string{"b"}, 30, []string{"b"}, []string{"a", "c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec.ClearFaults()
			if tc.hold == nil {
				rec.Inject(harness.Fault{Do: harness.Hold})
			}
			for _, name := range tc.hold {
				rec.Inject(harness.Fault{Method: "PATCH", Path: "/httproutes/" + name, Do: harness.Hold})
			}
			start := time.Now()
			err := p.SetWeight(ro, tc.weight, nil)
			elapsed := time.Since(start)
			t.Logf("%s: SetWeight(%d) answered after %s (call deadline %s): %s", tc.name, tc.weight, elapsed.Round(time.Millisecond), callTimeout, err.ErrorString)
			if elapsed > callTimeout+slack {
				t.Errorf("answered after %s, past the call's deadline of %s plus %s slack", elapsed, callTimeout, slack)
			}
			if !strings.Contains(err.ErrorString, "the call's deadline (6s, -call-timeout) passed") {
				t.Errorf("error does not name the deadline: %q", err.ErrorString)
			}
			for _, name := range tc.failed {
				if !strings.Contains(err.ErrorString, "HTTPRoute "+ns+"/"+name+": not confirmed written before the call's deadline") {
					t.Errorf("error does not name route %s as not written", name)
				}
			}
			for _, name := range tc.written {
				if strings.Contains(err.ErrorString, "HTTPRoute "+ns+"/"+name) {
					t.Errorf("error names route %s, which was written", name)
				}
				if w := weights(get(t, standard, "v1", "HTTPRoute", ns, name)); w["0/canary"] != int64(tc.weight) {
					t.Errorf("route %s: canary %d, want %d", name, w["0/canary"], tc.weight)
				}
			}
			rec.ClearFaults()
			if err := p.SetWeight(ro, tc.weight, nil); err.HasError() {
				t.Fatalf("the same call once the apiserver answers: %s", err)
			}
			for _, name := range []string{"a", "b", "c"} {
				if w := weights(get(t, standard, "v1", "HTTPRoute", ns, name)); w["0/canary"] != int64(tc.weight) {
					t.Errorf("after the repeat, route %s: canary %d, want %d", name, w["0/canary"], tc.weight)
				}
			}
		})
	}
}

// The apiserver applies a write and the answer is lost. Repeating it (the
// plugin's transport at once, or the controller with the next call) leaves
// each experiment backendRef and each header rule on the route exactly once:
// the repeat carries the old resourceVersion, gets a 409, and the decision
// made again from the route as it now is (its claims annotation records what
// the lost write added) has nothing left to do.
func TestLostAnswerIsSafeToRepeat(t *testing.T) {
	ns := namespace(t, standard)
	service(t, standard, ns, "exp-baseline", "http:80")
	service(t, standard, ns, "exp-canary", "http:80")
	create(t, standard, ns, routeYAML("v1", "HTTPRoute", "route"))
	p := startPlugin(t, standard, "-call-timeout=8s", "-request-timeout=2s")
	ro := rollout(ns, `{"httpRoute": "route"}`)
	ro.Spec.Strategy.Canary.TrafficRouting.ManagedRoutes = []v1alpha1.MangedRoutes{{Name: "canary-header"}}
	header := &v1alpha1.SetHeaderRoute{Name: "canary-header", Match: []v1alpha1.HeaderRoutingMatch{{HeaderName: "X-Canary", HeaderValue: &v1alpha1.StringMatch{Exact: "yes"}}}}
	rec := faults(t)

	check := func(t *testing.T, canary, baseline, expCanary int64, headerRules int) {
		t.Helper()
		u := get(t, standard, "v1", "HTTPRoute", ns, "route")
		want := map[string]int64{"0/stable": 100 - canary - baseline - expCanary, "0/canary": canary}
		if baseline > 0 {
			want["0/exp-baseline"], want["0/exp-canary"] = baseline, expCanary
		}
		for i := range headerRules {
			want[fmt.Sprintf("%d/canary", i+1)] = 1
		}
		if diff := cmp.Diff(want, weights(u)); diff != "" {
			t.Errorf("weights (-want +got):\n%s", diff)
		}
		refs := 0
		rules, _ := u.Object["spec"].(map[string]any)["rules"].([]any)
		for _, r := range rules {
			for _, b := range r.(map[string]any)["backendRefs"].([]any) {
				if strings.HasPrefix(b.(map[string]any)["name"].(string), "exp-") {
					refs++
				}
			}
		}
		if baseline > 0 && refs != 2 {
			t.Errorf("%d experiment backendRefs on the route, want each of the 2 exactly once", refs)
		}
		if len(rules) != 1+headerRules {
			t.Errorf("%d rules, want %d", len(rules), 1+headerRules)
		}
	}

	// The transport repeats at once.
	rec.Reset()
	dropped := rec.Inject(harness.Fault{Method: "PATCH", Path: "/route", Times: 1, Do: harness.DropAnswer})
	if err := p.SetWeight(ro, 20, experimentDestinations(5, 5)); err.HasError() {
		t.Fatalf("SetWeight with an experiment, answer lost: %s", err)
	}
	forwarded, _ := patchesOf("route")
	t.Logf("experiment step, answer lost: %d answers dropped, %d applies reached the apiserver (the lost one and its repeat)", dropped.Hits(), forwarded)
	check(t, 20, 5, 5, 0)
	rec.ClearFaults()
	rec.Inject(harness.Fault{Method: "PATCH", Path: "/route", Times: 1, Do: harness.DropAnswer})
	if err := p.SetHeaderRoute(ro, header); err.HasError() {
		t.Fatalf("SetHeaderRoute, answer lost: %s", err)
	}
	check(t, 20, 5, 5, 1)

	// Every answer is lost: the call fails, the controller calls again.
	rec.ClearFaults()
	rec.Reset()
	all := rec.Inject(harness.Fault{Method: "PATCH", Path: "/route", Do: harness.DropAnswer})
	err := p.SetWeight(ro, 40, experimentDestinations(10, 10))
	t.Logf("every answer lost: %d applies forwarded, none answered; the call said: %s", all.Hits(), err.ErrorString)
	if !err.HasError() {
		t.Fatal("a call none of whose writes was answered succeeded")
	}
	rec.ClearFaults()
	rec.Reset()
	if err := p.SetWeight(ro, 40, experimentDestinations(10, 10)); err.HasError() {
		t.Fatalf("the controller's repeat: %s", err)
	}
	if forwarded, _ := patchesOf("route"); forwarded > 1 {
		t.Errorf("the repeat sent %d applies; the lost one was applied, at most one stale attempt may follow", forwarded)
	}
	check(t, 40, 10, 10, 1)
	if err := p.SetHeaderRoute(ro, header); err.HasError() {
		t.Fatal(err)
	}
	check(t, 40, 10, 10, 1)
}

// One route that the apiserver refuses for good does not keep the others from
// being written; the error names that route with its reason and no other, and
// once the apiserver takes it, the same call writes only that route.
func TestOneRouteFailingPersistently(t *testing.T) {
	ns := namespace(t, standard)
	for _, name := range []string{"a", "b", "c"} {
		create(t, standard, ns, routeYAML("v1", "HTTPRoute", name))
	}
	p := startPlugin(t, standard)
	ro := rollout(ns, `{"httpRoutes": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}`)
	rec := faults(t)
	failing := rec.Inject(harness.Fault{Method: "PATCH", Path: "/httproutes/b", Do: harness.Answer, Status: 500})
	start := time.Now()
	err := p.SetWeight(ro, 30, nil)
	t.Logf("route b refused %d times; SetWeight(30) answered after %s: %s", failing.Hits(), time.Since(start).Round(time.Millisecond), err.ErrorString)
	for _, want := range []string{"1 of 3 routes failed; the others are written and the call is safe to repeat", "HTTPRoute " + ns + "/b", "injected fault: 500"} {
		if !strings.Contains(err.ErrorString, want) {
			t.Errorf("error does not say %q", want)
		}
	}
	for _, name := range []string{"a", "c"} {
		if strings.Contains(err.ErrorString, "HTTPRoute "+ns+"/"+name) {
			t.Errorf("error names route %s, which was written", name)
		}
	}
	for name, canary := range map[string]int64{"a": 30, "b": 0, "c": 30} {
		if w := weights(get(t, standard, "v1", "HTTPRoute", ns, name)); w["0/canary"] != canary {
			t.Errorf("route %s: canary %d, want %d", name, w["0/canary"], canary)
		}
	}
	rec.ClearFaults()
	rec.Reset()
	if err := p.SetWeight(ro, 30, nil); err.HasError() {
		t.Fatalf("the repeat: %s", err)
	}
	var writes []string
	for _, w := range pluginWrites(standard) {
		writes = append(writes, w.Method+" "+w.Path[strings.LastIndex(w.Path, "/")+1:])
	}
	if diff := cmp.Diff([]string{"PATCH b"}, writes); diff != "" {
		t.Errorf("the repeat's writes (-want +got):\n%s", diff)
	}
	for _, name := range []string{"a", "b", "c"} {
		if w := weights(get(t, standard, "v1", "HTTPRoute", ns, name)); w["0/canary"] != 30 {
			t.Errorf("after the repeat, route %s: canary %d, want 30", name, w["0/canary"])
		}
	}
}

// A read, not a write, fails for one route of three: the namespace's watch
// and list are refused (so the watch cache cannot sync and the plugin reads
// each route with a GET) and so is every GET of route b. The call names b alone and
// says the others are written; a and c get their weights.
func TestOneRouteFailingToBeRead(t *testing.T) {
	ns := namespace(t, standard)
	for _, name := range []string{"a", "b", "c"} {
		create(t, standard, ns, routeYAML("v1", "HTTPRoute", name))
	}
	rec := faults(t)
	list := rec.Inject(harness.Fault{Method: "GET", PathEnd: "/namespaces/" + ns + "/httproutes", Watches: true, Do: harness.Answer, Status: 500})
	read := rec.Inject(harness.Fault{Method: "GET", Path: "/namespaces/" + ns + "/httproutes/b", Do: harness.Answer, Status: 500})
	p := startPlugin(t, standard)
	ro := rollout(ns, `{"httpRoutes": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}`)
	start := time.Now()
	err := p.SetWeight(ro, 30, nil)
	t.Logf("list refused %d times, route b's GET %d times; SetWeight(30) answered after %s: %s",
		list.Hits(), read.Hits(), time.Since(start).Round(time.Millisecond), err.ErrorString)
	if read.Hits() == 0 {
		t.Fatal("route b was never read with a GET: the test did not test a failing read")
	}
	for _, want := range []string{"1 of 3 routes failed; the others are written and the call is safe to repeat", "HTTPRoute " + ns + "/b", "injected fault: 500"} {
		if !strings.Contains(err.ErrorString, want) {
			t.Errorf("error does not say %q", want)
		}
	}
	for _, name := range []string{"a", "c"} {
		if strings.Contains(err.ErrorString, "HTTPRoute "+ns+"/"+name) {
			t.Errorf("error names route %s, which was written", name)
		}
	}
	rec.ClearFaults()
	for name, canary := range map[string]int64{"a": 30, "b": 0, "c": 30} {
		if w := weights(get(t, standard, "v1", "HTTPRoute", ns, name)); w["0/canary"] != canary {
			t.Errorf("route %s: canary %d, want %d", name, w["0/canary"], canary)
		}
	}
	if err := p.SetWeight(ro, 30, nil); err.HasError() {
		t.Fatalf("the repeat, the faults gone: %s", err)
	}
	if w := weights(get(t, standard, "v1", "HTTPRoute", ns, "b")); w["0/canary"] != 30 {
		t.Errorf("after the repeat, route b: canary %d, want 30", w["0/canary"])
	}
}
