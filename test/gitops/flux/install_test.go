package flux

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
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
// entry, the RBAC binds the controller's ServiceAccount, and every object of
// the result applies to a real apiserver.
func TestInstallOverlay(t *testing.T) {
	var overlay map[string]any
	gitopstest.DocObject(t, filepath.Join(gitopstest.RepoRoot(), "docs", "install.md"), "Kustomization", &overlay)
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
	component, err := filepath.Rel(dir, filepath.Join(gitopstest.RepoRoot(), "install", "argo-rollouts"))
	if err != nil {
		t.Fatal(err)
	}
	overlay["components"] = []any{component} // kustomize takes no absolute paths
	k, err := yaml.Marshal(overlay)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), k, 0o644); err != nil {
		t.Fatal(err)
	}
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = kustypes.LoadRestrictionsNone // the Component is outside dir
	res, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build of docs/install.md's kustomization: %v\n%s", err, k)
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
	plugins, _, _ := unstructured.NestedString(cm.Object, "data", "trafficRouterPlugins")
	want := "- name: \"argoproj-labs/gatewayAPI\"\n  location: \"<the location make release printed>\"\n  sha256: \"<the sha256 make release printed>\""
	if diff := cmp.Diff(want, plugins); diff != "" {
		t.Errorf("argo-rollouts-config trafficRouterPlugins after the overlay's patch (-want +got):\n%s", diff)
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
