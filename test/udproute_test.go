package test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/argoproj/argo-rollouts/utils/plugin/types"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ktypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/kube/kubetest"
	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// UDPRoute, the fifth kind: a kind without matches, so the plugin gives it
// what it gives a TCPRoute (weights, experiments, ping-pong, VerifyWeight,
// rule names, conflicts, the release of its ownership) and no header or
// mirror rules. Every scenario runs on UDPRoute v1 (Gateway API v1.6.3's
// standard channel) and v1alpha2 (a cluster as older installs left it, the
// experimental channel's only version before v1.6), with UDP Services.
func TestUDPRoute(t *testing.T) {
	standard := parallel(t)
	old, err := harness.Start(harness.V1Alpha2Only)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Stop()
	for _, sc := range []struct {
		name string
		run  func(t *testing.T, u udp)
	}{
		{"experiment with UDP Services added and removed exactly", udpExperiment},
		{"ping-pong", udpPingPong},
		{"VerifyWeight", udpVerifyWeight},
		{"ruleName", udpRuleName},
		{"another manager's change is a conflict", udpConflict},
		{"header and mirror steps", udpHeaderAndMirror},
		{"plan, inspect and cleanup", udpCommands},
	} {
		for _, u := range []udp{{standard, "v1"}, {old, "v1alpha2"}} {
			t.Run(sc.name+"/"+u.version, func(t *testing.T) { sc.run(t, u) })
		}
	}
}

// udp is where a scenario runs: the cluster and the UDPRoute version it serves.
type udp struct {
	c       *harness.Cluster
	version string
}

func (u udp) gvr() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: u.version, Resource: "udproutes"}
}

func (u udp) get(t *testing.T, ns, name string) *unstructured.Unstructured {
	t.Helper()
	return get(t, u.c, u.version, "UDPRoute", ns, name)
}

// namespace is a fresh namespace whose stable and canary Services are DNS
// servers: 53/TCP dns-tcp and 53/UDP dns, TCP first (so a choice by name
// alone would take the TCP port).
func (u udp) namespace(t *testing.T) string {
	t.Helper()
	ns := namespace(t, u.c)
	ctx := context.Background()
	for _, name := range []string{"stable", "canary"} {
		s, err := u.c.Kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Spec.Ports = []corev1.ServicePort{
			{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(5353)},
			{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(5353)},
		}
		if _, err := u.c.Kube.CoreV1().Services(ns).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return ns
}

// route is a UDPRoute as a team keeps it: labels and an annotation of its
// own, a parentRef to a UDP listener, one named rule with the two Services
// and a third backendRef of another team.
func (u udp) route(name string) string {
	return `apiVersion: gateway.networking.k8s.io/` + u.version + `
kind: UDPRoute
metadata:
  name: ` + name + `
  labels: {team: dns}
  annotations: {owner: dns-team@example.com}
spec:
  parentRefs: [{name: gw, sectionName: dns}]
  rules:
  - name: main
    backendRefs:
    - {name: stable, port: 53, weight: 100}
    - {name: canary, port: 53, weight: 0}
    - {name: resolver-legacy, port: 53, weight: 7}
`
}

// startPlugin starts the plugin binary on the scenario's cluster.
func (u udp) startPlugin(t *testing.T) *harness.PluginProcess {
	t.Helper()
	p, err := harness.StartPlugin(pluginBin, u.c.Kubeconfig, kubetest.Log(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

// backendRefs is the route's first rule's backendRefs, as stored.
func backendRefs(u *unstructured.Unstructured) []any {
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	refs, _, _ := unstructured.NestedSlice(rules[0].(map[string]any), "backendRefs")
	return refs
}

// withoutBookkeeping is the route without what the apiserver changes on
// every write (resourceVersion, generation, managedFields), to compare whole
// objects.
func withoutBookkeeping(u *unstructured.Unstructured) map[string]any {
	u = u.DeepCopy()
	u.SetResourceVersion("")
	u.SetGeneration(0)
	u.SetManagedFields(nil)
	return u.Object
}

// An experiment step on a UDPRoute whose Services speak UDP: each experiment
// Service's backendRef takes its UDP port (baseline: the port named like the
// stable Service's UDP name, not its TCP one; canary: its one UDP port beside
// a TCP metrics port). Every other byte of the route stays, compared on the
// whole object; when the experiment ends exactly its backendRefs leave, and
// when the rollout ends the route is as it was created and the plugin owns
// nothing. The plugin only reads Services.
func udpExperiment(t *testing.T, u udp) {
	ns := u.namespace(t)
	service(t, u.c, ns, "exp-baseline", "dns-tcp:5354", "dns:5353/UDP")
	service(t, u.c, ns, "exp-canary", "metrics:9153", "resolver:5353/UDP")
	created := create(t, u.c, ns, u.route("route"))
	p := u.startPlugin(t)
	ro := rollout(ns, `{"udpRoute": "route"}`)
	u.c.Recorder.Reset()

	withRefs := func(stable, canary int64, experiment ...map[string]any) map[string]any {
		want := created.DeepCopy()
		refs := backendRefs(want)
		refs[0].(map[string]any)["weight"] = stable
		refs[1].(map[string]any)["weight"] = canary
		for _, e := range experiment {
			refs = append(refs, e)
		}
		rules, _, _ := unstructured.NestedSlice(want.Object, "spec", "rules")
		rules[0].(map[string]any)["backendRefs"] = refs
		_ = unstructured.SetNestedSlice(want.Object, rules, "spec", "rules")
		return want.Object
	}
	expRef := func(name string, weight int64) map[string]any {
		return map[string]any{"group": "", "kind": "Service", "name": name, "port": int64(5353), "weight": weight}
	}
	for _, step := range []struct {
		canary int32
		exp    []v1alpha1.WeightDestination
		want   map[string]any
	}{
		{0, experimentDestinations(5, 25), withRefs(70, 0, expRef("exp-baseline", 5), expRef("exp-canary", 25))},
		{20, experimentDestinations(5, 25), withRefs(50, 20, expRef("exp-baseline", 5), expRef("exp-canary", 25))},
		{20, nil, withRefs(80, 20)},
		{0, nil, created.Object},
	} {
		if err := p.Plugin.SetWeight(ro, step.canary, step.exp); err.HasError() {
			t.Fatalf("SetWeight(%d, %v): %s", step.canary, step.exp, err)
		}
		got := u.get(t, ns, "route")
		want := &unstructured.Unstructured{Object: step.want}
		want = want.DeepCopy()
		if claims, ok := got.GetAnnotations()["gatewayapi-ssa.dev/claims"]; ok {
			// The plugin's own bookkeeping, with its label; the claims'
			// format is desired/'s and routes/' to test.
			if !json.Valid([]byte(claims)) || !strings.Contains(claims, ns+"/demo") {
				t.Errorf("SetWeight(%d, %v): claims annotation %q", step.canary, step.exp, claims)
			}
			want.SetAnnotations(map[string]string{"owner": "dns-team@example.com", "gatewayapi-ssa.dev/claims": claims})
			want.SetLabels(map[string]string{"team": "dns", "rollouts.argoproj.io/gatewayapi-canary": "in-progress"})
		}
		if diff := cmp.Diff(withoutBookkeeping(want), withoutBookkeeping(got)); diff != "" {
			t.Errorf("SetWeight(%d, %v): the route (-want +got):\n%s", step.canary, step.exp, diff)
		}
	}
	pluginOwnsNothing(t, u.get(t, ns, "route"))
	for _, r := range u.c.Recorder.Requests() {
		if strings.Contains(r.Path, "/services") && r.Method != http.MethodGet {
			t.Errorf("the plugin wrote a Service: %s %s", r.Method, r.Path)
		}
	}
}

// Ping-pong on a UDPRoute between two UDP Services: the weight moves between
// them as stablePingPong says, an experiment's UDP Service joins and leaves,
// and the plugin gives its ownership back at the end.
func udpPingPong(t *testing.T, u udp) {
	walkPingPong(t, u.c, u.version, "UDPRoute", "dns:80/UDP")
}

// setUDPRouteStatus writes a UDPRoute's status.parents through the status
// subresource, as a gateway controller does.
func setUDPRouteStatus(t *testing.T, u udp, ns, name string, parents ...gatewayv1.RouteParentStatus) {
	t.Helper()
	ctx := context.Background()
	res := u.c.Dynamic.Resource(u.gvr()).Namespace(ns)
	route, err := res.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(gatewayv1.RouteStatus{Parents: parents})
	if err != nil {
		t.Fatal(err)
	}
	var status map[string]any
	if err := json.Unmarshal(data, &status); err != nil {
		t.Fatal(err)
	}
	route.Object["status"] = status
	if _, err := res.UpdateStatus(ctx, route, metav1.UpdateOptions{FieldManager: "gateway-controller"}); err != nil {
		t.Fatalf("writing the status of UDPRoute %s/%s: %v", ns, name, err)
	}
}

// VerifyWeight on a UDPRoute reads its status.parents as for any kind: not
// verified until the gateway has taken the route's generation, verified
// then, and a backend the gateway cannot resolve is an error naming the
// UDPRoute. It writes nothing.
func udpVerifyWeight(t *testing.T, u udp) {
	ns := u.namespace(t)
	create(t, u.c, ns, u.route("route"))
	p := u.startPlugin(t)
	cfg := `{"udpRoute": "route", "verifyWeight": true}`
	must(t, "SetWeight(30)", p.Plugin.SetWeight(rollout(ns, cfg), 30, nil))
	gen := u.get(t, ns, "route").GetGeneration()
	listener := gatewayv1.ParentReference{Name: "gw", SectionName: section("dns")}

	checkVerify(t, u.c, p, ns, cfg, 30, types.NotVerified)
	setUDPRouteStatus(t, u, ns, "route", accepted(listener, gen-1))
	checkVerify(t, u.c, p, ns, cfg, 30, types.NotVerified)
	setUDPRouteStatus(t, u, ns, "route", accepted(listener, gen))
	checkVerify(t, u.c, p, ns, cfg, 30, types.Verified)
	checkVerify(t, u.c, p, ns, cfg, 40, types.NotVerified)
	setUDPRouteStatus(t, u, ns, "route", gatewayv1.RouteParentStatus{
		ParentRef:      listener,
		ControllerName: gatewayController,
		Conditions: []metav1.Condition{
			condition("Accepted", metav1.ConditionTrue, gen, "Accepted", "Route is accepted"),
			condition("ResolvedRefs", metav1.ConditionFalse, gen, "BackendNotFound", `Service "canary" has no UDP port 53`),
		},
	})
	checkVerify(t, u.c, p, ns, cfg, 30, types.NotVerified, "UDPRoute "+ns+"/route", "BackendNotFound", `Service "canary"`)
}

// ruleName on a UDPRoute: the rule of that name is the one whose weights
// move (on v1alpha2, which allows 16 rules, the other rule holding the same
// Services stays as it is); a name the route has no rule for is an error
// listing the names it has, and nothing is written.
func udpRuleName(t *testing.T, u udp) {
	ns := u.namespace(t)
	manifest := u.route("route")
	if u.version == "v1alpha2" {
		manifest += `  - name: backup
    backendRefs:
    - {name: stable, port: 53, weight: 100}
    - {name: canary, port: 53, weight: 0}
`
	}
	create(t, u.c, ns, manifest)
	p := u.startPlugin(t)

	before := u.get(t, ns, "route").GetResourceVersion()
	u.c.Recorder.Reset()
	err := p.Plugin.SetWeight(rollout(ns, `{"udpRoutes": [{"name": "route", "ruleName": "primary"}]}`), 30, nil)
	for _, w := range []string{"UDPRoute " + ns + `/route has no rule named "primary"`, "rules named main"} {
		if !strings.Contains(err.ErrorString, w) {
			t.Errorf("error %q does not say %q", err.ErrorString, w)
		}
	}
	if w := pluginWrites(u.c); len(w) != 0 || u.get(t, ns, "route").GetResourceVersion() != before {
		t.Errorf("a ruleName the route does not have wrote %v", w)
	}

	cfg := `{"udpRoute": "route", "udpRouteRuleName": "main"}`
	rest := map[string]int64{}
	if u.version == "v1alpha2" {
		cfg = `{"udpRoute": "route", "udpRouteRuleName": "backup"}`
		rest = map[string]int64{"0/stable": 100, "0/canary": 0, "0/resolver-legacy": 7}
	}
	ro := rollout(ns, cfg)
	for _, step := range []struct{ weight, stable int64 }{{30, 70}, {100, 0}, {0, 100}} {
		must(t, fmt.Sprintf("SetWeight(%d)", step.weight), p.Plugin.SetWeight(ro, int32(step.weight), nil))
		want := map[string]int64{}
		for k, v := range rest {
			want[k] = v
		}
		if u.version == "v1alpha2" {
			want["1/stable"], want["1/canary"] = step.stable, step.weight
		} else {
			want["0/stable"], want["0/canary"], want["0/resolver-legacy"] = step.stable, step.weight, 7
		}
		if diff := cmp.Diff(want, weights(u.get(t, ns, "route"))); diff != "" {
			t.Errorf("ruleName, SetWeight(%d) (-want +got):\n%s", step.weight, diff)
		}
	}
	pluginOwnsNothing(t, u.get(t, ns, "route"))
}

// Argo CD syncs Git's UDPRoute mid-rollout (a forced apply): the plugin's next
// step is a conflict error naming the UDPRoute, the manager and what to do,
// and leaves Argo CD's values; conflictPolicy: Force takes over, and the end
// of the rollout gives the ownership back.
func udpConflict(t *testing.T, u udp) {
	ns := u.namespace(t)
	create(t, u.c, ns, u.route("route"))
	p := u.startPlugin(t)
	git := func(stable, canary int) {
		t.Helper()
		obj := map[string]any{}
		manifest := strings.NewReplacer("weight: 100}", fmt.Sprintf("weight: %d}", stable), "weight: 0}", fmt.Sprintf("weight: %d}", canary)).Replace(u.route("route"))
		if err := yaml.Unmarshal([]byte(manifest), &obj); err != nil {
			t.Fatal(err)
		}
		r := &unstructured.Unstructured{Object: obj}
		r.SetNamespace(ns)
		data, _ := r.MarshalJSON()
		force := true
		if _, err := u.c.Dynamic.Resource(u.gvr()).Namespace(ns).Patch(context.Background(), "route", ktypes.ApplyPatchType, data,
			metav1.PatchOptions{FieldManager: "argocd-controller", Force: &force}); err != nil {
			t.Fatalf("Argo CD's apply: %v", err)
		}
	}
	weightsAre := func(what string, stable, canary int64, owners ...string) {
		t.Helper()
		r := u.get(t, ns, "route")
		if diff := cmp.Diff(map[string]int64{"0/stable": stable, "0/canary": canary, "0/resolver-legacy": 7}, weights(r)); diff != "" {
			t.Errorf("%s: weights (-want +got):\n%s", what, diff)
		}
		if diff := cmp.Diff(owners, rulesOwners(r)); diff != "" {
			t.Errorf("%s: owners of spec.rules (-want +got):\n%s", what, diff)
		}
	}
	must(t, "SetWeight(30)", p.Plugin.SetWeight(rollout(ns, `{"udpRoute": "route"}`), 30, nil))
	weightsAre("SetWeight(30)", 70, 30, fieldManager)
	git(100, 0)
	weightsAre("Argo CD's sync", 100, 0, "argocd-controller")
	err := p.Plugin.SetWeight(rollout(ns, `{"udpRoute": "route"}`), 50, nil)
	t.Logf("error: %s", err.ErrorString)
	for _, w := range []string{"UDPRoute " + ns + "/route: conflict", "rollout " + ns + "/demo", "argocd-controller (Apply)",
		"the plugin set 70, now 100, the plugin would set 50", "conflictPolicy: Force"} {
		if !strings.Contains(err.ErrorString, w) {
			t.Errorf("conflict error does not say %q", w)
		}
	}
	weightsAre("the conflict", 100, 0, "argocd-controller")
	must(t, "SetWeight(50) with Force", p.Plugin.SetWeight(rollout(ns, `{"udpRoute": "route", "conflictPolicy": "Force"}`), 50, nil))
	weightsAre("Force", 50, 50, fieldManager)
	must(t, "SetWeight(0)", p.Plugin.SetWeight(rollout(ns, `{"udpRoute": "route"}`), 0, nil))
	weightsAre("the end", 100, 0)
	pluginOwnsNothing(t, u.get(t, ns, "route"))
}

// A UDPRoute has no matches. Beside an HTTPRoute, a UDPRoute named by
// udpRoute takes no header or mirror rule: the HTTPRoute gets them, the
// UDPRoute is not written. Alone it makes a header step an error that says
// no route of the Rollout takes one; listed with useHeaderRoutes: true, an
// error naming it. Nothing is written on an error.
func udpHeaderAndMirror(t *testing.T, u udp) {
	ns := u.namespace(t)
	create(t, u.c, ns, u.route("route"))
	create(t, u.c, ns, routeYAML("v1", "HTTPRoute", "web"))
	p := u.startPlugin(t)
	ro := managedRollout(ns, "demo", `{"httpRoute": "web", "udpRoute": "route"}`, "beta", "mirror")
	before := u.get(t, ns, "route").GetResourceVersion()
	must(t, "SetHeaderRoute", p.Plugin.SetHeaderRoute(ro, headerStep("beta", "X-Canary", "yes")))
	pct := int32(10)
	must(t, "SetMirrorRoute", p.Plugin.SetMirrorRoute(ro, &v1alpha1.SetMirrorRoute{Name: "mirror", Percentage: &pct,
		Match: []v1alpha1.RouteMatch{{Method: &v1alpha1.StringMatch{Exact: "POST"}}}}))
	if diff := cmp.Diff([]string{"-", "beta", "mirror"}, ruleNames(get(t, u.c, "v1", "HTTPRoute", ns, "web"))); diff != "" {
		t.Errorf("the HTTPRoute's rules (-want +got):\n%s", diff)
	}
	must(t, "RemoveManagedRoutes", p.Plugin.RemoveManagedRoutes(ro))
	if got := u.get(t, ns, "route").GetResourceVersion(); got != before {
		t.Errorf("header and mirror steps wrote the UDPRoute (resourceVersion %s → %s)", before, got)
	}

	for _, tc := range []struct{ config, want string }{
		{`{"udpRoute": "route"}`, "no HTTPRoute or GRPCRoute of the Rollout takes header routes"},
		{`{"httpRoute": "web", "udpRoutes": [{"name": "route", "useHeaderRoutes": true}]}`,
			"UDPRoute " + ns + `/route: listed with useHeaderRoutes: true, but a UDPRoute has no matches and cannot take header route "beta"`},
	} {
		u.c.Recorder.Reset()
		err := p.Plugin.SetHeaderRoute(managedRollout(ns, "demo", tc.config, "beta"), headerStep("beta", "X-Canary", "yes"))
		if !strings.Contains(err.ErrorString, tc.want) {
			t.Errorf("%s: error %q does not say %q", tc.config, err.ErrorString, tc.want)
		}
		if w := pluginWrites(u.c); len(w) != 0 {
			t.Errorf("%s: a refused header step wrote %v", tc.config, w)
		}
	}
}

// udpRollout is a Rollout on the UDPRoute route whose pods serve DNS on
// 5353/UDP (and metrics on 9153/TCP): a canary with an experiment.
func udpRollout(ns string) string {
	return `apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: demo, namespace: ` + ns + `}
spec:
  replicas: 1
  selector: {matchLabels: {app: demo}}
  template:
    metadata: {labels: {app: demo}}
    spec:
      containers:
      - name: dns
        image: "dns:v2"
        ports: [{name: metrics, containerPort: 9153}, {name: resolver, containerPort: 5353, protocol: UDP}]
  strategy:
    canary:
      stableService: stable
      canaryService: canary
      trafficRouting:
        plugins:
          argoproj-labs/gatewayAPI: {udpRoute: route}
      steps:
      - setWeight: 20
      - experiment:
          templates:
          - {name: baseline, specRef: stable, weight: 5}
      - pause: {}
      - setWeight: 60
`
}

// The binary's commands on a UDPRoute: plan walks a Rollout on it and writes
// nothing (its experiment Service, with the pods' 9153/TCP and 5353/UDP, has
// one port a UDPRoute can take: without the protocol, that would be a
// problem of the plan, which port to take); inspect
// shows the plugin's claim mid-rollout; cleanup, after the Rollout is
// deleted mid-canary, puts the route back as it was created and leaves the
// plugin owning nothing.
func udpCommands(t *testing.T, u udp) {
	ns := u.namespace(t)
	created := create(t, u.c, ns, u.route("route"))
	rv := created.GetResourceVersion()

	out, code := runBinary(t, nil, "plan", "--kubeconfig", u.c.Kubeconfig, "-f", writeFile(t, "rollout.yaml", udpRollout(ns)), "-o", "json")
	var report struct {
		OK    bool
		Steps []struct {
			Step    string
			Changes map[string][]string
		}
		Problems []any
	}
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("plan: exit %d, the JSON output does not parse: %v", code, err)
	}
	var steps []string
	for _, s := range report.Steps {
		steps = append(steps, s.Step)
	}
	want := []string{"setWeight 20", "experiment baseline 5", "pause", "setWeight 60",
		"promotion: every step done", "promotion: the new version is stable", "abort (from the last step)"}
	if diff := cmp.Diff(want, steps); diff != "" || code != 0 || !report.OK || len(report.Problems) != 0 {
		t.Errorf("plan: exit %d, steps (-want +got):\n%s\nok %v, problems %v", code, diff, report.OK, report.Problems)
	}
	text, _ := runBinary(t, nil, "plan", "--kubeconfig", u.c.Kubeconfig, "-f", writeFile(t, "rollout.yaml", udpRollout(ns)))
	for _, w := range []string{"UDPRoute " + ns + "/route", "Service " + ns + "/stable 100→80", "+ Service " + ns + "/demo-baseline weight 5", "problems: none"} {
		if !strings.Contains(text, w) {
			t.Errorf("the plan's text does not show %q", w)
		}
	}
	if got := u.get(t, ns, "route").GetResourceVersion(); got != rv {
		t.Errorf("plan wrote the route (resourceVersion %s → %s)", rv, got)
	}

	create(t, u.c, ns, udpRollout(ns))
	service(t, u.c, ns, "exp-baseline", "dns:5353/UDP")
	p := u.startPlugin(t)
	must(t, "SetWeight(30) with an experiment", p.Plugin.SetWeight(rollout(ns, `{"udpRoute": "route"}`), 30, experimentDestinations(5, 0)[:1]))
	out, code = runBinary(t, nil, "inspect", "udproute/route", "-n", ns, "--kubeconfig", u.c.Kubeconfig, "-o", "json")
	var in desired.Inspection
	if err := json.Unmarshal([]byte(out), &in); err != nil || code != 0 {
		t.Fatalf("inspect: exit %d, %v", code, err)
	}
	if !in.PluginOwnsRules || len(in.Claims) != 1 || !in.Claims[0].Active || in.Claims[0].CanaryWeight != 30 || in.Release {
		t.Errorf("inspect mid-rollout: %+v", in)
	}
	if diff := cmp.Diff(rulesOwners(u.get(t, ns, "route")), in.RulesOwners); diff != "" {
		t.Errorf("inspect: spec.rules owners (-apiserver +inspect):\n%s", diff)
	}
	if _, code := runBinary(t, nil, "inspect", "UDPRoute/route", "-n", ns, "--kubeconfig", u.c.Kubeconfig); code != 0 {
		t.Errorf("inspect UDPRoute/route: exit %d", code)
	}

	if err := u.c.Dynamic.Resource(rolloutsGVR).Namespace(ns).Delete(context.Background(), "demo", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	out, code = runBinary(t, nil, "cleanup", "--kubeconfig", u.c.Kubeconfig, "-n", ns, ns+"/demo")
	if code != 0 || !strings.Contains(out, "UDPRoute "+ns+"/route") || !strings.Contains(out, "undone") {
		t.Errorf("cleanup: exit %d, %q", code, out)
	}
	after := u.get(t, ns, "route")
	if diff := cmp.Diff(withoutBookkeeping(created), withoutBookkeeping(after)); diff != "" {
		t.Errorf("after cleanup the route is not as created (-created +after):\n%s", diff)
	}
	pluginOwnsNothing(t, after)
}
