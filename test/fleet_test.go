package test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// clusterPropertyCRD is KEP-2149's ClusterProperty (about.k8s.io), whose
// object cluster.clusterset.k8s.io names a member cluster of a clusterset.
const clusterPropertyCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: clusterproperties.about.k8s.io
  annotations: {api-approved.kubernetes.io: "https://github.com/kubernetes/enhancements/pull/2149"}
spec:
  group: about.k8s.io
  scope: Cluster
  names: {kind: ClusterProperty, listKind: ClusterPropertyList, plural: clusterproperties, singular: clusterproperty}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [value]
            properties:
              value: {type: string, maxLength: 128000, minLength: 1}
`

// startMember starts a member cluster of a fleet: its own etcd and
// kube-apiserver, with namespace ns for its Rollout.
func startMember(t *testing.T, ns string) *harness.Cluster {
	t.Helper()
	c, err := harness.Start(harness.Standard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	if _, err := c.Kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return c
}

// nameByClusterProperty gives the member cluster c the ClusterProperty
// cluster.clusterset.k8s.io with value name.
func nameByClusterProperty(t *testing.T, c *harness.Cluster, name string) {
	t.Helper()
	create(t, c, "", clusterPropertyCRD)
	gvr := schema.GroupVersionResource{Group: "about.k8s.io", Version: "v1alpha1", Resource: "clusterproperties"}
	prop := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "about.k8s.io/v1alpha1", "kind": "ClusterProperty",
		"metadata": map[string]any{"name": "cluster.clusterset.k8s.io"}, "spec": map[string]any{"value": name}}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := c.Dynamic.Resource(gvr).Create(context.Background(), prop, metav1.CreateOptions{})
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("creating ClusterProperty cluster.clusterset.k8s.io: %v", err)
		}
		time.Sleep(200 * time.Millisecond) // the CRD is established a moment after it is created
	}
}

// claimsOn are the claims a route records.
func claimsOn(t *testing.T, u *unstructured.Unstructured) routes.Claims {
	t.Helper()
	claims, err := routes.ReadClaims(routes.Route{Annotations: u.GetAnnotations()})
	if err != nil {
		t.Fatal(err)
	}
	return claims
}

// A fleet of two member clusters runs the same Rollout (store/demo) against
// one HTTPRoute in the fleet's config cluster, as a GKE fleet does. One
// member is named by its ClusterProperty, the other by -cluster-name. While
// member-a's Rollout walks the route, member-b's is refused, naming
// member-a, and the route is left as it is; once member-a's has ended,
// member-b's walks. Each member's sweep of the config cluster takes back
// only its own claims.
func TestAFleetMemberDoesNotTakeARouteAnotherMemberWalks(t *testing.T) {
	t.Parallel()
	const ns = "store"
	f := startFleet(t)
	f.namespace(t, ns)
	for _, s := range []string{"stable", "canary", "static"} {
		f.importService(t, "net.gke.io", ns, s)
	}
	created := create(t, f.config, ns, storeRoute("net.gke.io"))
	memberA, memberB := startMember(t, ns), startMember(t, ns)
	nameByClusterProperty(t, memberA, "member-a")
	// Both members' plugins sweep the claims of deleted Rollouts, the
	// config cluster's among them; the Rollout exists in both, for now.
	routeCluster := []string{"-route-cluster", "fleet=" + f.routeKubeconfig, "-route-namespaces", "fleet=" + ns,
		"-cleanup-deleted-rollouts", "-cleanup-interval=1s"}
	for _, m := range []*harness.Cluster{memberA, memberB} {
		create(t, m, ns, rolloutObject("demo", "store"))
	}
	a, _ := startPluginWith(t, pluginBin, memberA.Kubeconfig, routeCluster...)
	b, _ := startPluginWith(t, pluginBin, memberB.Kubeconfig, append(routeCluster, "-cluster-name", "member-b")...)
	ro := rollout(ns, `{"httpRoute": "store", "cluster": "fleet"}`)
	ro.Spec.Strategy.Canary.TrafficRouting.ManagedRoutes = []v1alpha1.MangedRoutes{{Name: "beta"}}
	route := func() *unstructured.Unstructured { return get(t, f.config, "v1", "HTTPRoute", ns, "store") }
	weighted := func(u *unstructured.Unstructured) map[string]int64 {
		w := weights(u)
		return map[string]int64{"stable": w["0/stable"], "canary": w["0/canary"]}
	}

	if err := a.SetWeight(ro, 30, nil); err.HasError() {
		t.Fatal(err.ErrorString)
	}
	walked := route()
	if got := claimsOn(t, walked)[ns+"/demo"].Cluster; got != "member-a" {
		t.Errorf("member-a's claim names cluster %q, want member-a (its ClusterProperty)", got)
	}
	for name, call := range map[string]func() rpcErr{
		"SetWeight(30)":  func() rpcErr { return b.SetWeight(ro, 30, nil) },
		"SetWeight(10)":  func() rpcErr { return b.SetWeight(ro, 10, nil) },
		"SetHeaderRoute": func() rpcErr { return b.SetHeaderRoute(ro, headerStep("beta", "X-Canary", "yes")) },
	} {
		err := call()
		want := `in route cluster "fleet": nothing was written: HTTPRoute store/store: conflict: rollout store/demo of cluster member-a is in progress on this route, ` +
			"so the same rollout of this cluster (member-b) leaves it as it is until that one has ended"
		if !strings.Contains(err.ErrorString, want) {
			t.Errorf("member-b's %s while member-a walks: %q, want it to say %q", name, err.ErrorString, want)
		}
	}
	if err := b.RemoveManagedRoutes(ro); err.HasError() {
		t.Errorf("member-b's RemoveManagedRoutes, with nothing of its own on the route: %s", err.ErrorString)
	}
	if diff := cmp.Diff(stored(t, walked), stored(t, route())); diff != "" {
		t.Errorf("member-b's calls changed the route member-a walks (-before +after):\n%s", diff)
	}

	// member-a's rollout ends; member-b's walks.
	if err := a.SetWeight(ro, 0, nil); err.HasError() {
		t.Fatal(err.ErrorString)
	}
	if err := b.SetWeight(ro, 30, nil); err.HasError() {
		t.Fatalf("member-b's SetWeight once member-a's rollout has ended: %s", err.ErrorString)
	}
	if diff := cmp.Diff(map[string]int64{"stable": 70, "canary": 30}, weighted(route())); diff != "" {
		t.Errorf("member-b's walk (-want +got):\n%s", diff)
	}
	if got := claimsOn(t, route())[ns+"/demo"].Cluster; got != "member-b" {
		t.Errorf("member-b's claim names cluster %q, want member-b (its -cluster-name)", got)
	}
	if err := a.SetWeight(ro, 50, nil); !strings.Contains(err.ErrorString, "of cluster member-b is in progress on this route") {
		t.Errorf("member-a's SetWeight while member-b walks: %q, want a conflict naming member-b", err.ErrorString)
	}

	// member-a's Rollout is deleted: member-a's sweep of the config cluster
	// leaves member-b's claim (of a Rollout of the same name) alone. Once
	// member-b's is deleted too, member-b's sweep takes its claim back.
	deleteIn(t, memberA, ns, "demo")
	time.Sleep(4 * time.Second) // four sweeps of member-a, two of them an interval after the Rollout was seen gone
	if got := claimsOn(t, route())[ns+"/demo"]; got.Cluster != "member-b" || got.CanaryWeight != 30 {
		t.Fatalf("member-a's sweep took member-b's claim: %+v", got)
	}
	deleteIn(t, memberB, ns, "demo")
	eventuallyWithin(t, 20*time.Second, "member-b's sweep to take its claim back", func() bool {
		u := route()
		_, claimed := u.GetAnnotations()[claimsAnnotation]
		return !claimed && !ownsRules(u, fieldManager)
	})
	end := route()
	if diff := cmp.Diff(userView(t, created), userView(t, end)); diff != "" {
		t.Errorf("the route after both walks differs from the route before them (-before +after):\n%s", diff)
	}
	pluginOwnsNothing(t, end)
}

// deleteIn deletes Rollout ns/name in cluster c.
func deleteIn(t *testing.T, c *harness.Cluster, ns, name string) {
	t.Helper()
	gvr := schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}
	if err := c.Dynamic.Resource(gvr).Namespace(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Two members of a fleet given the same -cluster-name are told apart by the
// UID of their kube-system, which the claims record beside the name: while
// one member walks the route, the other's calls are refused, saying that
// two members share the name, and its sweep leaves the claim of its
// namesake alone once its own Rollout is gone. A member whose name changes
// under a claim (its plugin restarted with another -cluster-name) is
// refused, saying from which name to which.
func TestFleetMembersOfOneNameAreToldApart(t *testing.T) {
	t.Parallel()
	const ns = "store"
	f := startFleet(t)
	f.namespace(t, ns)
	for _, s := range []string{"stable", "canary", "static"} {
		f.importService(t, "net.gke.io", ns, s)
	}
	create(t, f.config, ns, storeRoute("net.gke.io"))
	memberA, memberB := startMember(t, ns), startMember(t, ns)
	for _, m := range []*harness.Cluster{memberA, memberB} {
		create(t, m, ns, rolloutObject("demo", "store"))
	}
	uidOf := func(c *harness.Cluster) string {
		t.Helper()
		n, err := c.Kube.CoreV1().Namespaces().Get(context.Background(), "kube-system", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return string(n.UID)
	}
	routeCluster := []string{"-route-cluster", "fleet=" + f.routeKubeconfig, "-route-namespaces", "fleet=" + ns, "-cluster-name", "member-x"}
	a, _ := startPluginWith(t, pluginBin, memberA.Kubeconfig, routeCluster...)
	b, _ := startPluginWith(t, pluginBin, memberB.Kubeconfig, append(routeCluster, "-cleanup-deleted-rollouts", "-cleanup-interval=1s")...)
	ro := rollout(ns, `{"httpRoute": "store", "cluster": "fleet"}`)
	route := func() *unstructured.Unstructured { return get(t, f.config, "v1", "HTTPRoute", ns, "store") }

	if err := a.SetWeight(ro, 30, nil); err.HasError() {
		t.Fatal(err.ErrorString)
	}
	walked := route()
	want := routes.Claim{Cluster: "member-x", ClusterUID: uidOf(memberA), CanaryWeight: 30}
	got := claimsOn(t, walked)[ns+"/demo"]
	if diff := cmp.Diff(want, routes.Claim{Cluster: got.Cluster, ClusterUID: got.ClusterUID, CanaryWeight: got.CanaryWeight}); diff != "" {
		t.Errorf("member-a's claim (-want +got):\n%s", diff)
	}
	shared := "two members of the fleet share the name member-x (kube-system UIDs " + uidOf(memberA) + " and " + uidOf(memberB) + ")"
	if err := b.SetWeight(ro, 10, nil); !strings.Contains(err.ErrorString, shared) {
		t.Errorf("member-b's SetWeight under member-a's name: %q, want it to say %q", err.ErrorString, shared)
	}
	// member-b's Rollout is deleted: its sweep leaves its namesake's claim.
	deleteIn(t, memberB, ns, "demo")
	time.Sleep(4 * time.Second) // four sweeps, two of them an interval after the Rollout was seen gone
	if diff := cmp.Diff(stored(t, walked), stored(t, route())); diff != "" {
		t.Errorf("member-b changed the route member-a walks (-before +after):\n%s", diff)
	}

	// member-a's plugin comes back under another name.
	renamed, _ := startPluginWith(t, pluginBin, memberA.Kubeconfig, "-route-cluster", "fleet="+f.routeKubeconfig, "-route-namespaces", "fleet="+ns, "-cluster-name", "member-y")
	changed := "the name of this cluster changed from member-x to member-y (-cluster-name)"
	if err := renamed.SetWeight(ro, 50, nil); !strings.Contains(err.ErrorString, changed) {
		t.Errorf("member-a's SetWeight under a new name: %q, want it to say %q", err.ErrorString, changed)
	}
	if err := a.SetWeight(ro, 0, nil); err.HasError() {
		t.Fatalf("member-a's SetWeight(0) under its name: %s", err.ErrorString)
	}
}
