package orchestrator

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/gatewayapi-ssa/rollouts-plugin/kube"
	"github.com/gatewayapi-ssa/rollouts-plugin/kube/kubetest"
	"github.com/gatewayapi-ssa/rollouts-plugin/rollout"
	"github.com/gatewayapi-ssa/rollouts-plugin/ssa"
)

// reachRoute is HTTPRoute web of a namespace, splitting between the
// Services of Rollout mallory/web, with a header rule the argoproj-labs
// plugin wrote (so a call reads that plugin's ConfigMap, configMap).
const reachRoute = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: web
  namespace: NS
  resourceVersion: "5"
  labels: {app: web}
  managedFields:
  - manager: gatewayAPI
    operation: Update
    apiVersion: gateway.networking.k8s.io/v1
    time: "2025-03-04T05:06:07Z"
    fieldsType: FieldsV1
    fieldsV1: {"f:spec": {"f:rules": {}}}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /}}]
    backendRefs:
    - {group: "", kind: Service, name: web-stable, namespace: mallory, port: 80, weight: 100}
    - {group: "", kind: Service, name: web-canary, namespace: mallory, port: 80, weight: 0}
  - matches: [{headers: [{name: x-beta, value: "1"}]}]
    backendRefs:
    - {group: "", kind: Service, name: web-canary, namespace: mallory, port: 80}
`

// partnerGrant lets Rollouts of mallory reach the HTTPRoutes of partner.
const partnerGrant = `apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: rollouts-of-mallory, namespace: partner}
spec:
  from: [{group: argoproj.io, kind: Rollout, namespace: mallory}]
  to: [{group: gateway.networking.k8s.io, kind: HTTPRoute}]
`

// reachService is Service NAME of mallory.
const reachService = `apiVersion: v1
kind: Service
metadata: {name: NAME, namespace: mallory}
`

// FuzzRequestsStayInReach: whatever config Rollout mallory/web gives (the
// names of its routes, their namespace, its configMap, an experiment
// Service), every request the plugin sends for SetWeight or
// RemoveManagedRoutes stays within the Rollout's namespace, a namespace
// that grants it (partner), or the paths every call may read (discovery,
// OpenAPI, ReferenceGrants, the cluster's name, access reviews, Leases of
// the controller's namespace, Events); and route shop/web, which grants
// nothing, is never changed. Issue 57: "../../shop/httproutes/web" moved it.
func FuzzRequestsStayInReach(f *testing.F) {
	long := strings.Repeat("a", 254)
	for _, seed := range []struct {
		config, experiment string
		remove             bool
	}{
		{`{"httpRoute": "web"}`, "", false},
		{`{"httpRoute": "web", "namespace": "partner"}`, "", false},
		{`{"httpRoute": "web", "namespace": "shop"}`, "", false},
		{`{"httpRouteSelector": {"matchLabels": {"app": "web"}}}`, "exp", false},
		{`{"httpRoute": "web"}`, "exp", false},
		{`{"httpRoute": "../../shop/httproutes/web"}`, "", false},
		{`{"httpRoutes": [{"name": "../../shop/httproutes/web"}]}`, "", false},
		{`{"httpRoute": "web", "configMap": "../../../../../../api/v1/namespaces/kube-system/secrets/db"}`, "", false},
		{`{"httpRoute": "web", "configMap": "../../shop/configmaps/cm"}`, "", true},
		{`{"httpRoute": "..%2F..%2Fshop%2Fhttproutes%2Fweb"}`, "", false},
		{`{"httpRoute": "..%2f..%2fshop%2fhttproutes%2fweb"}`, "", true},
		{`{"httpRoute": "/apis/gateway.networking.k8s.io/v1/namespaces/shop/httproutes/web"}`, "", false},
		{`{"httpRoute": "web/../../../shop/httproutes/web"}`, "", false},
		{`{"httpRoute": ".."}`, "", false},
		{`{"httpRoute": "` + long + `"}`, "", false},
		{`{"httpRoutes": [{"name": "` + long + `"}]}`, "", false},
		{`{"httpRoute": "web", "configMap": "` + long + `"}`, "", false},
		{`{"httpRoute": "web"}`, "../../../shop/services/web", false},
		{`{"httpRoute": "web", "namespace": "../shop"}`, "", false},
	} {
		f.Add(seed.config, seed.experiment, seed.remove)
	}
	f.Fuzz(func(t *testing.T, config, experiment string, remove bool) {
		objects := []string{partnerGrant}
		for _, ns := range []string{"mallory", "partner", "shop"} {
			objects = append(objects, strings.ReplaceAll(reachRoute, "NS", ns))
		}
		for _, name := range []string{"web-stable", "web-canary", "exp"} {
			objects = append(objects, strings.ReplaceAll(reachService, "NAME", name))
		}
		api := kubetest.New(t, objects...)
		for _, ns := range []string{"mallory", "partner"} {
			api.Serve("/api/v1/namespaces/"+ns+"/configmaps", map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": "argo-gatewayapi-configmap", "namespace": ns}, "data": map[string]any{}})
		}
		shop := api.Route("shop", "web").DeepCopy()

		if err := runInReach(t, api, config, experiment, remove); err != nil {
			t.Logf("the call failed: %v", err)
		}
		for _, r := range api.Requests() {
			if !inReach(r.Path, "mallory", "partner") {
				t.Errorf("a request outside the Rollout's reach: %s", r)
			}
		}
		if diff := cmp.Diff(shop.Object, api.Route("shop", "web").Object); diff != "" {
			t.Errorf("route shop/web changed (-before +after):\n%s", diff)
		}
	})
}

// runInReach makes one call of Rollout mallory/web with config as its plugin
// config: SetWeight(30), with experiment Service experiment at 10 if it is
// not "", or RemoveManagedRoutes; the watch caches are closed when it returns.
func runInReach(t *testing.T, api *kubetest.Server, config, experiment string, remove bool) error {
	cfg := &rest.Config{Host: api.URL(), QPS: -1}
	gw, err := gateway.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	cluster := kube.NewCluster(gw.GatewayV1().RESTClient(), logrus.NewEntry(log))
	defer cluster.Close()
	o := New(cluster, ssa.NewWriter(gw, dyn, fieldManager, logrus.NewEntry(log)), nil, nil, logrus.NewEntry(log), Bounds{WritesPerCall: 1, CallTimeout: 5 * time.Second})

	ro := &v1alpha1.Rollout{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mallory", Name: "web"},
		Spec: v1alpha1.RolloutSpec{Strategy: v1alpha1.RolloutStrategy{Canary: &v1alpha1.CanaryStrategy{
			StableService: "web-stable", CanaryService: "web-canary",
			TrafficRouting: &v1alpha1.RolloutTrafficRouting{
				Plugins:       map[string]json.RawMessage{rollout.DefaultPluginName: json.RawMessage(config)},
				ManagedRoutes: []v1alpha1.MangedRoutes{{Name: "beta"}},
			},
		}}},
	}
	l := rollout.Label{Method: rollout.SetWeight, Weight: 30}
	if experiment != "" {
		l.Additional = []v1alpha1.WeightDestination{{ServiceName: experiment, Weight: 10}}
	}
	if remove {
		l = rollout.Label{Method: rollout.RemoveManagedRoutes}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p := rollout.Process{PluginName: rollout.DefaultPluginName, FieldManager: fieldManager}
	c, err := rollout.Decode(p, ro, l)
	if err != nil {
		return err
	}
	return o.Run(ctx, c)
}

// inReach says whether a request of path stays within a Rollout of
// namespace rollouts, granted the namespaces granted: a path of one of
// those namespaces, or one every call may send, whatever it reaches.
func inReach(path, rollouts string, granted ...string) bool {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for _, p := range parts {
		if p == "" || p == "." || p == ".." {
			return false
		}
	}
	switch {
	case path == "/api" || path == "/apis" || strings.HasPrefix(path, "/openapi/v3"):
		return true // discovery and the OpenAPI documents
	case parts[0] == "apis" && len(parts) <= 3:
		return true // /apis/<group>, /apis/<group>/<version>
	case path == "/api/v1/namespaces/kube-system" || parts[0] == "apis" && parts[1] == "about.k8s.io":
		return true // the cluster's name
	case parts[0] == "apis" && parts[1] == "authorization.k8s.io":
		return true // access reviews
	}
	// /api/v1/namespaces/<ns>/<resource>... or /apis/<group>/<version>/namespaces/<ns>/<resource>...
	rest := parts[2:]
	if parts[0] == "apis" {
		rest = parts[3:]
	}
	if len(rest) < 3 || rest[0] != "namespaces" {
		return false
	}
	ns, resource, object := rest[1], rest[2], rest[3:]
	switch {
	case resource == "referencegrants" && len(object) == 0:
		return true // the grants that decide the reach
	case resource == "leases" && ns == "argo-rollouts", resource == "events":
		return true
	}
	return ns == rollouts || slices.Contains(granted, ns)
}
