//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/test/e2e/cluster"
	"github.com/gatewayapi-ssa/rollouts-plugin/test/e2e/traffic"
)

// scenario is one Rollout walked through its steps by the real controller.
type scenario struct {
	name string
	// objects are created in the scenario's namespace, in order (Services and
	// routes before the Rollout).
	objects string
	rollout string
	route   routeRef
	// backends get a server in the data plane each, reached through an
	// EndpointSlice (an experiment's Services too, before the Experiment
	// controller creates them). A scenario with backends has its HTTPRoute
	// on the Traefik Gateway, and every step that names weights is measured
	// through Traefik as well.
	backends []backend
	// host is the Host header of the route's requests (its hostname; a
	// TLSRoute's SNI, a GRPCRoute's authority).
	host string
	// protocol is what the backends speak and the measurements send (HTTP
	// unless set), listener the Gateway listener the route attaches to
	// (cluster.GatewayListener unless set).
	protocol traffic.Protocol
	listener string
	steps    []step
}

// backend is a Service that gets a backend, and the name of the Service
// port it is reached through.
type backend struct{ service, port string }

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
	// restartController kills the Argo Rollouts controller (and its plugin
	// process) and starts it again.
	restartController
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
	case restartController:
		return "kill and restart the controller"
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
	// released: the plugin has let go of the route: no managedFields entry
	// of its field manager, no claims annotation, no in-progress label.
	released bool
	// logged: a line of the controller's log about the scenario's namespace
	// contains every one of these strings (the controller records no Event
	// of SetMirrorRoute and SetHeaderRoute errors; the plugin's own Warning
	// is checked by events_test.go).
	logged []string
	// gatewayErrors: Traefik answers the requests with errors of its own
	// (what a rule it cannot carry does); measured and printed, not split.
	gatewayErrors bool

	// What Traefik must carry, measured with 1,000 requests once the state
	// above is reached (scenarios with backends only): the weights above,
	// split over the Services' backends within traffic.Tolerance, and
	// requests with the header rule's header all going to its backend.
	// versions is the share (percent) of those requests per version: the
	// image tag of the ReplicaSet each Service selects.
	versions map[string]int64
	// sticky: stickyCanary's cookies, measured once the split is (sticky.go).
	sticky *stickyWant
	// verified: the controller logged this step's weight as verified, and
	// the requests sent right then split as that weight says.
	verified *verifiedWant
}

// verifiedWant is the controller's log line "Desired weight (stepIdx:
// <stepIndex>) <weight> verified", logged after the step's action, and the
// split Traefik must carry when it is logged.
type verifiedWant struct {
	stepIndex string
	weight    int32
	split     map[string]int64
}

type headerRule struct {
	name, value, backend string
}

func index(i int32) *int32 { return &i }

// observed is what the test saw of the Rollout and the route.
type observed struct {
	rollout    *v1alpha1.Rollout
	route      []cluster.Rule
	generation int64
	// leftovers is what the plugin holds on the route (see want.released).
	leftovers []string
	events    []string
	err       error
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
		if !slices.Contains(r.Headers, h.name+"="+h.value) || len(r.Backends) != 1 || r.Backends[0].Name != h.backend {
			out = append(out, fmt.Sprintf("header rule %v, want %s=%s sending everything to %s", r, h.name, h.value, h.backend))
		}
	}
	if w.noHeaderRule != "" && findHeaderRule(o.route, w.noHeaderRule) != nil {
		out = append(out, fmt.Sprintf("a rule still matches header %s: %v", w.noHeaderRule, findHeaderRule(o.route, w.noHeaderRule)))
	}
	if w.released && len(o.leftovers) > 0 {
		out = append(out, fmt.Sprintf("the plugin still holds %s", strings.Join(o.leftovers, ", ")))
	}
	if len(w.errorText) > 0 && errorSource(o, w.errorText) == "" {
		out = append(out, fmt.Sprintf("no event, status message or condition contains all of %q", w.errorText))
	}
	return out
}

// fieldManager is the plugin's field manager: the cluster runs it with its
// default.
const fieldManager = "argo-rollouts-gatewayapi"

// pluginLeftovers lists what the plugin (at its default field manager and
// label) holds on a route.
func pluginLeftovers(u *unstructured.Unstructured) []string {
	var out []string
	for _, e := range u.GetManagedFields() {
		if e.Manager == fieldManager {
			out = append(out, fmt.Sprintf("a managedFields entry (%s)", e.Operation))
		}
	}
	if _, ok := u.GetAnnotations()[routes.ClaimsAnnotation]; ok {
		out = append(out, "its claims annotation")
	}
	if _, ok := u.GetLabels()["rollouts.argoproj.io/gatewayapi-canary"]; ok {
		out = append(out, "its in-progress label")
	}
	return out
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
	// watch times the route's generations and Traefik's status for them.
	watch *cluster.RouteWatch
	// measured are the traffic lines of every step, for the scenario's dump.
	measured []string
	// canaryCookie is the last canary cookie (name=value) a sticky step got.
	canaryCookie string
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
	for _, b := range r.sc.backends {
		addr, err := r.c.Backends.Serve(ctx, traffic.Backend{Namespace: r.ns, Service: b.service, PortName: b.port, Protocol: r.sc.protocol, Host: r.sc.host})
		if err != nil {
			t.Fatalf("backend for Service %s: %v", b.service, err)
		}
		t.Logf("backend of Service %s at %s", b.service, addr)
	}
	if err := r.c.CreateObjects(ctx, r.ns, r.sc.objects, "e2e-create"); err != nil {
		t.Fatalf("scenario objects: %v", err)
	}
	if len(r.sc.backends) > 0 {
		w, err := r.c.WatchRoute(ctx, r.ns, r.sc.route.kind, r.sc.route.name)
		if err != nil {
			t.Fatal(err)
		}
		r.watch = w
		t.Cleanup(w.Stop)
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
	case restartController:
		var away time.Duration
		if away, err = r.c.RestartRolloutsController(); err == nil {
			t.Logf("the controller (with its plugin) was killed and is healthy again after %s", away.Round(time.Millisecond))
		}
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
	o.generation = u.GetGeneration()
	o.leftovers = pluginLeftovers(u)
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

// await polls until the step's state is reached or the step's time is up
// (fail with the last observed state). An answer of the plugin that says
// "not supported" fails the step at once, unless the step expects that text:
// every feature the scenarios use is supported, so such an answer is a
// regression, never a reason to skip.
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
		if len(st.want.logged) > 0 && len(r.c.ControllerLog.Find(1, append([]string{r.ns}, st.want.logged...)...)) == 0 {
			problems = append(problems, fmt.Sprintf("no line of the controller's log contains all of %q", st.want.logged))
		}
		if len(problems) == 0 {
			return "", nil
		}
		if msg := r.notSupported(o); msg != "" && !expects(st.want.errorText, "not supported") {
			return "", fmt.Errorf("the plugin answered \"not supported\": %s", msg)
		}
		return strings.Join(problems, "; "), nil
	})
	switch {
	case errors.Is(err, cluster.ErrNotReached):
		var logged string
		if lines := r.c.ControllerLog.Errors(3, r.ns); len(lines) > 0 {
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

// expects says whether one of the expected error texts contains phrase.
func expects(texts []string, phrase string) bool {
	for _, s := range texts {
		if strings.Contains(strings.ToLower(s), phrase) {
			return true
		}
	}
	return false
}

// notSupported finds the plugin's "not supported" answer for this scenario:
// in a Rollout event (SetWeight errors become TrafficRoutingError events;
// every error is the plugin's own Warning too) or in the controller's log.
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
	if r.watch != nil {
		b.WriteString("# Traffic measured through Traefik\n")
		for _, l := range r.measured {
			b.WriteString(l + "\n")
		}
		fmt.Fprintf(&b, "# The route's generations (times after the first)\n")
		for _, l := range r.watch.Since(time.Time{}) {
			b.WriteString(l + "\n")
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
		c.Measure(fmt.Sprintf("scenario %s (%s)", sc.name, passed(t)), start)
	})
	r.setup(t)
	for _, st := range sc.steps {
		began := time.Now()
		// A step whose answer from VerifyWeight is checked samples the
		// traffic all along, to know what Traefik carried at that moment.
		var sampler *traffic.Sampler
		if st.want.verified != nil {
			sampler = c.Meter.Sample(context.Background(), r.request(nil), traffic.MaxRequests, 500*time.Microsecond)
			t.Cleanup(func() { sampler.Stop() }) // when the step fails before checkVerified stops it
		}
		r.do(t, st.do)
		took := r.await(t, st)
		o := r.observe()
		t.Logf("%-44s %5.1fs  route %v", st.name, took.Seconds(), o.route)
		if sampler != nil {
			r.checkVerified(t, st, began, sampler)
		}
		if len(sc.backends) > 0 && st.want.weights != nil {
			r.checkTraffic(t, st, o, began)
		}
		if st.want.gatewayErrors {
			r.checkGatewayErrors(t, st)
		}
	}
}
