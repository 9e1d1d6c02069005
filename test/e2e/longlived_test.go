//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/e2e/cluster"
	"github.com/gatewayapi-ssa/rollouts-plugin/test/e2e/traffic"
)

const (
	// conversations is how many long-lived connections (or gRPC streams)
	// stay open through each walk, each exchanging a message every
	// messagePeriod.
	conversations = 50
	messagePeriod = 100 * time.Millisecond
	// scaleDownDelay is the Rollouts' scaleDownDelaySeconds: Argo Rollouts'
	// default, what users get.
	scaleDownDelay = 30
)

// longLivedWalk is a Rollout walked twice (weights 20, 50, promotion; then
// a second rollout back to the other Service) while conversations long-lived
// conversations stay open through Traefik, on backends that follow the
// ReplicaSets (traffic.Follower): a ReplicaSet's backend runs while it has
// Ready pods and its Services' EndpointSlices follow their selectors.
type longLivedWalk struct {
	name     string
	proto    traffic.Protocol
	listener string
	kind     string // route kind
	host     string // a GRPCRoute's authority
	app      string
	// a, b are the two Services: ping and pong, or stable and canary.
	a, b     string
	pingPong bool
}

// llStep is a state of the walk: the Rollout, the route's weights per
// Service, and the new connections' split per version.
type llStep struct {
	name     string
	do       action
	rollout  cluster.RolloutWant
	pingPong string
	weights  map[string]int64
	versions map[string]int64
	// retired is the version whose ReplicaSet is scaled down after this
	// step (the old stable): the walk waits for its backend to stop.
	retired string
}

func longLivedObjects(w longLivedWalk) string {
	var svc func(name string) string
	var route string
	switch w.proto {
	case traffic.GRPC:
		svc = func(name string) string { return h2cService(name, w.app) }
		route = grpcRoute(w.app, w.a, w.b)
	default:
		svc = func(name string) string { return service(name, w.app, 80) }
		route = fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: TCPRoute
metadata:
  name: %s
spec:
  parentRefs:
  - name: %s
    namespace: %s
    sectionName: %s
  rules:
  - backendRefs:
    - name: %s
      port: 80
      weight: 100
    - name: %s
      port: 80
      weight: 0
---
`, w.app, cluster.GatewayName, cluster.GatewayNamespace, w.listener, w.a, w.b)
	}
	services := fmt.Sprintf("stableService: %s\ncanaryService: %s", w.a, w.b)
	if w.pingPong {
		services = fmt.Sprintf("pingPong:\n  pingService: %s\n  pongService: %s", w.a, w.b)
	}
	kindKey := map[string]string{"TCPRoute": "tcpRoute", "GRPCRoute": "grpcRoute"}[w.kind]
	return svc(w.a) + svc(w.b) + route + fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: %[1]s
spec:
  replicas: 2
  revisionHistoryLimit: 3
  selector:
    matchLabels:
      app: %[1]s
  template:
    metadata:
      labels:
        app: %[1]s
    spec:
      containers:
      - name: app
        image: registry.example/%[1]s:v1
        ports:
        - containerPort: 8080
  strategy:
    canary:
      scaleDownDelaySeconds: %[2]d
%[3]s
      trafficRouting:
        plugins:
          argoproj-labs/gatewayAPI:
            %[4]s: %[1]s
      steps:
      - setWeight: 20
      - pause: {}
      - setWeight: 50
      - pause: {}
`, w.app, scaleDownDelay, indent(services, 6), kindKey)
}

func pingPongTCP() longLivedWalk {
	return longLivedWalk{name: "longlived-pingpong-tcp", proto: traffic.TCP, listener: cluster.TCPListeners[1], kind: "TCPRoute",
		app: "lpt", a: "lpt-ping", b: "lpt-pong", pingPong: true}
}

func pingPongGRPC() longLivedWalk {
	return longLivedWalk{name: "longlived-pingpong-grpc", proto: traffic.GRPC, listener: cluster.GRPCListener, kind: "GRPCRoute",
		app: "lpg", host: host("lpg"), a: "lpg-ping", b: "lpg-pong", pingPong: true}
}

func canaryTCP() longLivedWalk {
	return longLivedWalk{name: "longlived-canary-tcp", proto: traffic.TCP, listener: cluster.TCPListeners[2], kind: "TCPRoute",
		app: "lct", a: "lct-stable", b: "lct-canary"}
}

// steps: ping-pong moves weight between the two Services and flips which is
// stable; a plain canary moves it, then points the stable Service's
// selector at the new pods.
func (w longLivedWalk) steps() []llStep {
	a, b := w.a, w.b
	if w.pingPong {
		return []llStep{
			{name: "image v2: pong canary, 80/20", do: img(w.app, "v2"), rollout: cluster.RolloutWant{Phase: "Paused", StepIndex: index(1)},
				pingPong: "ping", weights: map[string]int64{a: 80, b: 20}, versions: map[string]int64{"v1": 80, "v2": 20}},
			{name: "promote: 50/50", do: action{kind: promote}, rollout: cluster.RolloutWant{Phase: "Paused", StepIndex: index(3)},
				pingPong: "ping", weights: map[string]int64{a: 50, b: 50}, versions: map[string]int64{"v1": 50, "v2": 50}},
			{name: "promote: pong stable (the flip), ping 0", do: action{kind: promote}, rollout: cluster.RolloutWant{Phase: "Healthy", Promoted: true},
				pingPong: "pong", weights: map[string]int64{a: 0, b: 100}, versions: map[string]int64{"v2": 100}, retired: "v1"},
			{name: "image v3: ping canary, 20/80", do: img(w.app, "v3"), rollout: cluster.RolloutWant{Phase: "Paused", StepIndex: index(1)},
				pingPong: "pong", weights: map[string]int64{a: 20, b: 80}, versions: map[string]int64{"v3": 20, "v2": 80}},
			{name: "promote: 50/50", do: action{kind: promote}, rollout: cluster.RolloutWant{Phase: "Paused", StepIndex: index(3)},
				pingPong: "pong", weights: map[string]int64{a: 50, b: 50}, versions: map[string]int64{"v3": 50, "v2": 50}},
			{name: "promote: ping stable again, pong 0", do: action{kind: promote}, rollout: cluster.RolloutWant{Phase: "Healthy", Promoted: true},
				pingPong: "ping", weights: map[string]int64{a: 100, b: 0}, versions: map[string]int64{"v3": 100}, retired: "v2"},
		}
	}
	return []llStep{
		{name: "image v2: canary 80/20", do: img(w.app, "v2"), rollout: cluster.RolloutWant{Phase: "Paused", StepIndex: index(1)},
			weights: map[string]int64{a: 80, b: 20}, versions: map[string]int64{"v1": 80, "v2": 20}},
		{name: "promote: 50/50", do: action{kind: promote}, rollout: cluster.RolloutWant{Phase: "Paused", StepIndex: index(3)},
			weights: map[string]int64{a: 50, b: 50}, versions: map[string]int64{"v1": 50, "v2": 50}},
		{name: "promote: stable Service's selector to v2, 100/0", do: action{kind: promote}, rollout: cluster.RolloutWant{Phase: "Healthy", Promoted: true},
			weights: map[string]int64{a: 100, b: 0}, versions: map[string]int64{"v2": 100}, retired: "v1"},
		{name: "image v3: canary 80/20", do: img(w.app, "v3"), rollout: cluster.RolloutWant{Phase: "Paused", StepIndex: index(1)},
			weights: map[string]int64{a: 80, b: 20}, versions: map[string]int64{"v2": 80, "v3": 20}},
		{name: "promote: 50/50", do: action{kind: promote}, rollout: cluster.RolloutWant{Phase: "Paused", StepIndex: index(3)},
			weights: map[string]int64{a: 50, b: 50}, versions: map[string]int64{"v2": 50, "v3": 50}},
		{name: "promote: stable Service's selector to v3, 100/0", do: action{kind: promote}, rollout: cluster.RolloutWant{Phase: "Healthy", Promoted: true},
			weights: map[string]int64{a: 100, b: 0}, versions: map[string]int64{"v3": 100}, retired: "v2"},
	}
}

// runLongLived walks w: before the rollout starts, conversations long-lived
// conversations open through Traefik; after every step the new connections'
// split is measured; once the old stable's ReplicaSet is scaled down the
// walk says how long its conversations went on after new connections stopped
// reaching it, and how they ended. With ping-pong, a conversation that ends
// while its backend still runs, or a message lost then, fails the test;
// without, everything is reported as it is (the contrast).
func runLongLived(t *testing.T, c *cluster.Cluster, w longLivedWalk) {
	sc := scenario{name: w.name, rollout: w.app, route: routeRef{w.kind, w.app}, host: w.host, protocol: w.proto, listener: w.listener}
	r := &run{c: c, sc: sc, ns: "e2e-" + w.name}
	start := time.Now()
	t.Cleanup(func() {
		r.dump(t)
		c.Measure(fmt.Sprintf("scenario %s (%s)", w.name, passed(t)), start)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	follower, err := c.Backends.Follow(ctx, r.ns, w.proto)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		follower.Stop()
		for _, l := range follower.Log() {
			t.Log("follower: " + l)
		}
	})
	if err := c.CreateObjects(ctx, r.ns, longLivedObjects(w), "e2e-create"); err != nil {
		t.Fatal(err)
	}
	if r.watch, err = c.WatchRoute(ctx, r.ns, w.kind, w.app); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.watch.Stop)
	if _, err := c.AwaitRollout(ctx, r.ns, w.app, cluster.RolloutWant{Phase: "Healthy", Promoted: true}, defaultStepTimeout); err != nil {
		t.Fatal(err)
	}
	// Traefik carries the route (all to v1) before the conversations open.
	first := map[string]int64{"v1": 100}
	if _, err := c.Meter.Converge(ctx, r.request(nil), first, measureRequests, time.Now(), convergeTimeout); err != nil {
		t.Fatalf("before the rollout: %v", err)
	}
	ll, err := traffic.OpenLongLived(ctx, w.proto, c.Traefik.Entrypoints[w.listener], w.host, conversations, messagePeriod)
	if err != nil {
		t.Fatal(err)
	}
	defer ll.Close()
	what := map[traffic.Protocol]string{traffic.TCP: "TCP connections", traffic.GRPC: "gRPC streams (FullDuplexCall, one h2c connection)"}[w.proto]
	r.record(t, fmt.Sprintf("before the rollout: %d %s open, all on v1, a message on each every %s: %s", conversations, what, messagePeriod, ll.Snapshot()))

	for _, st := range w.steps() {
		began := time.Now()
		r.do(t, st.do)
		err := c.Await(ctx, defaultStepTimeout, func() (string, error) {
			o := r.observe()
			problems := st.rollout.Mismatches(o.rollout)
			if o.err != nil {
				return o.err.Error(), nil
			}
			if st.pingPong != "" && string(o.rollout.Status.Canary.StablePingPong) != st.pingPong {
				problems = append(problems, fmt.Sprintf("stablePingPong %q, want %q", o.rollout.Status.Canary.StablePingPong, st.pingPong))
			}
			problems = append(problems, checkWeights(o.route, st.weights)...)
			return strings.Join(problems, "; "), nil
		})
		if err != nil {
			t.Fatalf("step %q: %v\n%s", st.name, err, r.observe())
		}
		conv, err := c.Meter.Converge(ctx, r.request(nil), st.versions, measureRequests, began, convergeTimeout)
		if err != nil {
			t.Fatalf("step %q: new connections: %v", st.name, err)
		}
		r.record(t, fmt.Sprintf("%s: new %s", st.name, conv.Counts.Describe(st.versions)),
			fmt.Sprintf("    traffic moved %s after the step began; long-lived: %s", ms(conv.Moved), ll.Snapshot()))
		if st.retired != "" {
			r.retire(t, ctx, w, st, began, follower, ll)
		}
	}
	final := ll.Snapshot()
	r.record(t, fmt.Sprintf("after the walk: %s", final))
	var early []string
	lostEarly := 0
	for _, e := range final.Ended {
		if stopped := follower.Stopped(e.Backend); stopped.IsZero() || e.At.Before(stopped) {
			early = append(early, fmt.Sprintf("%s at %s (%s)", e.Backend, e.At.Format("15:04:05.000"), e.Err))
			lostEarly += e.Lost
		}
	}
	r.record(t, fmt.Sprintf("    dropped or reset while their backend still ran: %d conversations, %d messages lost; at their backend's stop: %d conversations, %d messages in flight",
		len(early), lostEarly, len(final.Ended)-len(early), final.Lost-lostEarly))
	// How they ended, and how long after their backend stopped.
	how := map[string]int{}
	for _, e := range final.Ended {
		after := "?"
		if stopped := follower.Stopped(e.Backend); !stopped.IsZero() {
			after = ms(e.At.Sub(stopped).Truncate(100 * time.Millisecond))
		}
		how[fmt.Sprintf("%s, %s after its backend stopped", e.Err, after)]++
	}
	for _, k := range slices.Sorted(maps.Keys(how)) {
		r.record(t, fmt.Sprintf("      %d ended: %s", how[k], k))
	}
	if w.pingPong && (len(early) > 0 || final.Refused > 0) {
		t.Errorf("ping-pong: %d conversations ended while their backend ran (%s), %d messages lost then, %d connections refused",
			len(early), strings.Join(early, "; "), lostEarly, final.Refused)
	}
}

// retire waits (bounded) until the old stable's ReplicaSet is scaled down
// and its backend stopped, and records how long its conversations went on
// after new connections stopped reaching it, and how they ended.
func (r *run) retire(t *testing.T, ctx context.Context, w longLivedWalk, st llStep, began time.Time, f *traffic.Follower, ll *traffic.LongLived) {
	t.Helper()
	// When new connections stopped reaching the old version: with ping-pong,
	// the plugin's write that gave its Service weight 0; with a plain
	// canary, the stable Service's endpoints moving to the new pods.
	var zero time.Time
	var why string
	if w.pingPong {
		old := w.a
		if st.pingPong == "ping" {
			old = w.b
		}
		gen, seen, ok := r.watch.FirstWhere(began, func(rules []cluster.Rule) bool {
			return len(checkWeights(rules, map[string]int64{old: 0, otherOf(w, old): 100})) == 0
		})
		if !ok {
			t.Fatalf("step %q: the watch never saw %s at weight 0", st.name, old)
		}
		zero, why = seen, fmt.Sprintf("the write of generation %d (%s weight 0)", gen, old)
	} else {
		for _, ch := range f.Changes(w.a) {
			if !ch.At.Before(began) && !slices.Contains(ch.Backends, st.retired) {
				zero, why = ch.At, fmt.Sprintf("%s's endpoints changed to %v", w.a, ch.Backends)
				break
			}
		}
		if zero.IsZero() {
			t.Fatalf("step %q: %s's endpoints never left %s", st.name, w.a, st.retired)
		}
	}
	open := ll.Snapshot().OpenOn[st.retired]
	deadline := time.Now().Add(scaleDownDelay*time.Second + 2*time.Minute)
	for f.Stopped(st.retired).IsZero() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("step %q: the %s ReplicaSet's backend never stopped (scaleDownDelaySeconds %d)", st.name, st.retired, scaleDownDelay)
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopped := f.Stopped(st.retired)
	time.Sleep(2 * time.Second) // the ended conversations reconnect
	after := ll.Snapshot()
	endedThere := 0
	lostThere := 0
	for _, e := range after.Ended {
		if e.Backend == st.retired && !e.At.Before(stopped) {
			endedThere++
			lostThere += e.Lost
		}
	}
	r.record(t,
		fmt.Sprintf("    %s gets no new connections from %s", st.retired, why),
		fmt.Sprintf("    %d conversations were on %s then; they went on for %s, until its ReplicaSet was scaled down (scaleDownDelaySeconds %d) and its backend stopped; last echo from %s %s after that moment",
			open, st.retired, ms(stopped.Sub(zero)), scaleDownDelay, st.retired, ms(after.LastEcho[st.retired].Sub(zero))),
		fmt.Sprintf("    at the backend's stop %d conversations ended (%d messages in flight lost) and reconnected: %s", endedThere, lostThere, after))
	if last := after.LastEcho[st.retired]; last.Sub(zero) < 0 {
		t.Errorf("step %q: no echo from %s after new connections stopped reaching it", st.name, st.retired)
	}
}

func otherOf(w longLivedWalk, svc string) string {
	if svc == w.a {
		return w.b
	}
	return w.a
}
