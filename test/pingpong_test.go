package test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/google/go-cmp/cmp"
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
// plugin moves weight between the two and never writes a Service.
func TestPingPongWalkAndFlip(t *testing.T) {
	for _, tc := range []struct{ version, kind string }{{"v1", "TCPRoute"}, {"v1", "GRPCRoute"}, {"v1", "HTTPRoute"}, {"v1", "TLSRoute"}, {"v1", "UDPRoute"}} {
		t.Run(tc.kind, func(t *testing.T) {
			ns := namespace(t, standard)
			service(t, standard, ns, "ping", "tcp:80")
			service(t, standard, ns, "pong", "tcp:80")
			service(t, standard, ns, "exp-baseline", "tcp:80")
			service(t, standard, ns, "exp-canary", "tcp:80")
			create(t, standard, ns, pingPongRoute(tc.version, tc.kind))
			p := startPlugin(t, standard)
			ro := pingPongRollout(ns, fmt.Sprintf(`{"%sRoute": "route"}`, strings.ToLower(strings.TrimSuffix(tc.kind, "Route"))))
			standard.Recorder.Reset()
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
				got := weights(get(t, standard, tc.version, tc.kind, ns, "route"))
				if diff := cmp.Diff(step.want, got); diff != "" {
					t.Errorf("stable %s, SetWeight(%d, %v) (-want +got):\n%s", step.stable, step.weight, step.exp, diff)
				}
			}
			for _, r := range standard.Recorder.Requests() {
				if strings.Contains(r.Path, "/services") && r.Method != http.MethodGet {
					t.Errorf("the plugin wrote a Service: %s %s", r.Method, r.Path)
				}
			}
		})
	}
}

// A route without the ping or the pong backendRef is an error naming both.
func TestPingPongRouteWithoutPong(t *testing.T) {
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
