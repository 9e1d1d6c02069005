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
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

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
// of gateway.networking.k8s.io/v1 (HTTPRoutes only; every other version of
// the group is not served), its OpenAPI document (every field), GET, LIST
// and watch of HTTPRoutes, server-side apply and JSON patch (PATCH) of
// them, GET of Rollouts and Services, ReferenceGrants (none) and
// SelfSubjectAccessReviews (allowed). It records every request it gets.
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

	mu       sync.Mutex
	rv       int
	routes   map[string]*unstructured.Unstructured // "<namespace>/<name>"
	rollouts map[string]bool                       // "<namespace>/<name>"
	services map[string]bool                       // "<namespace>/<name>"
	// rolloutsAnswer, when not 0, is the status of every GET of a Rollout.
	rolloutsAnswer int
	// answers script the applies of a route ("<namespace>/<name>"), and
	// applied counts them.
	answers  map[string][]Answer
	applied  map[string]int
	requests []Request
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
	Body         string
	// Found is the resourceVersion of the route the request names as the
	// fake held it when it served the request; "" for other requests.
	Found string
}

func (r Request) String() string {
	s := r.Method + " " + r.Path
	if r.Query != "" {
		s += "?" + r.Query
	}
	return s
}

// New starts the fake with the given objects, as YAML documents:
// HTTPRoutes, Rollouts and Services.
func New(t *testing.T, objects ...string) *Server {
	t.Helper()
	f := &Server{t: t, closing: make(chan struct{}), rv: 1,
		routes: map[string]*unstructured.Unstructured{}, rollouts: map[string]bool{}, services: map[string]bool{},
		answers: map[string][]Answer{}, applied: map[string]int{}}
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

// Add holds the objects from now on: HTTPRoutes, Rollouts and Services.
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
			f.rollouts[key] = true
		case "Service":
			f.services[key] = true
		default:
			f.t.Fatalf("the fake apiserver holds no %s", u.GetKind())
		}
	}
}

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

// URL is where the server listens.
func (f *Server) URL() string { return f.srv.URL }

// AnswerRollouts makes every GET of a Rollout answer code from now on (0:
// what the fake holds).
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

const gatewayV1 = "/apis/" + routes.Group + "/v1"

func (f *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.requests = append(f.requests, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, ContentType: r.Header.Get("Content-Type"), Body: string(body)})
	request := len(f.requests) - 1
	f.mu.Unlock()

	path := r.URL.Path
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case r.Method == http.MethodGet && path == gatewayV1:
		f.answer(w, http.StatusOK, metav1.APIResourceList{
			TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: routes.Group + "/v1",
			APIResources: []metav1.APIResource{{Name: "httproutes", SingularName: "httproute", Namespaced: true, Kind: "HTTPRoute",
				Verbs: metav1.Verbs{"delete", "get", "list", "patch", "update", "watch"}}},
		})
	case r.Method == http.MethodGet && path == "/openapi/v3"+gatewayV1:
		// No route schema: the reader takes the kinds to have every field.
		f.answer(w, http.StatusOK, map[string]any{"openapi": "3.0.0", "components": map[string]any{"schemas": map[string]any{}}})
	case strings.HasPrefix(path, gatewayV1+"/") && strings.HasSuffix(path, "/httproutes"):
		ns := ""
		if len(parts) == 6 { // apis, group, v1, namespaces, ns, httproutes
			ns = parts[4]
		}
		if r.URL.Query().Get("watch") == "true" {
			f.watch(w, r, ns)
			return
		}
		f.answer(w, http.StatusOK, f.list(ns))
	case strings.HasPrefix(path, gatewayV1+"/namespaces/") && len(parts) == 7 && parts[5] == "httproutes":
		f.route(w, r, request, parts[4], parts[6], body)
	case strings.HasPrefix(path, gatewayV1+"/"):
		f.notFound(w, schema.GroupResource{Group: routes.Group, Resource: parts[len(parts)-1]}, "")
	case strings.HasPrefix(path, "/apis/"+routes.Group+"/"):
		// Discovery of another version: not served.
		f.notFound(w, schema.GroupResource{}, "")
	case strings.HasPrefix(path, "/apis/coordination.k8s.io/"):
		// A user without the plugin's Lease Role.
		f.status(w, apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "", errors.New("RBAC: no Role for Leases")))
	case r.Method == http.MethodGet && strings.HasPrefix(path, "/apis/argoproj.io/v1alpha1/namespaces/") && len(parts) == 7 && parts[5] == "rollouts":
		f.rollout(w, parts[4], parts[6])
	case r.Method == http.MethodGet && strings.HasPrefix(path, "/api/v1/namespaces/") && len(parts) == 6 && parts[4] == "services":
		f.mu.Lock()
		exists := f.services[parts[3]+"/"+parts[5]]
		f.mu.Unlock()
		if !exists {
			f.notFound(w, schema.GroupResource{Resource: "services"}, parts[5])
			return
		}
		f.answer(w, http.StatusOK, map[string]any{"apiVersion": "v1", "kind": "Service",
			"metadata": map[string]any{"name": parts[5], "namespace": parts[3]},
			"spec":     map[string]any{"ports": []any{map[string]any{"name": "http", "port": 80}}}})
	case r.Method == http.MethodGet && strings.HasSuffix(path, "/referencegrants"):
		f.answer(w, http.StatusOK, map[string]any{"apiVersion": routes.Group + "/v1beta1", "kind": "ReferenceGrantList",
			"metadata": map[string]any{"resourceVersion": "1"}, "items": []any{}})
	case r.Method == http.MethodPost && path == "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews":
		// Sent as protobuf, like every built-in type; the answer may be JSON.
		review := &authorizationv1.SelfSubjectAccessReview{}
		if _, _, err := kubescheme.Codecs.UniversalDeserializer().Decode(body, nil, review); err != nil {
			f.t.Errorf("a SelfSubjectAccessReview the fake cannot read (%s): %v", r.Header.Get("Content-Type"), err)
			f.status(w, apierrors.NewBadRequest(err.Error()))
			return
		}
		review.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "the fake apiserver allows everything"}
		f.answer(w, http.StatusCreated, review)
	default:
		f.t.Errorf("the fake apiserver does not serve %s %s", r.Method, r.URL)
		f.notFound(w, schema.GroupResource{}, "")
	}
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
	exists, code := f.rollouts[namespace+"/"+name], f.rolloutsAnswer
	f.mu.Unlock()
	switch {
	case code != 0:
		f.status(w, apierrors.NewGenericServerResponse(code, http.MethodGet, gr, name, "the fake apiserver answers so", 0, false))
	case !exists:
		f.notFound(w, gr, name)
	default:
		f.answer(w, http.StatusOK, map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
			"metadata": map[string]any{"name": name, "namespace": namespace, "resourceVersion": "3"}})
	}
}

func (f *Server) list(namespace string) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	items := []any{}
	for _, key := range slices.Sorted(maps.Keys(f.routes)) {
		if u := f.routes[key]; namespace == "" || u.GetNamespace() == namespace {
			items = append(items, u.DeepCopy().Object)
		}
	}
	return map[string]any{"apiVersion": routes.Group + "/v1", "kind": "HTTPRouteList",
		"metadata": map[string]any{"resourceVersion": strconv.Itoa(f.rv)}, "items": items}
}

// watch streams the routes as ADDED events when asked for the initial
// events (a watch list), then a bookmark that ends them, then nothing until
// the client or the test goes.
func (f *Server) watch(w http.ResponseWriter, r *http.Request, namespace string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	list := f.list(namespace)
	if r.URL.Query().Get("sendInitialEvents") == "true" {
		for _, item := range list["items"].([]any) {
			_ = enc.Encode(map[string]any{"type": "ADDED", "object": item})
		}
		_ = enc.Encode(map[string]any{"type": "BOOKMARK", "object": map[string]any{
			"apiVersion": routes.Group + "/v1", "kind": "HTTPRoute",
			"metadata": map[string]any{"resourceVersion": list["metadata"].(map[string]any)["resourceVersion"],
				"annotations": map[string]any{metav1.InitialEventsAnnotationKey: "true"}}}})
	}
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
	select {
	case <-r.Context().Done():
	case <-f.closing:
	}
}

// route serves one route, the request-th the fake got: GET, and PATCH: a
// server-side apply (the applied spec.rules, labels and annotations replace
// what the field manager applied before; with dryRun, nothing is kept; or
// as the test scripted it), or a JSON patch (the release).
func (f *Server) route(w http.ResponseWriter, r *http.Request, request int, namespace, name string, body []byte) {
	gr := schema.GroupResource{Group: routes.Group, Resource: "httproutes"}
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
		// The release: tests, then removals of managedFields entries.
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
	case r.Method == http.MethodPatch && len(f.answers[key]) > 0:
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
	case r.Method == http.MethodPatch:
		applied := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(body, &applied.Object); err != nil {
			f.status(w, apierrors.NewBadRequest(err.Error()))
			return
		}
		if rv := applied.GetResourceVersion(); rv != "" && rv != live.GetResourceVersion() {
			f.status(w, apierrors.NewConflict(gr, name, fmt.Errorf("the object has been modified")))
			return
		}
		stored := applyTo(live, applied, r.URL.Query().Get("fieldManager"))
		if len(r.URL.Query()["dryRun"]) == 0 {
			f.rv++
			stored.SetResourceVersion(strconv.Itoa(f.rv))
			f.routes[key] = stored
		}
		f.answer(w, http.StatusOK, stored.Object)
	default:
		f.t.Errorf("the fake apiserver does not serve %s of a route", r.Method)
		f.status(w, apierrors.NewMethodNotSupported(gr, r.Method))
	}
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
	var entries []metav1.ManagedFieldsEntry
	var before map[string]any
	for _, e := range live.GetManagedFields() {
		if e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationApply {
			_ = json.Unmarshal(e.FieldsV1.GetRawBytes(), &before)
			continue
		}
		entries = append(entries, e)
	}
	keys := func(field string) []string {
		set, _, _ := unstructured.NestedMap(before, "f:metadata", "f:"+field)
		var out []string
		for k := range set {
			out = append(out, strings.TrimPrefix(k, "f:"))
		}
		return out
	}
	merge := func(now, want map[string]string, owned []string) map[string]string {
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
	out.SetLabels(merge(out.GetLabels(), applied.GetLabels(), keys("labels")))
	out.SetAnnotations(merge(out.GetAnnotations(), applied.GetAnnotations(), keys("annotations")))
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
	raw, _ := json.Marshal(owns)
	entries = append(entries, metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationApply,
		APIVersion: routes.Group + "/v1", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(string(raw))})
	out.SetManagedFields(entries)
	return out
}
