package cleanup

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	"sigs.k8s.io/yaml"

	"github.com/gatewayapi-ssa/rollouts-plugin/kube"
	"github.com/gatewayapi-ssa/rollouts-plugin/orchestrator"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/ssa"
)

// fieldManager is the plugin's field manager in these tests.
const fieldManager = ssa.DefaultFieldManager

var httpRoutes = routes.HTTPRoute.GVR("v1")

// fakeCluster is the cluster the Cleaner works on in these tests. client-go's
// fake dynamic client holds the routes and the Rollouts: the Cleaner lists
// and reads them with it, and the plugin's release (an Update) goes through
// it. The Gateway API client's server-side applies, which client-go's fakes
// cannot take, go to a server on 127.0.0.1 that keeps what they apply in the
// same store. Every write, either way, is recorded.
type fakeCluster struct {
	t   *testing.T
	dyn *dynamicfake.FakeDynamicClient
	gw  gateway.Interface
	srv *httptest.Server

	mu     sync.Mutex
	rv     int
	writes []write
}

// write is one write the cluster got.
type write struct {
	// Verb is "apply" (a PATCH of the Gateway API client) or what the
	// dynamic client did ("update", "delete", ...).
	Verb string
	// Route is "<namespace>/<name>" of what was written: a route, or a
	// Rollout, Service...
	Route string
	// Object is what was sent.
	Object map[string]any
}

// newFakeCluster holds the given objects: routes and Rollouts.
func newFakeCluster(t *testing.T, objects ...*unstructured.Unstructured) *fakeCluster {
	t.Helper()
	var objs []runtime.Object
	for _, o := range objects {
		objs = append(objs, o.DeepCopy())
	}
	f := &fakeCluster{t: t, rv: 100}
	f.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{httpRoutes: "HTTPRouteList", rolloutsResource: "RolloutList"}, objs...)
	f.dyn.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		switch a := a.(type) {
		case k8stesting.UpdateAction: // creates too: the two interfaces have one method set
			u := a.GetObject().(*unstructured.Unstructured)
			f.record(write{Verb: a.GetVerb(), Route: a.GetNamespace() + "/" + u.GetName(), Object: u.DeepCopy().Object})
			f.mu.Lock()
			f.rv++
			u.SetResourceVersion(strconv.Itoa(f.rv)) // as the apiserver stores it
			f.mu.Unlock()
		case k8stesting.PatchAction:
			f.record(write{Verb: a.GetVerb(), Route: a.GetNamespace() + "/" + a.GetName()})
		case k8stesting.DeleteAction:
			f.record(write{Verb: a.GetVerb(), Route: a.GetNamespace() + "/" + a.GetName()})
		}
		return false, nil, nil // the tracker carries it out
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(f.serve)}}
	f.srv.Start()
	t.Cleanup(f.srv.Close)
	if f.gw, err = gateway.NewForConfig(&rest.Config{Host: f.srv.URL}); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fakeCluster) record(w write) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = append(f.writes, w)
}

// Writes are the writes so far, in order.
func (f *fakeCluster) Writes() []write {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.writes)
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
	obj, err := f.dyn.Tracker().Get(httpRoutes, namespace, name)
	if err != nil {
		f.t.Fatal(err)
	}
	return obj.(*unstructured.Unstructured).DeepCopy()
}

// serve takes the Gateway API client's requests on routes: GET, and PATCH
// as a server-side apply that sets spec.rules and the plugin's label and
// claims annotation as applied (one it leaves out goes), and keeps its
// managedFields entry; with dryRun, nothing is kept.
func (f *fakeCluster) serve(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/") // apis, group, v1, namespaces, ns, httproutes, name
	if len(parts) != 7 || parts[1] != routes.Group || parts[2] != "v1" || parts[5] != "httproutes" {
		f.t.Errorf("the fake cluster does not serve %s %s", r.Method, r.URL)
		http.NotFound(w, r)
		return
	}
	ns, name := parts[4], parts[6]
	f.mu.Lock()
	defer f.mu.Unlock()
	obj, err := f.dyn.Tracker().Get(httpRoutes, ns, name)
	if err != nil {
		f.status(w, err)
		return
	}
	live := obj.(*unstructured.Unstructured).DeepCopy()
	switch r.Method {
	case http.MethodGet:
		f.answer(w, live)
	case http.MethodPatch:
		body, _ := io.ReadAll(r.Body)
		applied := &unstructured.Unstructured{}
		data, err := yaml.YAMLToJSON(body)
		if err == nil {
			err = applied.UnmarshalJSON(data) // integers stay integers
		}
		if err != nil {
			f.status(w, apierrors.NewBadRequest(err.Error()))
			return
		}
		f.writes = append(f.writes, write{Verb: "apply", Route: ns + "/" + name, Object: applied.Object})
		if rv := applied.GetResourceVersion(); rv != "" && rv != live.GetResourceVersion() {
			f.status(w, apierrors.NewConflict(httpRoutes.GroupResource(), name, fmt.Errorf("the object has been modified")))
			return
		}
		rules, _, _ := unstructured.NestedSlice(applied.Object, "spec", "rules")
		_ = unstructured.SetNestedSlice(live.Object, rules, "spec", "rules")
		live.SetLabels(replaced(live.GetLabels(), applied.GetLabels(), "rollouts.argoproj.io/gatewayapi-canary"))
		live.SetAnnotations(replaced(live.GetAnnotations(), applied.GetAnnotations(), routes.ClaimsAnnotation))
		if len(r.URL.Query()["dryRun"]) == 0 {
			f.rv++
			live.SetResourceVersion(strconv.Itoa(f.rv))
			if err := f.dyn.Tracker().Update(httpRoutes, live, ns); err != nil {
				f.status(w, err)
				return
			}
		}
		f.answer(w, live)
	default:
		f.t.Errorf("the fake cluster does not serve %s of a route", r.Method)
		f.status(w, apierrors.NewMethodNotSupported(httpRoutes.GroupResource(), r.Method))
	}
}

// replaced is values with key as applied: set, or gone.
func replaced(values, applied map[string]string, key string) map[string]string {
	out := map[string]string{}
	for k, v := range values {
		if k != key {
			out[k] = v
		}
	}
	if v, ok := applied[key]; ok {
		out[key] = v
	}
	return out
}

func (f *fakeCluster) answer(w http.ResponseWriter, u *unstructured.Unstructured) {
	data, err := u.MarshalJSON()
	if err != nil {
		f.t.Errorf("fake cluster: %v", err)
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(data)
}

func (f *fakeCluster) status(w http.ResponseWriter, err error) {
	st := apierrors.NewInternalError(err).ErrStatus
	if se, ok := err.(apierrors.APIStatus); ok {
		st = se.Status()
	}
	st.Kind, st.APIVersion = "Status", "v1"
	data, _ := json.Marshal(st)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.Code))
	_, _ = w.Write(data)
}

// servedV1 is a cluster's discovery that serves HTTPRoutes in v1 and no
// other route kind.
type servedV1 struct{}

func (servedV1) ServedVersion(_ context.Context, kind routes.Kind) (string, error) {
	if kind == routes.HTTPRoute {
		return "v1", nil
	}
	return "", fmt.Errorf("the cluster serves %s in none of the versions this plugin supports", kind)
}

// newCleaner is the Cleaner of the cleanup command and of the plugin's
// sweep, built as they build it, on the fake cluster.
func newCleaner(t *testing.T, f *fakeCluster) *Cleaner {
	t.Helper()
	log := logrus.NewEntry(logrus.New())
	log.Logger.SetOutput(testWriter{t})
	log.Logger.SetLevel(logrus.WarnLevel)
	reader := kube.NewCluster(f.gw.GatewayV1().RESTClient(), log)
	orch := orchestrator.New(reader, ssa.NewWriter(f.gw, f.dyn, fieldManager, log), nil, nil, log, orchestrator.Bounds{WritesPerCall: 1})
	return &Cleaner{Dynamic: f.dyn, Versions: servedV1{}, Orchestrator: orch, FieldManager: fieldManager, Log: log}
}

// testWriter sends the Cleaner's log to the test's.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
