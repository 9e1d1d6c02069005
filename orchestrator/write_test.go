package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/kube"
	"github.com/gatewayapi-ssa/rollouts-plugin/kube/kubetest"
	"github.com/gatewayapi-ssa/rollouts-plugin/retry"
	"github.com/gatewayapi-ssa/rollouts-plugin/rollout"
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
	// Read as the apiserver's JSON is read the long way (kube's decoder
	// gives the same route: its tests hold it to this).
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	r, err := routes.FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// apiserver is package kubetest's, holding the route at resourceVersion 5
// (kubectl's and the plugin's), its applies answered as a scenario says.
type apiserver struct {
	*kubetest.Server
	t *testing.T
}

// requests are the requests the apiserver got: "PATCH at 7" (an apply
// guarded by the resourceVersion, forced), "PATCH owned" (guarded by
// ownership: neither), "RELEASE at 9" (the JSON patch, at the version it
// found), "GET". An apply with one guard and not the other is an error.
func (a *apiserver) requests() []string {
	a.t.Helper()
	var log []string
	for _, r := range a.Requests() {
		switch {
		case r.Path != "/apis/"+routes.Group+"/v1/namespaces/shop/httproutes/web":
			log = append(log, r.String())
		case r.Method == http.MethodPatch && r.ContentType == "application/json-patch+json":
			log = append(log, "RELEASE at "+r.Found)
		case r.Method == http.MethodPatch:
			var body map[string]any
			_ = json.Unmarshal([]byte(r.Body), &body)
			rv, _ := body["metadata"].(map[string]any)["resourceVersion"].(string)
			query, _ := url.ParseQuery(r.Query)
			switch force := query.Get("force") == "true"; {
			case rv == "" && !force:
				log = append(log, "PATCH owned")
			case rv != "" && force:
				log = append(log, "PATCH at "+rv)
			default:
				a.t.Errorf("an apply with resourceVersion %q and force %v: neither guard", rv, force)
			}
		case r.Method == http.MethodGet:
			log = append(log, "GET")
		default:
			log = append(log, r.String())
		}
	}
	return log
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
	last    *kube.Answer
	// cacheBehind: Get answers with a version older than any plan's, as
	// a watch cache that does not follow.
	cacheBehind bool
	// rulesChange makes every fresh read's rules differ (one more rule),
	// as when another manager keeps changing them.
	rulesChange bool
	// eventAfterRead: the cache, behind, catches up with its next event
	// right after a Get, and NextEvent tells of it.
	eventAfterRead bool
	changed        chan struct{}
	// gets and freshReads count the reads of Get and of Fresh.
	gets, freshReads int
}

// Get answers as kube.Cluster does: with the last answer written until the
// watch cache has it; else with the route as the cache has it, which here
// follows the apiserver at once (the next version, as Fresh reads it).
func (r *reader) Get(ctx context.Context, ref routes.Ref) (routes.Route, error) {
	r.mu.Lock()
	r.gets++
	if r.last != nil {
		defer r.mu.Unlock()
		return r.last.Route()
	}
	if r.cacheBehind {
		defer r.mu.Unlock()
		if r.eventAfterRead && r.changed != nil {
			r.cacheBehind = false // the event comes right after this read
			close(r.changed)
			r.changed = nil
		}
		return liveAt(r.t, 1, "kubectl"), nil
	}
	r.mu.Unlock()
	return r.read()
}

func (r *reader) List(context.Context, routes.Kind, string, labels.Selector) ([]routes.Route, error) {
	return nil, errors.New("not used")
}

func (r *reader) ServiceImported(context.Context, routes.ObjectRef) (bool, error) {
	return false, errors.New("not used")
}

func (r *reader) ReferenceGrants(context.Context, string) ([]routes.ReferenceGrant, error) {
	return nil, errors.New("not used")
}

func (r *reader) PredecessorRecords(context.Context, string, string) (routes.PredecessorRecords, error) {
	return routes.PredecessorRecords{}, errors.New("not used")
}

// ResourceVersion cannot tell: Get decides, as it answers.
func (r *reader) ResourceVersion(context.Context, routes.Ref) string { return "" }

func (r *reader) ServedVersion(context.Context, routes.Kind) (string, error) { return "v1", nil }

func (r *reader) Fresh(context.Context, routes.Ref) (routes.Route, error) {
	r.mu.Lock()
	r.freshReads++
	r.mu.Unlock()
	return r.read()
}

// read is the route at the next resourceVersion.
func (r *reader) read() (routes.Route, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.freshRV++
	live := liveAt(r.t, r.freshRV, "kubectl", fieldManager)
	if r.rulesChange {
		live.Rules = append(live.Rules, routes.Rule{"name": fmt.Sprintf("r%d", r.freshRV)})
	}
	r.last = nil
	return live, nil
}

func (r *reader) Gateways(context.Context, routes.Parents) []routes.Gateway { return nil }

// NextEvent tells of the cache's next event: only with eventAfterRead does
// one come.
func (r *reader) NextEvent(routes.Ref) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.changed == nil {
		r.changed = make(chan struct{})
	}
	return r.changed
}

func (r *reader) Written(a *kube.Answer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.written = append(r.written, a.ResourceVersion)
	r.last = a
}

// fixture is an orchestrator against a scenario of the fake apiserver,
// every write carrying its resourceVersion (no peers).
func fixture(t *testing.T, freshFrom int, patches ...kubetest.Answer) (*Orchestrator, *apiserver, *reader, *logtest.Hook) {
	t.Helper()
	return fixtureAmong(t, nil, freshFrom, patches...)
}

// fixtureAmong is fixture with the process's peers.
func fixtureAmong(t *testing.T, peers Exclusion, freshFrom int, patches ...kubetest.Answer) (*Orchestrator, *apiserver, *reader, *logtest.Hook) {
	t.Helper()
	api := &apiserver{Server: kubetest.New(t), t: t}
	api.Add(&unstructured.Unstructured{Object: served(5, "kubectl", fieldManager)})
	if len(patches) > 0 {
		api.AnswerApplies(web.Namespace, web.Name, patches...)
	}
	t.Cleanup(func() { api.requests() }) // each apply has one guard or none
	cfg := &rest.Config{Host: api.URL(), QPS: 1000, Burst: 1000}
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
	o := New(rd, ssa.NewWriter(gw, dyn, fieldManager, logrus.NewEntry(logger)), peers, nil, logrus.NewEntry(logger), Bounds{WritesPerCall: 1})
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
	return desired.Result{Rules: rules, Changes: []routes.Change{routes.Changef(routes.WeightChanged, "rule 0 canary 0→30")}, Release: d.release}, nil
}

// decideFunc is a decision of a test as a desired.Intent: it decides from
// the live route alone.
type decideFunc func(live routes.Route) (desired.Result, error)

func (f decideFunc) Desired(live routes.Route, _ desired.Env) (desired.Result, error) { return f(live) }

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
	p, err := o.MakePlan(ctx(t), liveAt(t, 5, "kubectl", fieldManager), desired.Env{}, decideFunc(d.decide))
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Write(ctx(t), p, rollout.Call{}); err != nil {
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
	if diff := cmp.Diff(Writes{Conflicts: 2, Retried: 2, Applied: 1}, o.Writes()); diff != "" {
		t.Errorf("writes counted (-want +got):\n%s", diff)
	}
}

// A route whose rules another manager changes before every attempt: each
// time the orchestrator reads it, decides again, waits its turn (backoff),
// reads and decides once more; after retry.ConflictAttempts applies the call gives
// up, says so and that it is safe to repeat, and records nothing.
func TestARouteWhoseRulesKeepChangingEndsTheCallAfterMaxAttempts(t *testing.T) {
	o, api, rd, _ := fixture(t, 7, stale)
	rd.rulesChange = true
	d := &decider{}
	p, err := o.MakePlan(ctx(t), liveAt(t, 5, "kubectl", fieldManager), desired.Env{}, decideFunc(d.decide))
	if err != nil {
		t.Fatal(err)
	}
	err = o.Write(ctx(t), p, rollout.Call{})
	want := "HTTPRoute shop/web: the route kept changing under the plugin: 8 attempts ended in optimistic-lock conflicts; the call is safe to repeat"
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
	if n, decisions := len(api.requests()), 2*retry.ConflictAttempts; n != retry.ConflictAttempts || len(d.seen) != decisions || len(rd.written) != 0 {
		t.Errorf("%d applies, %d decisions, %d recorded; want %d, %d, 0", n, len(d.seen), len(rd.written), retry.ConflictAttempts, decisions)
	}
	if diff := cmp.Diff(Writes{Conflicts: retry.ConflictAttempts, Retried: retry.ConflictAttempts - 1, Failed: 1}, o.Writes()); diff != "" {
		t.Errorf("writes counted (-want +got):\n%s", diff)
	}
}

// A route whose other managers keep writing what the plugin does not write
// (its labels, say): decided again, the write is the same, so it is sent
// again at once, guarded by the new resourceVersion, up to
// retry.BusyAttempts more times; such a route that changes under every
// attempt still ends the call, saying why.
func TestARouteWhoseMetadataKeepsChangingIsWrittenAgainAtOnce(t *testing.T) {
	o, api, rd, _ := fixture(t, 7, stale, stale, stale, stored(12))
	d := &decider{}
	p, err := o.MakePlan(ctx(t), liveAt(t, 5, "kubectl", fieldManager), desired.Env{}, decideFunc(d.decide))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := o.Write(ctx(t), p, rollout.Call{}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"PATCH at 5", "PATCH at 8", "PATCH at 9", "PATCH at 10"}, api.requests()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"12"}, rd.written); diff != "" {
		t.Errorf("recorded (-want +got):\n%s", diff)
	}
	t.Logf("three conflicts and the write took %s (no backoff between)", time.Since(start).Round(time.Millisecond))

	o, api, rd, _ = fixture(t, 7, stale)
	d = &decider{}
	p, _ = o.MakePlan(ctx(t), liveAt(t, 5, "kubectl", fieldManager), desired.Env{}, decideFunc(d.decide))
	err = o.Write(ctx(t), p, rollout.Call{})
	want := fmt.Sprintf("HTTPRoute shop/web: the route kept changing under the plugin: %d attempts ended in optimistic-lock conflicts, %d of them after changes only to "+
		"what the plugin does not write (another manager writing the route more often than the plugin can read and write it); the call is safe to repeat",
		retry.BusyAttempts+1, retry.BusyAttempts)
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
	if n := len(api.requests()); n != retry.BusyAttempts+1 || len(rd.written) != 0 {
		t.Errorf("%d applies, %d recorded; want %d, 0", n, len(rd.written), retry.BusyAttempts+1)
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
	p, _ := o.MakePlan(ctx(t), liveAt(t, 5, "kubectl", fieldManager), desired.Env{}, decideFunc(d.decide))
	err := o.Write(ctx(t), p, rollout.Call{})
	if err == nil || !strings.Contains(err.Error(), `conflict with "kubectl"`) || !strings.HasPrefix(err.Error(), "HTTPRoute shop/web: ") {
		t.Errorf("error %v, want the field manager conflict, naming the route", err)
	}
	if diff := cmp.Diff([]string{"PATCH at 5"}, api.requests()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Writes{Conflicts: 1, Failed: 1}, o.Writes()); diff != "" {
		t.Errorf("writes counted (-want +got):\n%s", diff)
	}
}

// The last write of the last Rollout on a route: the apply, then the
// release of the plugin's managedFields entry from the object the apply
// stored (no GET between), a JSON patch that tests the entry is as read.
// Both answers are recorded with the reader, and each write has its log
// line.
func TestTheLastWriteReleasesOwnership(t *testing.T) {
	o, api, rd, hook := fixture(t, 7, stored(6))
	d := &decider{release: true}
	p, _ := o.MakePlan(ctx(t), liveAt(t, 5, "kubectl", fieldManager), desired.Env{}, decideFunc(d.decide))
	if err := o.Write(ctx(t), p, rollout.Call{}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"PATCH at 5", "RELEASE at 6"}, api.requests()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"6", "7"}, rd.written); diff != "" {
		t.Errorf("recorded with the reader (-want +got):\n%s", diff)
	}
	var managers []string
	for _, e := range api.Route(web.Namespace, web.Name).GetManagedFields() {
		managers = append(managers, e.Manager)
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
	if diff := cmp.Diff(Writes{Applied: 1, Released: 1}, o.Writes()); diff != "" {
		t.Errorf("writes counted (-want +got):\n%s", diff)
	}
}

// Nothing to apply and nothing of the plugin's left: the release alone,
// reading the route first (there is no apply's answer to update).
func TestAnUnchangedRouteIsReleasedWithoutAnApply(t *testing.T) {
	o, api, rd, _ := fixture(t, 7) // the apiserver holds the route at 5, kubectl's and the plugin's
	p, _ := o.MakePlan(ctx(t), liveAt(t, 5, "kubectl", fieldManager), desired.Env{}, decideFunc(func(routes.Route) (desired.Result, error) {
		return desired.Result{Unchanged: true, Release: true}, nil
	}))
	if err := o.Write(ctx(t), p, rollout.Call{}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"GET", "RELEASE at 5"}, api.requests()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Writes{Unchanged: 1, Released: 1}, o.Writes()); diff != "" {
		t.Errorf("writes counted (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"6"}, rd.written); diff != "" {
		t.Errorf("recorded with the reader (-want +got):\n%s", diff)
	}
}

// A route the plugin does not own and that stays unchanged: no request.
func TestAnUnchangedRouteThePluginDoesNotOwnSendsNothing(t *testing.T) {
	o, api, _, _ := fixture(t, 7)
	p, _ := o.MakePlan(ctx(t), liveAt(t, 5, "kubectl"), desired.Env{}, decideFunc(func(routes.Route) (desired.Result, error) {
		return desired.Result{Unchanged: true, Release: true}, nil
	}))
	if err := o.Write(ctx(t), p, rollout.Call{}); err != nil || len(api.requests()) != 0 {
		t.Errorf("error %v, requests %v; want none", err, api.requests())
	}
}

// exclusion is the process's peers as a scenario says: alone or not, or
// an error; it counts the writes in flight between Enter and leave.
type exclusion struct {
	alone bool
	epoch uint64 // 1 when zero
	err   error

	mu             sync.Mutex
	inFlight, most int
	entered, left  int
}

func (e *exclusion) Enter(context.Context) (bool, uint64, func(), error) {
	if e.err != nil {
		return false, 0, func() {}, e.err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.entered++
	e.inFlight++
	e.most = max(e.most, e.inFlight)
	return e.alone, max(e.epoch, 1), sync.OnceFunc(func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.left++
		e.inFlight--
	}), nil
}

// ownershipConflict is the apiserver's answer to an apply without force
// that would change spec.rules, which another manager took meanwhile.
func ownershipConflict(map[string]any) (int, any) {
	return http.StatusConflict, map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict", "code": 409,
		"message": `Apply failed with 1 conflict: conflict with "argocd" using gateway.networking.k8s.io/v1: .spec.rules`,
		"details": map[string]any{"causes": []any{map[string]any{"reason": "FieldManagerConflict", "message": `conflict with "argocd" using gateway.networking.k8s.io/v1`, "field": ".spec.rules"}}}}
}

// The plugin owns spec.rules alone and no other process of its field
// manager is there: once the process has written the route since it became
// the only one (that first write carries the resourceVersion: a process gone
// a moment ago may have written after what the cache holds), its applies
// carry no resourceVersion and are not forced, so others' writes to labels,
// annotations or hostnames cannot stop them. Each write leaves the peers'
// gate once its answer is in; a new epoch (another process came and went)
// starts with a resourceVersion again.
func TestWritesOfRulesThePluginOwnsAloneAreGuardedByOwnership(t *testing.T) {
	peers := &exclusion{alone: true}
	ownedAlone := func(rv int) func(map[string]any) (int, any) {
		return func(map[string]any) (int, any) { return http.StatusOK, served(rv, fieldManager) }
	}
	o, api, rd, hook := fixtureAmong(t, peers, 7, ownedAlone(6), ownedAlone(7), ownedAlone(8))
	write := func(rv int) {
		t.Helper()
		p, _ := o.MakePlan(ctx(t), liveAt(t, rv, fieldManager), desired.Env{}, decideFunc((&decider{}).decide))
		if err := o.Write(ctx(t), p, rollout.Call{}); err != nil {
			t.Fatal(err)
		}
	}
	write(5)
	write(6)
	peers.epoch = 2
	write(7)
	if diff := cmp.Diff([]string{"PATCH at 5", "PATCH owned", "PATCH at 7"}, api.requests()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"6", "7", "8"}, rd.written); diff != "" {
		t.Errorf("recorded (-want +got):\n%s", diff)
	}
	if peers.entered != 3 || peers.left != 3 {
		t.Errorf("entered the gate %d times, left %d; want 3, 3", peers.entered, peers.left)
	}
	var guards []string
	for _, e := range hook.AllEntries() {
		if e.Message == "applied route" {
			guards = append(guards, e.Data["guard"].(string))
		}
	}
	if diff := cmp.Diff([]string{"resourceVersion", "ownership", "resourceVersion"}, guards); diff != "" {
		t.Errorf("the write log lines' guard (-want +got):\n%s", diff)
	}
}

// Guarded by the resourceVersion, forced: the first write of a rollout
// (another manager owns spec.rules too), and any write while another
// process of the plugin's field manager is there.
func TestWritesThatOwnershipCannotGuardCarryTheResourceVersion(t *testing.T) {
	for _, c := range []struct {
		name     string
		alone    bool
		managers []string
	}{
		{"the first write: kubectl owns the rules too", true, []string{"kubectl", fieldManager}},
		{"the first write: the plugin owns nothing yet", true, []string{"kubectl"}},
		{"another process of the plugin is there", false, []string{fieldManager}},
	} {
		t.Run(c.name, func(t *testing.T) {
			peers := &exclusion{alone: c.alone}
			o, api, _, _ := fixtureAmong(t, peers, 7, stored(6))
			p, _ := o.MakePlan(ctx(t), liveAt(t, 5, c.managers...), desired.Env{}, decideFunc((&decider{}).decide))
			if err := o.Write(ctx(t), p, rollout.Call{}); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"PATCH at 5"}, api.requests()); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			if peers.inFlight != 0 {
				t.Errorf("%d writes left in the gate", peers.inFlight)
			}
		})
	}
}

// Another manager changed spec.rules after the plugin read the route: the
// apply guarded by ownership conflicts, the route is read again and decided
// again (the decision reports a change of what the plugin manages), and
// what is left to write takes the rules back guarded by the new
// resourceVersion.
func TestAnOwnershipConflictIsAnsweredByDecidingAgainAndTakingOver(t *testing.T) {
	ownedAlone := func(map[string]any) (int, any) { return http.StatusOK, served(4, fieldManager) }
	o, api, rd, _ := fixtureAmong(t, &exclusion{alone: true}, 7, ownedAlone, ownershipConflict, stored(9))
	first, _ := o.MakePlan(ctx(t), liveAt(t, 3, fieldManager), desired.Env{}, decideFunc((&decider{}).decide))
	if err := o.Write(ctx(t), first, rollout.Call{}); err != nil {
		t.Fatal(err)
	}
	d := &decider{}
	p, _ := o.MakePlan(ctx(t), liveAt(t, 5, fieldManager), desired.Env{}, decideFunc(d.decide))
	if err := o.Write(ctx(t), p, rollout.Call{}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"PATCH at 3", "PATCH owned", "PATCH at 8"}, api.requests()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"5", "8"}, d.seen); diff != "" {
		t.Errorf("decided on (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"4", "9"}, rd.written); diff != "" {
		t.Errorf("recorded (-want +got):\n%s", diff)
	}
}

// The process cannot write (its peers have not acknowledged it): nothing
// is sent, and the error names the route.
func TestAWriteThePeersDoNotAdmitSendsNothing(t *testing.T) {
	o, api, _, _ := fixtureAmong(t, &exclusion{err: errors.New("waiting for the plugin's other processes")}, 7, stored(6))
	p, _ := o.MakePlan(ctx(t), liveAt(t, 5, fieldManager), desired.Env{}, decideFunc((&decider{}).decide))
	err := o.Write(ctx(t), p, rollout.Call{})
	if err == nil || err.Error() != "HTTPRoute shop/web: waiting for the plugin's other processes" {
		t.Errorf("error %v", err)
	}
	if n := len(api.requests()); n != 0 {
		t.Errorf("%d requests, want none", n)
	}
}

// Two calls of one process decided on the same read of a route (two
// Rollouts sharing it): they write one after the other, and the second
// decides again on the first one's answer before it writes, so the first
// write is not lost although neither carries a resourceVersion.
func TestTwoCallsOfOneProcessWriteARouteOneAfterTheOther(t *testing.T) {
	peers := &exclusion{alone: true}
	ownedAlone := func(rv int) func(map[string]any) (int, any) {
		return func(map[string]any) (int, any) { return http.StatusOK, served(rv, fieldManager) }
	}
	o, api, _, _ := fixtureAmong(t, peers, 7, ownedAlone(6), ownedAlone(7))
	first, second := &decider{}, &decider{}
	p1, _ := o.MakePlan(ctx(t), liveAt(t, 5, fieldManager), desired.Env{}, decideFunc(first.decide))
	p2, _ := o.MakePlan(ctx(t), liveAt(t, 5, fieldManager), desired.Env{}, decideFunc(second.decide))
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, p := range []Plan{p1, p2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = o.Write(ctx(t), p, rollout.Call{})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"PATCH at 5", "PATCH owned"}, api.requests()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	// Whichever wrote second decided twice: on 5, then on the first's answer, 6.
	seen := append(append([]string{}, first.seen...), second.seen...)
	slices.Sort(seen)
	if diff := cmp.Diff([]string{"5", "5", "6"}, seen); diff != "" {
		t.Errorf("decided on (-want +got):\n%s", diff)
	}
	if peers.most != 1 {
		t.Errorf("%d writes of the route were in flight at once, want 1", peers.most)
	}
}

// After a conflict the next attempt is decided on the version the watch
// cache brings; a cache that brings none within retry.ConflictEventWait is not waited
// for longer: the route is read fresh.
func TestAConflictWithACacheThatDoesNotFollowIsAnsweredByAFreshRead(t *testing.T) {
	o, api, rd, _ := fixture(t, 7, stale, stored(11))
	rd.cacheBehind = true
	d := &decider{}
	p, _ := o.MakePlan(ctx(t), liveAt(t, 5, "kubectl", fieldManager), desired.Env{}, decideFunc(d.decide))
	start := time.Now()
	if err := o.Write(ctx(t), p, rollout.Call{}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < retry.ConflictEventWait {
		t.Errorf("the retry came after %s, before retry.ConflictEventWait (%s)", took, retry.ConflictEventWait)
	}
	if diff := cmp.Diff([]string{"PATCH at 5", "PATCH at 8"}, api.requests()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

// After a conflict, the watch event that brings the route's next version
// wakes the write: it decides again on what the cache then holds, with no
// fresh read.
func TestAConflictIsDecidedAgainOnTheWatchEventThatFollows(t *testing.T) {
	o, api, rd, _ := fixture(t, 7, stale, stored(11))
	rd.cacheBehind, rd.eventAfterRead = true, true
	d := &decider{}
	p, _ := o.MakePlan(ctx(t), liveAt(t, 5, "kubectl", fieldManager), desired.Env{}, decideFunc(d.decide))
	if err := o.Write(ctx(t), p, rollout.Call{}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"PATCH at 5", "PATCH at 8"}, api.requests()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"5", "8"}, d.seen); diff != "" {
		t.Errorf("decided on (-want +got):\n%s", diff)
	}
	if rd.gets != 2 || rd.freshReads != 0 {
		t.Errorf("%d reads from the cache, %d fresh; want 2 (before and after the event), 0", rd.gets, rd.freshReads)
	}
}

// A refusal is worded the same whether the route was decided on before the
// write or again after a conflict: the watch cache may or may not hold the
// other manager's change when the call comes, and the controller shows (and
// counts as one Event) what the call says.
func TestARefusalAfterAConflictReadsAsOneBeforeAnyWrite(t *testing.T) {
	ownedAlone := func(map[string]any) (int, any) { return http.StatusOK, served(4, fieldManager) }
	o, api, _, _ := fixtureAmong(t, &exclusion{alone: true}, 7, ownedAlone, ownershipConflict)
	first, _ := o.MakePlan(ctx(t), liveAt(t, 3, fieldManager), desired.Env{}, decideFunc((&decider{}).decide))
	if err := o.Write(ctx(t), first, rollout.Call{}); err != nil {
		t.Fatal(err)
	}
	refuse := errors.New("spec.rules was changed by argocd")
	decide := func(live routes.Route) (desired.Result, error) {
		if live.ResourceVersion == "5" {
			return (&decider{}).decide(live) // the cache does not hold argocd's change yet
		}
		return desired.Result{}, refuse
	}
	p, _ := o.MakePlan(ctx(t), liveAt(t, 5, fieldManager), desired.Env{}, decideFunc(decide))
	afterConflict := o.writeAll(ctx(t), rollout.Call{}, []Plan{p}, nil)
	_, beforeWrite := o.MakePlan(ctx(t), liveAt(t, 8, fieldManager), desired.Env{}, decideFunc(decide))
	want := "nothing was written: " + beforeWrite.Error()
	if afterConflict == nil || afterConflict.Error() != want {
		t.Errorf("refused after a conflict:\n%v\nwant, as before any write:\n%s", afterConflict, want)
	}
	if diff := cmp.Diff([]string{"PATCH at 3", "PATCH owned"}, api.requests()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Writes{Applied: 1, Conflicts: 1, Refused: 1}, o.Writes()); diff != "" {
		t.Errorf("writes counted (-want +got):\n%s", diff)
	}
}
