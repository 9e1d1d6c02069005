package test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	rolloutsrpc "github.com/argoproj/argo-rollouts/rollout/trafficrouting/plugin/rpc"
	"github.com/argoproj/argo-rollouts/utils/plugin/types"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// The tests of this file are serial: they stop a route cluster's
// apiserver and time how the plugin fares, and count requests per step.

// A fleet as GKE's multi-cluster Gateways run it: the Rollout and its
// Services in the workload cluster (standard), the HTTPRoute in the fleet's
// config cluster with ServiceImport backendRefs. The plugin is given the
// config cluster with -route-cluster, a kubeconfig of a ServiceAccount there
// bound to exactly install/route-cluster's RBAC, as a platform team installs
// it.
type fleet struct {
	config *harness.Cluster
	// routeKubeconfig is the plugin's kubeconfig for the config cluster,
	// and routeRecorder sees its requests there.
	routeKubeconfig string
	routeRecorder   *harness.Recorder
}

func startFleet(t *testing.T) fleet {
	t.Helper()
	config, err := harness.StartConfigCluster(harness.Standard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = config.Stop() })
	applyKustomization(t, config, filepath.Join(harness.RepoRoot(), "install", "route-cluster"))
	kubeconfig, rec, err := config.KubeconfigForServiceAccount("argo-rollouts", "rollouts-gatewayapi-ssa")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rec.Close)
	return fleet{config: config, routeKubeconfig: kubeconfig, routeRecorder: rec}
}

// namespace makes namespace ns in the config cluster.
func (f fleet) namespace(t *testing.T, ns string) {
	t.Helper()
	if _, err := f.config.Kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// serviceImportVersion is the version each ServiceImport group is served in
// by harness.ServiceImportCRDs.
var serviceImportVersion = map[string]string{"net.gke.io": "v1", "multicluster.x-k8s.io": "v1beta1"}

// importService creates the ServiceImport of group for Service name, as the
// fleet does once the Service is exported.
func (f fleet) importService(t *testing.T, group, ns, name string) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": group + "/" + serviceImportVersion[group], "kind": "ServiceImport",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"type": "ClusterSetIP", "ports": []any{map[string]any{"port": int64(80), "protocol": "TCP"}}},
	}}
	gvr := schema.GroupVersionResource{Group: group, Version: serviceImportVersion[group], Resource: "serviceimports"}
	if _, err := f.config.Dynamic.Resource(gvr).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// storeRoute is the HTTPRoute of the fleet's Gateway, reaching the Rollout's
// Services and a static one through ServiceImports of group.
func storeRoute(group string) string {
	return fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: store
  labels: {team: store}
  annotations: {owner: platform}
spec:
  parentRefs: [{name: external-http, namespace: gateways}]
  hostnames: [store.example.com]
  rules:
  - backendRefs:
    - {group: %[1]s, kind: ServiceImport, name: stable, port: 80, weight: 100}
    - {group: %[1]s, kind: ServiceImport, name: canary, port: 80, weight: 0}
  - matches: [{path: {type: PathPrefix, value: /static}}]
    backendRefs:
    - {group: %[1]s, kind: ServiceImport, name: static, port: 80}
`, group)
}

// userView is what a person sees of a route: its spec, labels and
// annotations (no server bookkeeping).
func userView(t *testing.T, u *unstructured.Unstructured) any {
	t.Helper()
	return normalizeJSON(t, map[string]any{"spec": u.Object["spec"], "labels": u.GetLabels(), "annotations": u.GetAnnotations()})
}

// backendRefsOf are the backendRefs of rule i, as stored.
func backendRefsOf(u *unstructured.Unstructured, i int) []any {
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	refs, _, _ := unstructured.NestedSlice(rules[i].(map[string]any), "backendRefs")
	return refs
}

// A Rollout in the workload cluster walks an HTTPRoute in the config cluster
// whose backendRefs are ServiceImports (GKE's net.gke.io, the Multi-Cluster
// Services API's multicluster.x-k8s.io): weights, an experiment whose
// ServiceImports are missing and then there, a header and a mirror step,
// VerifyWeight, the end; then a Rollout deleted mid-rollout is cleaned up
// with the cleanup command. Every route write goes to the config cluster,
// none to the workload cluster; the route is what it was before, byte for
// byte, and the plugin owns nothing on it.
func TestRoutesInAConfigCluster(t *testing.T) {
	f := startFleet(t)
	for _, group := range []string{"net.gke.io", "multicluster.x-k8s.io"} {
		t.Run(group, func(t *testing.T) {
			ns := namespace(t, standard)
			service(t, standard, ns, "exp-baseline", "http:80")
			service(t, standard, ns, "exp-canary", "http:80")
			f.namespace(t, ns)
			for _, s := range []string{"stable", "canary", "static"} {
				f.importService(t, group, ns, s)
			}
			created := create(t, f.config, ns, storeRoute(group))
			p, log := startPluginWith(t, pluginBin, standard.Kubeconfig,
				"-route-cluster", "fleet="+f.routeKubeconfig, "-route-namespaces", "fleet=other,"+ns)
			ro := rollout(ns, `{"httpRoute": "store", "cluster": "fleet", "verifyWeight": true, "verifyWeightSettle": "0s"}`)
			ro.Spec.Strategy.Canary.TrafficRouting.ManagedRoutes = []v1alpha1.MangedRoutes{{Name: "beta"}, {Name: "mirror"}}
			imported := func(name string, weight int64) map[string]any {
				return map[string]any{"group": group, "kind": "ServiceImport", "name": name, "port": int64(80), "weight": weight}
			}
			pct := int32(20)
			steps := []struct {
				name string
				call func() types.RpcError
				// want are the weighted rule's backendRefs after the call;
				// nil: the route is as before the call.
				want []any
				// rules is how many rules the route has after the call.
				rules int
				err   []string
			}{
				{"SetWeight(30)", func() types.RpcError { return p.SetWeight(ro, 30, nil) },
					[]any{imported("stable", 70), imported("canary", 30)}, 2, nil},
				{"VerifyWeight(30)", func() types.RpcError {
					v, err := p.VerifyWeight(ro, 30, nil)
					if !err.HasError() && v != types.NotVerified {
						t.Errorf("VerifyWeight(30) = %v with no gateway to carry the route, want NotVerified", v)
					}
					return err
				}, nil, 2, nil},
				{"an experiment before its Services are exported", func() types.RpcError { return p.SetWeight(ro, 30, experimentDestinations(10, 10)) }, nil, 2,
					[]string{`in route cluster "fleet": nothing was written: HTTPRoute ` + ns + `/store: rollout ` + ns + `/demo: the experiment's Service ` + ns + `/exp-baseline would be added as ServiceImport.` + group + ` ` + ns + `/exp-baseline`,
						"a ServiceExport named exp-baseline in namespace " + ns}},
				{"the experiment once they are", func() types.RpcError {
					f.importService(t, group, ns, "exp-baseline")
					f.importService(t, group, ns, "exp-canary")
					return p.SetWeight(ro, 30, experimentDestinations(10, 10))
				}, []any{imported("stable", 50), imported("canary", 30), imported("exp-baseline", 10), imported("exp-canary", 10)}, 2, nil},
				{"the experiment's end", func() types.RpcError { return p.SetWeight(ro, 30, nil) },
					[]any{imported("stable", 70), imported("canary", 30)}, 2, nil},
				{"SetHeaderRoute(beta)", func() types.RpcError {
					return p.SetHeaderRoute(ro, &v1alpha1.SetHeaderRoute{Name: "beta", Match: []v1alpha1.HeaderRoutingMatch{{HeaderName: "X-Canary", HeaderValue: &v1alpha1.StringMatch{Exact: "yes"}}}})
				}, []any{imported("stable", 70), imported("canary", 30)}, 3, nil},
				{"SetMirrorRoute(mirror)", func() types.RpcError {
					return p.SetMirrorRoute(ro, &v1alpha1.SetMirrorRoute{Name: "mirror", Percentage: &pct, Match: []v1alpha1.RouteMatch{{Path: &v1alpha1.StringMatch{Prefix: "/api"}}}})
				}, []any{imported("stable", 70), imported("canary", 30)}, 4, nil},
				{"RemoveManagedRoutes", func() types.RpcError { return p.RemoveManagedRoutes(ro) }, []any{imported("stable", 70), imported("canary", 30)}, 2, nil},
				{"SetWeight(100)", func() types.RpcError { return p.SetWeight(ro, 100, nil) }, []any{imported("stable", 0), imported("canary", 100)}, 2, nil},
				{"SetWeight(0)", func() types.RpcError { return p.SetWeight(ro, 0, nil) }, []any{imported("stable", 100), imported("canary", 0)}, 2, nil},
			}
			var table []string
			for _, st := range steps {
				before := get(t, f.config, "v1", "HTTPRoute", ns, "store")
				workloadAt, routeAt := standard.Recorder.Count(), f.routeRecorder.Count()
				start := time.Now()
				err := st.call()
				took := time.Since(start)
				table = append(table, fmt.Sprintf("| %s | %d | %d | %s |", st.name,
					countPlugin(standard.Recorder.RequestsSince(workloadAt)), countPlugin(f.routeRecorder.RequestsSince(routeAt)), took.Round(time.Millisecond)))
				switch {
				case st.err == nil && err.HasError():
					t.Fatalf("%s: %s", st.name, err.ErrorString)
				case st.err != nil:
					if missing, ok := containsAll(err.ErrorString, st.err); !ok {
						t.Fatalf("%s: error %q does not say %q", st.name, err.ErrorString, missing)
					}
				}
				u := get(t, f.config, "v1", "HTTPRoute", ns, "store")
				if st.want == nil {
					if u.GetResourceVersion() != before.GetResourceVersion() {
						t.Errorf("%s: the route was written", st.name)
					}
				} else if diff := cmp.Diff(normalizeJSON(t, st.want), normalizeJSON(t, backendRefsOf(u, 0))); diff != "" {
					t.Errorf("%s: the weighted rule's backendRefs (-want +got):\n%s", st.name, diff)
				}
				rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
				if len(rules) != st.rules {
					t.Errorf("%s: %d rules, want %d", st.name, len(rules), st.rules)
				}
				switch st.name {
				case "SetHeaderRoute(beta)":
					if diff := cmp.Diff(normalizeJSON(t, []any{imported("canary", 1)}), normalizeJSON(t, backendRefsOf(u, 2))); diff != "" {
						t.Errorf("the header rule sends elsewhere than the canary's ServiceImport (-want +got):\n%s", diff)
					}
				case "SetMirrorRoute(mirror)":
					mirror, _, _ := unstructured.NestedSlice(rules[3].(map[string]any), "filters")
					got, _, _ := unstructured.NestedMap(mirror[len(mirror)-1].(map[string]any), "requestMirror", "backendRef")
					want := map[string]any{"group": group, "kind": "ServiceImport", "name": "canary", "port": int64(80)}
					if diff := cmp.Diff(want, got); diff != "" {
						t.Errorf("the mirror filter mirrors elsewhere than to the canary's ServiceImport (-want +got):\n%s", diff)
					}
				}
			}
			t.Logf("requests to each cluster, per step:\n| step | workload cluster | config cluster | time |\n| --- | --- | --- | --- |\n%s", strings.Join(table, "\n"))

			end := get(t, f.config, "v1", "HTTPRoute", ns, "store")
			if diff := cmp.Diff(userView(t, created), userView(t, end)); diff != "" {
				t.Errorf("the route after the rollout differs from the route before it (-before +after):\n%s", diff)
			}
			pluginOwnsNothing(t, end)
			for _, r := range pluginWrites(standard) {
				if strings.Contains(r.Path, "/namespaces/"+ns+"/") {
					t.Errorf("the plugin wrote to the workload cluster: %s %s", r.Method, r.Path)
				}
			}
			if n := log.Count("applied route", "routeCluster=fleet", "route=\"HTTPRoute "+ns+"/store\""); n < 7 {
				t.Errorf("%d log lines of applies in route cluster fleet, want at least 7", n)
			}
			// The route's Events in its cluster, the Rollout's in the
			// controller's: the refused experiment on both, each where it
			// lives, with install/route-cluster's RBAC in the config cluster.
			refusedOn := func(c *harness.Cluster, kind, name string) []eventsv1.Event {
				return waitForEvents(t, c, ns, kind, name, func(evs []eventsv1.Event) bool {
					return slices.ContainsFunc(evs, func(e eventsv1.Event) bool { return e.Reason == "ServiceImportMissing" })
				})
			}
			routeEvs := refusedOn(f.config, "HTTPRoute", "store")
			if !slices.ContainsFunc(routeEvs, func(e eventsv1.Event) bool { return e.Reason == "WeightsChanged" }) ||
				!slices.ContainsFunc(routeEvs, func(e eventsv1.Event) bool { return e.Reason == "ServiceImportMissing" }) {
				t.Errorf("the route's Events in the config cluster, want WeightsChanged and ServiceImportMissing among them:\n%s", describe(routeEvs))
			}
			if evs := refusedOn(standard, "Rollout", "demo"); len(evs) != 2 || evs[0].Reason != "ServiceImportMissing" || evs[1].Reason != "Recovered" ||
				!strings.HasPrefix(evs[0].Note, "rollout "+ns+"/demo: SetWeight(30, exp-baseline=10,exp-canary=10): in route cluster \"fleet\": ") {
				t.Errorf("the Rollout's Events in the workload cluster, want the refused experiment, then Recovered:\n%s", describe(evs))
			}
			if evs := pluginEvents(t, standard, ns, "HTTPRoute", "store"); len(evs) > 0 {
				t.Errorf("Events about the route in the workload cluster:\n%s", describe(evs))
			}
			if evs := pluginEvents(t, f.config, ns, "Rollout", "demo"); len(evs) > 0 {
				t.Errorf("Events about the Rollout in the config cluster:\n%s", describe(evs))
			}
			if log.Count("may not record Events") > 0 {
				t.Error("the plugin may not record Events in one of the clusters")
			}

			// The Rollout is deleted mid-rollout; the cleanup command, given
			// the route cluster as the plugin is, undoes its claim there.
			if err := p.SetWeight(ro, 40, experimentDestinations(5, 5)); err.HasError() {
				t.Fatal(err.ErrorString)
			}
			if err := p.SetHeaderRoute(ro, &v1alpha1.SetHeaderRoute{Name: "beta", Match: []v1alpha1.HeaderRoutingMatch{{HeaderName: "X-Canary", HeaderValue: &v1alpha1.StringMatch{Exact: "yes"}}}}); err.HasError() {
				t.Fatal(err.ErrorString)
			}
			out, code := runBinary(t, nil, "cleanup", "--kubeconfig", standard.Kubeconfig, "--cluster", "fleet",
				"--route-cluster", "fleet="+f.config.Kubeconfig, "--route-namespaces", "fleet="+ns, ns+"/demo")
			if code != 0 || !strings.Contains(out, "HTTPRoute "+ns+"/store: undone: ") {
				t.Fatalf("cleanup: exit %d\n%s", code, out)
			}
			end = get(t, f.config, "v1", "HTTPRoute", ns, "store")
			if diff := cmp.Diff(userView(t, created), userView(t, end)); diff != "" {
				t.Errorf("the route after the cleanup differs from the route before the rollout (-before +after):\n%s", diff)
			}
			pluginOwnsNothing(t, end)
		})
	}
}

// countPlugin counts the plugin's requests among rs (by user agent; its
// Lease renewals left out, which come every few seconds whatever it does,
// and its Events, sent after the call by a goroutine of their own).
func countPlugin(rs []harness.Request) int {
	n := 0
	for _, r := range rs {
		if strings.HasPrefix(r.UserAgent, "rollouts-gatewayapi-ssa") && !strings.HasPrefix(r.Path, "/apis/coordination.k8s.io/") && !r.IsEvent() {
			n++
		}
	}
	return n
}

// The platform team decides which clusters and namespaces a Rollout may
// reach: a cluster the plugin was not given, or a namespace there it was not
// allowed, is refused before anything is read; a route cluster whose
// kubeconfig cannot be read fails only the Rollouts that name it. Within the
// allowed namespaces, one that is not the Rollout's needs a ReferenceGrant
// in the route cluster, as in the controller's.
func TestRouteClusterSelectionIsThePlatformTeams(t *testing.T) {
	f := startFleet(t)
	ns := namespace(t, standard)
	create(t, standard, ns, routeYAML("v1", "HTTPRoute", "route"))
	p, _ := startPluginWith(t, pluginBin, standard.Kubeconfig,
		"-route-cluster", "fleet="+f.routeKubeconfig, "-route-namespaces", "fleet=store",
		"-route-cluster", "broken="+filepath.Join(t.TempDir(), "missing-kubeconfig"), "-route-namespaces", "broken=*")
	for _, tc := range []struct {
		config string
		want   []string
	}{
		{`{"httpRoute": "route", "cluster": "elsewhere"}`, []string{`key "cluster": the plugin has no route cluster "elsewhere" (it knows fleet, broken)`}},
		{`{"httpRoute": "route", "cluster": "fleet"}`, []string{`key "namespace": Rollouts may not reach namespace ` + ns + ` in route cluster "fleet" (they may reach store)`}},
		{`{"httpRoute": "route", "cluster": "broken"}`, []string{`route cluster "broken" cannot be used: reading kubeconfig`, "missing-kubeconfig", "fix -route-cluster broken="}},
	} {
		routeAt := f.routeRecorder.Count()
		err := p.SetWeight(rollout(ns, tc.config), 30, nil)
		if missing, ok := containsAll(err.ErrorString, tc.want); !ok {
			t.Errorf("%s: error %q does not say %q", tc.config, err.ErrorString, missing)
		}
		if n := countPlugin(f.routeRecorder.RequestsSince(routeAt)); n != 0 {
			t.Errorf("%s: %d requests to the config cluster", tc.config, n)
		}
	}
	// Namespace store is allowed, but it is not the Rollout's: the route
	// cluster's store must grant it, and nothing else is read there before.
	f.namespace(t, "store")
	create(t, f.config, "store", routeToServicesOf(ns))
	inStore := rollout(ns, `{"httpRoute": "route", "cluster": "fleet", "namespace": "store"}`)
	routeAt := f.routeRecorder.Count()
	err := p.SetWeight(inStore, 30, nil)
	if want := `in route cluster "fleet": nothing was written: HTTPRoute store/route: namespace store does not grant Rollouts of namespace ` + ns; !strings.Contains(err.ErrorString, want) {
		t.Errorf("a Rollout on an allowed namespace of the route cluster that does not grant it: %q, want %q", err.ErrorString, want)
	}
	for _, r := range f.routeRecorder.RequestsSince(routeAt) {
		if strings.Contains(r.Path, "/httproutes") {
			t.Errorf("the plugin read the ungranted namespace's routes: %s %s", r.Method, r.Path)
		}
	}
	create(t, f.config, "store", rolloutGrant(ns, ""))
	eventually(t, "the route cluster's grant to take effect", func() bool { return !p.SetWeight(inStore, 30, nil).HasError() })
	if diff := cmp.Diff(map[string]int64{"0/stable": 70, "0/canary": 30}, weights(get(t, f.config, "v1", "HTTPRoute", "store", "route"))); diff != "" {
		t.Errorf("the granted route in the route cluster (-want +got):\n%s", diff)
	}

	// The Rollouts of the controller's own cluster go on.
	if err := p.SetWeight(rollout(ns, `{"httpRoute": "route"}`), 30, nil); err.HasError() {
		t.Fatal(err.ErrorString)
	}
	if diff := cmp.Diff(map[string]int64{"0/stable": 70, "0/canary": 30}, weights(get(t, standard, "v1", "HTTPRoute", ns, "route"))); diff != "" {
		t.Errorf("the workload cluster's route (-want +got):\n%s", diff)
	}
}

// The config cluster goes away in the middle of a rollout: the call fails
// within its deadline, naming the route cluster and the route; once the
// cluster is back, the controller's repeat of the call converges.
func TestARouteClusterThatGoesAway(t *testing.T) {
	f := startFleet(t)
	ns := namespace(t, standard)
	f.namespace(t, ns)
	for _, s := range []string{"stable", "canary", "static"} {
		f.importService(t, "net.gke.io", ns, s)
	}
	create(t, f.config, ns, storeRoute("net.gke.io"))
	var p rolloutsrpc.TrafficRouterPlugin
	p, _ = startPluginWith(t, pluginBin, standard.Kubeconfig, "-call-timeout", "8s",
		"-route-cluster", "fleet="+f.routeKubeconfig, "-route-namespaces", "fleet="+ns)
	ro := rollout(ns, `{"httpRoute": "store", "cluster": "fleet"}`)
	if err := p.SetWeight(ro, 20, nil); err.HasError() {
		t.Fatal(err.ErrorString)
	}
	startAgain, err := f.config.StopAPIServer()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	e := p.SetWeight(ro, 50, nil)
	took := time.Since(start)
	if missing, ok := containsAll(e.ErrorString, []string{"SetWeight(50): in route cluster \"fleet\": ", "HTTPRoute " + ns + "/store"}); !ok {
		t.Errorf("with the config cluster away: error %q does not say %q", e.ErrorString, missing)
	}
	if took > 8*time.Second {
		t.Errorf("the call took %s, past its deadline of 8s", took)
	}
	away, err := startAgain()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the call failed after %s; the config cluster was away %s", took.Round(time.Millisecond), away.Round(time.Millisecond))
	eventuallyWithin(t, time.Minute, "SetWeight(50) to converge once the config cluster is back", func() bool {
		return !p.SetWeight(ro, 50, nil).HasError()
	})
	want := []any{
		map[string]any{"group": "net.gke.io", "kind": "ServiceImport", "name": "stable", "port": int64(80), "weight": int64(50)},
		map[string]any{"group": "net.gke.io", "kind": "ServiceImport", "name": "canary", "port": int64(80), "weight": int64(50)},
	}
	if diff := cmp.Diff(normalizeJSON(t, want), normalizeJSON(t, backendRefsOf(get(t, f.config, "v1", "HTTPRoute", ns, "store"), 0))); diff != "" {
		t.Errorf("after the repeat (-want +got):\n%s", diff)
	}
}

// plan and inspect reach a route cluster as the plugin does, given its
// -route-cluster and -route-namespaces values: plan computes every step on
// the config cluster's route, dry-runs it there and checks the permissions
// of the route cluster's kubeconfig there; inspect reads the route there.
func TestCommandsReachTheRouteCluster(t *testing.T) {
	f := startFleet(t)
	ns := namespace(t, standard)
	f.namespace(t, ns)
	for _, s := range []string{"stable", "canary", "static"} {
		f.importService(t, "net.gke.io", ns, s)
	}
	create(t, f.config, ns, storeRoute("net.gke.io"))
	routeFlags := []string{"--route-cluster", "fleet=" + f.routeKubeconfig, "--route-namespaces", "fleet=" + ns}
	rolloutFile := writeFile(t, "rollout.yaml", `apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: demo, namespace: `+ns+`}
spec:
  selector: {matchLabels: {app: demo}}
  template:
    metadata: {labels: {app: demo}}
    spec: {containers: [{name: demo, image: demo:2}]}
  strategy:
    canary:
      stableService: stable
      canaryService: canary
      trafficRouting:
        plugins:
          argoproj-labs/gatewayAPI: {httpRoute: store, cluster: fleet}
      steps:
      - setWeight: 30
      - pause: {}
`)
	out, code := runBinary(t, nil, append([]string{"plan", "-f", rolloutFile, "--kubeconfig", standard.Kubeconfig}, routeFlags...)...)
	for _, want := range []string{"HTTPRoute " + ns + "/store", "rule 0 ServiceImport.net.gke.io " + ns + "/stable 100→70",
		"permissions on the routes of the user of route cluster fleet's kubeconfig"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan does not say %q", want)
		}
	}
	if code != 0 {
		t.Errorf("plan: exit %d, want 0", code)
	}
	// The same Rollout in a namespace the route cluster does not allow.
	out, code = runBinary(t, nil, "plan", "-f", rolloutFile, "--kubeconfig", standard.Kubeconfig, "--route-cluster", "fleet="+f.routeKubeconfig, "--route-namespaces", "fleet=other")
	if code != 1 || !strings.Contains(out, `Rollouts may not reach namespace `+ns+` in route cluster "fleet"`) {
		t.Errorf("plan into a namespace not allowed: exit %d, want 1 and the namespace refused", code)
	}

	p, _ := startPluginWith(t, pluginBin, standard.Kubeconfig, "-route-cluster", "fleet="+f.routeKubeconfig, "-route-namespaces", "fleet="+ns)
	if err := p.SetWeight(rollout(ns, `{"httpRoute": "store", "cluster": "fleet"}`), 30, nil); err.HasError() {
		t.Fatal(err.ErrorString)
	}
	out, code = runBinary(t, nil, append([]string{"inspect", "httproute/store", "-n", ns, "--kubeconfig", standard.Kubeconfig, "--cluster", "fleet"}, routeFlags...)...)
	if code != 0 || !strings.Contains(out, ns+"/demo") {
		t.Errorf("inspect --cluster fleet: exit %d, and does not name the Rollout's claim", code)
	}
}
