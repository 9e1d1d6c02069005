package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/test/e2e/cluster"
	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// demoRolloutYAML is the Rollout `make demo` creates next to
// docs/examples/demo.yaml. A setHeaderRoute needs a canary pod first (the
// controller removes managed rules while the canary has none), so it comes
// after a setWeight.
const demoRolloutYAML = `apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: rollouts-demo
  namespace: demo
spec:
  replicas: 2
  revisionHistoryLimit: 2
  selector:
    matchLabels:
      app: rollouts-demo
  template:
    metadata:
      labels:
        app: rollouts-demo
    spec:
      containers:
      - name: app
        image: argoproj/rollouts-demo:blue
        ports:
        - containerPort: 8080
  strategy:
    canary:
      stableService: rollouts-demo-stable
      canaryService: rollouts-demo-canary
      scaleDownDelaySeconds: 5
      trafficRouting:
        managedRoutes:
        - name: canary-testers
        plugins:
          argoproj-labs/gatewayAPI:
            httpRoute: rollouts-demo
      steps:
      - setWeight: 10
      - pause: {}
      - setWeight: 50
      - setHeaderRoute:
          name: canary-testers
          match:
          - headerName: X-Canary
            headerValue:
              exact: "yes"
      - pause: {}
`

// stepTimeout bounds the wait for each state of the controller demo.
const stepTimeout = 2 * time.Minute

// controllerDemo is `make demo`: the demo's printing, and the cluster whose
// Argo Rollouts controller runs the plugin.
type controllerDemo struct {
	*demo
	c     *cluster.Cluster
	log   *pluginLog
	watch *cluster.RouteWatch
}

// runController is `make demo`: the real Argo Rollouts controller walks a
// Rollout through its steps on a cluster of local processes, and the demo
// acts as the user (new image, `kubectl argo rollouts promote` and `abort`)
// and prints the Rollout and the route at every stop.
func runController(ctx context.Context, out io.Writer) (err error) {
	d := &controllerDemo{demo: &demo{ctx: ctx, out: out}}
	d.title("Argo Rollouts Gateway API plugin (server-side apply): demo")
	fmt.Fprintln(out, "The real Argo Rollouts controller (v1.10.1) loads the plugin binary and walks a Rollout")
	fmt.Fprintln(out, "on a cluster of local processes: etcd, kube-apiserver, kube-controller-manager,")
	fmt.Fprintln(out, "kube-scheduler and kwok (fake nodes: pods become Ready without running anything).")
	fmt.Fprintln(out, "Traefik v3.7 is the gateway: after every step the demo sends 1,000 real requests through it")
	fmt.Fprintln(out, "(to 127.0.0.1) and shows which Service's backend answered, next to the weights on the route.")
	fmt.Fprintln(out, "A second act walks a ping-pong Rollout on a TCPRoute with 50 long-lived TCP connections open.")
	fmt.Fprintln(out, "")
	fmt.Fprintln(out, "The binaries are built from the Go module proxy and cached in ~/.cache/rollouts-gatewayapi-ssa.")
	fmt.Fprintln(out, "On a brand-new 2-core machine the first run builds them: 15 min 47 s after make test had built")
	fmt.Fprintln(out, "kube-apiserver and etcd (2026-12-04, README); far longer on a busy machine (docs/performance/e2e.md).")
	fmt.Fprintln(out, "Later runs reuse them and take about 2 minutes. The backends live in a network namespace of the")
	fmt.Fprintln(out, "demo's own: it needs root.")
	fmt.Fprintln(out, "")

	c, err := cluster.Start(cluster.Options{Name: "demo", Out: out})
	defer func() {
		fmt.Fprintln(out, "")
		c.Stop() // prints where the logs are
	}()
	if err != nil {
		return fmt.Errorf("starting the cluster (logs in %s): %w", c.LogDir, err)
	}
	d.c, d.kube, d.dyn = c, c.Kube, c.Dynamic
	d.log = &pluginLog{path: filepath.Join(c.LogDir, "rollouts-controller.log")}
	if err := d.interrupted(); err != nil {
		return err
	}

	if err := d.applyExamples(filepath.Join(harness.RepoRoot(), "docs", "examples", "demo.yaml")); err != nil {
		return err
	}
	if err := d.serveBackends(); err != nil {
		return err
	}
	defer d.watch.Stop()
	d.title("The Rollout")
	fmt.Fprintf(out, "Created with `kubectl create` (field manager \"kubectl\"). The plugin reads its config under\nthe name it is registered with in argo-rollouts-config, %q:\n\n", cluster.PluginName)
	fmt.Fprint(out, indent(demoRolloutYAML, "    "))
	if err := d.c.CreateObjects(ctx, namespace, demoRolloutYAML, "kubectl"); err != nil {
		return fmt.Errorf("creating the Rollout: %w", err)
	}

	for _, st := range d.steps() {
		if err := d.walk(st); err != nil {
			return err
		}
	}
	if err := d.pingPongAct(); err != nil {
		return err
	}

	d.title("Done")
	fmt.Fprintln(out, "The Argo Rollouts controller called the plugin at every step. Every weight and rule change")
	fmt.Fprintf(out, "was one server-side apply under the field manager %q; the header rule lived\n", fieldManager)
	fmt.Fprintln(out, "only while its step was active; the abort put all traffic back on stable; and when each")
	fmt.Fprintln(out, "rollout ended the plugin gave spec.rules back with one Update: it owns nothing on the route now.")
	fmt.Fprintln(out, "After every step Traefik carried exactly the split on the route: the counts above are real")
	fmt.Fprintln(out, "requests, answered by the backend of the Service they were routed to.")
	return nil
}

// controllerStep is one thing the user does and the state it leads to.
type controllerStep struct {
	title, why string
	do         func(ctx context.Context) error
	rollout    cluster.RolloutWant
	// weights are the backendRefs of the route's first rule.
	weights map[string]int64
	// headerRule: the setHeaderRoute rule is on the route.
	headerRule bool
	// pluginOwns: the plugin owns spec.rules; otherwise it has no
	// managedFields entry at all.
	pluginOwns bool
}

func (d *controllerDemo) steps() []controllerStep {
	setImage := func(image string) func(context.Context) error {
		return func(ctx context.Context) error { return d.c.SetImage(ctx, namespace, "rollouts-demo", image) }
	}
	promote := func(ctx context.Context) error { return d.c.Promote(ctx, namespace, "rollouts-demo") }
	abort := func(ctx context.Context) error { return d.c.Abort(ctx, namespace, "rollouts-demo") }
	stableOnly := map[string]int64{stableSvc: 100, canarySvc: 0}
	return []controllerStep{
		{title: "The Rollout's first revision",
			why:     "The controller creates the pods of image blue (kwok makes them Ready) and calls the plugin\nwith weight 0: the route already sends everything to stable, so the plugin writes nothing.",
			rollout: cluster.RolloutWant{Phase: "Healthy", Promoted: true}, weights: stableOnly},
		{title: "New image: the canary starts (setWeight 10, then pause)",
			why:     "`kubectl argo rollouts set image rollouts-demo app=argoproj/rollouts-demo:green`. The controller\nstarts a canary pod and calls SetWeight(10): one apply moves 10% to the canary and adds the\nin-progress label. The plugin now owns spec.rules. The Rollout pauses at step 1.",
			do:      setImage("argoproj/rollouts-demo:green"),
			rollout: cluster.RolloutWant{Phase: "Paused", StepIndex: ptr(int32(1))}, weights: map[string]int64{stableSvc: 90, canarySvc: 10}, pluginOwns: true},
		{title: "Promote: setWeight 50, setHeaderRoute, pause",
			why:     "`kubectl argo rollouts promote rollouts-demo`. The controller calls SetWeight(50), then\nSetHeaderRoute(canary-testers): a rule named canary-testers, a copy of the managed rule\nmatching X-Canary: yes, sends those requests to the canary only. Paused at step 4.",
			do:      promote,
			rollout: cluster.RolloutWant{Phase: "Paused", StepIndex: ptr(int32(4))}, weights: map[string]int64{stableSvc: 50, canarySvc: 50}, headerRule: true, pluginOwns: true},
		{title: "Promote: the steps are done, green becomes stable",
			why:     "`kubectl argo rollouts promote rollouts-demo`. The controller sends everything to the canary\n(SetWeight(100)), makes green stable, removes the managed rule (RemoveManagedRoutes) and sends\neverything to stable (SetWeight(0)). The label goes, and the plugin gives spec.rules back with\none Update that keeps every value.",
			do:      promote,
			rollout: cluster.RolloutWant{Phase: "Healthy", Promoted: true, StepIndex: ptr(int32(5))}, weights: stableOnly},
		{title: "Another new image: canary yellow at 10%",
			why:     "`kubectl argo rollouts set image rollouts-demo app=argoproj/rollouts-demo:yellow`.",
			do:      setImage("argoproj/rollouts-demo:yellow"),
			rollout: cluster.RolloutWant{Phase: "Paused", StepIndex: ptr(int32(1))}, weights: map[string]int64{stableSvc: 90, canarySvc: 10}, pluginOwns: true},
		{title: "Abort: all traffic back to stable",
			why:     "`kubectl argo rollouts abort rollouts-demo`. The controller calls SetWeight(0): green keeps\neverything, and the plugin gives spec.rules back. The Rollout is Degraded (aborted).",
			do:      abort,
			rollout: cluster.RolloutWant{Phase: "Degraded", Aborted: true}, weights: stableOnly},
		{title: "Image back to green: Healthy",
			why:     "`kubectl argo rollouts set image rollouts-demo app=argoproj/rollouts-demo:green`: the spec is\nthe stable revision again, so the Rollout is Healthy without a canary; the route is untouched.",
			do:      setImage("argoproj/rollouts-demo:green"),
			rollout: cluster.RolloutWant{Phase: "Healthy", Promoted: true}, weights: stableOnly},
	}
}

// walk does one step, waits for the Rollout and the route to reach its
// state, and prints them.
func (d *controllerDemo) walk(st controllerStep) error {
	if err := d.interrupted(); err != nil {
		return err
	}
	d.step++
	title := fmt.Sprintf("Step %d: %s", d.step, st.title)
	d.title(title)
	fmt.Fprintln(d.out, st.why)
	if st.do != nil {
		ctx, cancel := context.WithTimeout(d.ctx, 20*time.Second)
		err := st.do(ctx)
		cancel()
		if err != nil {
			return fmt.Errorf("%s: %w", title, err)
		}
	}
	start := time.Now()
	var ro *v1alpha1.Rollout
	var route *unstructured.Unstructured
	err := d.c.Await(d.ctx, stepTimeout, func() (string, error) {
		ctx, cancel := context.WithTimeout(d.ctx, 20*time.Second)
		defer cancel()
		var err error
		if ro, err = d.c.Rollout(ctx, namespace, "rollouts-demo"); err != nil {
			return err.Error(), nil
		}
		if route, err = d.route(); err != nil {
			return err.Error(), nil
		}
		return strings.Join(append(st.rollout.Mismatches(ro), st.routeMismatches(route)...), "; "), nil
	})
	if err != nil {
		if d.ctx.Err() != nil {
			return d.interrupted()
		}
		return fmt.Errorf("%s: %w\n%s", title, err, d.diagnose(ro, route))
	}
	fmt.Fprintf(d.out, "\nreached in %.1fs\n", time.Since(start).Seconds())
	fmt.Fprintf(d.out, "rollout:          %s\n", describeRollout(ro))
	if w := ro.Status.Canary.Weights; w != nil {
		fmt.Fprintf(d.out, "controller says:  stable %d, canary %d\n", w.Stable.Weight, w.Canary.Weight)
	}
	// The plugin's log lines reach the controller's log a moment after its writes.
	time.Sleep(300 * time.Millisecond)
	calls := d.log.next(namespace)
	fmt.Fprintf(d.out, "plugin writes:    %d\n", len(calls))
	for _, call := range calls {
		fmt.Fprintf(d.out, "  %s\n", call)
	}
	fmt.Fprintf(d.out, "rules:            %s\n", strings.Join(ruleSummaries(route), "; "))
	fmt.Fprintf(d.out, "claims:           %s\n", orNone(route.GetAnnotations()[routes.ClaimsAnnotation]))
	d.show(route)
	if err := d.showTraffic(st, start); err != nil {
		return fmt.Errorf("%s: %w", title, err)
	}
	return nil
}

// routeMismatches lists how the route differs from the step's state.
func (st controllerStep) routeMismatches(route *unstructured.Unstructured) []string {
	var out []string
	if got := weights(route); !mapsEqual(got, st.weights) {
		out = append(out, fmt.Sprintf("route weights %s, want %s", formatWeights(got), formatWeights(st.weights)))
	}
	hasRule := slices.ContainsFunc(cluster.Rules(route), func(r cluster.Rule) bool { return r.Name == headerRouteName })
	if hasRule != st.headerRule {
		out = append(out, fmt.Sprintf("header rule %s on the route: %v, want %v", headerRouteName, hasRule, st.headerRule))
	}
	var plugin []string
	for _, e := range managedFields(route) {
		if e.manager == fieldManager {
			plugin = append(plugin, e.paths...)
		}
	}
	switch {
	case st.pluginOwns && !slices.Contains(plugin, "f:spec.f:rules"):
		out = append(out, fmt.Sprintf("%s does not own spec.rules (owns %v)", fieldManager, plugin))
	case !st.pluginOwns && len(plugin) > 0:
		out = append(out, fmt.Sprintf("%s still owns %v, want nothing", fieldManager, plugin))
	}
	return out
}

// diagnose says what was last seen when a step is not reached: the Rollout,
// the route, the Rollout's latest events and the controller's errors.
func (d *controllerDemo) diagnose(ro *v1alpha1.Rollout, route *unstructured.Unstructured) string {
	var b strings.Builder
	b.WriteString("last seen:\n")
	if ro != nil {
		b.WriteString(cluster.DescribeRollout(ro))
	}
	if route != nil {
		fmt.Fprintf(&b, "  route rules: %v\n", cluster.Rules(route))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if events, err := d.c.Events(ctx, namespace, "involvedObject.name=rollouts-demo"); err == nil {
		for _, e := range events[max(0, len(events)-5):] {
			fmt.Fprintf(&b, "  event: %s %s: %s\n", e.Type, e.Reason, e.Message)
		}
	}
	for _, line := range d.c.ControllerLog.Errors(3, namespace) {
		fmt.Fprintf(&b, "  controller: %s\n", line)
	}
	fmt.Fprintf(&b, "logs: %s", d.c.LogDir)
	return b.String()
}

// describeRollout is the Rollout's phase, step and revision in one line.
func describeRollout(ro *v1alpha1.Rollout) string {
	s := string(ro.Status.Phase)
	if ro.Status.Abort {
		s += " (aborted)"
	}
	if ro.Status.Message != "" {
		s += ": " + ro.Status.Message
	}
	steps := ro.Spec.Strategy.Canary.Steps
	if i := ro.Status.CurrentStepIndex; i != nil {
		if int(*i) < len(steps) {
			s += fmt.Sprintf(", step %d of %d (%s)", *i, len(steps), describeStep(steps[*i]))
		} else {
			s += fmt.Sprintf(", all %d steps done", len(steps))
		}
	}
	if rev := ro.Annotations["rollout.argoproj.io/revision"]; rev != "" {
		s += ", revision " + rev
	}
	if img := ro.Spec.Template.Spec.Containers; len(img) > 0 {
		s += ", image " + img[0].Image
	}
	return s
}

func describeStep(st v1alpha1.CanaryStep) string {
	switch {
	case st.SetWeight != nil:
		return fmt.Sprintf("setWeight %d", *st.SetWeight)
	case st.Pause != nil:
		return "pause"
	case st.SetHeaderRoute != nil:
		return "setHeaderRoute " + st.SetHeaderRoute.Name
	case st.SetCanaryScale != nil:
		return "setCanaryScale"
	case st.Experiment != nil:
		return "experiment"
	}
	return "other"
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// pluginLog reads the plugin's route writes from the controller's log: the
// plugin logs one line per write ("applied route", "released route") with
// the call and what changed.
type pluginLog struct {
	path   string
	offset int64
}

var (
	// hclog's line, as the controller logs the plugin's entries ("plugin.gatewayAPI: applied route: route=…"),
	// or logrus's, with -logformat=text.
	logWrite = regexp.MustCompile(`(?:msg="|: )(applied|released) route(?:"|:)`)
	logField = regexp.MustCompile(`\b(call|changes|rollout)=("(?:[^"\\]|\\.)*"|\S+)`)
)

// next returns the writes logged since the last call for Rollouts in namespace ns.
func (l *pluginLog) next(ns string) []string {
	f, err := os.Open(l.path)
	if err != nil {
		return []string{"(reading " + l.path + ": " + err.Error() + ")"}
	}
	defer f.Close()
	if _, err := f.Seek(l.offset, io.SeekStart); err != nil {
		return nil
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil
	}
	// Only whole lines; the rest is read next time.
	data = data[:strings.LastIndexByte(string(data), '\n')+1]
	l.offset += int64(len(data))
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		m := logWrite.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		fields := map[string]string{}
		for _, f := range logField.FindAllStringSubmatch(line, -1) {
			if v, err := strconv.Unquote(f[2]); err == nil {
				fields[f[1]] = v
			} else {
				fields[f[1]] = f[2]
			}
		}
		if !strings.HasPrefix(fields["rollout"], ns+"/") {
			continue
		}
		out = append(out, fmt.Sprintf("%s %s: %s", fields["call"], m[1], fields["changes"]))
	}
	return out
}
