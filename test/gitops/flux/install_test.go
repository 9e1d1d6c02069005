package flux

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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

// installPage is the page whose kustomizations a platform team copies.
var installPage = filepath.Join(gitopstest.RepoRoot(), "docs", "install.md")

// shaPlaceholder is what docs/install.md's https kustomization has where
// the reader puts the sha256 make release printed.
const shaPlaceholder = "<the sha256 make release printed>"

// The kustomizations of docs/install.md, as a platform team writes them
// beside Argo Rollouts v1.10.1's install.yaml (from the module cache instead
// of its release URL; this repository's install/ folders read locally),
// built with kustomize and applied to a real apiserver; each time the
// plugin would load when the controller starts (loadProblems).
//   - The default: the init container, from the image the kustomization's
//     images: names, copies the plugin into an emptyDir where the entry's
//     file:// location is.
//   - The same with install/argo-rollouts-route-cluster beside it, as
//     "Route clusters" says: the kubeconfigs' Secret is mounted too.
//   - The download: as the page writes it, the sha256 is the placeholder and
//     is refused; with the sha256 the reader fills in, it applies. The https
//     Component without the reader's patch is refused by the apiserver.
func TestInstallOverlay(t *testing.T) {
	d := gitopstest.StartDriver(t)
	d.Namespace(t, "argo-rollouts")
	c, err := client.New(d.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	applies := func(t *testing.T, objects []*unstructured.Unstructured) {
		t.Helper()
		for _, err := range applyObjects(c, objects) {
			t.Error(err)
		}
	}
	loads := func(t *testing.T, byName map[string]*unstructured.Unstructured) install {
		t.Helper()
		in, err := installOf(byName)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range append(loadProblems(in), routeClusterProblems(in)...) {
			t.Errorf("the controller would not load the plugin: %s", p)
		}
		return in
	}

	t.Run("init container", func(t *testing.T) {
		overlay := docOverlay(t, "install/argo-rollouts")
		objects, byName := kustomizeBuild(t, installPage, overlay)
		in := loads(t, byName)
		var image string
		images, _ := overlay["images"].([]any)
		for _, i := range images {
			if m, _ := i.(map[string]any); m["name"] == "ghcr.io/gatewayapi-ssa/rollouts-plugin" {
				image = fmt.Sprintf("%v:%v", m["newName"], m["newTag"])
			}
		}
		if image == "" {
			t.Fatal("the kustomization's images: does not name the plugin's image ghcr.io/gatewayapi-ssa/rollouts-plugin: say how a private registry's copy of it is used")
		}
		inits := in.deployment.Spec.Template.Spec.InitContainers
		if len(inits) != 1 || inits[0].Image != image {
			t.Errorf("the init containers %+v, want one, of the image the kustomization's images: names (%s)", inits, image)
		}
		applies(t, objects)
	})

	t.Run("init container and route cluster", func(t *testing.T) {
		overlay := docOverlay(t, "install/argo-rollouts")
		overlay["components"] = append(overlay["components"].([]any),
			"https://github.com/gatewayapi-ssa/rollouts-plugin//install/argo-rollouts-route-cluster?ref=v0.1.0")
		objects, byName := kustomizeBuild(t, installPage, overlay)
		in := loads(t, byName)
		if e, _ := in.entry(); !slices.ContainsFunc(e.Args, func(a string) bool { return strings.HasPrefix(a, "-route-cluster=") }) {
			t.Errorf("the entry has no -route-cluster: %v", e.Args)
		}
		applies(t, objects)
	})

	t.Run("download", func(t *testing.T) {
		overlay := docOverlay(t, "install/argo-rollouts-https")
		_, byName := kustomizeBuild(t, installPage, overlay)
		in, err := installOf(byName)
		if err != nil {
			t.Fatal(err)
		}
		if p := loadProblems(in); len(p) != 1 || !strings.Contains(p[0], "sha256") {
			t.Errorf("as the page writes it, with %q, the build was not refused for its sha256 alone: %q", shaPlaceholder, p)
		}
		// The reader puts in the sha256 of the file, as make release prints it.
		sum := sha256.Sum256([]byte("rollouts-gatewayapi-ssa-linux-amd64"))
		filled := fillIn(t, overlay, shaPlaceholder, hex.EncodeToString(sum[:]))
		objects, byName := kustomizeBuild(t, installPage, filled)
		if in := loads(t, byName); len(in.deployment.Spec.Template.Spec.InitContainers) > 0 {
			t.Errorf("the download pulls an image too: %+v", in.deployment.Spec.Template.Spec.InitContainers)
		}
		applies(t, objects)
	})

	t.Run("download without the reader's patch", func(t *testing.T) {
		overlay := docOverlay(t, "install/argo-rollouts-https")
		delete(overlay, "patches")
		objects, byName := kustomizeBuild(t, installPage, overlay)
		in, err := installOf(byName)
		if err != nil {
			t.Fatal(err)
		}
		if p := loadProblems(in); len(p) != 2 {
			t.Errorf("the Component alone: want its key and its sha256 refused, got %q", p)
		}
		var refused bool
		for _, err := range applyObjects(c, objects) {
			if strings.Contains(err.Error(), "ConfigMap argo-rollouts/argo-rollouts-config") && strings.Contains(err.Error(), "sha256-unset") {
				refused = true
				t.Logf("refused, as it must be: %v", err)
			}
		}
		if !refused {
			t.Error("the apiserver took install/argo-rollouts-https's ConfigMap without the reader's patch: its key sha256-unset:… must make it refuse it")
		}
	})
}

// docOverlay is the kustomization of docs/install.md whose components
// name this repository's folder component (and no other of install/).
func docOverlay(t *testing.T, component string) map[string]any {
	t.Helper()
	var found []map[string]any
	for _, k := range gitopstest.DocObjects(t, installPage, "Kustomization") {
		var folders []string
		components, _ := k["components"].([]any)
		for _, c := range components {
			if m := installComponent.FindStringSubmatch(fmt.Sprint(c)); m != nil {
				folders = append(folders, m[1])
			}
		}
		if slices.Equal(folders, []string{component}) {
			found = append(found, k)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s has %d kustomizations with the one Component %s, want one", installPage, len(found), component)
	}
	return found[0]
}

// copyOverlay is a deep copy of overlay.
func copyOverlay(t *testing.T, overlay map[string]any) map[string]any {
	t.Helper()
	data, err := json.Marshal(overlay)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// fillIn is overlay with placeholder, which must be in one of its strings
// once, replaced by value, as a reader fills it in.
func fillIn(t *testing.T, overlay map[string]any, placeholder, value string) map[string]any {
	t.Helper()
	out := copyOverlay(t, overlay)
	n := 0
	var walk func(v any) any
	walk = func(v any) any {
		switch v := v.(type) {
		case string:
			n += strings.Count(v, placeholder)
			return strings.ReplaceAll(v, placeholder, value)
		case map[string]any:
			for k, e := range v {
				v[k] = walk(e)
			}
		case []any:
			for i, e := range v {
				v[i] = walk(e)
			}
		}
		return v
	}
	walk(out)
	if n != 1 {
		t.Fatalf("the kustomization has %q %d times, want once", placeholder, n)
	}
	return out
}

// The kustomization of docs/quickstart-gke-fleet.md, built the same way with
// both of its Components (install/argo-rollouts-https and
// install/argo-rollouts-route-cluster) and applied (so its patch must remove
// the https Component's guard key): the entry downloads the plugin over
// https with the route cluster's args, no init container pulls an image,
// the controller's Deployment mounts the route clusters' Secret where those
// args name the kubeconfig, and, with the sha256 the reader fills in, the
// plugin would load.
func TestQuickstartOverlay(t *testing.T) {
	page := filepath.Join(gitopstest.RepoRoot(), "docs", "quickstart-gke-fleet.md")
	byName := buildOverlay(t, page)
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
	var overlay map[string]any
	gitopstest.DocObject(t, page, "Kustomization", &overlay)
	sum := sha256.Sum256([]byte("rollouts-gatewayapi-ssa-linux-amd64"))
	_, filled := kustomizeBuild(t, page, fillIn(t, overlay, "<the sha256 make release printed for linux/amd64>", hex.EncodeToString(sum[:])))
	in, err := installOf(filled)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range append(loadProblems(in), routeClusterProblems(in)...) {
		t.Errorf("the controller would not load the plugin: %s", p)
	}
	if inits := in.deployment.Spec.Template.Spec.InitContainers; len(inits) > 0 {
		t.Errorf("the quickstart downloads the plugin, yet its build has init containers: %+v", inits)
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
// (kustomizeBuild), applies every object to a real apiserver, and returns
// the objects by kind and name.
func buildOverlay(t *testing.T, page string) map[string]*unstructured.Unstructured {
	t.Helper()
	var overlay map[string]any
	gitopstest.DocObject(t, page, "Kustomization", &overlay)
	objects, byName := kustomizeBuild(t, page, overlay)
	d := gitopstest.StartDriver(t)
	d.Namespace(t, "argo-rollouts")
	c, err := client.New(d.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range applyObjects(c, objects) {
		t.Error(err)
	}
	return byName
}

// kustomizeBuild builds overlay, a kustomization of page, with kustomize,
// Argo Rollouts' install.yaml and this repository's install/ folders read
// locally, checks what every such build must hold (argo-rollouts-config
// with Argo Rollouts' own labels, install/base's RBAC bound to the
// controller's ServiceAccount), and returns the objects in order and by
// kind and name. overlay is not changed.
func kustomizeBuild(t *testing.T, page string, overlay map[string]any) ([]*unstructured.Unstructured, map[string]*unstructured.Unstructured) {
	t.Helper()
	overlay = copyOverlay(t, overlay)
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
	return objects, byName
}

// applyObjects server-side applies every object of a build but the CRDs
// (the control plane has them), and returns what the apiserver refused.
func applyObjects(c client.Client, objects []*unstructured.Unstructured) []error {
	var errs []error
	for _, u := range objects {
		if u.GetKind() == "CustomResourceDefinition" {
			continue
		}
		if err := c.Patch(context.Background(), u, client.Apply, client.FieldOwner("kustomize-build"), client.ForceOwnership); err != nil {
			errs = append(errs, fmt.Errorf("applying %s %s/%s from the build: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err))
		}
	}
	return errs
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
