package compat

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	rolloutsrpc "github.com/argoproj/argo-rollouts/rollout/trafficrouting/plugin/rpc"
	"github.com/argoproj/argo-rollouts/utils/plugin/types"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

const (
	fieldManager     = "argo-rollouts-gatewayapi"
	pluginUserAgent  = "rollouts-gatewayapi-ssa"
	claimsAnnotation = "gatewayapi-ssa.dev/claims"
	inProgressLabel  = "rollouts.argoproj.io/gatewayapi-canary"
	// claimsRecorded stands for the claims annotation's value in the routes
	// compared: what it records is the plugin's business, that it is there is
	// the contract.
	claimsRecorded = "(the plugin's claims)"
)

// The values of a cell other than an error's name.
const (
	works         = "works"
	notApplicable = "n/a"
	// failed is a cell that went wrong in a way the page has no name for.
	failed = "fails"
)

// outcome is what one cell measured: works, n/a, the name of an error the
// page names, or failed; detail says what happened for the last two.
type outcome struct {
	value, detail string
}

// cluster is one release's channel, running, with one plugin process for
// all its cells (as one Argo Rollouts controller has).
type cluster struct {
	*harness.Cluster
	plugin rolloutsrpc.TrafficRouterPlugin
	log    *pluginLog
}

// cell is one feature being measured on one route kind of a cluster, in a
// namespace of its own.
type cell struct {
	c       cluster
	kind    routeKind
	ns      string
	created *unstructured.Unstructured
	// start is where the recorder stood when the cell began.
	start   int
	outcome outcome
}

// stopCell is what a cell panics with to stop; measure recovers it.
type stopCell struct{}

var nsCounter atomic.Int32

// measure runs one feature on one kind and says what came of it.
func measure(c cluster, k routeKind, f feature) (o outcome) {
	if f.matchesOnly && !k.Matches {
		return outcome{value: notApplicable}
	}
	x := &cell{c: c, kind: k, ns: fmt.Sprintf("c%d-%s", nsCounter.Add(1), strings.ToLower(k.Kind)), start: c.Recorder.Count()}
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(stopCell); !ok {
				panic(r)
			}
			o = x.outcome
			if log := c.log.about(x.ns); o.value == failed && log != "" {
				o.detail += "\nthe plugin's log for the cell:\n" + log
			}
		}
	}()
	if err := c.Namespace(x.ns, "stable", "canary", "ping", "pong", "exp-baseline", "exp-canary"); err != nil {
		x.failf("%v", err)
	}
	f.run(x)
	x.expectVersionUsed()
	return outcome{value: works}
}

func (x *cell) stop(o outcome) {
	x.outcome = o
	panic(stopCell{})
}

func (x *cell) failf(format string, args ...any) {
	x.stop(outcome{value: failed, detail: fmt.Sprintf(format, args...)})
}

// create creates the cell's route.
func (x *cell) create(r route) {
	u, err := x.c.CreateYAML(x.ns, x.kind.manifest(r))
	if err != nil {
		x.failf("%v", err)
	}
	x.created = u
}

func (x *cell) gvr() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: x.kind.Version, Resource: x.kind.resource()}
}

// get reads the cell's route as stored.
func (x *cell) get() *unstructured.Unstructured {
	u, err := x.c.Dynamic.Resource(x.gvr()).Namespace(x.ns).Get(context.Background(), "route", metav1.GetOptions{})
	if err != nil {
		x.failf("reading %s %s/route: %v", x.kind.Kind, x.ns, err)
	}
	return u
}

// config is the Rollout's plugin config naming the cell's route, with more
// keys ("\"verifyWeight\": true").
func (x *cell) config(more ...string) string {
	return "{" + strings.Join(append([]string{fmt.Sprintf(`"%s": "route"`, x.kind.key())}, more...), ", ") + "}"
}

// rollout is a Rollout of stable and canary with the given plugin config and
// managedRoutes entries.
func (x *cell) rollout(config string, managed ...string) *v1alpha1.Rollout {
	ro := &v1alpha1.Rollout{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: x.ns},
		Spec: v1alpha1.RolloutSpec{Strategy: v1alpha1.RolloutStrategy{Canary: &v1alpha1.CanaryStrategy{
			StableService: "stable",
			CanaryService: "canary",
			TrafficRouting: &v1alpha1.RolloutTrafficRouting{
				Plugins: map[string]json.RawMessage{"argoproj-labs/gatewayAPI": json.RawMessage(config)},
			},
		}}},
	}
	for _, m := range managed {
		ro.Spec.Strategy.Canary.TrafficRouting.ManagedRoutes = append(ro.Spec.Strategy.Canary.TrafficRouting.ManagedRoutes, v1alpha1.MangedRoutes{Name: m})
	}
	return ro
}

// call makes one of the plugin's calls. An RpcError stops the cell: with the
// error's name when the page names it and the call wrote nothing (a named
// error is the plugin refusing before it writes), as a failure otherwise.
func (x *cell) call(what string, do func() types.RpcError) {
	mark := x.c.Recorder.Count()
	err := do()
	if !err.HasError() {
		return
	}
	name := errorName(err.ErrorString)
	if name == "" {
		x.failf("%s: %s", what, err.ErrorString)
	}
	if w := x.writesSince(mark); len(w) > 0 {
		x.failf("%s: %s (%s), but only after writing: %v", what, name, err.ErrorString, w)
	}
	x.stop(outcome{value: name, detail: what + ": " + err.ErrorString})
}

func (x *cell) setWeight(ro *v1alpha1.Rollout, weight int32, experiment ...v1alpha1.WeightDestination) {
	x.call(fmt.Sprintf("SetWeight(%d, %v)", weight, experiment), func() types.RpcError { return x.c.plugin.SetWeight(ro, weight, experiment) })
}

func (x *cell) setHeaderRoute(ro *v1alpha1.Rollout, step *v1alpha1.SetHeaderRoute) {
	x.call(fmt.Sprintf("SetHeaderRoute(%s, %d matches)", step.Name, len(step.Match)), func() types.RpcError { return x.c.plugin.SetHeaderRoute(ro, step) })
}

func (x *cell) setMirrorRoute(ro *v1alpha1.Rollout, step *v1alpha1.SetMirrorRoute) {
	pct := "no percentage"
	if step.Percentage != nil {
		pct = fmt.Sprintf("%d %%", *step.Percentage)
	}
	x.call(fmt.Sprintf("SetMirrorRoute(%s, %d matches, %s)", step.Name, len(step.Match), pct), func() types.RpcError { return x.c.plugin.SetMirrorRoute(ro, step) })
}

func (x *cell) removeManagedRoutes(ro *v1alpha1.Rollout) {
	x.call("RemoveManagedRoutes", func() types.RpcError { return x.c.plugin.RemoveManagedRoutes(ro) })
}

// verifyWeight calls VerifyWeight and stops the cell unless it answers want.
func (x *cell) verifyWeight(ro *v1alpha1.Rollout, weight int32, want types.RpcVerified) {
	var got types.RpcVerified
	what := fmt.Sprintf("VerifyWeight(%d)", weight)
	x.call(what, func() types.RpcError {
		var err types.RpcError
		got, err = x.c.plugin.VerifyWeight(ro, weight, nil)
		return err
	})
	if got != want {
		x.failf("%s = %s, want %s", what, harness.VerifiedName(got), harness.VerifiedName(want))
	}
}

// writesSince lists the plugin's writes in the cell's namespace after the
// recorder's mark.
func (x *cell) writesSince(mark int) []string {
	var out []string
	for _, r := range x.c.Recorder.RequestsSince(mark) {
		if r.IsWrite() && strings.HasPrefix(r.UserAgent, pluginUserAgent) && strings.Contains(r.Path, "/namespaces/"+x.ns+"/") {
			out = append(out, r.Method+" "+r.Path)
		}
	}
	return out
}

// expectWrites stops the cell unless the plugin wrote n times since mark.
func (x *cell) expectWrites(after string, mark, n int) {
	if w := x.writesSince(mark); len(w) != n {
		x.failf("%s: %d writes, want %d: %v", after, len(w), n, w)
	}
}

// expectVersionUsed stops the cell unless every request of the plugin for
// the cell's route used the version the page names for the kind.
func (x *cell) expectVersionUsed() {
	want := "/apis/gateway.networking.k8s.io/" + x.kind.Version + "/"
	seen := 0
	for _, r := range x.c.Recorder.RequestsSince(x.start) {
		if !strings.HasPrefix(r.UserAgent, pluginUserAgent) || !strings.Contains(r.Path, "/namespaces/"+x.ns+"/"+x.kind.resource()) {
			continue
		}
		seen++
		if !strings.HasPrefix(r.Path, want) {
			x.failf("the plugin used another version of %s than %s: %s %s", x.kind.Kind, x.kind.Version, r.Method, r.Path)
		}
	}
	if seen == 0 {
		x.failf("the plugin never read %s %s/route", x.kind.Kind, x.ns)
	}
}

// expectRoute stops the cell unless the route is want, as a whole.
func (x *cell) expectRoute(after string, want *expected) {
	if diff := cmp.Diff(comparable(want.u), comparable(x.get())); diff != "" {
		x.failf("%s %s/route after %s (-want +got):\n%s", x.kind, x.ns, after, diff)
	}
}

// expectOwnsRules stops the cell unless the plugin's apply owns spec.rules.
func (x *cell) expectOwnsRules(after string) {
	for _, e := range x.get().GetManagedFields() {
		if e.Manager == fieldManager && e.Operation == metav1.ManagedFieldsOperationApply && e.FieldsV1 != nil && strings.Contains(e.FieldsV1.GetRawString(), `"f:rules"`) {
			return
		}
	}
	x.failf("after %s the plugin does not own spec.rules", after)
}

// expectReleased stops the cell unless the plugin owns nothing on the route.
func (x *cell) expectReleased(after string) {
	for _, e := range x.get().GetManagedFields() {
		if e.Manager == fieldManager {
			x.failf("after %s the plugin still has a managedFields entry: %s %s", after, e.Operation, e.FieldsV1.GetRawString())
		}
	}
}

// comparable is a route as the cells compare it: without what the apiserver
// changes on every write, the claims annotation's value replaced.
func comparable(u *unstructured.Unstructured) map[string]any {
	u = u.DeepCopy()
	for _, f := range []string{"resourceVersion", "generation", "managedFields"} {
		unstructured.RemoveNestedField(u.Object, "metadata", f)
	}
	if a := u.GetAnnotations(); a[claimsAnnotation] != "" {
		a[claimsAnnotation] = claimsRecorded
		u.SetAnnotations(a)
	}
	return u.Object
}

// expected is the route a cell expects, built from the one it created.
type expected struct {
	u *unstructured.Unstructured
	x *cell
}

func (x *cell) expected() *expected { return &expected{u: x.created.DeepCopy(), x: x} }

func (e *expected) rules() []any { return e.u.Object["spec"].(map[string]any)["rules"].([]any) }

func (e *expected) rule(i int) map[string]any { return e.rules()[i].(map[string]any) }

// weights sets the weights of rule i's backendRefs by Service name.
func (e *expected) weights(i int, byName map[string]int64) *expected {
	for _, ref := range e.rule(i)["backendRefs"].([]any) {
		ref := ref.(map[string]any)
		if w, ok := byName[ref["name"].(string)]; ok {
			ref["weight"] = w
		}
	}
	return e
}

// backendRefs appends backendRefs (YAML) to rule i.
func (e *expected) backendRefs(i int, refs ...string) *expected {
	for _, r := range refs {
		e.rule(i)["backendRefs"] = append(e.rule(i)["backendRefs"].([]any), e.x.object(r))
	}
	return e
}

// filter appends a filter (YAML) to rule i.
func (e *expected) filter(i int, f string) *expected {
	e.rule(i)["filters"] = append(e.rule(i)["filters"].([]any), e.x.object(f))
	return e
}

// added appends rules (YAML) to the route.
func (e *expected) added(rules ...string) *expected {
	all := e.rules()
	for _, r := range rules {
		all = append(all, e.x.object(r))
	}
	e.u.Object["spec"].(map[string]any)["rules"] = all
	return e
}

// inProgress adds the in-progress label and the claims annotation.
func (e *expected) inProgress() *expected {
	labels, annotations := e.u.GetLabels(), e.u.GetAnnotations()
	labels[inProgressLabel] = "in-progress"
	annotations[claimsAnnotation] = claimsRecorded
	e.u.SetLabels(labels)
	e.u.SetAnnotations(annotations)
	return e
}

// status sets the route's status, as read back from the status subresource.
func (e *expected) status(s any) *expected {
	e.u.Object["status"] = s
	return e
}

// object parses YAML into the form the dynamic client serves (numbers as int64).
func (x *cell) object(s string) map[string]any {
	data, err := yaml.YAMLToJSON([]byte(s))
	if err != nil {
		x.failf("bad YAML in the test: %v\n%s", err, s)
	}
	var out map[string]any
	if err := utiljson.Unmarshal(data, &out); err != nil {
		x.failf("bad YAML in the test: %v\n%s", err, s)
	}
	return out
}

// pluginLog keeps a plugin's log, to show the lines of a cell that failed.
type pluginLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *pluginLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, strings.Split(strings.TrimRight(string(p), "\n"), "\n")...)
	return len(p), nil
}

// about returns the lines that mention namespace ns.
func (l *pluginLog) about(ns string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if strings.Contains(line, ns+"/") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
