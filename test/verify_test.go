package test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/argoproj/argo-rollouts/utils/plugin/types"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

const gatewayController = "example.com/gateway-controller"

// notVerifiedLog is the message of the plugin's log line for a route that is behind.
const notVerifiedLog = `msg="weights not verified yet"`

// logCapture keeps the plugin's log lines and passes them on to the test log.
type logCapture struct {
	t     *testing.T
	mu    sync.Mutex
	lines []string
}

func (l *logCapture) Write(p []byte) (int, error) {
	s := strings.TrimRight(string(p), "\n")
	l.t.Log(s)
	l.mu.Lock()
	l.lines = append(l.lines, strings.Split(s, "\n")...)
	l.mu.Unlock()
	return len(p), nil
}

// matching returns the lines since mark that contain every string of want.
func (l *logCapture) matching(mark int, want ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines[min(mark, len(l.lines)):] {
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(line, w)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

func (l *logCapture) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}

// startPluginCapturingLogs starts the plugin binary and captures its log.
func startPluginCapturingLogs(t *testing.T, c *harness.Cluster) (*harness.PluginProcess, *logCapture) {
	t.Helper()
	logs := &logCapture{t: t}
	p, err := harness.StartPlugin(pluginBin, c.Kubeconfig, logs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p, logs
}

// condition is a route condition as a gateway controller writes it.
func condition(typ string, status metav1.ConditionStatus, gen int64, reason, message string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, ObservedGeneration: gen, Reason: reason, Message: message, LastTransitionTime: metav1.Now()}
}

// accepted is a parent status saying the controller took generation gen.
func accepted(parent gatewayv1.ParentReference, gen int64) gatewayv1.RouteParentStatus {
	return gatewayv1.RouteParentStatus{
		ParentRef:      parent,
		ControllerName: gatewayController,
		Conditions: []metav1.Condition{
			condition("Accepted", metav1.ConditionTrue, gen, "Accepted", "Route is accepted"),
			condition("ResolvedRefs", metav1.ConditionTrue, gen, "ResolvedRefs", "All references resolved"),
		},
	}
}

func parentRef(name string) gatewayv1.ParentReference {
	return gatewayv1.ParentReference{Name: gatewayv1.ObjectName(name)}
}

// setRouteStatus writes an HTTPRoute's status.parents through the status
// subresource, as a gateway controller does, and returns the route's generation.
func setRouteStatus(t *testing.T, c *harness.Cluster, ns, name string, parents ...gatewayv1.RouteParentStatus) int64 {
	t.Helper()
	ctx := context.Background()
	client := c.Gateway.GatewayV1().HTTPRoutes(ns)
	route, err := client.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	route.Status.Parents = parents
	updated, err := client.UpdateStatus(ctx, route, metav1.UpdateOptions{FieldManager: "gateway-controller"})
	if err != nil {
		t.Fatalf("writing the status of HTTPRoute %s/%s: %v", ns, name, err)
	}
	if updated.Generation != route.Generation {
		t.Fatalf("a status write changed the generation %d → %d", route.Generation, updated.Generation)
	}
	return updated.Generation
}

func generation(t *testing.T, c *harness.Cluster, ns, name string) int64 {
	t.Helper()
	return get(t, c, "v1", "HTTPRoute", ns, name).GetGeneration()
}

// checkVerify calls VerifyWeight and checks its answer, that an error names
// what it should, and that the call wrote nothing.
func checkVerify(t *testing.T, c *harness.Cluster, p *harness.PluginProcess, ns, config string, weight int32,
	want types.RpcVerified, wantErr ...string) {
	t.Helper()
	c.Recorder.Reset()
	v, err := p.Plugin.VerifyWeight(rollout(ns, config), weight, nil)
	if v != want {
		t.Errorf("VerifyWeight(%d) = %v, want %v (error %q)", weight, harness.VerifiedName(v), harness.VerifiedName(want), err.ErrorString)
	}
	if len(wantErr) == 0 && err.HasError() {
		t.Errorf("VerifyWeight(%d): unexpected error %s", weight, err.ErrorString)
	}
	if len(wantErr) > 0 {
		if !err.HasError() {
			t.Errorf("VerifyWeight(%d): no error, want one mentioning %q", weight, wantErr)
		}
		t.Logf("error: %s", err.ErrorString)
		for _, w := range wantErr {
			if !strings.Contains(err.ErrorString, w) {
				t.Errorf("VerifyWeight(%d): error %q does not mention %q", weight, err.ErrorString, w)
			}
		}
	}
	if w := pluginWrites(c); len(w) != 0 {
		t.Errorf("VerifyWeight(%d) wrote: %v", weight, w)
	}
}

// With verifyWeight: true the answer follows the route's status.parents as a
// gateway controller writes it: nothing, an older generation, a False
// condition, and finally Accepted and ResolvedRefs True for the generation the
// plugin's write produced.
func TestVerifyWeightFollowsRouteStatus(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	create(t, standard, ns, routeYAML("v1", "HTTPRoute", "route"))
	p, logs := startPluginCapturingLogs(t, standard)
	cfg := `{"httpRoute": "route", "verifyWeight": true}`
	gw := parentRef("gw")
	routeName := "HTTPRoute " + ns + "/route"

	if err := p.Plugin.SetWeight(rollout(ns, cfg), 30, nil); err.HasError() {
		t.Fatal(err)
	}
	gen := generation(t, standard, ns, "route")

	t.Run("no status: NotVerified, one log line naming route and parent", func(t *testing.T) {
		mark := logs.mark()
		checkVerify(t, standard, p, ns, cfg, 30, types.NotVerified)
		eventually(t, "the NotVerified log line", func() bool {
			return len(logs.matching(mark, notVerifiedLog, routeName, "parent Gateway "+ns+"/gw", "no status.parents entry")) == 1
		})
		if n := len(logs.matching(mark, notVerifiedLog)); n != 1 {
			t.Errorf("%d NotVerified log lines for one route, want 1", n)
		}
	})

	t.Run("status for an older generation: NotVerified", func(t *testing.T) {
		setRouteStatus(t, standard, ns, "route", accepted(gw, gen-1))
		mark := logs.mark()
		checkVerify(t, standard, p, ns, cfg, 30, types.NotVerified)
		eventually(t, "the NotVerified log line", func() bool {
			return len(logs.matching(mark, notVerifiedLog, routeName, "Accepted=True for an older generation")) == 1
		})
	})

	t.Run("Accepted and ResolvedRefs True for the current generation: Verified", func(t *testing.T) {
		setRouteStatus(t, standard, ns, "route", accepted(gw, gen))
		checkVerify(t, standard, p, ns, cfg, 30, types.Verified)
	})

	t.Run("ResolvedRefs False: RpcError naming route, parent and reason", func(t *testing.T) {
		setRouteStatus(t, standard, ns, "route", gatewayv1.RouteParentStatus{
			ParentRef:      gw,
			ControllerName: gatewayController,
			Conditions: []metav1.Condition{
				condition("Accepted", metav1.ConditionTrue, gen, "Accepted", "Route is accepted"),
				condition("ResolvedRefs", metav1.ConditionFalse, gen, "BackendNotFound", `Service "canary" not found`),
			},
		})
		checkVerify(t, standard, p, ns, cfg, 30, types.NotVerified,
			"rollout "+ns+"/demo", routeName, "parent Gateway "+ns+"/gw", "ResolvedRefs=False", "BackendNotFound", `Service "canary" not found`, gatewayController)
	})

	t.Run("the next SetWeight makes the status old again", func(t *testing.T) {
		setRouteStatus(t, standard, ns, "route", accepted(gw, gen))
		if err := p.Plugin.SetWeight(rollout(ns, cfg), 60, nil); err.HasError() {
			t.Fatal(err)
		}
		newGen := generation(t, standard, ns, "route")
		if newGen <= gen {
			t.Fatalf("SetWeight(60) left generation %d", newGen)
		}
		// Right after the write: the plugin reads the route fresh, so it sees
		// the new generation and the old status.
		checkVerify(t, standard, p, ns, cfg, 60, types.NotVerified)
		setRouteStatus(t, standard, ns, "route", accepted(gw, newGen))
		checkVerify(t, standard, p, ns, cfg, 60, types.Verified)
	})

	t.Run("a spec that does not carry the desired weights: NotVerified", func(t *testing.T) {
		mark := logs.mark()
		checkVerify(t, standard, p, ns, cfg, 80, types.NotVerified)
		eventually(t, "the NotVerified log line", func() bool {
			return len(logs.matching(mark, notVerifiedLog, routeName, "spec does not carry the desired weights", "has weight 60, want 80")) == 1
		})
	})
}

// A gateway whose status leads its data plane (Traefik, by its controllerName)
// gets its settle time after the status write: current status alone is
// NotVerified at first, with a log line saying the plugin waits for the data
// plane; verifyWeightSettle: 0s verifies by status alone. (The wait running
// out, on a real Traefik, is make e2e's verify-weight scenario.)
func TestVerifyWeightWaitsForTraefiksDataPlane(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	create(t, standard, ns, routeYAML("v1", "HTTPRoute", "route"))
	p, logs := startPluginCapturingLogs(t, standard)
	cfg := `{"httpRoute": "route", "verifyWeight": true}`
	if err := p.Plugin.SetWeight(rollout(ns, cfg), 30, nil); err.HasError() {
		t.Fatal(err)
	}
	st := accepted(parentRef("gw"), generation(t, standard, ns, "route"))
	st.ControllerName = "traefik.io/gateway-controller"
	setRouteStatus(t, standard, ns, "route", st)

	mark := logs.mark()
	checkVerify(t, standard, p, ns, cfg, 30, types.NotVerified)
	eventually(t, "the settle log line", func() bool {
		return len(logs.matching(mark, "waiting for its data plane", "HTTPRoute "+ns+"/route", "settle=4s",
			"settle time of traefik.io/gateway-controller")) == 1
	})
	checkVerify(t, standard, p, ns, `{"httpRoute": "route", "verifyWeight": true, "verifyWeightSettle": "0s"}`, 30, types.Verified)
	checkVerify(t, standard, p, ns, `{"httpRoute": "route", "verifyWeight": true, "verifyWeightSettle": "1m"}`, 30, types.NotVerified)
}

// Without verifyWeight: true the answer is NotImplemented, with no error,
// whatever the status says: never a blind Verified.
func TestVerifyWeightOffIsNotImplemented(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	create(t, standard, ns, routeYAML("v1", "HTTPRoute", "route"))
	p, _ := startPluginCapturingLogs(t, standard)
	if err := p.Plugin.SetWeight(rollout(ns, `{"httpRoute": "route"}`), 30, nil); err.HasError() {
		t.Fatal(err)
	}
	for _, cfg := range []string{`{"httpRoute": "route"}`, `{"httpRoute": "route", "verifyWeight": false}`} {
		checkVerify(t, standard, p, ns, cfg, 30, types.NotImplemented)
	}
	setRouteStatus(t, standard, ns, "route", accepted(parentRef("gw"), generation(t, standard, ns, "route")))
	checkVerify(t, standard, p, ns, `{"httpRoute": "route"}`, 30, types.NotImplemented)

	// A broken config is still an error, also with the option off.
	checkVerify(t, standard, p, ns, `{"httpRoute": "route", "verifyWeigth": true}`, 30, types.NotVerified, `unknown key "verifyWeigth"`)
}

// A route attached to two listeners of two Gateways is verified only when
// both report the current generation.
func TestVerifyWeightTwoParentsOneBehind(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	create(t, standard, ns, `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: route
spec:
  parentRefs:
  - {name: gw-a}
  - {name: gw-b, sectionName: https}
  rules:
  - backendRefs:
    - {name: stable, port: 80, weight: 100}
    - {name: canary, port: 80, weight: 0}
`)
	p, logs := startPluginCapturingLogs(t, standard)
	cfg := `{"httpRoute": "route", "verifyWeight": true}`
	if err := p.Plugin.SetWeight(rollout(ns, cfg), 30, nil); err.HasError() {
		t.Fatal(err)
	}
	gen := generation(t, standard, ns, "route")
	gwB := gatewayv1.ParentReference{Name: "gw-b", SectionName: section("https")}

	setRouteStatus(t, standard, ns, "route", accepted(parentRef("gw-a"), gen), accepted(gwB, gen-1))
	mark := logs.mark()
	checkVerify(t, standard, p, ns, cfg, 30, types.NotVerified)
	eventually(t, "the NotVerified log line", func() bool {
		return len(logs.matching(mark, notVerifiedLog, "parent Gateway "+ns+"/gw-b sectionName https")) == 1
	})
	if lines := logs.matching(mark, notVerifiedLog, "gw-a"); len(lines) != 0 {
		t.Errorf("the log blames gw-a, which is current: %v", lines)
	}

	// Status for gw-b's other listener is not status for the parent the route names.
	setRouteStatus(t, standard, ns, "route", accepted(parentRef("gw-a"), gen),
		accepted(gatewayv1.ParentReference{Name: "gw-b", SectionName: section("http")}, gen))
	checkVerify(t, standard, p, ns, cfg, 30, types.NotVerified)

	setRouteStatus(t, standard, ns, "route", accepted(parentRef("gw-a"), gen), accepted(gwB, gen))
	checkVerify(t, standard, p, ns, cfg, 30, types.Verified)
}

// Every managed route is checked; each route that is behind gets its own
// log line, and only those.
func TestVerifyWeightEveryRoute(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	create(t, standard, ns, routeYAML("v1", "HTTPRoute", "route-a"))
	create(t, standard, ns, routeYAML("v1", "HTTPRoute", "route-b"))
	create(t, standard, ns, routeYAML("v1", "HTTPRoute", "route-c"))
	p, logs := startPluginCapturingLogs(t, standard)
	cfg := `{"httpRoutes": [{"name": "route-a"}, {"name": "route-b"}, {"name": "route-c"}], "verifyWeight": true}`
	if err := p.Plugin.SetWeight(rollout(ns, cfg), 30, nil); err.HasError() {
		t.Fatal(err)
	}
	setRouteStatus(t, standard, ns, "route-a", accepted(parentRef("gw"), generation(t, standard, ns, "route-a")))
	setRouteStatus(t, standard, ns, "route-c", accepted(parentRef("gw"), generation(t, standard, ns, "route-c")-1))

	mark := logs.mark()
	checkVerify(t, standard, p, ns, cfg, 30, types.NotVerified)
	eventually(t, "one log line for route-b and one for route-c", func() bool {
		return len(logs.matching(mark, notVerifiedLog, "HTTPRoute "+ns+"/route-b")) == 1 &&
			len(logs.matching(mark, notVerifiedLog, "HTTPRoute "+ns+"/route-c")) == 1
	})
	if lines := logs.matching(mark, notVerifiedLog, "HTTPRoute "+ns+"/route-a"); len(lines) != 0 {
		t.Errorf("the log blames route-a, which is verified: %v", lines)
	}

	setRouteStatus(t, standard, ns, "route-b", accepted(parentRef("gw"), generation(t, standard, ns, "route-b")))
	setRouteStatus(t, standard, ns, "route-c", accepted(parentRef("gw"), generation(t, standard, ns, "route-c")))
	checkVerify(t, standard, p, ns, cfg, 30, types.Verified)
}

func section(name string) *gatewayv1.SectionName {
	s := gatewayv1.SectionName(name)
	return &s
}

// During an experiment step the experiment Services' backendRefs count too:
// stable carries what canary and the experiments leave, and a gateway that
// cannot find an experiment Service is an error that names it.
func TestVerifyWeightWithExperimentServices(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	create(t, standard, ns, `apiVersion: v1
kind: Service
metadata:
  name: exp
spec:
  selector: {app: exp}
  ports:
  - {name: http, port: 80, targetPort: 8080}
`)
	create(t, standard, ns, routeYAML("v1", "HTTPRoute", "route"))
	p, logs := startPluginCapturingLogs(t, standard)
	cfg := `{"httpRoute": "route", "verifyWeight": true}`
	exp := []v1alpha1.WeightDestination{{ServiceName: "exp", Weight: 10}}
	if err := p.Plugin.SetWeight(rollout(ns, cfg), 20, exp); err.HasError() {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int64{"0/stable": 70, "0/canary": 20, "0/exp": 10}, weights(get(t, standard, "v1", "HTTPRoute", ns, "route"))); diff != "" {
		t.Fatalf("weights after SetWeight(20, exp=10) (-want +got):\n%s", diff)
	}
	gen := generation(t, standard, ns, "route")
	setRouteStatus(t, standard, ns, "route", accepted(parentRef("gw"), gen))

	verify := func(weight int32, dests []v1alpha1.WeightDestination, want types.RpcVerified, wantErr ...string) {
		t.Helper()
		standard.Recorder.Reset()
		v, err := p.Plugin.VerifyWeight(rollout(ns, cfg), weight, dests)
		if v != want {
			t.Errorf("VerifyWeight(%d, %v) = %s, want %s (error %q)", weight, dests, harness.VerifiedName(v), harness.VerifiedName(want), err.ErrorString)
		}
		if len(wantErr) == 0 && err.HasError() {
			t.Errorf("VerifyWeight(%d, %v): unexpected error %s", weight, dests, err.ErrorString)
		}
		for _, w := range wantErr {
			if !strings.Contains(err.ErrorString, w) {
				t.Errorf("VerifyWeight(%d, %v): error %q does not mention %q", weight, dests, err.ErrorString, w)
			}
		}
		if w := pluginWrites(standard); len(w) != 0 {
			t.Errorf("VerifyWeight wrote: %v", w)
		}
	}
	verify(20, exp, types.Verified)

	mark := logs.mark()
	verify(20, []v1alpha1.WeightDestination{{ServiceName: "exp", Weight: 15}}, types.NotVerified)
	eventually(t, "the NotVerified log line", func() bool {
		return len(logs.matching(mark, notVerifiedLog, "Service "+ns+"/exp has weight 10, want 15")) == 1
	})
	// Without the experiment, stable should have 80: the spec is not there.
	verify(20, nil, types.NotVerified)

	setRouteStatus(t, standard, ns, "route", gatewayv1.RouteParentStatus{
		ParentRef:      parentRef("gw"),
		ControllerName: gatewayController,
		Conditions: []metav1.Condition{
			condition("Accepted", metav1.ConditionTrue, gen, "Accepted", "Route is accepted"),
			condition("ResolvedRefs", metav1.ConditionFalse, gen, "BackendNotFound", `Service "exp" has no endpoints`),
		},
	})
	verify(20, exp, types.NotVerified, "HTTPRoute "+ns+"/route", "BackendNotFound", `Service "exp"`)
}
