package test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/gatewayapi-ssa/rollouts-plugin/kube/kubetest"
	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// service creates a Service with the given ports ("name:port", or
// "name:port/UDP" for another protocol than TCP; an empty name is no name).
func service(t *testing.T, c *harness.Cluster, ns, name string, ports ...string) {
	t.Helper()
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name}}}
	for _, p := range ports {
		p, proto, _ := strings.Cut(p, "/")
		pname, number, _ := strings.Cut(p, ":")
		var num int32
		if _, err := fmt.Sscanf(number, "%d", &num); err != nil {
			t.Fatalf("bad port %q", p)
		}
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: pname, Port: num, Protocol: corev1.Protocol(proto), TargetPort: intstr.FromInt32(8080)})
	}
	if _, err := c.Kube.CoreV1().Services(ns).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func experimentDestinations(baseline, canary int32) []v1alpha1.WeightDestination {
	return []v1alpha1.WeightDestination{
		{ServiceName: "exp-baseline", PodTemplateHash: "aaa", Weight: baseline},
		{ServiceName: "exp-canary", PodTemplateHash: "bbb", Weight: canary},
	}
}

// The GKE case: an experiment step with canary weight 0 and experiment
// weights baseline 5 and canary 25 gives stable 70 / 5 / 25; when the
// experiment ends the experiment backends leave and stable gets 100. A
// backendRef another team added stays, with its weight, throughout.
func TestExperimentStepOnEveryKind(t *testing.T) {
	standard := parallel(t)
	for _, tc := range []struct{ version, kind string }{{"v1", "HTTPRoute"}, {"v1", "GRPCRoute"}, {"v1", "TCPRoute"}, {"v1", "UDPRoute"}} {
		t.Run(tc.kind, func(t *testing.T) {
			ns := namespace(t, standard)
			service(t, standard, ns, "exp-baseline", "http:80")
			service(t, standard, ns, "exp-canary", "http:80")
			manifest := strings.Replace(routeYAML(tc.version, tc.kind, "route"),
				"    - {name: canary, port: 80, weight: 0}\n",
				"    - {name: canary, port: 80, weight: 0}\n    - {name: other-team, port: 9090, weight: 7}\n", 1)
			create(t, standard, ns, manifest)
			p := startPlugin(t, standard)
			ro := rollout(ns, fmt.Sprintf(`{"%sRoute": "route"}`, strings.ToLower(strings.TrimSuffix(tc.kind, "Route"))))
			for _, step := range []struct {
				canary int32
				exp    []v1alpha1.WeightDestination
				want   map[string]int64
			}{
				{0, experimentDestinations(5, 25), map[string]int64{"0/stable": 70, "0/canary": 0, "0/other-team": 7, "0/exp-baseline": 5, "0/exp-canary": 25}},
				{20, experimentDestinations(5, 25), map[string]int64{"0/stable": 50, "0/canary": 20, "0/other-team": 7, "0/exp-baseline": 5, "0/exp-canary": 25}},
				{20, experimentDestinations(10, 10), map[string]int64{"0/stable": 60, "0/canary": 20, "0/other-team": 7, "0/exp-baseline": 10, "0/exp-canary": 10}},
				{20, nil, map[string]int64{"0/stable": 80, "0/canary": 20, "0/other-team": 7}},
				{0, nil, map[string]int64{"0/stable": 100, "0/canary": 0, "0/other-team": 7}},
			} {
				if err := p.SetWeight(ro, step.canary, step.exp); err.HasError() {
					t.Fatalf("SetWeight(%d, %v): %s", step.canary, step.exp, err)
				}
				u := get(t, standard, tc.version, tc.kind, ns, "route")
				if diff := cmp.Diff(step.want, weights(u)); diff != "" {
					t.Errorf("SetWeight(%d, %v) (-want +got):\n%s", step.canary, step.exp, diff)
				}
			}
			u := get(t, standard, tc.version, tc.kind, ns, "route")
			if _, ok := u.GetAnnotations()["gatewayapi-ssa.dev/claims"]; ok {
				t.Errorf("claims annotation left after the rollout ended: %v", u.GetAnnotations())
			}
			if _, ok := u.GetLabels()["rollouts.argoproj.io/gatewayapi-canary"]; ok {
				t.Errorf("in-progress label left after the rollout ended")
			}
		})
	}
}

// Both managed rules of a route get the experiment backends, with the port
// of each rule's stable backendRef; an unmanaged rule gets nothing.
func TestExperimentOnTwoManagedRules(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	// The stable Service of this test has two ports; so do the experiment Services.
	service(t, standard, ns, "exp-baseline", "http:80", "grpc:9000")
	service(t, standard, ns, "exp-canary", "http:80", "grpc:9000")
	create(t, standard, ns, `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: route}
spec:
  rules:
  - matches: [{path: {type: PathPrefix, value: /a}}]
    backendRefs:
    - {name: stable, port: 80, weight: 100}
    - {name: canary, port: 80, weight: 0}
  - matches: [{path: {type: PathPrefix, value: /b}}]
    backendRefs:
    - {name: stable, port: 80, weight: 100}
    - {name: canary, port: 80, weight: 0}
  - matches: [{path: {type: PathPrefix, value: /static}}]
    backendRefs:
    - {name: static, port: 80}
`)
	p := startPlugin(t, standard)
	ro := rollout(ns, `{"httpRoute": "route"}`)
	if err := p.SetWeight(ro, 0, experimentDestinations(5, 25)); err.HasError() {
		t.Fatal(err)
	}
	want := map[string]int64{
		"0/stable": 70, "0/canary": 0, "0/exp-baseline": 5, "0/exp-canary": 25,
		"1/stable": 70, "1/canary": 0, "1/exp-baseline": 5, "1/exp-canary": 25,
		"2/static": 1,
	}
	if diff := cmp.Diff(want, weights(get(t, standard, "v1", "HTTPRoute", ns, "route"))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	r, err := standard.Gateway.GatewayV1().HTTPRoutes(ns).Get(context.Background(), "route", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range r.Spec.Rules[1].BackendRefs[2:] {
		if ref.Port == nil || *ref.Port != 80 || ref.Namespace != nil {
			t.Errorf("experiment backendRef %s: port %v namespace %v, want port 80 and no namespace", ref.Name, ref.Port, ref.Namespace)
		}
	}
}

// The plugin finds what it added on the route itself: a new plugin process,
// and a Rollout with an empty status, still remove exactly the experiment
// backends; a backendRef someone else added to a Service named like an
// experiment Service stays.
func TestExperimentRemovalAfterRestart(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	service(t, standard, ns, "exp-baseline", "http:80")
	service(t, standard, ns, "exp-canary", "http:80")
	create(t, standard, ns, `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: route}
spec:
  rules:
  - backendRefs:
    - {name: stable, port: 80, weight: 100}
    - {name: canary, port: 80, weight: 0}
  - matches: [{path: {type: PathPrefix, value: /preview}}]
    backendRefs:
    - {name: exp-canary, port: 80, weight: 1}
`)
	first, err := harness.StartPlugin(pluginBin, standard.Kubeconfig, kubetest.Log(t))
	if err != nil {
		t.Fatal(err)
	}
	ro := rollout(ns, `{"httpRoute": "route"}`)
	ro.Status.Canary.CurrentExperiment = "demo-exp-1"
	if err := first.Plugin.SetWeight(ro, 0, experimentDestinations(5, 25)); err.HasError() {
		t.Fatal(err)
	}
	first.Stop()

	second := startPlugin(t, standard)
	ro.Status = v1alpha1.RolloutStatus{} // lost or reset status
	if err := second.SetWeight(ro, 0, nil); err.HasError() {
		t.Fatal(err)
	}
	want := map[string]int64{"0/stable": 100, "0/canary": 0, "1/exp-canary": 1}
	if diff := cmp.Diff(want, weights(get(t, standard, "v1", "HTTPRoute", ns, "route"))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// A missing experiment Service, an ambiguous port, too many backendRefs and
// weights over the maximum are errors that say what is wrong; nothing is written.
func TestExperimentErrorsWriteNothing(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	service(t, standard, ns, "exp-baseline", "http:80")
	service(t, standard, ns, "exp-ambiguous", "metrics:9090", "admin:9091")
	for i := range 15 {
		service(t, standard, ns, fmt.Sprintf("exp-%d", i), "http:80")
	}
	create(t, standard, ns, routeYAML("v1", "HTTPRoute", "route"))
	p := startPlugin(t, standard)
	ro := rollout(ns, `{"httpRoute": "route"}`)
	// stable + canary + 15 experiment Services = 17 backendRefs in one rule.
	many := []v1alpha1.WeightDestination{}
	for i := range 15 {
		many = append(many, v1alpha1.WeightDestination{ServiceName: fmt.Sprintf("exp-%d", i), Weight: 1})
	}
	before := get(t, standard, "v1", "HTTPRoute", ns, "route").GetResourceVersion()
	for _, tc := range []struct {
		name   string
		canary int32
		exp    []v1alpha1.WeightDestination
		want   []string
	}{
		{"missing Service", 0, []v1alpha1.WeightDestination{{ServiceName: "exp-baseline", Weight: 5}, {ServiceName: "exp-gone", Weight: 25}}, []string{"Service " + ns + "/exp-gone not found"}},
		{"ambiguous port", 0, []v1alpha1.WeightDestination{{ServiceName: "exp-ambiguous", Weight: 5}}, []string{"HTTPRoute " + ns + "/route", "rule 0", "exp-ambiguous", "metrics:9090", "admin:9091"}},
		{"more than 16 backendRefs", 0, many, []string{"HTTPRoute " + ns + "/route", "rule 0", "17 backendRefs", "allows 16"}},
		{"experiment template without a Service", 0, []v1alpha1.WeightDestination{{ServiceName: "", Weight: 5}}, []string{"no Service name", "container port"}},
		{"weights over the maximum", 80, []v1alpha1.WeightDestination{{ServiceName: "exp-baseline", Weight: 25}}, []string{"canary weight 80 plus experiment weights 25 exceed maxTrafficWeight 100"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			standard.Recorder.Reset()
			err := p.SetWeight(ro, tc.canary, tc.exp)
			t.Logf("error: %s", err.ErrorString)
			if !err.HasError() {
				t.Fatal("SetWeight succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.ErrorString, w) {
					t.Errorf("error does not mention %q", w)
				}
			}
			if w := pluginWrites(standard); len(w) != 0 {
				t.Errorf("the plugin wrote %v", w)
			}
			if after := get(t, standard, "v1", "HTTPRoute", ns, "route").GetResourceVersion(); after != before {
				t.Errorf("route changed")
			}
		})
	}
}

// A route in another namespace than the Rollout (which grants the Rollout's
// namespace its route) gets experiment backendRefs with the Rollout's
// namespace set (a ReferenceGrant there allows them).
func TestExperimentOnRouteInAnotherNamespace(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	service(t, standard, ns, "exp-baseline", "http:80")
	service(t, standard, ns, "exp-canary", "http:80")
	routesNS := namespace(t, standard)
	create(t, standard, routesNS, fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: route}
spec:
  rules:
  - backendRefs:
    - {name: stable, namespace: %[1]s, port: 80, weight: 100}
    - {name: canary, namespace: %[1]s, port: 80, weight: 0}
    - {name: stable, port: 80, weight: 3}
`, ns))
	create(t, standard, routesNS, rolloutGrant(ns, "route"))
	p := startPlugin(t, standard)
	ro := rollout(ns, `{"httpRoute": "route", "namespace": "`+routesNS+`"}`)
	if err := p.SetWeight(ro, 10, experimentDestinations(5, 25)); err.HasError() {
		t.Fatal(err)
	}
	r, err := standard.Gateway.GatewayV1().HTTPRoutes(routesNS).Get(context.Background(), "route", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range r.Spec.Rules[0].BackendRefs {
		refNS := "-"
		if b.Namespace != nil {
			refNS = string(*b.Namespace)
		}
		got = append(got, fmt.Sprintf("%s/%s=%d", refNS, b.Name, *b.Weight))
	}
	want := []string{ns + "/stable=60", ns + "/canary=10", "-/stable=3", ns + "/exp-baseline=5", ns + "/exp-canary=25"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
