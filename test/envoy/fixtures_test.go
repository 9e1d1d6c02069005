//go:build envoy

package envoy

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	rolloutsrpc "github.com/argoproj/argo-rollouts/rollout/trafficrouting/plugin/rpc"
	"github.com/argoproj/argo-rollouts/utils/plugin/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/gatewayapi-ssa/rollouts-plugin/kube/kubetest"
	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// envoyController is the controllerName of Envoy Gateway's GatewayClass.
const envoyController = "gateway.envoyproxy.io/gatewayclass-controller"

// gatewayYAML is the Gateway of every scenario: a listener for each kind of
// route (TLS passthrough for TLSRoutes).
const gatewayYAML = `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: %s
  listeners:
  - {name: http, protocol: HTTP, port: 80}
  - {name: tcp, protocol: TCP, port: 9000}
  - {name: tls, protocol: TLS, port: 8443, tls: {mode: Passthrough}}
  - {name: udp, protocol: UDP, port: 5300}
`

// ref names a route.
type ref struct{ Kind, Name string }

func (r ref) String() string { return r.Kind + "/" + r.Name }

// l4 says whether Envoy Gateway gives the kind's rules one cluster for the
// whole route (TCP, TLS and UDP proxies) rather than one per rule.
func (r ref) l4() bool { return r.Kind == "TCPRoute" || r.Kind == "TLSRoute" || r.Kind == "UDPRoute" }

var nsCounter atomic.Int32

// scenario is one walk: a namespace with Services, behind a Gateway of an
// Envoy Gateway class of its own, and the plugin binary.
type scenario struct {
	t      *testing.T
	name   string
	ns     string
	class  string
	plugin rolloutsrpc.TrafficRouterPlugin
	// fed is each route's generation whose status was last written.
	fed map[ref]int64
}

var notDNS = regexp.MustCompile(`[^a-z0-9]+`)

// newScenario creates the namespace with a Service per name (port 80 of
// protocol proto, TCP if ""), the GatewayClass (its status left empty, as
// Envoy Gateway v1.9.1 leaves it: it publishes no supportedFeatures) and the
// Gateway, and starts the plugin.
func newScenario(t *testing.T, name string, proto corev1.Protocol, services ...string) *scenario {
	t.Helper()
	ctx := context.Background()
	ns := fmt.Sprintf("e%d-%s", nsCounter.Add(1), strings.Trim(notDNS.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-"))
	if len(ns) > 50 {
		ns = strings.TrimRight(ns[:50], "-")
	}
	if _, err := cluster.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if proto == "" {
		proto = corev1.ProtocolTCP
	}
	for _, svc := range services {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: svc, Namespace: ns}, Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": svc},
			Ports:    []corev1.ServicePort{{Name: "p", Port: 80, Protocol: proto, TargetPort: intstr.FromInt32(8080)}},
		}}
		if _, err := cluster.Kube.CoreV1().Services(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	class := ns + "-eg"
	gc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
		"metadata": map[string]any{"name": class},
		"spec":     map[string]any{"controllerName": envoyController},
	}}
	if _, err := cluster.Dynamic.Resource(gatewayAPI("gatewayclasses")).Create(ctx, gc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cluster.Dynamic.Resource(gatewayAPI("gatewayclasses")).Delete(context.Background(), class, metav1.DeleteOptions{})
	})
	s := &scenario{t: t, name: name, ns: ns, class: class, fed: map[ref]int64{}}
	s.create(fmt.Sprintf(gatewayYAML, class))
	p, err := harness.StartPlugin(pluginBin, cluster.Kubeconfig, kubetest.Log(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	s.plugin = p.Plugin
	return s
}

func (s *scenario) create(manifest string) {
	s.t.Helper()
	if _, err := cluster.CreateYAML(s.ns, manifest); err != nil {
		s.t.Fatal(err)
	}
}

// translate is Envoy Gateway's translation of the scenario's namespace as it is now.
func (s *scenario) translate() *translation {
	s.t.Helper()
	return translate(s.t, s.ns, s.class, "gw")
}

// check records a check of a step in the table and fails the test if it failed.
func (s *scenario) check(step, what string, err error) {
	s.t.Helper()
	checks.record(s.name, step, what, err)
	if err != nil {
		s.t.Errorf("%s: %s: %v", step, what, err)
	}
}

// rollout is Rollout demo with the Services stable and canary and the plugin config.
func (s *scenario) rollout(config string) *v1alpha1.Rollout {
	return &v1alpha1.Rollout{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: s.ns},
		Spec: v1alpha1.RolloutSpec{Strategy: v1alpha1.RolloutStrategy{Canary: &v1alpha1.CanaryStrategy{
			StableService: "stable",
			CanaryService: "canary",
			TrafficRouting: &v1alpha1.RolloutTrafficRouting{
				Plugins: map[string]json.RawMessage{"argoproj-labs/gatewayAPI": json.RawMessage(config)},
			},
		}}},
	}
}

func (s *scenario) get(r ref) *unstructured.Unstructured {
	s.t.Helper()
	u, err := cluster.Dynamic.Resource(gatewayAPI(strings.ToLower(r.Kind)+"s")).Namespace(s.ns).Get(context.Background(), r.Name, metav1.GetOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	return u
}

// feedStatus writes the status Envoy Gateway computed for the route into
// the apiserver, through the status subresource, as its controller would.
// Two fields are the controller's and not the offline translator's: egctl's
// loader keeps only a route's name, namespace and spec, so its conditions
// carry no observedGeneration (Envoy Gateway writes the route's
// metadata.generation there, gatewayapi/route.go) and no
// lastTransitionTime (the status writer sets it); both are filled in here.
func (s *scenario) feedStatus(r ref, tr *translation) {
	s.t.Helper()
	status, ok := tr.status[r.String()]
	if !ok {
		s.t.Fatalf("Envoy Gateway gave %s no status", r)
	}
	u := s.get(r)
	now := metav1.Now().UTC().Format(time.RFC3339)
	parents, _ := status["parents"].([]any)
	for _, p := range parents {
		conds, _ := p.(map[string]any)["conditions"].([]any)
		for _, c := range conds {
			m := c.(map[string]any)
			m["observedGeneration"] = u.GetGeneration()
			m["lastTransitionTime"] = now
		}
	}
	u.Object["status"] = status
	out, err := cluster.Dynamic.Resource(gatewayAPI(strings.ToLower(r.Kind)+"s")).Namespace(s.ns).UpdateStatus(context.Background(), u, metav1.UpdateOptions{FieldManager: "envoy-gateway"})
	if err != nil {
		s.t.Fatalf("writing Envoy Gateway's status of %s: %v", r, err)
	}
	s.fed[r] = out.GetGeneration()
}

// verify checks the plugin's VerifyWeight on route r (the Rollout's only
// route, with verifyWeight: true) as docs/verify-weight.md says it answers:
// NotVerified while the route's status is of an older generation than its
// spec, Verified once Envoy Gateway's status for this generation is written
// (its controller has no settle time).
func (s *scenario) verify(step string, ro *v1alpha1.Rollout, weight int32, exp []v1alpha1.WeightDestination, r ref, tr *translation) {
	s.t.Helper()
	want := types.Verified
	if s.get(r).GetGeneration() > s.fed[r] {
		want = types.NotVerified
	}
	got, err := s.plugin.VerifyWeight(ro, weight, exp)
	s.check(step, "VerifyWeight before the status", verdict(got, err, want))
	s.feedStatus(r, tr)
	got, err = s.plugin.VerifyWeight(ro, weight, exp)
	s.check(step, "VerifyWeight with Envoy Gateway's status", verdict(got, err, types.Verified))
}

func verdict(got types.RpcVerified, err types.RpcError, want types.RpcVerified) error {
	if err.HasError() {
		return fmt.Errorf("VerifyWeight: %s", err.ErrorString)
	}
	if got != want {
		return fmt.Errorf("VerifyWeight = %s, want %s", harness.VerifiedName(got), harness.VerifiedName(want))
	}
	return nil
}

func must(t *testing.T, what string, err types.RpcError) {
	t.Helper()
	if err.HasError() {
		t.Fatalf("%s: %s", what, err.ErrorString)
	}
}

// routeYAML is a route of kind whose one rule sends all of total to stable.
func routeYAML(kind string, total int) string {
	hostnames := ""
	if kind == "TLSRoute" {
		hostnames = "  hostnames: [tls.example.com]\n"
	}
	return fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: %s
metadata: {name: route}
spec:
  parentRefs: [{name: gw}]
%s  rules:
  - backendRefs:
    - {name: stable, port: 80, weight: %d}
    - {name: canary, port: 80, weight: 0}
`, kind, hostnames, total)
}

// configKey is the plugin config's key of a route kind (httpRoute …).
func configKey(kind string) string {
	return strings.ToLower(strings.TrimSuffix(kind, "Route")) + "Route"
}
