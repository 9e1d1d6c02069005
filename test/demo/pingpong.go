package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/e2e/cluster"
	"github.com/gatewayapi-ssa/rollouts-plugin/test/e2e/traffic"
)

// The second act: a ping-pong Rollout on a TCPRoute, with long-lived TCP
// connections open through Traefik all along.
const (
	ppNamespace = "demo-pingpong"
	ppApp       = "orders"
	ppPing      = "orders-ping"
	ppPong      = "orders-pong"
	// ppConnections long-lived connections, a message on each every ppPeriod.
	ppConnections = 50
	ppPeriod      = 100 * time.Millisecond
	// ppScaleDownDelay is the Rollout's scaleDownDelaySeconds: how long the
	// old stable's pods (and the connections on them) stay after promotion.
	ppScaleDownDelay = 10
)

var ppObjects = fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: orders-ping
spec:
  selector:
    app: orders
  ports:
  - name: tcp
    port: 5432
    targetPort: 8080
---
apiVersion: v1
kind: Service
metadata:
  name: orders-pong
spec:
  selector:
    app: orders
  ports:
  - name: tcp
    port: 5432
    targetPort: 8080
---
apiVersion: gateway.networking.k8s.io/v1
kind: TCPRoute
metadata:
  name: orders
spec:
  parentRefs:
  - name: %s
    namespace: %s
    sectionName: %s
  rules:
  - backendRefs:
    - name: orders-ping
      port: 5432
      weight: 100
    - name: orders-pong
      port: 5432
      weight: 0
---
apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: orders
spec:
  replicas: 2
  revisionHistoryLimit: 2
  selector:
    matchLabels:
      app: orders
  template:
    metadata:
      labels:
        app: orders
    spec:
      containers:
      - name: orders
        image: example.com/orders:v1
        ports:
        - containerPort: 8080
  strategy:
    canary:
      scaleDownDelaySeconds: %d
      pingPong:
        pingService: orders-ping
        pongService: orders-pong
      trafficRouting:
        plugins:
          argoproj-labs/gatewayAPI:
            tcpRoute: orders
      steps:
      - setWeight: 20
      - pause: {}
      - setWeight: 50
      - pause: {}
`, cluster.GatewayName, cluster.GatewayNamespace, cluster.TCPListeners[3], ppScaleDownDelay)

// ppStep is one thing the user does in the second act and what it leads to.
type ppStep struct {
	title, why string
	do         func(ctx context.Context) error
	rollout    cluster.RolloutWant
	stable     string // status.canary.stablePingPong
	weights    map[string]int64
	// retired: wait until this version's pods are gone, then show the connections.
	retired string
}

// pingPongAct is `make demo`'s second act.
func (d *controllerDemo) pingPongAct() error {
	d.title("Second act: ping-pong on a TCPRoute, with long-lived connections")
	fmt.Fprintf(d.out, `Two Services, %s and %s, keep their places on a TCPRoute; the plugin moves weight
between them and Argo Rollouts flips which one is stable (status.canary.stablePingPong).
Before the rollout starts, the demo opens %d TCP connections through Traefik and sends a
message on each every %s for the whole act. Here one backend stands for each ReplicaSet's
pods: it runs while they are Ready, and each Service's EndpointSlice lists the backends
of the pods its selector picks. After every step: the open long-lived connections per
backend, and where 1,000 NEW connections go.

`, ppPing, ppPong, ppConnections, ppPeriod)
	fmt.Fprint(d.out, indent(ppObjects, "    "))
	ctx := d.ctx
	if _, err := d.c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ppNamespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	follower, err := d.c.Backends.Follow(ctx, ppNamespace, traffic.TCP)
	if err != nil {
		return err
	}
	defer follower.Stop()
	if err := d.c.CreateObjects(ctx, ppNamespace, ppObjects, "kubectl"); err != nil {
		return err
	}
	if _, err := d.c.AwaitRollout(ctx, ppNamespace, ppApp, cluster.RolloutWant{Phase: "Healthy", Promoted: true}, stepTimeout); err != nil {
		return err
	}
	entry := d.c.Traefik.Entrypoints[cluster.TCPListeners[3]]
	req := traffic.Request{Protocol: traffic.TCP, Entrypoint: entry}
	if _, err := d.c.Meter.Converge(ctx, req, map[string]int64{"v1": 100}, demoRequests, time.Now(), time.Minute); err != nil {
		return fmt.Errorf("before the rollout: %w", err)
	}
	ll, err := traffic.OpenLongLived(ctx, traffic.TCP, entry, "", ppConnections, ppPeriod)
	if err != nil {
		return err
	}
	defer ll.Close()
	fmt.Fprintf(d.out, "\n%d connections open through Traefik (%s), all on v1.\n", ppConnections, entry)

	setImage := func(image string) func(context.Context) error {
		return func(ctx context.Context) error { return d.c.SetImage(ctx, ppNamespace, ppApp, image) }
	}
	promote := func(ctx context.Context) error { return d.c.Promote(ctx, ppNamespace, ppApp) }
	steps := []ppStep{
		{title: "New image v2: pong is the canary, 20%", why: "The controller points orders-pong at the v2 pods and calls SetWeight(20).",
			do: setImage("example.com/orders:v2"), rollout: cluster.RolloutWant{Phase: "Paused", StepIndex: ptr(int32(1))}, stable: "ping",
			weights: map[string]int64{ppPing: 80, ppPong: 20}},
		{title: "Promote: 50%", do: promote, rollout: cluster.RolloutWant{Phase: "Paused", StepIndex: ptr(int32(3))}, stable: "ping",
			weights: map[string]int64{ppPing: 50, ppPong: 50}},
		{title: "Promote: pong becomes stable, ping gets 0", why: fmt.Sprintf("The flip: stablePingPong becomes pong. No Service selector changes; the v1 pods stay\nfor scaleDownDelaySeconds (%d s), and so do the connections on them.", ppScaleDownDelay),
			do: promote, rollout: cluster.RolloutWant{Phase: "Healthy", Promoted: true}, stable: "pong",
			weights: map[string]int64{ppPing: 0, ppPong: 100}, retired: "v1"},
		{title: "New image v3: ping is the canary, 20%", why: "The next rollout goes back to the other Service.",
			do: setImage("example.com/orders:v3"), rollout: cluster.RolloutWant{Phase: "Paused", StepIndex: ptr(int32(1))}, stable: "pong",
			weights: map[string]int64{ppPing: 20, ppPong: 80}},
		{title: "Promote: 50%", do: promote, rollout: cluster.RolloutWant{Phase: "Paused", StepIndex: ptr(int32(3))}, stable: "pong",
			weights: map[string]int64{ppPing: 50, ppPong: 50}},
		{title: "Promote: ping is stable again", do: promote, rollout: cluster.RolloutWant{Phase: "Healthy", Promoted: true}, stable: "ping",
			weights: map[string]int64{ppPing: 100, ppPong: 0}, retired: "v2"},
	}
	for _, st := range steps {
		if err := d.ppWalk(st, req, follower, ll); err != nil {
			return err
		}
	}
	s := ll.Snapshot()
	fmt.Fprintf(d.out, "\nEnd of the second act: %s.\n", s)
	early := 0
	for _, e := range s.Ended {
		if stopped := follower.Stopped(e.Backend); stopped.IsZero() || e.At.Before(stopped) {
			early++
			fmt.Fprintf(d.out, "ended while its backend %s ran: at %s, %s\n", e.Backend, e.At.Format("15:04:05.000"), e.Err)
		}
	}
	fmt.Fprintf(d.out, "Connections that ended while their backend ran: %d. Weight moved only new connections; the\n", early)
	fmt.Fprintf(d.out, "%d that ended did so when their pods went away, scaleDownDelaySeconds after the flip, and\n", len(s.Ended)-early)
	fmt.Fprintln(d.out, "reconnected to the stable of the moment.")
	if early > 0 {
		return fmt.Errorf("%d long-lived connections ended while their backend ran", early)
	}
	return nil
}

func (d *controllerDemo) ppWalk(st ppStep, req traffic.Request, f *traffic.Follower, ll *traffic.LongLived) error {
	if err := d.interrupted(); err != nil {
		return err
	}
	d.step++
	title := fmt.Sprintf("Step %d: %s", d.step, st.title)
	d.title(title)
	if st.why != "" {
		fmt.Fprintln(d.out, st.why)
	}
	ctx, cancel := context.WithTimeout(d.ctx, 20*time.Second)
	err := st.do(ctx)
	cancel()
	if err != nil {
		return fmt.Errorf("%s: %w", title, err)
	}
	start := time.Now()
	err = d.c.Await(d.ctx, stepTimeout, func() (string, error) {
		ctx, cancel := context.WithTimeout(d.ctx, 20*time.Second)
		defer cancel()
		ro, err := d.c.Rollout(ctx, ppNamespace, ppApp)
		if err != nil {
			return err.Error(), nil
		}
		problems := st.rollout.Mismatches(ro)
		if got := string(ro.Status.Canary.StablePingPong); got != st.stable {
			problems = append(problems, fmt.Sprintf("stablePingPong %q, want %q", got, st.stable))
		}
		route, err := d.c.Route(ctx, ppNamespace, "TCPRoute", ppApp)
		if err != nil {
			return err.Error(), nil
		}
		if got := weights(route); !mapsEqual(got, st.weights) {
			problems = append(problems, fmt.Sprintf("route weights %s, want %s", formatWeights(got), formatWeights(st.weights)))
		}
		return strings.Join(problems, "; "), nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", title, err)
	}
	fmt.Fprintf(d.out, "\nreached in %.1fs; stablePingPong %s; route %s\n", time.Since(start).Seconds(), st.stable, formatWeights(st.weights))
	// New connections: by the version of the pods behind each Service.
	want := map[string]int64{}
	ctx, cancel = context.WithTimeout(d.ctx, 2*time.Minute)
	defer cancel()
	for svc, w := range st.weights {
		v, err := d.c.ServiceVersion(ctx, ppNamespace, svc)
		if err != nil {
			return err
		}
		want[v] += w
	}
	for v, w := range want {
		if w == 0 {
			delete(want, v)
		}
	}
	conv, err := d.c.Meter.Converge(ctx, req, want, demoRequests, start, time.Minute)
	if err != nil {
		return fmt.Errorf("%s: new connections: %w", title, err)
	}
	fmt.Fprintf(d.out, "new connections:  %d through Traefik:\n", demoRequests)
	for _, line := range traffic.Bars(conv.Counts, want, 30) {
		fmt.Fprintln(d.out, "  "+line)
	}
	d.showLongLived(ll)
	if st.retired == "" {
		return nil
	}
	fmt.Fprintf(d.out, "\nwaiting for the %s pods to go (scaleDownDelaySeconds %d) ...\n", st.retired, ppScaleDownDelay)
	deadline := time.Now().Add(ppScaleDownDelay*time.Second + stepTimeout)
	for f.Stopped(st.retired).IsZero() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: the %s pods never went away", title, st.retired)
		}
		if err := d.interrupted(); err != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second) // the ended connections reconnect
	fmt.Fprintf(d.out, "the %s pods went away %.1fs after the flip; the connections that ended, and where they are now:\n", st.retired, f.Stopped(st.retired).Sub(start).Seconds())
	d.showLongLived(ll)
	return nil
}

// showLongLived prints the open long-lived connections per backend and what
// ended so far.
func (d *controllerDemo) showLongLived(ll *traffic.LongLived) {
	s := ll.Snapshot()
	fmt.Fprintf(d.out, "long-lived:       %d open, a message every %s on each:\n", s.Open(), ppPeriod)
	for _, b := range slices.Sorted(maps.Keys(s.OpenOn)) {
		n := s.OpenOn[b]
		fmt.Fprintf(d.out, "  %-4s %s %d\n", b, strings.Repeat("█", n*30/ppConnections), n)
	}
	ended := s.EndedOn()
	var parts []string
	for _, b := range slices.Sorted(maps.Keys(ended)) {
		parts = append(parts, fmt.Sprintf("%d on %s", ended[b], b))
	}
	if len(parts) == 0 {
		parts = []string{"none"}
	}
	fmt.Fprintf(d.out, "                  ended so far: %s; messages sent %d, echoed %d, lost %d\n", strings.Join(parts, ", "), s.Sent, s.Echoed, s.Lost)
}
