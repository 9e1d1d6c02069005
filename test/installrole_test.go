package test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// asInstalled applies install/base to c as a platform team does and
// returns a kubeconfig of the ServiceAccount it binds
// (argo-rollouts/argo-rollouts, the controller's): the plugin then has
// exactly the install's rights.
func asInstalled(t *testing.T, c *harness.Cluster) string {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "argo-rollouts", Namespace: harness.ControllerNamespace}}
	if _, err := c.Kube.CoreV1().ServiceAccounts(sa.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	applyKustomization(t, c, filepath.Join(harness.RepoRoot(), "install", "base"))
	kubeconfig, rec, err := c.KubeconfigForServiceAccount(sa.Namespace, sa.Name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rec.Close)
	return kubeconfig
}

// applyKustomization applies the files of the kustomization in dir to c,
// as a platform team applies install/'s (manager platform-team).
func applyKustomization(t *testing.T, c *harness.Cluster, dir string) {
	t.Helper()
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Kube.Discovery()))
	for _, f := range kustomizationFiles(t, dir) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs, err := splitYAML(string(data))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, doc := range docs {
			if err := applyDocAs(c, mapper, doc, "platform-team"); err != nil {
				t.Fatalf("%s: %s %s: %v", f, doc.GetKind(), doc.GetName(), err)
			}
		}
	}
}

// With exactly install/base's ClusterRole, in one cluster that serves the
// Multi-Cluster Services API (MCS in one cluster, AWS Lattice): an
// experiment step on a route whose backends are ServiceImports adds the
// experiment's ServiceImports and takes them away; a route in another
// namespace is refused for want of a ReferenceGrant, not of a permission,
// and walks once it is granted; the claims on the cluster's own routes
// name no cluster.
func TestTheInstallsRoleCoversServiceImportsAndGrants(t *testing.T) {
	t.Parallel()
	c, err := harness.StartConfigCluster(harness.Standard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	p, log := startPluginWith(t, pluginBin, asInstalled(t, c))
	ctx := context.Background()
	const group = "multicluster.x-k8s.io"
	importOf := func(ns, name string) {
		t.Helper()
		create(t, c, ns, fmt.Sprintf(`apiVersion: %s/v1beta1
kind: ServiceImport
metadata: {name: %s}
spec: {type: ClusterSetIP, ports: [{port: 80, protocol: TCP}]}
`, group, name))
	}
	shop, shared := "shop", "shared"
	for _, ns := range []string{shop, shared} {
		if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []string{"stable", "canary", "exp-baseline", "exp-canary"} {
		service(t, c, shop, s, "http:80")
		importOf(shop, s)
	}
	route := fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: store}
spec:
  rules:
  - backendRefs:
    - {group: %[1]s, kind: ServiceImport, name: stable, namespace: shop, port: 80, weight: 100}
    - {group: %[1]s, kind: ServiceImport, name: canary, namespace: shop, port: 80, weight: 0}
`, group)
	created := create(t, c, shop, route)
	ro := rollout(shop, `{"httpRoute": "store"}`)
	if err := p.SetWeight(ro, 10, experimentDestinations(5, 5)); err.HasError() {
		t.Fatalf("an experiment on ServiceImport backends with the install's role: %s", err.ErrorString)
	}
	want := map[string]int64{"0/stable": 80, "0/canary": 10, "0/exp-baseline": 5, "0/exp-canary": 5}
	walked := get(t, c, "v1", "HTTPRoute", shop, "store")
	if diff := cmp.Diff(want, weights(walked)); diff != "" {
		t.Errorf("the experiment (-want +got):\n%s", diff)
	}
	if got := claimsOn(t, walked)[shop+"/demo"]; got.Cluster != "" || got.ClusterUID != "" {
		t.Errorf("the claim on the cluster's own route names cluster %q (UID %q), want none", got.Cluster, got.ClusterUID)
	}
	for _, w := range []int32{10, 0} {
		if err := p.SetWeight(ro, w, nil); err.HasError() {
			t.Fatal(err.ErrorString)
		}
	}
	if diff := cmp.Diff(userView(t, created), userView(t, get(t, c, "v1", "HTTPRoute", shop, "store"))); diff != "" {
		t.Errorf("the route does not end as it began (-begin +end):\n%s", diff)
	}

	create(t, c, shared, route)
	other := rollout(shop, `{"httpRoute": "store", "namespace": "shared"}`)
	if err := p.SetWeight(other, 10, nil); !strings.Contains(err.ErrorString, "namespace shared does not grant Rollouts of namespace shop its HTTPRoutes") ||
		strings.Contains(err.ErrorString, "forbidden") {
		t.Errorf("a route of an ungranted namespace with the install's role: %q, want the grant named and no permission missing", err.ErrorString)
	}
	create(t, c, shared, rolloutGrant(shop, "store"))
	eventually(t, "the grant to take effect", func() bool { return !p.SetWeight(other, 10, nil).HasError() })
	if err := p.SetWeight(other, 0, nil); err.HasError() {
		t.Fatal(err.ErrorString)
	}
	if n := log.Count("forbidden"); n > 0 {
		t.Errorf("%d log lines say forbidden with the install's role", n)
	}
}
