package cli

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/gatewayapi-ssa/rollouts-plugin/kube/kubetest"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// undoneDemo is what undoing Rollout shop/demo's claim changes on
// midCanaryRoute, as cleanup lists it.
const undoneDemo = "rule 0 Service shop/stable 70→100; rule 0 Service shop/canary 30→0; − rule beta; " +
	"label rollouts.argoproj.io/gatewayapi-canary no longer applied; annotation gatewayapi-ssa.dev/claims no longer applied"

// Cleanup of a Rollout that still exists is refused, with what to do
// instead, and writes nothing: the Rollout's controller would put it all back.
func TestCleanupRefusesARolloutThatExists(t *testing.T) {
	api := kubetest.New(t, midCanaryRoute, demoRollout)
	code, out, errOut := runCLI(t, "cleanup", "--kubeconfig", api.Kubeconfig, "--peers-namespace=", "shop/demo")
	if code != 1 || out != "" {
		t.Errorf("cleanup of an existing Rollout: exit %d, stdout %q; want 1 and nothing", code, out)
	}
	want := "Rollout shop/demo exists: abort it (kubectl argo rollouts abort) or delete it first; its controller would undo the cleanup\n"
	if diff := cmp.Diff(want, errOut); diff != "" {
		t.Errorf("the refusal (-want +got):\n%s", diff)
	}
	if w := api.Writes(); len(w) > 0 {
		t.Errorf("the refused cleanup wrote: %v", w)
	}
}

// When the apiserver cannot say whether the Rollout exists, cleanup does
// nothing and says why.
func TestCleanupWhenTheRolloutCannotBeRead(t *testing.T) {
	api := kubetest.New(t, midCanaryRoute)
	api.AnswerRollouts(http.StatusInternalServerError)
	code, out, errOut := runCLI(t, "cleanup", "--kubeconfig", api.Kubeconfig, "--peers-namespace=", "shop/demo")
	if code != 1 || out != "" {
		t.Errorf("exit %d, stdout %q; want 1 and nothing", code, out)
	}
	if !strings.HasPrefix(errOut, "reading Rollout shop/demo: ") || !strings.Contains(errOut, "the fake apiserver answers so") {
		t.Errorf("the error does not say the Rollout could not be read: %q", errOut)
	}
	if w := api.Writes(); len(w) > 0 {
		t.Errorf("cleanup wrote: %v", w)
	}
}

// A dry run of the cleanup of deleted Rollout shop/demo says, route by
// route, what would change, and writes nothing.
func TestCleanupDryRun(t *testing.T) {
	api := kubetest.New(t, midCanaryRoute)
	code, out, errOut := runCLI(t, "cleanup", "--kubeconfig", api.Kubeconfig, "--peers-namespace=", "--dry-run", "shop/demo")
	if code != 0 || errOut != "" {
		t.Errorf("cleanup --dry-run: exit %d, stderr %q; want 0 and nothing", code, errOut)
	}
	want := "HTTPRoute shop/web: would change: " + undoneDemo + "\n"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("the dry run's report (-want +got):\n%s", diff)
	}
	if w := api.Writes(); len(w) > 0 {
		t.Errorf("the dry run wrote: %v", w)
	}
}

// The cleanup of deleted Rollout shop/demo puts route web back as it was
// before the rollout, in one server-side apply, then gives up the plugin's
// ownership with one Update that keeps every value; run again, it finds
// nothing to do.
func TestCleanupUndoesADeletedRolloutsClaim(t *testing.T) {
	api := kubetest.New(t, midCanaryRoute)
	code, out, errOut := runCLI(t, "cleanup", "--kubeconfig", api.Kubeconfig, "--peers-namespace=", "-n", "shop", "shop/demo")
	if code != 0 || errOut != "" {
		t.Errorf("cleanup: exit %d, stderr %q; want 0 and nothing", code, errOut)
	}
	if diff := cmp.Diff("HTTPRoute shop/web: undone: "+undoneDemo+"\n", out); diff != "" {
		t.Errorf("the cleanup's report (-want +got):\n%s", diff)
	}

	const path = gatewayV1 + "/namespaces/shop/httproutes/web"
	var sent []string
	for _, w := range api.Writes() {
		sent = append(sent, w.Method+" "+w.Path)
	}
	if diff := cmp.Diff([]string{"PATCH " + path, "PATCH " + path}, sent); diff != "" {
		t.Fatalf("the writes (-want +got):\n%s", diff)
	}
	apply := api.Writes()[0]
	if q, _ := url.ParseQuery(apply.Query); q.Get("fieldManager") != "argo-rollouts-gatewayapi" || q.Get("force") != "true" || q.Has("dryRun") {
		t.Errorf("the apply is not a forced apply of the plugin's field manager: ?%s", apply.Query)
	}
	// The apply sends the rules as before the rollout, and neither the
	// plugin's label nor its claims: it stops applying them.
	var applied map[string]any
	if err := yaml.Unmarshal([]byte(apply.Body), &applied); err != nil {
		t.Fatal(err)
	}
	metadata, _ := applied["metadata"].(map[string]any)
	if labels, annotations := metadata["labels"], metadata["annotations"]; labels != nil || annotations != nil {
		t.Errorf("the apply still sends labels %v and annotations %v", labels, annotations)
	}
	if diff := cmp.Diff(specRules(t, plainRoute), applied["spec"].(map[string]any)["rules"]); diff != "" {
		t.Errorf("the applied rules are not the rules before the rollout (-before +applied):\n%s", diff)
	}

	after := api.Route("shop", "web")
	got, err := routes.FromUnstructured(after)
	if err != nil {
		t.Fatal(err)
	}
	if got.ManagedFields.OwnsAnything("argo-rollouts-gatewayapi") {
		t.Errorf("after the cleanup the plugin still owns fields: %+v", got.ManagedFields.Entries())
	}
	if diff := cmp.Diff(map[string]string{"owner": "shop-team@example.com"}, after.GetAnnotations()); diff != "" {
		t.Errorf("annotations after the cleanup (-want +got):\n%s", diff)
	}

	code, out, _ = runCLI(t, "cleanup", "--kubeconfig", api.Kubeconfig, "--peers-namespace=", "shop/demo")
	if code != 0 || out != "no route carries a claim of Rollout shop/demo: nothing to do\n" {
		t.Errorf("cleanup again: exit %d, %q; want 0 and nothing to do", code, out)
	}
	if n := len(api.Writes()); n != 2 {
		t.Errorf("cleanup again wrote: %d writes in all, want the first cleanup's 2", n)
	}
}

// specRules is spec.rules of a route as JSON reads it, with the defaults
// the plugin's apply spells out (group "" and kind Service).
func specRules(t *testing.T, route string) any {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(route), &u.Object); err != nil {
		t.Fatal(err)
	}
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	data, err := json.Marshal(rules)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// The command keeps a Lease among the plugin's processes while it writes,
// so that the controller's plugin writes those routes guarded by their
// resourceVersion meanwhile. A user without the Lease Role is told so, and
// the cleanup goes on, every write guarded by its resourceVersion.
func TestCleanupWithoutTheLeaseRoleSaysSoAndCleansUp(t *testing.T) {
	api := kubetest.New(t, midCanaryRoute)
	code, out, errOut := runCLI(t, "cleanup", "--kubeconfig", api.Kubeconfig, "shop/demo")
	if code != 0 || !strings.Contains(out, "undone:") {
		t.Errorf("cleanup: exit %d, %q; want 0 and the route undone", code, out)
	}
	for _, want := range []string{"cannot keep a Lease in namespace argo-rollouts", "grant the plugin's ServiceAccount get, list, watch, create, patch and delete on leases.coordination.k8s.io"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr does not say %q:\n%s", want, errOut)
		}
	}
	for _, w := range api.Writes() {
		if strings.Contains(w.Query, "fieldManager") && w.Method == http.MethodPatch && strings.Contains(w.Path, "httproutes") &&
			strings.Contains(w.Body, `"kind"`) && !strings.Contains(w.Body, "resourceVersion") {
			t.Errorf("an apply without a resourceVersion while the command keeps no Lease: %s", w.Body)
		}
	}
}

// midCanaryRouteOf is midCanaryRoute with Rollout shop/demo's claim made by
// cluster (as the plugin records it since claims name their cluster).
func midCanaryRouteOf(cluster string) string {
	return strings.Replace(midCanaryRoute, `{"shop/demo":{`, `{"shop/demo":{"cluster":"`+cluster+`",`, 1)
}

// clusterProperty is the ClusterProperty that names a member cluster of a
// clusterset (KEP-2149).
func clusterProperty(name string) string {
	return `apiVersion: about.k8s.io/v1alpha1
kind: ClusterProperty
metadata: {name: cluster.clusterset.k8s.io}
spec: {value: ` + name + `}
`
}

// In a fleet, the same Rollout runs in several member clusters against one
// route, and each claim records its cluster. The command names the
// kubeconfig's cluster as the plugin names its own (its ClusterProperty,
// else --cluster-name, else the UID of its namespace kube-system) and takes
// back only that cluster's claim; a route whose claim is another cluster's
// is left alone, and said so.
func TestCleanupTakesBackOnlyItsClustersClaim(t *testing.T) {
	leftAlone := func(named string) string {
		return "HTTPRoute shop/web: left alone: its claim of Rollout shop/demo is cluster member-b's, not this cluster's (" + named + ")\n" +
			"no route carries a claim of Rollout shop/demo of this cluster: nothing to do\n"
	}
	undone := "HTTPRoute shop/web: undone: " + undoneDemo + "\n"
	for name, tc := range map[string]struct {
		objects []string
		flags   []string
		want    string
		writes  int
	}{
		"another cluster's claim": {objects: []string{midCanaryRouteOf("member-b")}, flags: []string{"--cluster-name", "member-a"},
			want: leftAlone("member-a, named by -cluster-name")},
		"another cluster's, this one named by its kube-system": {objects: []string{midCanaryRouteOf("member-b")},
			want: leftAlone(kubetest.KubeSystemUID + ", named by the UID of namespace kube-system")},
		"this cluster's claim": {objects: []string{midCanaryRouteOf("member-a")}, flags: []string{"--cluster-name", "member-a"},
			want: undone, writes: 2},
		"this cluster's, named by its kube-system": {objects: []string{midCanaryRouteOf(kubetest.KubeSystemUID)},
			want: undone, writes: 2},
		"its ClusterProperty names it before --cluster-name": {objects: []string{midCanaryRouteOf("member-b"), clusterProperty("member-b")},
			flags: []string{"--cluster-name", "member-a"}, want: undone, writes: 2},
		"a claim that names no cluster": {objects: []string{midCanaryRoute}, flags: []string{"--cluster-name", "member-a"},
			want: undone, writes: 2},
	} {
		t.Run(name, func(t *testing.T) {
			api := kubetest.New(t, tc.objects...)
			args := append([]string{"cleanup", "--kubeconfig", api.Kubeconfig, "--peers-namespace="}, tc.flags...)
			code, out, errOut := runCLI(t, append(args, "shop/demo")...)
			if code != 0 || errOut != "" {
				t.Errorf("exit %d, stderr %q; want 0 and nothing", code, errOut)
			}
			if diff := cmp.Diff(tc.want, out); diff != "" {
				t.Errorf("the report (-want +got):\n%s", diff)
			}
			if n := len(api.Writes()); n != tc.writes {
				t.Errorf("%d writes, want %d: %v", n, tc.writes, api.Writes())
			}
		})
	}
}

// edgeRoute is route edge/web mid-canary for Rollout shop/demo, whose
// Services are in namespace shop: 30 % to canary.
const edgeRoute = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: web
  namespace: edge
  resourceVersion: "7"
  labels: {rollouts.argoproj.io/gatewayapi-canary: in-progress}
  annotations:
    gatewayapi-ssa.dev/claims: '{"shop/demo":{"canaryWeight":30,"weights":[{"rule":0,"service":"shop/stable","weight":70},{"rule":0,"service":"shop/canary","weight":30}]}}'
  managedFields:
  - manager: argo-rollouts-gatewayapi
    operation: Apply
    apiVersion: gateway.networking.k8s.io/v1
    time: "2025-03-04T06:07:08Z"
    fieldsType: FieldsV1
    fieldsV1:
      "f:metadata":
        "f:annotations": {"f:gatewayapi-ssa.dev/claims": {}}
        "f:labels": {"f:rollouts.argoproj.io/gatewayapi-canary": {}}
      "f:spec": {"f:rules": {}}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /}}]
    backendRefs:
    - {group: "", kind: Service, name: stable, namespace: shop, port: 80, weight: 70}
    - {group: "", kind: Service, name: canary, namespace: shop, port: 80, weight: 30}
`

// edgeGrantsShop lets Rollouts of namespace shop reach the HTTPRoutes of
// namespace edge.
const edgeGrantsShop = `apiVersion: gateway.networking.k8s.io/v1
kind: ReferenceGrant
metadata: {name: rollouts-of-shop, namespace: edge}
spec:
  from: [{group: argoproj.io, kind: Rollout, namespace: shop}]
  to: [{group: gateway.networking.k8s.io, kind: HTTPRoute}]
`

// A Rollout reaches a route in another namespace only where that namespace
// grants it, and so does its cleanup: without the ReferenceGrant the route
// is reported with the grant to create (exit 1) and not written;
// --require-reference-grants=false, as the plugin's flag, lets it through.
func TestCleanupOfARouteInAnotherNamespace(t *testing.T) {
	undone := "HTTPRoute edge/web: undone: rule 0 Service shop/stable 70→100; rule 0 Service shop/canary 30→0; " +
		"label rollouts.argoproj.io/gatewayapi-canary no longer applied; annotation gatewayapi-ssa.dev/claims no longer applied\n"
	for name, tc := range map[string]struct {
		objects []string
		flags   []string
		code    int
		want    string
		writes  int
	}{
		"not granted": {objects: []string{edgeRoute}, code: 1,
			want: "error: " + (&routes.NotGrantedError{Rollouts: "shop", Namespace: "edge", Kind: routes.HTTPRoute, Name: "web"}).Error() + "\n"},
		"granted":             {objects: []string{edgeRoute, edgeGrantsShop}, want: undone, writes: 2},
		"grants not required": {objects: []string{edgeRoute}, flags: []string{"--require-reference-grants=false"}, want: undone, writes: 2},
	} {
		t.Run(name, func(t *testing.T) {
			api := kubetest.New(t, tc.objects...)
			args := append([]string{"cleanup", "--kubeconfig", api.Kubeconfig, "--peers-namespace="}, tc.flags...)
			code, out, errOut := runCLI(t, append(args, "shop/demo")...)
			if code != tc.code || errOut != "" {
				t.Errorf("exit %d, stderr %q; want %d and nothing", code, errOut, tc.code)
			}
			if diff := cmp.Diff(tc.want, out); diff != "" {
				t.Errorf("the report (-want +got):\n%s", diff)
			}
			if n := len(api.Writes()); n != tc.writes {
				t.Errorf("%d writes, want %d: %v", n, tc.writes, api.Writes())
			}
		})
	}
}

// The usage names the flags that say whose claims the command takes back,
// and where.
func TestCleanupUsageNamesTheClusterAndGrantFlags(t *testing.T) {
	_, _, errOut := runCLI(t, "cleanup")
	for _, want := range []string{"-cluster-name string", "-require-reference-grants", "ReferenceGrant", "another\ncluster's"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("the usage does not say %q:\n%s", want, errOut)
		}
	}
}
