package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/ssa"
)

// The write loop of one route, against a fake apiserver that answers the
// applies as a scenario says: what the orchestrator sends, how often it
// decides, what it records with the reader.

const fieldManager = ssa.DefaultFieldManager

var web = routes.Ref{Kind: routes.HTTPRoute, Namespace: "shop", Name: "web"}

// served is the route as the fake apiserver serves it at resourceVersion
// rv, with the given managers' managedFields entries.
func served(rv int, managers ...string) map[string]any {
	var mf []any
	for _, m := range managers {
		mf = append(mf, map[string]any{"manager": m, "operation": "Apply", "apiVersion": routes.Group + "/v1",
			"fieldsType": "FieldsV1", "fieldsV1": map[string]any{"f:spec": map[string]any{"f:rules": map[string]any{}}}})
	}
	return map[string]any{
		"apiVersion": routes.Group + "/v1", "kind": "HTTPRoute",
		"metadata": map[string]any{"name": web.Name, "namespace": web.Namespace, "resourceVersion": strconv.Itoa(rv), "managedFields": mf},
		"spec": map[string]any{"rules": []any{map[string]any{"backendRefs": []any{
			map[string]any{"group": "", "kind": "Service", "name": "stable", "port": int64(80), "weight": int64(100)},
			map[string]any{"group": "", "kind": "Service", "name": "canary", "port": int64(80), "weight": int64(0)},
		}}}},
	}
}

func liveAt(t *testing.T, rv int, managers ...string) routes.Route {
	t.Helper()
	data, err := json.Marshal(served(rv, managers...))
	if err != nil {
		t.Fatal(err)
	}
	r, err := routes.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// apiserver answers the applies of the route with patches[i] for the i-th
// (the last one again after that) and records every request.
type apiserver struct {
	t       *testing.T
	mu      sync.Mutex
	patches []func(body map[string]any) (int, any)
	log     []string // "PATCH at 7", "PUT at 9", "GET"
	applies int
	stored  map[string]any
}

func (a *apiserver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r.URL.Path != "/apis/"+routes.Group+"/v1/namespaces/shop/httproutes/web" {
		http.NotFound(w, r)
		return
	}
	var body map[string]any
	if r.Body != nil {
		data, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(data, &body)
	}
	code, answer := http.StatusOK, any(a.stored)
	switch r.Method {
	case http.MethodPatch:
		rv, _ := body["metadata"].(map[string]any)["resourceVersion"].(string)
		a.log = append(a.log, "PATCH at "+rv)
		a.applies++
		code, answer = a.patches[min(a.applies, len(a.patches))-1](body)
		if code == http.StatusOK {
			a.stored = answer.(map[string]any)
		}
	case http.MethodPut:
		rv, _ := body["metadata"].(map[string]any)["resourceVersion"].(string)
		a.log = append(a.log, "PUT at "+rv)
		n, _ := strconv.Atoi(rv)
		body["metadata"].(map[string]any)["resourceVersion"] = strconv.Itoa(n + 1)
		a.stored, answer = body, body
	case http.MethodGet:
		a.log = append(a.log, "GET")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(answer)
}

func (a *apiserver) requests() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.log...)
}

// stale is the apiserver's answer to an apply whose resourceVersion is not
// the route's any more.
func stale(map[string]any) (int, any) {
	return http.StatusConflict, map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict", "code": 409,
		"message": `Operation cannot be fulfilled on httproutes.gateway.networking.k8s.io "web": the object has been modified; please apply your changes to the latest version and try again`}
}

// stored answers an apply by storing it at resourceVersion rv, owned by the
// plugin and kubectl.
func stored(rv int) func(map[string]any) (int, any) {
	return func(map[string]any) (int, any) { return http.StatusOK, served(rv, "kubectl", fieldManager) }
}

// reader is a kube.Reader whose Fresh reads the route at the next
// resourceVersion each time, and which records the answers written.
type reader struct {
	t       *testing.T
	mu      sync.Mutex
	freshRV int
	written []string
}

func (r *reader) Get(context.Context, routes.Ref) (routes.Route, error) {
	return routes.Route{}, errors.New("not used")
}

func (r *reader) List(context.Context, routes.Kind, string, labels.Selector) ([]routes.Route, error) {
	return nil, errors.New("not used")
}

func (r *reader) ServedVersion(context.Context, routes.Kind) (string, error) { return "v1", nil }

func (r *reader) Fresh(context.Context, routes.Ref) (routes.Route, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.freshRV++
	return liveAt(r.t, r.freshRV, "kubectl", fieldManager), nil
}

func (r *reader) Gateways(context.Context, routes.Parents) []routes.Gateway { return nil }

func (r *reader) Written(a *routes.Answer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.written = append(r.written, a.ResourceVersion)
}

// fixture is an orchestrator against a scenario of the fake apiserver.
func fixture(t *testing.T, freshFrom int, patches ...func(map[string]any) (int, any)) (*Orchestrator, *apiserver, *reader, *logtest.Hook) {
	t.Helper()
	api := &apiserver{t: t, patches: patches}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	cfg := &rest.Config{Host: srv.URL}
	gw, err := gateway.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	logger, hook := logtest.NewNullLogger()
	logger.SetLevel(logrus.DebugLevel)
	rd := &reader{t: t, freshRV: freshFrom}
	o := New(rd, ssa.NewWriter(gw, dyn, fieldManager, logrus.NewEntry(logger)), logrus.NewEntry(logger), Bounds{WritesPerCall: 1})
	return o, api, rd, hook
}

// decider decides the canary weight 30 on whatever it is given, and counts
// the resourceVersions it decided on.
type decider struct {
	release bool
	seen    []string
}

func (d *decider) decide(live routes.Route) (desired.Result, error) {
	d.seen = append(d.seen, live.ResourceVersion)
	rules := routes.CopyRules(live.Rules)
	rules[0].BackendRefs()[0].SetWeight(70)
	rules[0].BackendRefs()[1].SetWeight(30)
	return desired.Result{Rules: rules, Changes: []string{"rule 0 canary 0→30"}, Release: d.release}, nil
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// Two applies refused because the route changed since it was read: each
// time the orchestrator reads the route again, decides again on what it
// read and applies that, guarded by the new resourceVersion; the third
// apply is stored and recorded with the reader, once.
func TestAConflictIsAnsweredByReadingAndDecidingAgain(t *testing.T) {
	o, api, rd, hook := fixture(t, 7, stale, stale, stored(11))
	d := &decider{}
	p, err := o.Plan(liveAt(t, 5, "kubectl", fieldManager), d.decide)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Write(ctx(t), p, o.log); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"PATCH at 5", "PATCH at 8", "PATCH at 9"}, api.requests()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"5", "8", "9"}, d.seen); diff != "" {
		t.Errorf("decided on (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"11"}, rd.written); diff != "" {
		t.Errorf("recorded with the reader (-want +got):\n%s", diff)
	}
	var applied []string
	for _, e := range hook.AllEntries() {
		if e.Message == "applied route" {
			applied = append(applied, e.Data["resourceVersion"].(string)+" "+e.Data["changes"].(string))
		}
	}
	if diff := cmp.Diff([]string{"9→11 rule 0 canary 0→30"}, applied); diff != "" {
		t.Errorf("log lines of writes (-want +got):\n%s", diff)
	}
}

// A route that changes under every attempt: the call gives up after
// ssa.MaxAttempts applies, says so and that it is safe to repeat, and
// records nothing.
func TestARouteThatKeepsChangingEndsTheCallAfterMaxAttempts(t *testing.T) {
	o, api, rd, _ := fixture(t, 7, stale)
	d := &decider{}
	p, err := o.Plan(liveAt(t, 5, "kubectl", fieldManager), d.decide)
	if err != nil {
		t.Fatal(err)
	}
	err = o.Write(ctx(t), p, logrus.NewEntry(logrus.New()))
	want := "HTTPRoute shop/web: the route kept changing under the plugin: 8 attempts ended in optimistic-lock conflicts; the call is safe to repeat"
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
	if n := len(api.requests()); n != ssa.MaxAttempts || len(d.seen) != ssa.MaxAttempts || len(rd.written) != 0 {
		t.Errorf("%d applies, %d decisions, %d recorded; want %d, %d, 0", n, len(d.seen), len(rd.written), ssa.MaxAttempts, ssa.MaxAttempts)
	}
}

// Another manager holding what the apply changes is a conflict of field
// managers, not of versions: no second attempt, and the apiserver's words.
func TestAFieldManagerConflictIsNotRetried(t *testing.T) {
	o, api, _, _ := fixture(t, 7, func(map[string]any) (int, any) {
		return http.StatusConflict, map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict", "code": 409,
			"message": `Apply failed with 1 conflict: conflict with "kubectl": .spec.rules`,
			"details": map[string]any{"causes": []any{map[string]any{"reason": "FieldManagerConflict", "message": `conflict with "kubectl"`, "field": ".spec.rules"}}}}
	})
	d := &decider{}
	p, _ := o.Plan(liveAt(t, 5, "kubectl", fieldManager), d.decide)
	err := o.Write(ctx(t), p, logrus.NewEntry(logrus.New()))
	if err == nil || !strings.Contains(err.Error(), `conflict with "kubectl"`) || !strings.HasPrefix(err.Error(), "HTTPRoute shop/web: ") {
		t.Errorf("error %v, want the field manager conflict, naming the route", err)
	}
	if diff := cmp.Diff([]string{"PATCH at 5"}, api.requests()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

// The last write of the last Rollout on a route: the apply, then the
// release of the plugin's managedFields entry, updating the object the
// apply stored (no GET between), guarded by its resourceVersion. Both
// answers are recorded with the reader, and each write has its log line.
func TestTheLastWriteReleasesOwnership(t *testing.T) {
	o, api, rd, hook := fixture(t, 7, stored(6))
	d := &decider{release: true}
	p, _ := o.Plan(liveAt(t, 5, "kubectl", fieldManager), d.decide)
	if err := o.Write(ctx(t), p, o.log); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"PATCH at 5", "PUT at 6"}, api.requests()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"6", "7"}, rd.written); diff != "" {
		t.Errorf("recorded with the reader (-want +got):\n%s", diff)
	}
	var managers []string
	for _, e := range api.stored["metadata"].(map[string]any)["managedFields"].([]any) {
		managers = append(managers, e.(map[string]any)["manager"].(string))
	}
	if diff := cmp.Diff([]string{"kubectl"}, managers); diff != "" {
		t.Errorf("managers after the release (-want +got):\n%s", diff)
	}
	var lines []string
	for _, e := range hook.AllEntries() {
		if e.Message == "applied route" || e.Message == "released route" {
			lines = append(lines, e.Message+" "+e.Data["resourceVersion"].(string))
		}
	}
	if diff := cmp.Diff([]string{"applied route 5→6", "released route 6→7"}, lines); diff != "" {
		t.Errorf("log lines (-want +got):\n%s", diff)
	}
}

// Nothing to apply and nothing of the plugin's left: the release alone,
// reading the route first (there is no apply's answer to update).
func TestAnUnchangedRouteIsReleasedWithoutAnApply(t *testing.T) {
	o, api, rd, _ := fixture(t, 7)
	api.stored = served(5, "kubectl", fieldManager)
	p, _ := o.Plan(liveAt(t, 5, "kubectl", fieldManager), func(routes.Route) (desired.Result, error) {
		return desired.Result{Unchanged: true, Release: true}, nil
	})
	if err := o.Write(ctx(t), p, o.log); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"GET", "PUT at 5"}, api.requests()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"6"}, rd.written); diff != "" {
		t.Errorf("recorded with the reader (-want +got):\n%s", diff)
	}
}

// A route the plugin does not own and that stays unchanged: no request.
func TestAnUnchangedRouteThePluginDoesNotOwnSendsNothing(t *testing.T) {
	o, api, _, _ := fixture(t, 7)
	p, _ := o.Plan(liveAt(t, 5, "kubectl"), func(routes.Route) (desired.Result, error) {
		return desired.Result{Unchanged: true, Release: true}, nil
	})
	if err := o.Write(ctx(t), p, logrus.NewEntry(logrus.New())); err != nil || len(api.requests()) != 0 {
		t.Errorf("error %v, requests %v; want none", err, api.requests())
	}
}
