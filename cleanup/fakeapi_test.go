package cleanup

import (
	"slices"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	"sigs.k8s.io/yaml"

	"github.com/gatewayapi-ssa/rollouts-plugin/kube"
	"github.com/gatewayapi-ssa/rollouts-plugin/kube/kubetest"
	"github.com/gatewayapi-ssa/rollouts-plugin/orchestrator"
	"github.com/gatewayapi-ssa/rollouts-plugin/ssa"
)

// fieldManager is the plugin's field manager in these tests.
const fieldManager = ssa.DefaultFieldManager

// fakeCluster is the cluster the Cleaner works on in these tests: package
// kubetest's apiserver holds the routes and the Rollouts, and the Cleaner
// reaches it with the clients the plugin builds (dynamic for the lists and
// the release, the Gateway API client for the reads and applies).
type fakeCluster struct {
	*kubetest.Server
	t   *testing.T
	dyn dynamic.Interface
	gw  gateway.Interface
}

// write is one write the cluster got.
type write struct {
	// Verb is "apply" (a server-side apply), "patch" (a JSON patch: the
	// release) or the request's method.
	Verb string
	// Route is "<namespace>/<name>" of what was written.
	Route string
	// Object is what was sent.
	Object map[string]any
}

// newFakeCluster holds the given objects: routes and Rollouts.
func newFakeCluster(t *testing.T, objects ...*unstructured.Unstructured) *fakeCluster {
	t.Helper()
	f := &fakeCluster{Server: kubetest.New(t), t: t}
	f.Add(objects...)
	// No client-side rate limit: a sweep asks discovery about every route
	// kind the fake does not serve, every time.
	cfg := &rest.Config{Host: f.URL(), QPS: -1}
	var err error
	if f.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if f.gw, err = gateway.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	return f
}

// Writes are the writes so far, in order.
func (f *fakeCluster) Writes() []write {
	f.t.Helper()
	var out []write
	for _, r := range f.Server.Writes() {
		w := write{Verb: strings.ToLower(r.Method)}
		switch r.ContentType {
		case "application/apply-patch+yaml":
			w.Verb = "apply"
		case "application/json-patch+json":
			w.Verb = "patch"
		}
		parts := strings.Split(strings.Trim(r.Path, "/"), "/") // ..., namespaces, ns, resource, name
		if n := len(parts); n >= 4 && parts[n-4] == "namespaces" {
			w.Route = parts[n-3] + "/" + parts[n-1]
		}
		if w.Verb == "apply" {
			u := &unstructured.Unstructured{}
			data, err := yaml.YAMLToJSON([]byte(r.Body))
			if err == nil {
				err = u.UnmarshalJSON(data) // integers stay integers
			}
			if err != nil {
				f.t.Fatalf("%s: %v", r, err)
			}
			w.Object = u.Object
		}
		out = append(out, w)
	}
	return out
}

// Written lists the writes as "<verb> <namespace>/<name>", sorted.
func (f *fakeCluster) Written() []string {
	var out []string
	for _, w := range f.Writes() {
		out = append(out, w.Verb+" "+w.Route)
	}
	slices.Sort(out)
	return out
}

// Route is the route as the cluster holds it now.
func (f *fakeCluster) Route(namespace, name string) *unstructured.Unstructured {
	f.t.Helper()
	u := f.Server.Route(namespace, name)
	if u == nil {
		f.t.Fatalf("the cluster holds no route %s/%s", namespace, name)
	}
	return u
}

// newCleaner is the Cleaner of the cleanup command and of the plugin's
// sweep, built as they build it, on the fake cluster.
func newCleaner(t *testing.T, f *fakeCluster) *Cleaner {
	t.Helper()
	log := logrus.NewEntry(logrus.New())
	log.Logger.SetOutput(kubetest.Log(t))
	log.Logger.SetLevel(logrus.WarnLevel)
	reader := kube.NewCluster(f.gw.GatewayV1().RESTClient(), log)
	orch := orchestrator.New(reader, ssa.NewWriter(f.gw, f.dyn, fieldManager, log), nil, nil, log, orchestrator.Bounds{WritesPerCall: 1})
	return &Cleaner{Dynamic: f.dyn, Versions: reader, Orchestrator: orch, FieldManager: fieldManager, Log: log}
}
