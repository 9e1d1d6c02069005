package test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/google/go-cmp/cmp"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// pingPongRoute has one rule with the two persistent Services, all traffic on ping.
func pingPongRoute(version, kind string) string {
	return strings.NewReplacer("name: stable", "name: ping", "name: canary", "name: pong").Replace(routeYAML(version, kind, "route"))
}

func pingPongRollout(ns, config string) *v1alpha1.Rollout {
	ro := rollout(ns, config)
	ro.Spec.Strategy.Canary.StableService, ro.Spec.Strategy.Canary.CanaryService = "", ""
	ro.Spec.Strategy.Canary.PingPong = &v1alpha1.PingPongSpec{PingService: "ping", PongService: "pong"}
	return ro
}

// Ping-pong: status.canary.stablePingPong says which Service is stable; the
// plugin moves weight between the two, never writes a Service, and gives
// its ownership back when the rollout ends.
func TestPingPongWalkAndFlip(t *testing.T) {
	standard := parallel(t)
	for _, kind := range []string{"TCPRoute", "GRPCRoute", "HTTPRoute", "TLSRoute", "UDPRoute"} {
		t.Run(kind, func(t *testing.T) { walkPingPong(t, standard, "v1", kind, "tcp:80") })
	}
}

// walkPingPong walks a ping-pong Rollout on a route of kind in version,
// whose Services (ping, pong and two experiment Services) have port.
func walkPingPong(t *testing.T, c *harness.Cluster, version, kind, port string) {
	ns := namespace(t, c)
	for _, name := range []string{"ping", "pong", "exp-baseline", "exp-canary"} {
		service(t, c, ns, name, port)
	}
	create(t, c, ns, pingPongRoute(version, kind))
	p := startPlugin(t, c)
	ro := pingPongRollout(ns, fmt.Sprintf(`{"%sRoute": "route"}`, strings.ToLower(strings.TrimSuffix(kind, "Route"))))
	c.Recorder.Reset()
	for _, step := range []struct {
		stable v1alpha1.PingPongType
		weight int32
		exp    []v1alpha1.WeightDestination
		want   map[string]int64
	}{
		{v1alpha1.PPPing, 30, nil, map[string]int64{"0/ping": 70, "0/pong": 30}},
		{v1alpha1.PPPing, 30, experimentDestinations(5, 25), map[string]int64{"0/ping": 40, "0/pong": 30, "0/exp-baseline": 5, "0/exp-canary": 25}},
		{v1alpha1.PPPing, 100, nil, map[string]int64{"0/ping": 0, "0/pong": 100}},
		// Promotion: Argo Rollouts flips stablePingPong; pong is now stable.
		{v1alpha1.PPPong, 0, nil, map[string]int64{"0/ping": 0, "0/pong": 100}},
		{v1alpha1.PPPong, 30, nil, map[string]int64{"0/ping": 30, "0/pong": 70}},
		{v1alpha1.PPPong, 0, nil, map[string]int64{"0/ping": 0, "0/pong": 100}},
	} {
		ro.Status.Canary.StablePingPong = step.stable
		if err := p.SetWeight(ro, step.weight, step.exp); err.HasError() {
			t.Fatalf("stable %s, SetWeight(%d): %s", step.stable, step.weight, err)
		}
		got := weights(get(t, c, version, kind, ns, "route"))
		if diff := cmp.Diff(step.want, got); diff != "" {
			t.Errorf("stable %s, SetWeight(%d, %v) (-want +got):\n%s", step.stable, step.weight, step.exp, diff)
		}
	}
	pluginOwnsNothing(t, get(t, c, version, kind, ns, "route"))
	for _, r := range c.Recorder.Requests() {
		if strings.Contains(r.Path, "/services") && r.Method != http.MethodGet {
			t.Errorf("the plugin wrote a Service: %s %s", r.Method, r.Path)
		}
	}
}

// A route without the ping or the pong backendRef is an error naming both.
func TestPingPongRouteWithoutPong(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	create(t, standard, ns, strings.Replace(routeYAML("v1", "TCPRoute", "route"), "name: stable", "name: ping", 1))
	p := startPlugin(t, standard)
	ro := pingPongRollout(ns, `{"tcpRoute": "route"}`)
	ro.Status.Canary.StablePingPong = v1alpha1.PPPing
	err := p.SetWeight(ro, 30, nil)
	for _, want := range []string{"TCPRoute " + ns + "/route has no rule", "Service " + ns + "/ping", "Service " + ns + "/pong"} {
		if !strings.Contains(err.ErrorString, want) {
			t.Errorf("error %q does not mention %q", err.ErrorString, want)
		}
	}
}
