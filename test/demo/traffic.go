package main

import (
	"context"
	"fmt"
	"time"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/e2e/traffic"
)

const (
	// demoHost is the demo route's hostname: the Host of the demo's requests.
	demoHost = "demo.example.com"
	// demoRequests is how many requests the demo sends through Traefik after each step.
	demoRequests = 1000
)

// serveBackends gives the demo's two Services a backend each (port "http",
// as in docs/examples/demo.yaml) and starts watching the route, so the demo
// can say how long after the plugin's write the traffic moved.
func (d *controllerDemo) serveBackends() error {
	for _, svc := range []string{stableSvc, canarySvc} {
		addr, err := d.c.Backends.Serve(d.ctx, traffic.Backend{Namespace: namespace, Service: svc, PortName: "http"})
		if err != nil {
			return fmt.Errorf("a backend for Service %s/%s: %w", namespace, svc, err)
		}
		fmt.Fprintf(d.out, "  backend of Service %s at %s (answers with its Service's name)\n", svc, addr)
	}
	w, err := d.c.WatchRoute(d.ctx, namespace, "HTTPRoute", routeName)
	if err != nil {
		return err
	}
	d.watch = w
	return nil
}

// showTraffic sends demoRequests requests through Traefik's entrypoint and
// prints, per Service, the share that reached its backend next to the
// weight on the route, and the Service's version (the image of the pods it
// selects); with the header rule on the route, the same for requests
// carrying its header. It waits (bounded) until the split matches the
// weights: Traefik takes up to about 2.5 s to carry a change.
func (d *controllerDemo) showTraffic(st controllerStep, began time.Time) error {
	ctx, cancel := context.WithTimeout(d.ctx, 2*time.Minute)
	defer cancel()
	since := began
	if gen := d.watch.Latest(); gen > 0 {
		if seen, _, ok := d.watch.Generation(gen); ok && seen.After(began) {
			since = seen
		}
	}
	req := traffic.Request{Host: demoHost}
	conv, err := d.c.Meter.Converge(ctx, req, st.weights, demoRequests, since, time.Minute)
	if err != nil {
		return fmt.Errorf("the gateway (Traefik) does not carry the route's weights: %w", err)
	}
	fmt.Fprintf(d.out, "traffic:          %d requests through Traefik (%s, Host %s):\n", demoRequests, d.c.Entrypoint, demoHost)
	if err := d.bars(ctx, conv.Counts, st.weights); err != nil {
		return err
	}
	if since.Equal(began) {
		fmt.Fprintf(d.out, "                  (no write in this step; measured %.1fs after it began)\n", conv.Matched.Seconds())
	} else if conv.Already {
		fmt.Fprintf(d.out, "                  already carried when measuring began, %d ms after the plugin's write\n", conv.Moved.Milliseconds())
	} else {
		fmt.Fprintf(d.out, "                  carried %d ms after the plugin's write\n", conv.Moved.Milliseconds())
	}
	if st.headerRule {
		want := map[string]int64{canarySvc: 1} // the rule's one backendRef: all of it
		req.Header = map[string]string{"X-Canary": "yes"}
		hc, err := d.c.Meter.Converge(ctx, req, want, demoRequests, since, time.Minute)
		if err != nil {
			return fmt.Errorf("requests with X-Canary: yes do not all reach the canary: %w", err)
		}
		fmt.Fprintf(d.out, "with X-Canary: yes (the header rule):\n")
		return d.bars(ctx, hc.Counts, want)
	}
	return nil
}

// bars prints traffic.Bars with each Service's version next to its name.
func (d *controllerDemo) bars(ctx context.Context, counts traffic.Counts, weights map[string]int64) error {
	label := map[string]string{}
	for svc := range weights {
		v, err := d.c.ServiceVersion(ctx, namespace, svc)
		if err != nil {
			return err
		}
		label[svc] = fmt.Sprintf("%s (%s)", svc, v)
	}
	relabel := func(name string) string {
		if l, ok := label[name]; ok {
			return l
		}
		return name
	}
	c, w := traffic.Counts{}, map[string]int64{}
	for k, v := range counts {
		c[relabel(k)] = v
	}
	for k, v := range weights {
		w[relabel(k)] = v
	}
	for _, line := range traffic.Bars(c, w, 30) {
		fmt.Fprintln(d.out, "  "+line)
	}
	return nil
}
