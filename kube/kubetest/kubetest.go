// Package kubetest is an apiserver for unit tests, on 127.0.0.1: enough of
// one for the commands of package cli, the Cleaner of package cleanup and
// the Orchestrator of package orchestrator to read, apply and release routes
// through client-go, as the plugin does. A test may script the answers to a
// route's applies (conflicts, what is stored), as the orchestrator's do.
// Only tests import it.
package kubetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp/cmpopts"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// Server is an apiserver for tests, on 127.0.0.1: discovery
// of gateway.networking.k8s.io/v1 (HTTPRoutes and ReferenceGrants; every
// other version of the group is not served), its OpenAPI document (every
// field), GET, LIST and watch of HTTPRoutes, server-side apply and JSON
// patch (PATCH) of them, LIST and watch of ReferenceGrants, GET and LIST of
// Rollouts, GET of Services, the ClusterProperty that names the cluster
// (about.k8s.io is not served unless one is held), namespace kube-system
// (its uid KubeSystemUID) and SelfSubjectAccessReviews (allowed). A LIST
// pages as the apiserver does (limit, continue). Any other collection a
// test needs (Gateways, GatewayClasses, ListenerSets) it serves from the
// objects given (Serve). It records every request it gets, and counts the
// watches open (AwaitWatches); a test may script the answer of any path
// (Script).
//
// Its resourceVersion is the highest of the objects it has held (1 at
// least); each write it stores takes the next one.
type Server struct {
	t   *testing.T
	srv *httptest.Server
	// Kubeconfig is a kubeconfig file that points at the server, also in
	// $KUBECONFIG for the test.
	Kubeconfig string
	// closing ends the watch streams, so that the server can close.
	closing chan struct{}

	mu sync.Mutex
	rv int
	// The objects held, by "<namespace>/<name>".
	routes, rollouts, grants map[string]*unstructured.Unstructured
	services                 map[string]bool
	// clusterProperty is the value of ClusterProperty
	// cluster.clusterset.k8s.io; "" when the fake holds none.
	clusterProperty string
	// rolloutsAnswer, when not 0, is the status of every GET and LIST of
	// Rollouts.
	rolloutsAnswer int
	// answers script the applies of a route ("<namespace>/<name>"), and
	// applied counts them.
	answers  map[string][]Answer
	applied  map[string]int
	requests []Request
	// scripts answer a path's GETs ahead of what the fake holds (Script).
	scripts map[string]scripted
	// collections are the objects Serve holds, by collection path.
	collections map[string][]map[string]any
	// open and opened count the watches open now and opened so far, per
	// path; watchChanged is told each time one opens or ends.
	open, opened map[string]int
	watchChanged chan struct{}
}

// scripted is the answer Script sets for a path.
type scripted struct {
	code int
	body string
}

// Answer is the answer to one apply of a route, given what was applied:
// the status code and the body. The body of a 200 is the route the fake
// holds from then on, at the resourceVersion the body says.
type Answer func(applied map[string]any) (code int, body any)

// Request is one request the fake got.
type Request struct {
	Method, Path string
	Query        string
	ContentType  string
	// URI, Accept and UserAgent are recorded by Answering's server only.
	// URI is the request's target as it came (RequestURI): its path and
	// query with their escapes as sent, where Path is decoded.
	URI, Accept, UserAgent string
	Body                   string
	// Found is the resourceVersion of the route the request names as the
	// fake held it when it served the request; "" for other requests.
	Found string
}

// OnTheWire has cmp compare Requests by what came on the wire: the method,
// the raw URI, the Content-Type, the Accept and the body (not Path and
// Query, which the URI holds escaped, nor the User-Agent).
var OnTheWire = cmpopts.IgnoreFields(Request{}, "Path", "Query", "UserAgent")

func (r Request) String() string {
	s := r.Method + " " + r.Path
	if r.Query != "" {
		s += "?" + r.Query
	}
	return s
}

// KubeSystemUID is the uid of namespace kube-system in the fake: what names
// its cluster where no ClusterProperty and no -cluster-name does.
const KubeSystemUID = "0d2c3e4f-kube-test-0000-kube-system0"

// New starts the fake with the given objects, as YAML documents:
// HTTPRoutes, Rollouts, Services, ReferenceGrants and ClusterProperties.
func New(t *testing.T, objects ...string) *Server {
	t.Helper()
	f := &Server{t: t, closing: make(chan struct{}), rv: 1,
		routes: map[string]*unstructured.Unstructured{}, rollouts: map[string]*unstructured.Unstructured{},
		grants: map[string]*unstructured.Unstructured{}, services: map[string]bool{},
		answers: map[string][]Answer{}, applied: map[string]int{}, scripts: map[string]scripted{},
		collections: map[string][]map[string]any{}, open: map[string]int{}, opened: map[string]int{}, watchChanged: make(chan struct{}, 1)}
	for _, doc := range objects {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("fake apiserver object: %v\n%s", err, doc)
		}
		f.Add(u)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(f.serve)}}
	f.srv.Start()
	t.Cleanup(func() {
		close(f.closing)
		f.srv.Close()
	})
	// The kubeconfig the commands read, given with --kubeconfig or, as
	// here, found in $KUBECONFIG: never a real cluster's.
	f.Kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	t.Setenv("KUBECONFIG", f.Kubeconfig)
	config := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: %q}}]
users: [{name: tester, user: {}}]
contexts: [{name: fake, context: {cluster: fake, user: tester}}]
current-context: fake
`, f.srv.URL)
	if err := os.WriteFile(f.Kubeconfig, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// Add holds the objects from now on: HTTPRoutes, Rollouts, Services,
// ReferenceGrants and the ClusterProperty cluster.clusterset.k8s.io.
func (f *Server) Add(objects ...*unstructured.Unstructured) {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, u := range objects {
		key := u.GetNamespace() + "/" + u.GetName()
		switch u.GetKind() {
		case "HTTPRoute":
			f.hold(key, u.DeepCopy())
		case "Rollout":
			f.rollouts[key] = u.DeepCopy()
		case "Service":
			f.services[key] = true
		case "ReferenceGrant":
			f.grants[key] = u.DeepCopy()
		case "ClusterProperty":
			if u.GetName() != clusterPropertyName {
				f.t.Fatalf("the fake apiserver holds only ClusterProperty %s, not %s", clusterPropertyName, u.GetName())
			}
			f.clusterProperty, _, _ = unstructured.NestedString(u.Object, "spec", "value")
		default:
			f.t.Fatalf("the fake apiserver holds no %s", u.GetKind())
		}
	}
}

// Delete holds the objects no longer (by kind, namespace and name): as if
// they were deleted.
func (f *Server) Delete(objects ...*unstructured.Unstructured) {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, u := range objects {
		key := u.GetNamespace() + "/" + u.GetName()
		switch u.GetKind() {
		case "HTTPRoute":
			delete(f.routes, key)
		case "Rollout":
			delete(f.rollouts, key)
		case "Service":
			delete(f.services, key)
		case "ReferenceGrant":
			delete(f.grants, key)
		case "ClusterProperty":
			f.clusterProperty = ""
		default:
			f.t.Fatalf("the fake apiserver holds no %s", u.GetKind())
		}
	}
}

// clusterPropertyName is the ClusterProperty that names a member cluster of
// a clusterset (KEP-2149), the one the fake serves.
const clusterPropertyName = "cluster.clusterset.k8s.io"

// hold keeps u as the route at key, and the server's resourceVersion at
// least u's.
func (f *Server) hold(key string, u *unstructured.Unstructured) {
	if rv, err := strconv.Atoi(u.GetResourceVersion()); err == nil {
		f.rv = max(f.rv, rv)
	}
	f.routes[key] = u
}

// AnswerApplies answers the applies of the route with answers from now on,
// in order: the i-th with answers[i], every one after the last with the
// last again. The route must be held; the fake then neither checks an
// apply's resourceVersion nor stores what it applies: the answers decide.
func (f *Server) AnswerApplies(namespace, name string, answers ...Answer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := namespace + "/" + name
	f.answers[key], f.applied[key] = answers, 0
}

// Script answers every GET of path with code and body (JSON) from now on,
// ahead of anything the fake serves there: an object of a kind it does not
// hold, an API group's discovery, a document, a refusal (Status). A code of
// 0 drops the script.
func (f *Server) Script(path string, code int, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if code == 0 {
		delete(f.scripts, path)
		return
	}
	f.scripts[path] = scripted{code: code, body: body}
}

// Asked counts the requests of path so far.
func (f *Server) Asked(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.requests {
		if r.Path == path {
			n++
		}
	}
	return n
}

// Status is the body of an apiserver's refusal: a Status of code and reason
// (Forbidden, NotFound).
func Status(code int, reason string) string {
	return fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":%q,"code":%d,"message":%q}`, reason, code, strings.ToLower(reason))
}

// URL is where the server listens.
func (f *Server) URL() string { return f.srv.URL }

// AnswerRollouts makes every GET and LIST of Rollouts answer code from now
// on (0: what the fake holds).
func (f *Server) AnswerRollouts(code int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rolloutsAnswer = code
}

// Requests are every request the fake got, in order.
func (f *Server) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests)
}

// Writes are the requests that would change something: every PATCH, PUT,
// POST and DELETE but the SelfSubjectAccessReviews, which only ask.
func (f *Server) Writes() []Request {
	var out []Request
	for _, r := range f.Requests() {
		if r.Method != http.MethodGet && !strings.HasSuffix(r.Path, "/selfsubjectaccessreviews") {
			out = append(out, r)
		}
	}
	return out
}

// Route is the route as the fake holds it now.
func (f *Server) Route(namespace, name string) *unstructured.Unstructured {
	f.mu.Lock()
	defer f.mu.Unlock()
	u, ok := f.routes[namespace+"/"+name]
	if !ok {
		return nil
	}
	return u.DeepCopy()
}

// Rules is a route's spec.rules, as the fake (Route) or an apiserver
// serves it; nil when it has none.
func Rules(u *unstructured.Unstructured) []any {
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	return rules
}

const gatewayV1 = "/apis/" + routes.Group + "/v1"

// serve records the request and answers it: the Gateway API group's
// paths, then every other path the fake serves.
func (f *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.requests = append(f.requests, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, ContentType: r.Header.Get("Content-Type"), Body: string(body)})
	request := len(f.requests) - 1
	f.mu.Unlock()

	f.mu.Lock()
	script, ok := f.scripts[r.URL.Path]
	f.mu.Unlock()
	if ok && r.Method == http.MethodGet {
		f.write(w, script.code, []byte(script.body))
		return
	}
	if r.Method == http.MethodGet && f.serveCollection(w, r) {
		return
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if !f.serveGatewayAPI(w, r, request, parts, body) {
		f.serveOthers(w, r, parts, body)
	}
}

// serveGatewayAPI answers a request of the Gateway API group (parts is its
// path, split; request its index among the requests): discovery and the
// OpenAPI document of v1, LIST and watch of HTTPRoutes and ReferenceGrants,
// one route, and not found for the rest of the group. It says whether it
// answered.
func (f *Server) serveGatewayAPI(w http.ResponseWriter, r *http.Request, request int, parts []string, body []byte) bool {
	path := r.URL.Path
	switch {
	case r.Method == http.MethodGet && path == gatewayV1:
		f.discovery(w)
	case r.Method == http.MethodGet && path == "/openapi/v3"+gatewayV1:
		// No route schema: the reader takes the kinds to have every field.
		f.answer(w, http.StatusOK, map[string]any{"openapi": "3.0.0", "components": map[string]any{"schemas": map[string]any{}}})
	case r.Method == http.MethodGet && strings.HasPrefix(path, gatewayV1+"/") && (len(parts) == 4 || len(parts) == 6) &&
		(parts[len(parts)-1] == "httproutes" || parts[len(parts)-1] == "referencegrants"):
		f.listGatewayAPI(w, r, parts)
	case strings.HasPrefix(path, gatewayV1+"/namespaces/") && len(parts) == 7 && parts[5] == "httproutes":
		f.route(w, r, request, parts[4], parts[6], body)
	case strings.HasPrefix(path, gatewayV1+"/"):
		f.notFound(w, schema.GroupResource{Group: routes.Group, Resource: parts[len(parts)-1]}, "")
	case strings.HasPrefix(path, "/apis/"+routes.Group+"/"):
		// Discovery of another version: not served.
		f.notFound(w, schema.GroupResource{}, "")
	default:
		return false
	}
	return true
}

// serveOthers answers a request outside the Gateway API group (parts is
// its path, split): Leases (forbidden), Rollouts, namespace kube-system,
// the ClusterProperty API, Services and SelfSubjectAccessReviews; any
// other request fails the test.
func (f *Server) serveOthers(w http.ResponseWriter, r *http.Request, parts []string, body []byte) {
	path := r.URL.Path
	switch {
	case strings.HasPrefix(path, "/apis/coordination.k8s.io/"):
		// A user without the plugin's Lease Role.
		f.status(w, apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "", errors.New("RBAC: no Role for Leases")))
	case r.Method == http.MethodGet && strings.HasPrefix(path, "/apis/argoproj.io/v1alpha1/namespaces/") && len(parts) == 7 && parts[5] == "rollouts":
		f.rollout(w, parts[4], parts[6])
	case r.Method == http.MethodGet && (path == "/apis/argoproj.io/v1alpha1/rollouts" ||
		strings.HasPrefix(path, "/apis/argoproj.io/v1alpha1/namespaces/") && len(parts) == 6 && parts[5] == "rollouts"):
		f.listRollouts(w, r, parts)
	case r.Method == http.MethodGet && path == "/api/v1/namespaces/kube-system":
		f.answer(w, http.StatusOK, map[string]any{"apiVersion": "v1", "kind": "Namespace",
			"metadata": map[string]any{"name": "kube-system", "uid": KubeSystemUID, "resourceVersion": "1"}})
	case r.Method == http.MethodGet && (path == "/apis/about.k8s.io" || strings.HasPrefix(path, "/apis/about.k8s.io/")):
		f.about(w, path)
	case r.Method == http.MethodGet && strings.HasPrefix(path, "/api/v1/namespaces/") && len(parts) == 6 && parts[4] == "services":
		f.service(w, parts[3], parts[5])
	case r.Method == http.MethodPost && path == "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews":
		f.accessReview(w, r, body)
	default:
		f.t.Errorf("the fake apiserver does not serve %s %s", r.Method, r.URL)
		f.notFound(w, schema.GroupResource{}, "")
	}
}

// discovery serves the discovery of gateway.networking.k8s.io/v1:
// HTTPRoutes and ReferenceGrants.
func (f *Server) discovery(w http.ResponseWriter) {
	f.answer(w, http.StatusOK, metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: routes.Group + "/v1",
		APIResources: []metav1.APIResource{{Name: "httproutes", SingularName: "httproute", Namespaced: true, Kind: "HTTPRoute",
			Verbs: metav1.Verbs{"delete", "get", "list", "patch", "update", "watch"}},
			{Name: "referencegrants", SingularName: "referencegrant", Namespaced: true, Kind: "ReferenceGrant",
				Verbs: metav1.Verbs{"delete", "get", "list", "patch", "update", "watch"}}},
	})
}

// listGatewayAPI serves a LIST or a watch of HTTPRoutes or ReferenceGrants
// (the last element of parts), of every namespace or of one.
func (f *Server) listGatewayAPI(w http.ResponseWriter, r *http.Request, parts []string) {
	ns := ""
	if len(parts) == 6 { // apis, group, v1, namespaces, ns, httproutes
		ns = parts[4]
	}
	kind, store := "HTTPRoute", f.routes
	if parts[len(parts)-1] == "referencegrants" {
		kind, store = "ReferenceGrant", f.grants
	}
	if r.URL.Query().Get("watch") == "true" {
		f.watch(w, r, kind, store, ns)
		return
	}
	f.answer(w, http.StatusOK, f.list(kind, store, ns, r.URL.Query()))
}

// listRollouts serves a LIST of Rollouts, of every namespace or of one: the
// Rollouts, or, with rolloutsAnswer set, that status.
func (f *Server) listRollouts(w http.ResponseWriter, r *http.Request, parts []string) {
	ns := ""
	if len(parts) == 6 {
		ns = parts[4]
	}
	f.mu.Lock()
	code := f.rolloutsAnswer
	f.mu.Unlock()
	if code != 0 {
		f.status(w, apierrors.NewGenericServerResponse(code, http.MethodGet, schema.GroupResource{Group: "argoproj.io", Resource: "rollouts"}, "", "the fake apiserver answers so", 0, false))
		return
	}
	f.answer(w, http.StatusOK, f.list("Rollout", f.rollouts, ns, r.URL.Query()))
}

// service serves a GET of a Service: one port, http 80, or not found.
func (f *Server) service(w http.ResponseWriter, namespace, name string) {
	f.mu.Lock()
	exists := f.services[namespace+"/"+name]
	f.mu.Unlock()
	if !exists {
		f.notFound(w, schema.GroupResource{Resource: "services"}, name)
		return
	}
	f.answer(w, http.StatusOK, map[string]any{"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec":     map[string]any{"ports": []any{map[string]any{"name": "http", "port": 80}}}})
}

// accessReview answers a SelfSubjectAccessReview: allowed.
func (f *Server) accessReview(w http.ResponseWriter, r *http.Request, body []byte) {
	// Sent as protobuf, like every built-in type; the answer may be JSON.
	review := &authorizationv1.SelfSubjectAccessReview{}
	if _, _, err := kubescheme.Codecs.UniversalDeserializer().Decode(body, nil, review); err != nil {
		f.t.Errorf("a SelfSubjectAccessReview the fake cannot read (%s): %v", r.Header.Get("Content-Type"), err)
		f.status(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	review.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "the fake apiserver allows everything"}
	f.answer(w, http.StatusCreated, review)
}

func (f *Server) answer(w http.ResponseWriter, code int, v any) {
	f.write(w, code, f.encode(v))
}

// encode is v as JSON.
func (f *Server) encode(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		f.t.Errorf("fake apiserver: %v", err)
	}
	return data
}

// write answers code with data, JSON.
func (f *Server) write(w http.ResponseWriter, code int, data []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(data)
}

func (f *Server) status(w http.ResponseWriter, err *apierrors.StatusError) {
	st := err.ErrStatus
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	f.answer(w, int(st.Code), st)
}

func (f *Server) notFound(w http.ResponseWriter, gr schema.GroupResource, name string) {
	f.status(w, apierrors.NewNotFound(gr, name))
}

// rollout serves a GET of a Rollout: the Rollout, not found, or, with
// rolloutsAnswer set, that status.
func (f *Server) rollout(w http.ResponseWriter, namespace, name string) {
	gr := schema.GroupResource{Group: "argoproj.io", Resource: "rollouts"}
	f.mu.Lock()
	u, code := f.rollouts[namespace+"/"+name], f.rolloutsAnswer
	f.mu.Unlock()
	switch {
	case code != 0:
		f.status(w, apierrors.NewGenericServerResponse(code, http.MethodGet, gr, name, "the fake apiserver answers so", 0, false))
	case u == nil:
		f.notFound(w, gr, name)
	default:
		f.answer(w, http.StatusOK, served(u, "argoproj.io/v1alpha1", "3"))
	}
}

// served is u as the fake serves it: with apiVersion, and a
// resourceVersion (rv when u has none).
func served(u *unstructured.Unstructured, apiVersion, rv string) map[string]any {
	out := u.DeepCopy()
	out.SetAPIVersion(apiVersion)
	if out.GetResourceVersion() == "" {
		out.SetResourceVersion(rv)
	}
	return out.Object
}

// apiVersions are the versions the fake serves each kind it lists in.
var apiVersions = map[string]string{"HTTPRoute": routes.Group + "/v1", "ReferenceGrant": routes.Group + "/v1", "Rollout": "argoproj.io/v1alpha1"}

// list is the LIST of the objects of kind in store, in namespace ("" for
// all), sorted by namespace and name; with limit, one page of them from
// where continue says, and the continue of the next page while any is
// left. The token is the key of the page's last object: the fake's own
// choice, as the apiserver's token is its own.
func (f *Server) list(kind string, store map[string]*unstructured.Unstructured, namespace string, q url.Values) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	limit, _ := strconv.Atoi(q.Get("limit"))
	after := q.Get("continue")
	items := []any{}
	meta := map[string]any{"resourceVersion": strconv.Itoa(f.rv)}
	for _, key := range slices.Sorted(maps.Keys(store)) {
		u := store[key]
		if (namespace != "" && u.GetNamespace() != namespace) || (after != "" && key <= after) {
			continue
		}
		if limit > 0 && len(items) == limit {
			meta["continue"] = after
			break
		}
		items = append(items, served(u, apiVersions[kind], "1"))
		after = key
	}
	return map[string]any{"apiVersion": apiVersions[kind], "kind": kind + "List", "metadata": meta, "items": items}
}

// about serves the ClusterProperty API (about.k8s.io, KEP-2149): its group
// and the ClusterProperty the fake holds; not served while it holds none.
func (f *Server) about(w http.ResponseWriter, path string) {
	f.mu.Lock()
	value := f.clusterProperty
	f.mu.Unlock()
	gv := metav1.GroupVersionForDiscovery{GroupVersion: "about.k8s.io/v1alpha1", Version: "v1alpha1"}
	switch {
	case value == "":
		f.notFound(w, schema.GroupResource{}, "")
	case path == "/apis/about.k8s.io":
		f.answer(w, http.StatusOK, metav1.APIGroup{TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"},
			Name: "about.k8s.io", Versions: []metav1.GroupVersionForDiscovery{gv}, PreferredVersion: gv})
	case path == "/apis/about.k8s.io/v1alpha1/clusterproperties/"+clusterPropertyName:
		f.answer(w, http.StatusOK, map[string]any{"apiVersion": gv.GroupVersion, "kind": "ClusterProperty",
			"metadata": map[string]any{"name": clusterPropertyName}, "spec": map[string]any{"value": value}})
	default:
		f.notFound(w, schema.GroupResource{Group: "about.k8s.io", Resource: "clusterproperties"}, "")
	}
}

// watch streams the objects of kind in store as ADDED events when asked
// for the initial events (a watch list), then a bookmark that ends them,
// then nothing until the client or the test goes.
func (f *Server) watch(w http.ResponseWriter, r *http.Request, kind string, store map[string]*unstructured.Unstructured, namespace string) {
	list := f.list(kind, store, namespace, nil)
	f.stream(w, r, list["items"].([]any), list["metadata"].(map[string]any)["resourceVersion"],
		map[string]any{"apiVersion": apiVersions[kind], "kind": kind})
}

// stream answers a watch of a list of items at resourceVersion rv: with
// sendInitialEvents, an ADDED event per item and the bookmark that ends them
// (of the type typeMeta says, when it is known); then it holds the watch
// open.
func (f *Server) stream(w http.ResponseWriter, r *http.Request, items []any, rv any, typeMeta map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if r.URL.Query().Get("sendInitialEvents") == "true" {
		enc := json.NewEncoder(w)
		for _, item := range items {
			_ = enc.Encode(map[string]any{"type": "ADDED", "object": item})
		}
		bookmark := maps.Clone(typeMeta)
		bookmark["metadata"] = map[string]any{"resourceVersion": rv, "annotations": map[string]any{metav1.InitialEventsAnnotationKey: "true"}}
		_ = enc.Encode(map[string]any{"type": "BOOKMARK", "object": bookmark})
	}
	f.keepOpen(w, r)
}

// keepOpen flushes a watch's initial events and holds the watch open, counted
// (AwaitWatches), until its client or the server ends it.
func (f *Server) keepOpen(w http.ResponseWriter, r *http.Request) {
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
	f.watching(r.URL.Path, 1)
	defer f.watching(r.URL.Path, -1)
	select {
	case <-r.Context().Done():
	case <-f.closing:
	}
}

// watching counts a watch of path that opens (1) or ends (-1).
func (f *Server) watching(path string, n int) {
	f.mu.Lock()
	f.open[path] += n
	if n > 0 {
		f.opened[path] += n
	}
	f.mu.Unlock()
	select {
	case f.watchChanged <- struct{}{}:
	default:
	}
}

// AwaitWatches waits until cond holds of the watches open now and opened
// so far, per path, checking each time one opens or ends; after 30 s it
// fails the test, naming what it waited for.
func (f *Server) AwaitWatches(what string, cond func(open, opened map[string]int) bool) {
	f.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		f.mu.Lock()
		ok := cond(maps.Clone(f.open), maps.Clone(f.opened))
		open := fmt.Sprint(f.open)
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-f.watchChanged:
		case <-deadline:
			f.t.Fatalf("waited 30 s for %s; open watches: %s", what, open)
		}
	}
}

// Serve holds objects (as the apiserver serves them) under the collection
// path, e.g. /apis/gateway.networking.k8s.io/v1/namespaces/shop/gateways,
// for a kind the fake does not hold itself or in place of what it holds
// there: the collection's LIST and watch (its initial events, then held
// open) and each object's GET. The fake's resourceVersion becomes the
// objects' where theirs is higher.
func (f *Server) Serve(collection string, objects ...map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.collections[collection] = objects
	for _, o := range objects {
		meta, _ := o["metadata"].(map[string]any)
		rv, _ := meta["resourceVersion"].(string)
		if n, err := strconv.Atoi(rv); err == nil && n > f.rv {
			f.rv = n
		}
	}
}

// serveCollection answers a GET of a collection Serve holds, or of one of
// its objects; it says whether it answered.
func (f *Server) serveCollection(w http.ResponseWriter, r *http.Request) bool {
	path := r.URL.Path
	f.mu.Lock()
	items, isCollection := f.collections[path]
	i := strings.LastIndex(path, "/")
	parent, name := path[:i], path[i+1:]
	inParent, isObject := f.collections[parent]
	rv := strconv.Itoa(f.rv)
	f.mu.Unlock()
	switch {
	case isCollection && r.URL.Query().Get("watch") != "true":
		f.answer(w, http.StatusOK, map[string]any{"metadata": map[string]any{"resourceVersion": rv}, "items": items})
	case isCollection:
		all := make([]any, len(items))
		for i, o := range items {
			all[i] = o
		}
		f.stream(w, r, all, rv, map[string]any{})
	case isObject:
		for _, o := range inParent {
			if meta, _ := o["metadata"].(map[string]any); meta["name"] == name {
				f.answer(w, http.StatusOK, o)
				return true
			}
		}
		gr := schema.GroupResource{Resource: parent[strings.LastIndex(parent, "/")+1:]}
		if group, ok := strings.CutPrefix(path, "/apis/"); ok {
			gr.Group, _, _ = strings.Cut(group, "/")
		}
		f.notFound(w, gr, name)
	default:
		return false
	}
	return true
}

// httpRoutes is the resource of the routes the fake holds.
var httpRoutes = schema.GroupResource{Group: routes.Group, Resource: "httproutes"}

// route serves one route, the request-th the fake got: GET, and PATCH: a
// server-side apply (the applied spec.rules, labels and annotations replace
// what the field manager applied before; with dryRun, nothing is kept; or
// as the test scripted it), or a JSON patch (the release).
func (f *Server) route(w http.ResponseWriter, r *http.Request, request int, namespace, name string, body []byte) {
	gr := httpRoutes
	key := namespace + "/" + name
	f.mu.Lock()
	defer f.mu.Unlock()
	live, ok := f.routes[key]
	if !ok {
		f.notFound(w, gr, name)
		return
	}
	f.requests[request].Found = live.GetResourceVersion()
	switch {
	case r.Method == http.MethodGet:
		f.answer(w, http.StatusOK, live.Object)
	case r.Method == http.MethodPatch && r.Header.Get("Content-Type") == "application/json-patch+json":
		f.patch(w, key, name, live, body)
	case r.Method == http.MethodPatch && len(f.answers[key]) > 0:
		f.scriptedApply(w, key, body)
	case r.Method == http.MethodPatch:
		f.apply(w, r, key, name, live, body)
	default:
		f.t.Errorf("the fake apiserver does not serve %s of a route", r.Method)
		f.status(w, apierrors.NewMethodNotSupported(gr, r.Method))
	}
}

// patch serves a JSON patch of route name, live as held at key (the release:
// tests, then removals of managedFields entries) and keeps what it makes,
// at the next resourceVersion. The caller holds f.mu.
func (f *Server) patch(w http.ResponseWriter, key, name string, live *unstructured.Unstructured, body []byte) {
	patch, err := jsonpatch.DecodePatch(body)
	if err != nil {
		f.status(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	doc, _ := live.MarshalJSON()
	out, err := patch.Apply(doc)
	if err != nil {
		f.status(w, apierrors.NewInvalid(schema.GroupKind{Group: routes.Group, Kind: "HTTPRoute"}, name, nil))
		return
	}
	patched := &unstructured.Unstructured{}
	if err := patched.UnmarshalJSON(out); err != nil {
		f.status(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	if mf := patched.GetManagedFields(); len(mf) == 1 && mf[0].Manager == "" {
		patched.SetManagedFields(nil) // the list that says "none left"
	}
	f.rv++
	patched.SetResourceVersion(strconv.Itoa(f.rv))
	f.routes[key] = patched
	f.answer(w, http.StatusOK, patched.Object)
}

// scriptedApply answers an apply of the route at key as the test scripted
// it (AnswerApplies), and holds the answer's route when it is a 200. The
// caller holds f.mu.
func (f *Server) scriptedApply(w http.ResponseWriter, key string, body []byte) {
	var applied map[string]any
	if err := yaml.Unmarshal(body, &applied); err != nil {
		f.status(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	answers := f.answers[key]
	f.applied[key]++
	code, answer := answers[min(f.applied[key], len(answers))-1](applied)
	data := f.encode(answer)
	if code == http.StatusOK {
		stored := &unstructured.Unstructured{}
		if err := stored.UnmarshalJSON(data); err != nil {
			f.t.Errorf("fake apiserver: the scripted answer is not a route: %v", err)
		}
		f.hold(key, stored)
	}
	f.write(w, code, data)
}

// apply serves a server-side apply of route name, live as held at key: a
// conflict when it carries another resourceVersion, else live after the
// apply (applyTo), kept at the next resourceVersion unless it is a dry
// run. The caller holds f.mu.
func (f *Server) apply(w http.ResponseWriter, r *http.Request, key, name string, live *unstructured.Unstructured, body []byte) {
	applied := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(body, &applied.Object); err != nil {
		f.status(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	if rv := applied.GetResourceVersion(); rv != "" && rv != live.GetResourceVersion() {
		f.status(w, apierrors.NewConflict(httpRoutes, name, fmt.Errorf("the object has been modified")))
		return
	}
	stored := applyTo(live, applied, r.URL.Query().Get("fieldManager"))
	if len(r.URL.Query()["dryRun"]) == 0 {
		f.rv++
		stored.SetResourceVersion(strconv.Itoa(f.rv))
		f.routes[key] = stored
	}
	f.answer(w, http.StatusOK, stored.Object)
}

// applyTo is live after manager's apply of applied: spec.rules as applied,
// and the labels and annotations the manager applied before replaced by the
// ones it applies now; the manager's managedFields entry owns what it
// applied.
func applyTo(live, applied *unstructured.Unstructured, manager string) *unstructured.Unstructured {
	out := live.DeepCopy()
	if rules, ok, _ := unstructured.NestedSlice(applied.Object, "spec", "rules"); ok {
		_ = unstructured.SetNestedSlice(out.Object, rules, "spec", "rules")
	}
	entries, before := othersEntries(live, manager)
	out.SetLabels(replaceOwned(out.GetLabels(), applied.GetLabels(), ownedKeys(before, "labels")))
	out.SetAnnotations(replaceOwned(out.GetAnnotations(), applied.GetAnnotations(), ownedKeys(before, "annotations")))
	raw, _ := json.Marshal(appliedFields(applied))
	entries = append(entries, metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationApply,
		APIVersion: routes.Group + "/v1", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(string(raw))})
	out.SetManagedFields(entries)
	return out
}

// othersEntries are live's managedFields entries but manager's apply, and
// before the fields that apply owned (nil when it has none).
func othersEntries(live *unstructured.Unstructured, manager string) (entries []metav1.ManagedFieldsEntry, before map[string]any) {
	for _, e := range live.GetManagedFields() {
		if e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationApply {
			_ = json.Unmarshal(e.FieldsV1.GetRawBytes(), &before)
			continue
		}
		entries = append(entries, e)
	}
	return entries, before
}

// ownedKeys are the keys of metadata.<field> (labels or annotations) that
// the owned fields (FieldsV1) hold.
func ownedKeys(owned map[string]any, field string) []string {
	set, _, _ := unstructured.NestedMap(owned, "f:metadata", "f:"+field)
	var out []string
	for k := range set {
		out = append(out, strings.TrimPrefix(k, "f:"))
	}
	return out
}

// replaceOwned is now without the keys owned and with want's.
func replaceOwned(now, want map[string]string, owned []string) map[string]string {
	now = maps.Clone(now)
	if now == nil {
		now = map[string]string{}
	}
	for _, k := range owned {
		delete(now, k)
	}
	maps.Copy(now, want)
	return now
}

// appliedFields are the fields (FieldsV1) an apply of applied owns: the
// labels and annotations it sets, and spec.rules if it sets them.
func appliedFields(applied *unstructured.Unstructured) map[string]any {
	owns := map[string]any{}
	meta := map[string]any{}
	for field, values := range map[string]map[string]string{"labels": applied.GetLabels(), "annotations": applied.GetAnnotations()} {
		if len(values) > 0 {
			set := map[string]any{}
			for k := range values {
				set["f:"+k] = map[string]any{}
			}
			meta["f:"+field] = set
		}
	}
	if len(meta) > 0 {
		owns["f:metadata"] = meta
	}
	if _, ok, _ := unstructured.NestedSlice(applied.Object, "spec", "rules"); ok {
		owns["f:spec"] = map[string]any{"f:rules": map[string]any{}}
	}
	return owns
}

// Canned is an answer of Answering's server: a status code, a
// Content-Type, a Retry-After header (when not "") and a body, sent after
// Delay.
type Canned struct {
	Code                          int
	ContentType, RetryAfter, Body string
	Delay                         time.Duration
}

// Answering starts a server on 127.0.0.1 that answers the requests it gets
// with first and then in turn, the last answer to every request after
// them, for a test of how a client reads an answer; requests says what it
// got so far, in order.
func Answering(t testing.TB, first Canned, then ...Canned) (url string, requests func() []Request) {
	answers := append([]Canned{first}, then...)
	var mu sync.Mutex
	var seen []Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		c := answers[min(len(seen), len(answers)-1)]
		seen = append(seen, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, URI: r.RequestURI,
			ContentType: r.Header.Get("Content-Type"), Accept: r.Header.Get("Accept"), UserAgent: r.UserAgent(), Body: string(body)})
		mu.Unlock()
		time.Sleep(c.Delay)
		w.Header().Set("Content-Type", c.ContentType)
		if c.RetryAfter != "" {
			w.Header().Set("Retry-After", c.RetryAfter)
		}
		w.WriteHeader(c.Code)
		_, _ = io.WriteString(w, c.Body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []Request {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}

// Log is an io.Writer that logs each write in t: where a test hands a logger
// its output (logrus's SetOutput, a plugin process's stderr).
func Log(t testing.TB) io.Writer { return testLog{t} }

type testLog struct{ t testing.TB }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
