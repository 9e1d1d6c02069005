//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/e2e/cluster"
)

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
	route   []cluster.Rule
	events  []string
	err     error
}

func (o observed) String() string {
	if o.err != nil {
		return "error: " + o.err.Error()
	}
	var b strings.Builder
	if o.rollout != nil {
		b.WriteString(cluster.DescribeRollout(o.rollout))
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
	ro := o.rollout
	// Status written for an older spec (before the last action) proves nothing.
	out := cluster.RolloutWant{Phase: w.phase, StepIndex: w.stepIndex, Promoted: w.promoted, Aborted: w.aborted}.Mismatches(ro)
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
		if !contains(r.Headers, h.name+"="+h.value) || len(r.Backends) != 1 || r.Backends[0].Name != h.backend {
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
func checkWeights(rules []cluster.Rule, want map[string]int64) []string {
	var main []cluster.Rule
	for _, r := range rules {
		names := map[string]bool{}
		for _, b := range r.Backends {
			names[b.Name] = true
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
	for _, b := range main[0].Backends {
		got[b.Name] += b.Weight
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

func findHeaderRule(rules []cluster.Rule, header string) *cluster.Rule {
	for i, r := range rules {
		for _, h := range r.Headers {
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
	c  *cluster.Cluster
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
	if _, err := r.c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.c.CreateObjects(ctx, r.ns, r.sc.objects, "e2e-create"); err != nil {
		t.Fatalf("scenario objects: %v", err)
	}
}

// do carries out an action the way `kubectl argo rollouts` does.
func (r *run) do(t *testing.T, a action) {
	ctx, cancel := r.ctx()
	defer cancel()
	var err error
	switch a.kind {
	case none:
	case setImage:
		err = r.c.SetImage(ctx, r.ns, r.sc.rollout, a.image)
	case promote:
		err = r.c.Promote(ctx, r.ns, r.sc.rollout)
	case abort:
		err = r.c.Abort(ctx, r.ns, r.sc.rollout)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func (r *run) observe() observed {
	ctx, cancel := r.ctx()
	defer cancel()
	var o observed
	if o.rollout, o.err = r.c.Rollout(ctx, r.ns, r.sc.rollout); o.err != nil {
		return o
	}
	u, err := r.c.Route(ctx, r.ns, r.sc.route.kind, r.sc.route.name)
	if err != nil {
		o.err = err
		return o
	}
	o.route = cluster.Rules(u)
	items, err := r.c.Events(ctx, r.ns, "involvedObject.name="+r.sc.rollout)
	if err != nil {
		o.err = err
		return o
	}
	for _, e := range items {
		o.events = append(o.events, fmt.Sprintf("%s %s: %s", e.Type, e.Reason, e.Message))
	}
	return o
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
	var o observed
	err := r.c.Await(context.Background(), within, func() (string, error) {
		o = r.observe()
		problems := st.want.mismatches(o)
		if len(problems) == 0 {
			return "", nil
		}
		if r.sc.needs != "" {
			if msg := r.notSupported(o); msg != "" {
				t.Skipf("step %q: the plugin does not support this yet (%s): %s", st.name, r.sc.needs, msg)
			}
		}
		return strings.Join(problems, "; "), nil
	})
	switch {
	case errors.Is(err, cluster.ErrNotReached):
		var logged string
		if lines := r.c.ControllerLog.Find(3, "level=error", r.ns); len(lines) > 0 {
			logged = "\nlast errors in the controller's log for " + r.ns + ":\n  " + strings.Join(lines, "\n  ")
		}
		t.Fatalf("step %q (%s): %v\nlast observed:\n%s%s", st.name, st.do, err, o, logged)
	case err != nil:
		t.Fatalf("step %q: %v\nlast observed:\n%s", st.name, err, o)
	}
	if len(st.want.errorText) > 0 {
		t.Logf("found in %s", errorSource(o, st.want.errorText))
	}
	return time.Since(start)
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
	if lines := r.c.ControllerLog.Find(1, "not supported", r.ns); len(lines) > 0 {
		return lines[0]
	}
	return ""
}

// dump writes the Rollout, the route and the events to logs/scenario-<name>.txt.
func (r *run) dump(t *testing.T) {
	ctx, cancel := r.ctx()
	defer cancel()
	var b strings.Builder
	if u, err := r.c.Dynamic.Resource(cluster.RolloutsGVR).Namespace(r.ns).Get(ctx, r.sc.rollout, metav1.GetOptions{}); err == nil {
		y, _ := yaml.Marshal(u.Object)
		fmt.Fprintf(&b, "# Rollout %s/%s\n%s\n", r.ns, r.sc.rollout, y)
	}
	if u, err := r.c.Route(ctx, r.ns, r.sc.route.kind, r.sc.route.name); err == nil {
		y, _ := yaml.Marshal(u.Object)
		fmt.Fprintf(&b, "# %s %s/%s\n%s\n", r.sc.route.kind, r.ns, r.sc.route.name, y)
	}
	if items, err := r.c.Events(ctx, r.ns, ""); err == nil {
		b.WriteString("# Events\n")
		for _, e := range items {
			fmt.Fprintf(&b, "%s %s %s/%s %s: %s\n", cluster.EventTime(e).Format(time.RFC3339), e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
	path := filepath.Join(r.c.LogDir, "scenario-"+r.sc.name+".txt")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Logf("writing %s: %v", path, err)
	}
}

// runScenario creates the objects and walks the steps, each with a bounded wait.
func runScenario(t *testing.T, c *cluster.Cluster, sc scenario) {
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
		c.Measure(fmt.Sprintf("scenario %s (%s)", sc.name, status), start)
	})
	r.setup(t)
	for _, st := range sc.steps {
		r.do(t, st.do)
		took := r.await(t, st)
		o := r.observe()
		t.Logf("%-44s %5.1fs  route %v", st.name, took.Seconds(), o.route)
	}
}
