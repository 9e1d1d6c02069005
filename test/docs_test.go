package test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// Every YAML example in README.md, docs/ and docs/providers/ (```yaml blocks and .yaml files)
// is applied to a real apiserver with the Gateway API and Argo Rollouts CRDs,
// so a documented object the apiserver would refuse fails this test.
//
// Serial: it installs CRDs into the shared cluster, which changes discovery
// under every other test's plugin.
func TestDocumentedYAMLApplies(t *testing.T) {
	root := harness.RepoRoot()
	sources := map[string][]string{}
	mds, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	providers, _ := filepath.Glob(filepath.Join(root, "docs", "providers", "*.md"))
	mds = append(mds, providers...)
	for _, md := range append([]string{filepath.Join(root, "README.md")}, mds...) {
		data, err := os.ReadFile(md)
		if err != nil {
			t.Fatal(err)
		}
		sources[md] = yamlBlocks(string(data))
	}
	files, _ := filepath.Glob(filepath.Join(root, "docs", "examples", "*.yaml"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sources[f] = []string{string(data)}
	}
	// Documented Argo CD Applications and Flux Kustomizations are checked
	// against those projects' own CRDs.
	// So are ServiceExports and ServiceImports (docs/multicluster.md), and
	// the Prometheus Operator's PodMonitors and PrometheusRules, and Google
	// Managed Prometheus's PodMonitorings (docs/metrics.md).
	for _, crds := range []func() ([]*apiextensionsv1.CustomResourceDefinition, error){harness.ArgoCDCRDs, harness.FluxCRDs, harness.MultiClusterCRDs,
		harness.PrometheusOperatorCRDs, harness.GoogleManagedPrometheusCRDs} {
		list, err := crds()
		if err != nil {
			t.Fatal(err)
		}
		// envtest waits 10 s for them by default; a loaded machine took longer.
		if _, err := envtest.InstallCRDs(standard.Config, envtest.CRDInstallOptions{CRDs: list, MaxTime: 2 * time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(standard.Kube.Discovery()))
	var applied int
	for path, blocks := range sources {
		rel, _ := filepath.Rel(root, path)
		for i, block := range blocks {
			docs, err := splitYAML(block)
			if err != nil {
				t.Errorf("%s block %d: %v", rel, i+1, err)
				continue
			}
			for _, doc := range docs {
				if doc.GroupVersionKind().Group == "kustomize.config.k8s.io" {
					continue // a kustomize build's input, not an object: test/gitops/flux builds it
				}
				if err := applyDoc(standard, mapper, doc); err != nil {
					t.Errorf("%s block %d: %v", rel, i+1, err)
				}
				applied++
			}
		}
	}
	if applied == 0 {
		t.Fatal("found no YAML in the docs")
	}
	t.Logf("applied %d documented objects", applied)
}

// yamlBlocks returns the bodies of ```yaml fences.
func yamlBlocks(md string) []string {
	var out []string
	var cur *strings.Builder
	sc := bufio.NewScanner(strings.NewReader(md))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(line) == "```yaml":
			cur = &strings.Builder{}
		case cur != nil && strings.TrimSpace(line) == "```":
			out = append(out, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	return out
}

func splitYAML(s string) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader([]byte(s))))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			return nil, err
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// applyDoc server-side applies one object, creating its namespace first.
func applyDoc(c *harness.Cluster, mapper meta.RESTMapper, u *unstructured.Unstructured) error {
	return applyDocAs(c, mapper, u, "docs-test")
}

// applyDocAs is applyDoc under the given field manager.
func applyDocAs(c *harness.Cluster, mapper meta.RESTMapper, u *unstructured.Unstructured, manager string) error {
	ctx := context.Background()
	gvk := u.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	res := c.Dynamic.Resource(m.Resource)
	data, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	// Strict: a misspelt or unknown field in the docs is an error, not a warning.
	opts := metav1.PatchOptions{FieldManager: manager, FieldValidation: "Strict"}
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		_, err = res.Patch(ctx, u.GetName(), types.ApplyPatchType, data, opts)
		return err
	}
	ns := u.GetNamespace()
	if ns == "" {
		ns = "default"
	}
	_, err = c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	_, err = res.Namespace(ns).Patch(ctx, u.GetName(), types.ApplyPatchType, data, opts)
	return err
}
