package test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/argoproj/argo-rollouts/utils/plugin/types"
	"github.com/google/go-cmp/cmp"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// controllerServiceAccount is the user the Argo Rollouts controller (and so
// the plugin it starts) runs as, with the install manifests of Argo Rollouts.
const controllerServiceAccount = "system:serviceaccount:argo-rollouts:argo-rollouts"

// A platform team installs the plugin with install/: Argo Rollouts' own
// argo-rollouts-config ConfigMap and Deployment (from its v1.10.1
// manifests), the base's RBAC, the Component's ConfigMap entry and its
// Deployment patch (the init container, its volume and the controller's
// mount of it) are applied to the apiserver, which takes the pod they make;
// the entry parses as Argo Rollouts' plugin config; and the plugin, running as the
// controller's ServiceAccount with only that RBAC, walks a rollout on every
// route kind with its watch cache (no warning about list or watch), and
// records its Events on the routes and the Rollout.
//
// Serial: it applies the install's cluster-wide objects (ClusterRoles and
// their bindings, by their real names) and its ServiceAccount's plugin keeps
// its Lease in ControllerNamespace.
func TestInstallManifests(t *testing.T) {
	root := harness.RepoRoot()
	ctx := context.Background()
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(standard.Kube.Discovery()))

	// Argo Rollouts' own ConfigMap, as its install.yaml creates it in argo-rollouts.
	rolloutsDir, err := harness.ModuleDir("github.com/argoproj/argo-rollouts")
	if err != nil {
		t.Fatal(err)
	}
	// The Component patches the Deployment, so Argo Rollouts' own comes first.
	files := []string{
		filepath.Join(rolloutsDir, "manifests", "base", "argo-rollouts-config.yaml"),
		filepath.Join(rolloutsDir, "manifests", "base", "argo-rollouts-deployment.yaml"),
	}
	for _, base := range []string{"install/base", "install/argo-rollouts"} {
		files = append(files, kustomizationFiles(t, filepath.Join(root, base))...)
	}
	// A fresh install: the docs test applies README's argo-rollouts-config in
	// the same namespace; neither test sees the other's.
	dropConfigMap := func() {
		err := standard.Kube.CoreV1().ConfigMaps("argo-rollouts").Delete(ctx, "argo-rollouts-config", metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		err = standard.Kube.AppsV1().Deployments("argo-rollouts").Delete(ctx, "argo-rollouts", metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	dropConfigMap()
	t.Cleanup(dropConfigMap)
	// Each file under its own manager: the Component's patch adds to Argo
	// Rollouts' ConfigMap as kustomize merges it, keeping its labels.
	for i, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs, err := splitYAML(string(data))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, doc := range docs {
			if doc.GetKind() == "ConfigMap" || doc.GetKind() == "Deployment" || doc.GetNamespace() == "" && doc.GetKind() == "ServiceAccount" {
				doc.SetNamespace("argo-rollouts") // as `kubectl apply -n argo-rollouts` or a kustomization's namespace does
			}
			if err := applyDocAs(standard, mapper, doc, fmt.Sprintf("install-%d", i)); err != nil {
				t.Errorf("%s: %s %s: %v", rel(root, f), doc.GetKind(), doc.GetName(), err)
			}
		}
	}

	cm, err := standard.Kube.CoreV1().ConfigMaps("argo-rollouts").Get(ctx, "argo-rollouts-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var plugins []types.PluginItem
	if err := yaml.UnmarshalStrict([]byte(cm.Data["trafficRouterPlugins"]), &plugins); err != nil {
		t.Fatalf("argo-rollouts-config trafficRouterPlugins does not parse as Argo Rollouts' plugin list: %v\n%s", err, cm.Data["trafficRouterPlugins"])
	}
	want := []types.PluginItem{{
		Name:     "argoproj-labs/gatewayAPI",
		Location: "file:///home/argo-rollouts/plugins/rollouts-gatewayapi-ssa",
		Args:     []string{"-field-manager=argo-rollouts-gatewayapi"},
	}}
	if diff := cmp.Diff(want, plugins); diff != "" {
		t.Errorf("trafficRouterPlugins (-want +got):\n%s", diff)
	}
	if cm.Labels["app.kubernetes.io/part-of"] != "argo-rollouts" {
		t.Errorf("the ConfigMap lost Argo Rollouts' own labels: %v", cm.Labels)
	}
	// The pod as the apiserver took it: Argo Rollouts' containers and volumes
	// kept, the init container and its volume added.
	d, err := standard.Kube.AppsV1().Deployments("argo-rollouts").Get(ctx, "argo-rollouts", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := d.Spec.Template.Spec
	var inits, mounts, volumes []string
	for _, c := range pod.InitContainers {
		inits = append(inits, c.Name+": "+strings.Join(c.Command, " "))
	}
	for _, m := range pod.Containers[0].VolumeMounts {
		mounts = append(mounts, fmt.Sprintf("%s:%s:%v", m.Name, m.MountPath, m.ReadOnly))
	}
	for _, v := range pod.Volumes {
		volumes = append(volumes, fmt.Sprintf("%s:emptyDir=%v", v.Name, v.EmptyDir != nil))
	}
	got := map[string][]string{"init containers": inits, "controller mounts": mounts, "volumes": volumes}
	wantPod := map[string][]string{
		"init containers":   {"rollouts-gatewayapi-ssa: /rollouts-gatewayapi-ssa copy /plugins/rollouts-gatewayapi-ssa"},
		"controller mounts": {"plugin-bin:/home/argo-rollouts/plugin-bin:false", "tmp:/tmp:false", "gatewayapi-ssa-plugin:/home/argo-rollouts/plugins:true"},
		"volumes":           {"plugin-bin:emptyDir=true", "tmp:emptyDir=true", "gatewayapi-ssa-plugin:emptyDir=true"},
	}
	if diff := cmp.Diff(wantPod, got); diff != "" {
		t.Errorf("Deployment argo-rollouts after install/argo-rollouts (-want +got):\n%s", diff)
	}

	// The plugin as the controller's ServiceAccount, with nothing but the base's RBAC.
	kubeconfig, rec, err := standard.KubeconfigAs(controllerServiceAccount)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	var log syncBuffer
	proc, err := harness.StartPlugin(pluginBin, kubeconfig, &log)
	if err != nil {
		t.Fatal(err)
	}
	defer proc.Stop()
	for _, kind := range []string{"HTTPRoute", "GRPCRoute", "TCPRoute", "TLSRoute", "UDPRoute"} {
		ns := namespace(t, standard)
		create(t, standard, ns, routeYAML("v1", kind, "route"))
		cfg := `{"` + strings.ToLower(strings.TrimSuffix(kind, "Route")) + `Route": "route"}`
		ro := rollout(ns, cfg)
		for _, w := range []int32{30, 0} {
			if e := proc.Plugin.SetWeight(ro, w, nil); e.HasError() {
				t.Errorf("%s %s/route: SetWeight(%d) as %s with install/base's RBAC: %s", kind, ns, w, controllerServiceAccount, e.ErrorString)
			}
		}
		u := get(t, standard, "v1", kind, ns, "route")
		if diff := cmp.Diff(map[string]int64{"0/stable": 100, "0/canary": 0}, weights(u)); diff != "" {
			t.Errorf("%s %s/route after the walk (-want +got):\n%s", kind, ns, diff)
		}
		pluginOwnsNothing(t, u)
		// Its Events, with the same RBAC: what each write changed, on the route.
		if evs := waitForEvents(t, standard, ns, kind, "route", func(evs []eventsv1.Event) bool { return len(evs) >= 3 }); len(evs) < 3 {
			t.Errorf("%s %s/route: the plugin recorded %d Events there, want WeightsChanged twice and OwnershipReleased:\n%s", kind, ns, len(evs), describe(evs))
		}
	}
	// And an error, on the Rollout.
	ns := namespace(t, standard)
	if e := proc.Plugin.SetWeight(rollout(ns, `{"httpRoute": "missing"}`), 10, nil); !e.HasError() {
		t.Error("a missing route was found")
	}
	if evs := waitForEvents(t, standard, ns, "Rollout", "demo", func(evs []eventsv1.Event) bool { return len(evs) == 1 }); len(evs) != 1 || evs[0].Reason != "RouteNotFound" {
		t.Errorf("the Rollout's Events as %s with install/base's RBAC, want one RouteNotFound:\n%s", controllerServiceAccount, describe(evs))
	}
	if strings.Contains(log.String(), "watch cache did not sync") {
		t.Errorf("the plugin could not list or watch routes with install/base's RBAC:\n%s", log.String())
	}
	if strings.Contains(log.String(), "may not record Events") {
		t.Errorf("the plugin could not record Events with install/base's RBAC:\n%s", log.String())
	}
}

// kustomizationFiles lists the files a kustomization names under resources
// (following directories) and patches, in order.
func kustomizationFiles(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Kind      string
		Resources []string
		Patches   []struct{ Path string }
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	var out []string
	for _, r := range k.Resources {
		p := filepath.Join(dir, r)
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			out = append(out, kustomizationFiles(t, p)...)
			continue
		}
		out = append(out, p)
	}
	for _, p := range k.Patches {
		out = append(out, filepath.Join(dir, p.Path))
	}
	return out
}

func rel(root, path string) string {
	r, _ := filepath.Rel(root, path)
	return r
}

// syncBuffer collects the plugin's log from its output goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A platform team adds a route cluster with install/argo-rollouts-route-cluster,
// beside install/argo-rollouts, on Argo Rollouts' own v1.10.1 Deployment and
// ConfigMap: the controller's container gets the route clusters' kubeconfigs
// (read-only, its own volumes and the plugin's kept), and the plugin's entry parses as Argo
// Rollouts' plugin config with args the plugin takes. install/route-cluster,
// for the route cluster itself, is applied and used in multicluster_test.go.
//
// Serial: it applies the install's objects by their real names, as
// TestInstallManifests does.
func TestRouteClusterInstallManifests(t *testing.T) {
	root := harness.RepoRoot()
	ctx := context.Background()
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(standard.Kube.Discovery()))
	rolloutsDir, err := harness.ModuleDir("github.com/argoproj/argo-rollouts")
	if err != nil {
		t.Fatal(err)
	}
	files := []string{
		filepath.Join(rolloutsDir, "manifests", "base", "argo-rollouts-deployment.yaml"),
		filepath.Join(rolloutsDir, "manifests", "base", "argo-rollouts-config.yaml"),
	}
	// Beside install/argo-rollouts, as the Component is used, but for that
	// one's entry: the route cluster's replaces it, as the later of two
	// patches of one value does in a kustomize build.
	for _, f := range kustomizationFiles(t, filepath.Join(root, "install", "argo-rollouts")) {
		if filepath.Base(f) != "argo-rollouts-config.yaml" {
			files = append(files, f)
		}
	}
	files = append(files, kustomizationFiles(t, filepath.Join(root, "install", "argo-rollouts-route-cluster"))...)
	drop := func() {
		_ = standard.Kube.CoreV1().ConfigMaps("argo-rollouts").Delete(ctx, "argo-rollouts-config", metav1.DeleteOptions{})
		_ = standard.Kube.AppsV1().Deployments("argo-rollouts").Delete(ctx, "argo-rollouts", metav1.DeleteOptions{})
	}
	drop()
	t.Cleanup(drop)
	for i, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs, err := splitYAML(string(data))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, doc := range docs {
			doc.SetNamespace("argo-rollouts")
			if err := applyDocAs(standard, mapper, doc, fmt.Sprintf("install-%d", i)); err != nil {
				t.Errorf("%s: %s %s: %v", rel(root, f), doc.GetKind(), doc.GetName(), err)
			}
		}
	}
	d, err := standard.Kube.AppsV1().Deployments("argo-rollouts").Get(ctx, "argo-rollouts", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var mounts []string
	for _, m := range d.Spec.Template.Spec.Containers[0].VolumeMounts {
		mounts = append(mounts, fmt.Sprintf("%s:%s:%v", m.Name, m.MountPath, m.ReadOnly))
	}
	want := []string{"plugin-bin:/home/argo-rollouts/plugin-bin:false", "tmp:/tmp:false", "gatewayapi-ssa-plugin:/home/argo-rollouts/plugins:true", "route-clusters:/etc/rollouts-gatewayapi-ssa/route-clusters:true"}
	if diff := cmp.Diff(want, mounts); diff != "" {
		t.Errorf("the controller's volume mounts (-want +got):\n%s", diff)
	}
	var secret string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "route-clusters" && v.Secret != nil {
			secret = v.Secret.SecretName
		}
	}
	if secret != "rollouts-gatewayapi-ssa-route-clusters" {
		t.Errorf("the route-clusters volume is not Secret rollouts-gatewayapi-ssa-route-clusters: %+v", d.Spec.Template.Spec.Volumes)
	}
	cm, err := standard.Kube.CoreV1().ConfigMaps("argo-rollouts").Get(ctx, "argo-rollouts-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var plugins []types.PluginItem
	if err := yaml.UnmarshalStrict([]byte(cm.Data["trafficRouterPlugins"]), &plugins); err != nil || len(plugins) != 1 {
		t.Fatalf("trafficRouterPlugins does not parse as Argo Rollouts' plugin list of one plugin: %v\n%s", err, cm.Data["trafficRouterPlugins"])
	}
	// The plugin parses its flags, route clusters included, before -version.
	if out, code := runBinary(t, nil, append(plugins[0].Args, "-version")...); code != 0 {
		t.Errorf("the plugin refuses the Component's args %v: exit %d\n%s", plugins[0].Args, code, out)
	}
}
