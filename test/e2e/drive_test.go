//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

var rolloutsGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}

// scenario is one Rollout walked through its steps by the real controller.
type scenario struct {
	name string
	// needs, when set, names the issue that tracks a plugin feature this
	// scenario needs: if the plugin answers "not supported" the scenario is
	// skipped (naming the issue) instead of failing.
	needs string
	// objects are created in the scenario's namespace, in order (Services and
	// routes before the Rollout).
	objects string
	rollout string
	route   routeRef
	steps   []step
}

// routeRef names the route whose state the steps check (Gateway API v1).
type routeRef struct{ kind, name string }

// step is one action and the state it must lead to.
type step struct {
	name string
	do   action
	want want
	// within bounds the wait; default defaultStepTimeout.
	within time.Duration
}

const defaultStepTimeout = 2 * time.Minute

type actionKind int

const (
	none actionKind = iota
	setImage
	promote
	abort
)

// action is what a user does: change the image, or promote/abort as
// `kubectl argo rollouts` does.
type action struct {
	kind  actionKind
	image string
}

func (a action) String() string {
	switch a.kind {
	case setImage:
		return "set image " + a.image
	case promote:
		return "promote"
	case abort:
		return "abort"
	}
	return "wait"
}

func image(img string) action { return action{kind: setImage, image: img} }

// want is the state a step must reach; zero fields are not checked.
type want struct {
	// phase is the Rollout's status.phase (Healthy, Paused, Degraded, Progressing).
	phase string
	// stepIndex is status.currentStepIndex.
	stepIndex *int32
	// promoted: status.stableRS equals status.currentPodHash.
	promoted bool
	// aborted: status.abort is true.
	aborted bool
	// stablePingPong is status.canary.stablePingPong.
	stablePingPong string
	// weights are the backendRefs of the route's main rule (the one rule that
	// holds every Service named here): exactly these Services, with these weights.
	weights map[string]int64
	// rules is the number of rules in the route.
	rules int
	// header, when set, is a rule the plugin added: it matches this header and
	// sends everything to one Service.
	header *headerRule
	// noHeaderRule: no rule matches header (after promotion).
	noHeaderRule string
	// errorText: one Event of the Rollout, its status.message or one of its
	// conditions contains every one of these strings.
	errorText []string
}

type headerRule struct {
	name, value, backend string
}

func index(i int32) *int32 { return &i }

// observed is what the test saw of the Rollout and the route.
type observed struct {
	rollout *v1alpha1.Rollout
	route   []rule
	events  []string
	err     error
}

type rule struct {
	name     string
	headers  []string // "name=value" of every header match
	backends []backend
}

type backend struct {
	name   string
	weight int64
}

func (r rule) String() string {
	var b []string
	for _, be := range r.backends {
		b = append(b, fmt.Sprintf("%s=%d", be.name, be.weight))
	}
	s := "{" + strings.Join(b, " ") + "}"
	if r.name != "" {
		s = r.name + ":" + s
	}
	if len(r.headers) > 0 {
		s = "[" + strings.Join(r.headers, ",") + "]" + s
	}
	return s
}

func (o observed) String() string {
	if o.err != nil {
		return "error: " + o.err.Error()
	}
	var b strings.Builder
	ro := o.rollout
	if ro != nil {
		idx := "nil"
		if ro.Status.CurrentStepIndex != nil {
			idx = fmt.Sprint(*ro.Status.CurrentStepIndex)
		}
		fmt.Fprintf(&b, "  rollout: phase=%s message=%q step=%s stableRS=%s currentPodHash=%s abort=%v paused=%v pauseConditions=%d stablePingPong=%q\n",
			ro.Status.Phase, ro.Status.Message, idx, ro.Status.StableRS, ro.Status.CurrentPodHash, ro.Status.Abort,
			ro.Spec.Paused, len(ro.Status.PauseConditions), ro.Status.Canary.StablePingPong)
		if w := ro.Status.Canary.Weights; w != nil {
			fmt.Fprintf(&b, "  status.canary.weights: stable=%d canary=%d additional=%v\n", w.Stable.Weight, w.Canary.Weight, w.Additional)
		}
		for _, c := range ro.Status.Conditions {
			fmt.Fprintf(&b, "  condition %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
		}
	}
	fmt.Fprintf(&b, "  route rules: %v\n", o.route)
	for _, e := range lastN(o.events, 8) {
		fmt.Fprintf(&b, "  event: %s\n", e)
	}
	return b.String()
}

func lastN(s []string, n int) []string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// mismatches lists how o differs from w; empty when w is reached.
func (w want) mismatches(o observed) []string {
	if o.err != nil {
		return []string{o.err.Error()}
	}
	var out []string
	ro := o.rollout
	// Status written for an older spec (before the last action) proves nothing.
	if ro.Status.ObservedGeneration != strconv.FormatInt(ro.Generation, 10) {
		out = append(out, fmt.Sprintf("status.observedGeneration %q, generation %d", ro.Status.ObservedGeneration, ro.Generation))
	}
	if w.phase != "" && string(ro.Status.Phase) != w.phase {
		out = append(out, fmt.Sprintf("phase %s, want %s", ro.Status.Phase, w.phase))
	}
	if w.stepIndex != nil && (ro.Status.CurrentStepIndex == nil || *ro.Status.CurrentStepIndex != *w.stepIndex) {
		out = append(out, fmt.Sprintf("step index %v, want %d", deref(ro.Status.CurrentStepIndex), *w.stepIndex))
	}
	if w.promoted && (ro.Status.StableRS == "" || ro.Status.StableRS != ro.Status.CurrentPodHash) {
		out = append(out, fmt.Sprintf("not promoted: stableRS %q, currentPodHash %q", ro.Status.StableRS, ro.Status.CurrentPodHash))
	}
	if w.aborted && !ro.Status.Abort {
		out = append(out, "status.abort is not true")
	}
	if w.stablePingPong != "" && string(ro.Status.Canary.StablePingPong) != w.stablePingPong {
		out = append(out, fmt.Sprintf("stablePingPong %q, want %q", ro.Status.Canary.StablePingPong, w.stablePingPong))
	}
	if w.weights != nil {
		out = append(out, checkWeights(o.route, w.weights)...)
	}
	if w.rules != 0 && len(o.route) != w.rules {
		out = append(out, fmt.Sprintf("%d rules, want %d", len(o.route), w.rules))
	}
	if h := w.header; h != nil && findHeaderRule(o.route, h.name) == nil {
		out = append(out, fmt.Sprintf("no rule matches header %s", h.name))
	} else if h != nil {
		r := findHeaderRule(o.route, h.name)
		if !contains(r.headers, h.name+"="+h.value) || len(r.backends) != 1 || r.backends[0].name != h.backend {
			out = append(out, fmt.Sprintf("header rule %v, want %s=%s sending everything to %s", r, h.name, h.value, h.backend))
		}
	}
	if w.noHeaderRule != "" && findHeaderRule(o.route, w.noHeaderRule) != nil {
		out = append(out, fmt.Sprintf("a rule still matches header %s: %v", w.noHeaderRule, findHeaderRule(o.route, w.noHeaderRule)))
	}
	if len(w.errorText) > 0 && errorSource(o, w.errorText) == "" {
		out = append(out, fmt.Sprintf("no event, status message or condition contains all of %q", w.errorText))
	}
	return out
}

func deref(p *int32) any {
	if p == nil {
		return "nil"
	}
	return *p
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// checkWeights compares the main rule: the one rule whose backendRefs name
// every Service in want.
func checkWeights(rules []rule, want map[string]int64) []string {
	var main []rule
	for _, r := range rules {
		names := map[string]bool{}
		for _, b := range r.backends {
			names[b.name] = true
		}
		all := true
		for n := range want {
			if !names[n] {
				all = false
			}
		}
		if all {
			main = append(main, r)
		}
	}
	if len(main) != 1 {
		return []string{fmt.Sprintf("%d rules hold all of %v, want exactly one", len(main), keys(want))}
	}
	got := map[string]int64{}
	for _, b := range main[0].backends {
		got[b.name] += b.weight
	}
	if fmt.Sprint(got) != fmt.Sprint(want) { // fmt sorts map keys
		return []string{fmt.Sprintf("weights %v, want %v", got, want)}
	}
	return nil
}

func keys(m map[string]int64) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func findHeaderRule(rules []rule, header string) *rule {
	for i, r := range rules {
		for _, h := range r.headers {
			if strings.HasPrefix(h, header+"=") {
				return &rules[i]
			}
		}
	}
	return nil
}

// errorSource says where all the words appear: an Event, status.message or a
// condition; "" if nowhere.
func errorSource(o observed, words []string) string {
	has := func(s string) bool {
		for _, w := range words {
			if !strings.Contains(s, w) {
				return false
			}
		}
		return true
	}
	for _, e := range o.events {
		if has(e) {
			return "event: " + e
		}
	}
	if o.rollout != nil {
		if has(o.rollout.Status.Message) {
			return "status.message: " + o.rollout.Status.Message
		}
		for _, c := range o.rollout.Status.Conditions {
			if has(c.Message) {
				return fmt.Sprintf("condition %s: %s", c.Type, c.Message)
			}
		}
	}
	return ""
}

// run is one scenario on the cluster.
type run struct {
	c  *cluster
	sc scenario
	ns string
}

func (r *run) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 20*time.Second)
}

// setup creates the namespace and the scenario's objects.
func (r *run) setup(t *testing.T) {
	ctx, cancel := r.ctx()
	defer cancel()
	if _, err := r.c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(r.sc.objects), 4096)
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if err.Error() == "EOF" {
				break
			}
			t.Fatalf("scenario objects: %v", err)
		}
		if obj == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		u.SetNamespace(r.ns)
		gvk := u.GroupVersionKind()
		gvr := gvk.GroupVersion().WithResource(strings.ToLower(gvk.Kind) + "s")
		if _, err := r.c.dyn.Resource(gvr).Namespace(r.ns).Create(ctx, u, metav1.CreateOptions{FieldManager: "e2e-create"}); err != nil {
			t.Fatalf("creating %s %s: %v", gvk.Kind, u.GetName(), err)
		}
	}
}

// do carries out an action the way `kubectl argo rollouts` does.
func (r *run) do(t *testing.T, a action) {
	ctx, cancel := r.ctx()
	defer cancel()
	ri := r.c.dyn.Resource(rolloutsGVR).Namespace(r.ns)
	switch a.kind {
	case none:
	case setImage:
		// `kubectl argo rollouts set image` / a JSON patch: kubectl set image does not know the kind.
		patch := fmt.Sprintf(`[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":%q}]`, a.image)
		if _, err := ri.Patch(ctx, r.sc.rollout, types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatalf("setting image: %v", err)
		}
	case promote:
		// kubectl argo rollouts promote: unpause the spec if paused, then clear
		// the pause conditions through the status subresource.
		ro, err := r.getRollout(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ro.Spec.Paused {
			if _, err := ri.Patch(ctx, r.sc.rollout, types.MergePatchType, []byte(`{"spec":{"paused":false}}`), metav1.PatchOptions{}); err != nil {
				t.Fatalf("promote (spec): %v", err)
			}
		}
		if len(ro.Status.PauseConditions) > 0 {
			if _, err := ri.Patch(ctx, r.sc.rollout, types.MergePatchType, []byte(`{"status":{"pauseConditions":null}}`), metav1.PatchOptions{}, "status"); err != nil {
				t.Fatalf("promote (status): %v", err)
			}
		} else if !ro.Spec.Paused {
			t.Fatalf("promote: the rollout is not paused:\n%s", observed{rollout: ro})
		}
	case abort:
		if _, err := ri.Patch(ctx, r.sc.rollout, types.MergePatchType, []byte(`{"status":{"abort":true}}`), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatalf("abort: %v", err)
		}
	}
}

func (r *run) getRollout(ctx context.Context) (*v1alpha1.Rollout, error) {
	u, err := r.c.dyn.Resource(rolloutsGVR).Namespace(r.ns).Get(ctx, r.sc.rollout, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	ro := &v1alpha1.Rollout{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ro); err != nil {
		return nil, err
	}
	return ro, nil
}

func (r *run) routeGVR() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: strings.ToLower(r.sc.route.kind) + "s"}
}

func (r *run) observe() observed {
	ctx, cancel := r.ctx()
	defer cancel()
	var o observed
	if o.rollout, o.err = r.getRollout(ctx); o.err != nil {
		return o
	}
	u, err := r.c.dyn.Resource(r.routeGVR()).Namespace(r.ns).Get(ctx, r.sc.route.name, metav1.GetOptions{})
	if err != nil {
		o.err = err
		return o
	}
	o.route = rulesOf(u)
	events, err := r.c.kube.CoreV1().Events(r.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + r.sc.rollout})
	if err != nil {
		o.err = err
		return o
	}
	items := events.Items
	sort.SliceStable(items, func(i, j int) bool { return eventTime(items[i]).Before(eventTime(items[j])) })
	for _, e := range items {
		o.events = append(o.events, fmt.Sprintf("%s %s: %s", e.Type, e.Reason, e.Message))
	}
	return o
}

func eventTime(e corev1.Event) time.Time {
	if !e.LastTimestamp.IsZero() {
		return e.LastTimestamp.Time
	}
	return e.EventTime.Time
}

// rulesOf reads spec.rules of any route kind.
func rulesOf(u *unstructured.Unstructured) []rule {
	raw, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	var out []rule
	for _, x := range raw {
		m, _ := x.(map[string]any)
		var r rule
		r.name, _, _ = unstructured.NestedString(m, "name")
		matches, _, _ := unstructured.NestedSlice(m, "matches")
		for _, mm := range matches {
			hs, _, _ := unstructured.NestedSlice(mm.(map[string]any), "headers")
			for _, h := range hs {
				hm := h.(map[string]any)
				r.headers = append(r.headers, fmt.Sprintf("%v=%v", hm["name"], hm["value"]))
			}
		}
		refs, _, _ := unstructured.NestedSlice(m, "backendRefs")
		for _, ref := range refs {
			rm := ref.(map[string]any)
			name, _, _ := unstructured.NestedString(rm, "name")
			w, found, _ := unstructured.NestedInt64(rm, "weight")
			if !found {
				w = 1
			}
			r.backends = append(r.backends, backend{name: name, weight: w})
		}
		out = append(out, r)
	}
	return out
}

// await polls until the step's state is reached, the step's time is up (fail
// with the last observed state), or the plugin says the feature is not
// supported (skip, naming the issue).
func (r *run) await(t *testing.T, st step) time.Duration {
	t.Helper()
	within := st.within
	if within == 0 {
		within = defaultStepTimeout
	}
	start := time.Now()
	deadline := start.Add(within)
	for {
		o := r.observe()
		problems := st.want.mismatches(o)
		if len(problems) == 0 {
			if len(st.want.errorText) > 0 {
				t.Logf("found in %s", errorSource(o, st.want.errorText))
			}
			return time.Since(start)
		}
		if r.sc.needs != "" {
			if msg := r.notSupported(o); msg != "" {
				t.Skipf("step %q: the plugin does not support this yet (%s): %s", st.name, r.sc.needs, msg)
			}
		}
		if dead := r.c.dead(); len(dead) > 0 {
			t.Fatalf("step %q: cluster process died: %s\nlast observed:\n%s", st.name, strings.Join(dead, "; "), o)
		}
		if time.Now().After(deadline) {
			var logged string
			if lines := r.c.controllerLog.find(3, "level=error", r.ns); len(lines) > 0 {
				logged = "\nlast errors in the controller's log for " + r.ns + ":\n  " + strings.Join(lines, "\n  ")
			}
			t.Fatalf("step %q (%s): not reached within %s: %s\nlast observed:\n%s%s", st.name, st.do, within, strings.Join(problems, "; "), o, logged)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// notSupported finds the plugin's "not supported" answer for this scenario:
// in a Rollout event (SetWeight errors become TrafficRoutingError events) or
// in the controller's log (SetHeaderRoute errors are only logged there).
func (r *run) notSupported(o observed) string {
	for _, e := range o.events {
		if strings.Contains(strings.ToLower(e), "not supported") {
			return e
		}
	}
	if o.rollout != nil && strings.Contains(strings.ToLower(o.rollout.Status.Message), "not supported") {
		return o.rollout.Status.Message
	}
	if lines := r.c.controllerLog.find(1, "not supported", r.ns); len(lines) > 0 {
		return lines[0]
	}
	return ""
}

// dump writes the Rollout, the route and the events to logs/scenario-<name>.txt.
func (r *run) dump(t *testing.T) {
	ctx, cancel := r.ctx()
	defer cancel()
	var b strings.Builder
	if u, err := r.c.dyn.Resource(rolloutsGVR).Namespace(r.ns).Get(ctx, r.sc.rollout, metav1.GetOptions{}); err == nil {
		y, _ := yaml.Marshal(u.Object)
		fmt.Fprintf(&b, "# Rollout %s/%s\n%s\n", r.ns, r.sc.rollout, y)
	}
	if u, err := r.c.dyn.Resource(r.routeGVR()).Namespace(r.ns).Get(ctx, r.sc.route.name, metav1.GetOptions{}); err == nil {
		y, _ := yaml.Marshal(u.Object)
		fmt.Fprintf(&b, "# %s %s/%s\n%s\n", r.sc.route.kind, r.ns, r.sc.route.name, y)
	}
	if ev, err := r.c.kube.CoreV1().Events(r.ns).List(ctx, metav1.ListOptions{}); err == nil {
		b.WriteString("# Events\n")
		items := ev.Items
		sort.SliceStable(items, func(i, j int) bool { return eventTime(items[i]).Before(eventTime(items[j])) })
		for _, e := range items {
			fmt.Fprintf(&b, "%s %s %s/%s %s: %s\n", eventTime(e).Format(time.RFC3339), e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
	path := filepath.Join(r.c.logDir, "scenario-"+r.sc.name+".txt")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Logf("writing %s: %v", path, err)
	}
}

// runScenario creates the objects and walks the steps, each with a bounded wait.
func runScenario(t *testing.T, c *cluster, sc scenario) {
	r := &run{c: c, sc: sc, ns: "e2e-" + sc.name}
	start := time.Now()
	t.Cleanup(func() {
		r.dump(t)
		status := "passed"
		switch {
		case t.Skipped():
			status = "skipped"
		case t.Failed():
			status = "FAILED"
		}
		c.measure(fmt.Sprintf("scenario %s (%s)", sc.name, status), start)
	})
	r.setup(t)
	for _, st := range sc.steps {
		r.do(t, st.do)
		took := r.await(t, st)
		o := r.observe()
		t.Logf("%-44s %5.1fs  route %v", st.name, took.Seconds(), o.route)
	}
}
