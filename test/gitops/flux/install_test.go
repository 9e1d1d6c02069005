package flux

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	kustypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/gitops/gitopstest"
)

// The kustomization of docs/install.md, built with kustomize over Argo
// Rollouts v1.10.1's install.yaml (from the module cache instead of its
// release URL) and this repository's install/argo-rollouts Component (a local
// path instead of the Git URL): the ConfigMap carries the patched plugin
// entry, args included, the RBAC binds the controller's ServiceAccount, and
// every object of the result applies to a real apiserver.
func TestInstallOverlay(t *testing.T) {
	byName := buildOverlay(t, filepath.Join(gitopstest.RepoRoot(), "docs", "install.md"))
	want := "- name: \"argoproj-labs/gatewayAPI\"\n  location: \"<the location make release printed>\"\n  sha256: \"<the sha256 make release printed>\"\n  args:\n  - \"-field-manager=argo-rollouts-gatewayapi\""
	if diff := cmp.Diff(want, pluginsOf(t, byName)); diff != "" {
		t.Errorf("argo-rollouts-config trafficRouterPlugins after the overlay's patch (-want +got):\n%s", diff)
	}
}

// The kustomization of docs/quickstart-gke-fleet.md, built the same way with
// both of its Components (install/argo-rollouts and
// install/argo-rollouts-route-cluster): the entry downloads the plugin over
// https with the route cluster's args, and the controller's Deployment mounts
// the route clusters' Secret where those args name the kubeconfig.
func TestQuickstartOverlay(t *testing.T) {
	byName := buildOverlay(t, filepath.Join(gitopstest.RepoRoot(), "docs", "quickstart-gke-fleet.md"))
	want := `- name: "argoproj-labs/gatewayAPI"
  location: "https://downloads.example.com/gatewayapi-ssa/rollouts-gatewayapi-ssa-linux-amd64"
  sha256: "<the sha256 make release printed for linux/amd64>"
  args:
  - "-field-manager=argo-rollouts-gatewayapi"
  - "-route-cluster=fleet=/etc/rollouts-gatewayapi-ssa/route-clusters/fleet"
  - "-route-namespaces=fleet=store"
  - "-cluster-name=member-a"`
	if diff := cmp.Diff(want, pluginsOf(t, byName)); diff != "" {
		t.Errorf("argo-rollouts-config trafficRouterPlugins after the quickstart's patch (-want +got):\n%s", diff)
	}
	d := byName["Deployment/argo-rollouts"]
	if d == nil {
		t.Fatal("no Deployment argo-rollouts in the build")
	}
	mounts, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	var mounted bool
	for _, c := range mounts {
		vms, _, _ := unstructured.NestedSlice(c.(map[string]any), "volumeMounts")
		for _, vm := range vms {
			m := vm.(map[string]any)
			mounted = mounted || m["mountPath"] == "/etc/rollouts-gatewayapi-ssa/route-clusters" && m["name"] == "route-clusters"
		}
	}
	volumes, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "volumes")
	var secret bool
	for _, v := range volumes {
		name, _, _ := unstructured.NestedString(v.(map[string]any), "secret", "secretName")
		secret = secret || name == "rollouts-gatewayapi-ssa-route-clusters"
	}
	if !mounted || !secret {
		t.Errorf("the controller's Deployment does not mount Secret rollouts-gatewayapi-ssa-route-clusters at /etc/rollouts-gatewayapi-ssa/route-clusters (mounted %v, volume %v)", mounted, secret)
	}
}

// installComponent is a Git URL of one of this repository's install/
// folders, as the docs give it.
var installComponent = regexp.MustCompile(`^https://github.com/gatewayapi-ssa/rollouts-plugin//(install/[a-z-]+)\?ref=.+$`)

// buildOverlay builds the first kustomize Kustomization of the page at path
// with kustomize, Argo Rollouts' install.yaml and this repository's
// install/ folders read locally, checks what every such build must hold
// (argo-rollouts-config with Argo Rollouts' own labels, install/base's RBAC
// bound to the controller's ServiceAccount), applies every object to a real
// apiserver, and returns the objects by kind and name.
func buildOverlay(t *testing.T, page string) map[string]*unstructured.Unstructured {
	t.Helper()
	var overlay map[string]any
	gitopstest.DocObject(t, page, "Kustomization", &overlay)
	dir := t.TempDir()
	rollouts := rolloutsModuleDir(t)
	data, err := os.ReadFile(filepath.Join(rollouts, "manifests", "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "install.yaml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	overlay["resources"] = []any{"install.yaml"}
	components, _ := overlay["components"].([]any)
	if len(components) == 0 {
		t.Fatalf("%s: the kustomization has no components", page)
	}
	for i, c := range components {
		m := installComponent.FindStringSubmatch(fmt.Sprint(c))
		if m == nil {
			t.Fatalf("%s: component %v is not one of this repository's install/ folders", page, c)
		}
		local, err := filepath.Rel(dir, filepath.Join(gitopstest.RepoRoot(), m[1]))
		if err != nil {
			t.Fatal(err)
		}
		components[i] = local // kustomize takes no absolute paths
	}
	k, err := yaml.Marshal(overlay)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), k, 0o644); err != nil {
		t.Fatal(err)
	}
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = kustypes.LoadRestrictionsNone // the Components are outside dir
	res, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build of %s's kustomization: %v\n%s", page, err, k)
	}

	byName := map[string]*unstructured.Unstructured{}
	var objects []*unstructured.Unstructured
	for _, r := range res.Resources() {
		m, err := r.Map()
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: m}
		byName[u.GetKind()+"/"+u.GetName()] = u
		objects = append(objects, u)
	}
	cm := byName["ConfigMap/argo-rollouts-config"]
	if cm == nil {
		t.Fatal("no ConfigMap argo-rollouts-config in the build")
	}
	if cm.GetNamespace() != "argo-rollouts" || cm.GetLabels()["app.kubernetes.io/part-of"] != "argo-rollouts" {
		t.Errorf("ConfigMap: namespace %q, labels %v; want Argo Rollouts' own, in argo-rollouts", cm.GetNamespace(), cm.GetLabels())
	}
	binding := byName["ClusterRoleBinding/argo-rollouts-gatewayapi-ssa"]
	if binding == nil || byName["ClusterRole/argo-rollouts-gatewayapi-ssa"] == nil {
		t.Fatal("the build lacks install/base's ClusterRole or ClusterRoleBinding")
	}
	subjects, _, _ := unstructured.NestedSlice(binding.Object, "subjects")
	wantSubjects := []any{map[string]any{"kind": "ServiceAccount", "name": "argo-rollouts", "namespace": "argo-rollouts"}}
	if diff := cmp.Diff(wantSubjects, subjects); diff != "" {
		t.Errorf("ClusterRoleBinding subjects (-want +got):\n%s", diff)
	}

	d := gitopstest.StartDriver(t)
	d.Namespace(t, "argo-rollouts")
	c, err := client.New(d.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objects {
		if u.GetKind() == "CustomResourceDefinition" {
			continue // the control plane has them already
		}
		if err := c.Patch(context.Background(), u, client.Apply, client.FieldOwner("kustomize-build"), client.ForceOwnership); err != nil {
			t.Errorf("applying %s %s/%s from the build: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
	}
	return byName
}

// pluginsOf is the trafficRouterPlugins of the build's argo-rollouts-config.
func pluginsOf(t *testing.T, byName map[string]*unstructured.Unstructured) string {
	t.Helper()
	plugins, _, _ := unstructured.NestedString(byName["ConfigMap/argo-rollouts-config"].Object, "data", "trafficRouterPlugins")
	return plugins
}

// rolloutsModuleDir is github.com/argoproj/argo-rollouts in the module cache,
// at the version the root module requires.
func rolloutsModuleDir(t *testing.T) string {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/argoproj/argo-rollouts")
	cmd.Dir = gitopstest.RepoRoot()
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=", "GOTOOLCHAIN=local")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("locating github.com/argoproj/argo-rollouts from the root module: %v", err)
	}
	return strings.TrimSpace(string(out))
}
