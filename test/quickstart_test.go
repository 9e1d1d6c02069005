package test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/argoproj/argo-rollouts/utils/plugin/types"
	"github.com/google/go-cmp/cmp"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// quickstartPage is the GKE fleet quickstart; every ```yaml block of it
// says in its first line where it goes.
var quickstartPage = filepath.Join(harness.RepoRoot(), "docs", "quickstart-gke-fleet.md")

// quickstart is the page's YAML, by where the reader applies it.
type quickstart struct {
	// member goes to every member cluster, driving adds what only the
	// member whose plugin drives the shared route has (the Rollout).
	config, member, driving []*unstructured.Unstructured
	// entry is the plugin's argo-rollouts-config entry the kustomization's
	// patch writes.
	entry types.PluginItem
}

// readQuickstart sorts the page's YAML blocks by their first line: the
// config cluster's, each member cluster's, member-a's only, and the
// member's kustomization.yaml, whose patch holds the plugin's entry. A block that
// names none of them fails the test, so no YAML of the page goes untested.
func readQuickstart(t *testing.T) quickstart {
	t.Helper()
	data, err := os.ReadFile(quickstartPage)
	if err != nil {
		t.Fatal(err)
	}
	var q quickstart
	kustomizations := 0
	for i, block := range yamlBlocks(string(data)) {
		first, _, _ := strings.Cut(block, "\n")
		switch {
		case strings.HasPrefix(first, "# in the config cluster"):
			q.config = append(q.config, mustSplit(t, block)...)
		case strings.HasPrefix(first, "# in each member cluster"):
			q.member = append(q.member, mustSplit(t, block)...)
		case strings.HasPrefix(first, "# in member-a only"):
			q.driving = append(q.driving, mustSplit(t, block)...)
		case strings.HasPrefix(first, "# kustomization.yaml"):
			kustomizations++
			q.entry = pluginEntryOfPatch(t, block)
		default:
			t.Errorf("%s: yaml block %d starts %q: say in its first line where it goes (# in the config cluster, # in each member cluster, # in member-a only, # kustomization.yaml)", quickstartPage, i+1, first)
		}
	}
	if len(q.config) == 0 || len(q.member) == 0 || len(q.driving) == 0 || kustomizations != 1 {
		t.Fatalf("%s: %d objects for the config cluster, %d for the members, %d for member-a, %d kustomizations; want some, some, some and one",
			quickstartPage, len(q.config), len(q.member), len(q.driving), kustomizations)
	}
	return q
}

func mustSplit(t *testing.T, block string) []*unstructured.Unstructured {
	t.Helper()
	docs, err := splitYAML(block)
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

// pluginEntryOfPatch is the one trafficRouterPlugins entry a
// kustomization's JSON patch of argo-rollouts-config writes, read as Argo
// Rollouts reads it.
func pluginEntryOfPatch(t *testing.T, block string) types.PluginItem {
	t.Helper()
	var k struct {
		Patches []struct{ Patch string }
	}
	if err := yaml.Unmarshal([]byte(block), &k); err != nil {
		t.Fatalf("the kustomization: %v", err)
	}
	for _, p := range k.Patches {
		var ops []struct {
			Op, Path, Value string
		}
		if err := yaml.Unmarshal([]byte(p.Patch), &ops); err != nil {
			t.Fatalf("the kustomization's patch: %v", err)
		}
		for _, op := range ops {
			if op.Path != "/data/trafficRouterPlugins" {
				continue
			}
			var plugins []types.PluginItem
			if err := yaml.UnmarshalStrict([]byte(op.Value), &plugins); err != nil || len(plugins) != 1 {
				t.Fatalf("trafficRouterPlugins does not parse as Argo Rollouts' plugin list of one entry (%v):\n%s", err, op.Value)
			}
			return plugins[0]
		}
	}
	t.Fatal("the kustomization patches no /data/trafficRouterPlugins")
	return types.PluginItem{}
}

// applyAll applies objects to c as a reader does (kubectl apply, manager
// quickstart), strictly.
func applyAll(t *testing.T, c *harness.Cluster, objects []*unstructured.Unstructured) {
	t.Helper()
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Kube.Discovery()))
	for _, u := range objects {
		if err := applyDocAs(c, mapper, u.DeepCopy(), "quickstart"); err != nil {
			t.Fatalf("%s: %s %s/%s: %v", quickstartPage, u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
	}
}

// quickstartRollout is the page's Rollout, as the controller hands it to
// the plugin.
func quickstartRollout(t *testing.T, objects []*unstructured.Unstructured) *v1alpha1.Rollout {
	t.Helper()
	for _, u := range objects {
		if u.GetKind() != "Rollout" {
			continue
		}
		var ro v1alpha1.Rollout
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ro); err != nil {
			t.Fatal(err)
		}
		return &ro
	}
	t.Fatal("the page has no Rollout for the members")
	return nil
}

// routeClusterKubeconfig is where the page's kustomization mounts the route
// cluster's kubeconfig (install/argo-rollouts-route-cluster).
const routeClusterKubeconfig = "/etc/rollouts-gatewayapi-ssa/route-clusters/fleet"

// argsWith are the entry's args with the route cluster's kubeconfig at
// path and, when member is not "", that member's -cluster-name.
func argsWith(t *testing.T, args []string, path, member string) []string {
	t.Helper()
	var out []string
	mounted := 0
	for _, a := range args {
		if strings.Contains(a, routeClusterKubeconfig) {
			mounted++
			a = strings.ReplaceAll(a, routeClusterKubeconfig, path)
		}
		if member != "" && strings.HasPrefix(a, "-cluster-name=") {
			a = "-cluster-name=" + member
		}
		out = append(out, a)
	}
	if mounted != 1 {
		t.Fatalf("the entry's args name the mounted kubeconfig %s %d times, want once: %v", routeClusterKubeconfig, mounted, args)
	}
	return out
}

// The GKE fleet quickstart followed as a reader does, on real
// kube-apiservers: a config cluster (install/route-cluster applied, the
// ServiceImport CRDs of net.gke.io) and two member clusters. Every YAML
// block of the page is applied where its first line says (member-a's own
// block to member-a alone); GKE's
// multi-cluster Services controller is played by creating a ServiceImport in
// the config cluster per ServiceExport. The plugin binary runs with the
// args of the page's argo-rollouts-config entry (the mounted kubeconfig
// pointing at the config cluster as the route cluster's ServiceAccount) and
// walks the page's Rollout through its steps and its promotion; the route in
// the config cluster carries each step's weights on its ServiceImports and
// ends as it began, released. The same Rollout in a second member is refused
// while the first member's rollout holds the route, and walks once it has
// ended: what the page shows of a second member driving the shared route
// too. The outputs the page shows (the route's Event, inspect, the second
// member's Warning) are logged.
func TestGKEFleetQuickstart(t *testing.T) {
	t.Parallel()
	q := readQuickstart(t)
	if q.entry.Name != "argoproj-labs/gatewayAPI" || !strings.HasPrefix(q.entry.Location, "https://") || q.entry.Sha256 == "" {
		t.Errorf("the page's entry is %+v; want argoproj-labs/gatewayAPI downloaded over https with a sha256", q.entry)
	}
	f := startFleet(t)
	applyAll(t, f.config, q.config)
	memberA, memberB := startQuickstartMember(t), startQuickstartMember(t)
	for _, m := range []*harness.Cluster{memberA, memberB} {
		applyAll(t, m, q.member)
	}
	applyAll(t, memberA, q.driving)
	for _, u := range append(q.member, q.driving...) {
		if u.GetKind() == "ServiceExport" {
			f.importService(t, strings.Split(u.GetAPIVersion(), "/")[0], u.GetNamespace(), u.GetName())
		}
	}
	ro := quickstartRollout(t, q.driving)
	var config struct {
		Cluster, HTTPRoute, Namespace string
	}
	if err := json.Unmarshal(ro.Spec.Strategy.Canary.TrafficRouting.Plugins["argoproj-labs/gatewayAPI"], &config); err != nil {
		t.Fatal(err)
	}
	ns := ro.Namespace
	if config.Namespace != "" {
		ns = config.Namespace
	}
	route := func() *unstructured.Unstructured { return get(t, f.config, "v1", "HTTPRoute", ns, config.HTTPRoute) }
	before := userView(t, route())
	split := func(stable, canary int64) map[string]int64 {
		return map[string]int64{"0/" + ro.Spec.Strategy.Canary.StableService: stable, "0/" + ro.Spec.Strategy.Canary.CanaryService: canary}
	}
	if diff := cmp.Diff(split(100, 0), weights(route())); diff != "" {
		t.Fatalf("the page's route before the rollout (-want +got):\n%s", diff)
	}

	a, _ := startPluginWith(t, pluginBin, memberA.Kubeconfig, argsWith(t, q.entry.Args, f.routeKubeconfig, "")...)
	b, _ := startPluginWith(t, pluginBin, memberB.Kubeconfig, argsWith(t, q.entry.Args, f.routeKubeconfig, "member-b")...)

	// The first revision: nothing to set, nothing written.
	rv := route().GetResourceVersion()
	if err := a.RemoveManagedRoutes(ro); err.HasError() {
		t.Fatalf("RemoveManagedRoutes: %s", err.ErrorString)
	}
	if err := a.SetWeight(ro, 0, nil); err.HasError() {
		t.Fatalf("SetWeight(0) of the first revision: %s", err.ErrorString)
	}
	if got := route().GetResourceVersion(); got != rv {
		t.Errorf("the first revision's calls wrote the route (resourceVersion %s → %s)", rv, got)
	}

	// The canary's steps, then the promotion as the controller makes it.
	first := true
	for _, step := range ro.Spec.Strategy.Canary.Steps {
		if step.SetWeight == nil {
			continue
		}
		w := *step.SetWeight
		if err := a.SetWeight(ro, w, nil); err.HasError() {
			t.Fatalf("member-a SetWeight(%d): %s", w, err.ErrorString)
		}
		if diff := cmp.Diff(split(int64(100-w), int64(w)), weights(route())); diff != "" {
			t.Errorf("after SetWeight(%d), the route in the config cluster (-want +got):\n%s", w, diff)
		}
		if !first {
			continue
		}
		first = false
		evs := waitForEvents(t, f.config, ns, "HTTPRoute", config.HTTPRoute, func(evs []eventsv1.Event) bool { return len(evs) > 0 })
		if len(evs) != 1 || evs[0].Reason != "WeightsChanged" {
			t.Errorf("the route's Events after the first step:\n%s\nwant one WeightsChanged", describe(evs))
		}
		t.Logf("kubectl --context fleet describe httproute %s -n %s:\n%s", config.HTTPRoute, ns, describe(evs))

		out, code := runBinary(t, nil, "inspect", "httproute/"+config.HTTPRoute, "-n", ns, "--kubeconfig", memberA.Kubeconfig,
			"--cluster", config.Cluster, "--route-cluster", config.Cluster+"="+f.routeKubeconfig, "--route-namespaces", config.Cluster+"="+ns)
		if code != 0 || !strings.Contains(out, ro.Namespace+"/"+ro.Name) || !strings.Contains(out, "member-a") {
			t.Errorf("inspect exited %d and does not name the Rollout %s/%s of cluster member-a:\n%s", code, ro.Namespace, ro.Name, out)
		}

		// The same Rollout in member-b: refused while member-a's holds the route.
		err := b.SetWeight(ro, w, nil)
		if want := "of cluster member-a is in progress on this route"; !strings.Contains(err.ErrorString, want) {
			t.Errorf("member-b SetWeight(%d) = %q, want it to say %q", w, err.ErrorString, want)
		}
		warnings := waitForEvents(t, memberB, ro.Namespace, "Rollout", ro.Name, func(evs []eventsv1.Event) bool { return len(evs) > 0 })
		if len(warnings) == 0 || warnings[0].Reason != "Conflict" {
			t.Errorf("member-b's Rollout has the Events\n%s\nwant a Warning Conflict", describe(warnings))
		}
		t.Logf("kubectl --context member-b describe rollout %s -n %s:\n%s", ro.Name, ro.Namespace, describe(warnings))
	}
	for _, call := range []struct {
		name string
		do   func() types.RpcError
	}{
		{"SetWeight(100)", func() types.RpcError { return a.SetWeight(ro, 100, nil) }},
		{"RemoveManagedRoutes", func() types.RpcError { return a.RemoveManagedRoutes(ro) }},
		{"SetWeight(0)", func() types.RpcError { return a.SetWeight(ro, 0, nil) }},
	} {
		if err := call.do(); err.HasError() {
			t.Fatalf("member-a %s: %s", call.name, err.ErrorString)
		}
	}
	end := route()
	if diff := cmp.Diff(before, userView(t, end)); diff != "" {
		t.Errorf("after the promotion the route is not as it began (-before +after):\n%s", diff)
	}
	if ownsRules(end, fieldManager) {
		t.Errorf("after the promotion the plugin still owns spec.rules")
	}

	// member-a's rollout has ended: member-b's walks.
	if err := b.SetWeight(ro, 20, nil); err.HasError() {
		t.Fatalf("member-b SetWeight(20) after member-a's rollout ended: %s", err.ErrorString)
	}
	if diff := cmp.Diff(split(80, 20), weights(route())); diff != "" {
		t.Errorf("member-b's SetWeight(20) (-want +got):\n%s", diff)
	}
	if err := b.SetWeight(ro, 0, nil); err.HasError() {
		t.Fatalf("member-b SetWeight(0): %s", err.ErrorString)
	}
}

// startQuickstartMember starts a member cluster serving the ServiceExport
// CRD of net.gke.io (and the Gateway API's and Argo Rollouts' CRDs).
func startQuickstartMember(t *testing.T) *harness.Cluster {
	t.Helper()
	c, err := harness.StartConfigCluster(harness.Standard)
	if err != nil {
		t.Fatal(fmt.Errorf("starting a member cluster: %w", err))
	}
	t.Cleanup(func() { _ = c.Stop() })
	return c
}
