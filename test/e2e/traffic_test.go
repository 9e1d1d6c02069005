//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/e2e/cluster"
	"github.com/gatewayapi-ssa/rollouts-plugin/test/e2e/traffic"
)

const (
	// measureRequests is how many requests one measurement counts.
	measureRequests = 1000
	// convergeTimeout bounds the wait for Traefik to carry a split: generous,
	// the figures that matter are printed, not asserted.
	convergeTimeout = time.Minute
)

// report collects every traffic line of the run, printed at the end and
// written to logs/traffic.txt.
var report struct {
	mu    sync.Mutex
	lines map[string][]string
}

func (r *run) record(t *testing.T, lines ...string) {
	t.Helper()
	for _, l := range lines {
		t.Log(l)
	}
	r.measured = append(r.measured, lines...)
	addToReport(r.sc.name, lines...)
}

// addToReport adds a scenario's traffic lines to the run's report.
func addToReport(scenario string, lines ...string) {
	report.mu.Lock()
	defer report.mu.Unlock()
	if report.lines == nil {
		report.lines = map[string][]string{}
	}
	report.lines[scenario] = append(report.lines[scenario], lines...)
}

// printReport prints every scenario's traffic lines and writes them to
// logs/traffic.txt.
func printReport(c *cluster.Cluster) {
	report.mu.Lock()
	defer report.mu.Unlock()
	if len(report.lines) == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "traffic through Traefik (%d requests per measurement, Traefik with its default settings)\n", measureRequests)
	for _, name := range slices.Sorted(maps.Keys(report.lines)) {
		fmt.Fprintf(&b, "  %s\n", name)
		for _, l := range report.lines[name] {
			fmt.Fprintf(&b, "    %s\n", l)
		}
	}
	fmt.Print(b.String())
	if c != nil {
		_ = os.WriteFile(filepath.Join(c.LogDir, "traffic.txt"), []byte(b.String()), 0o644)
	}
}

// request is a request to the scenario's route, through Traefik.
func (r *run) request(header map[string]string) traffic.Request {
	req := traffic.Request{Host: r.sc.host, Header: header, Protocol: r.sc.protocol}
	if r.sc.listener != "" {
		req.Entrypoint = r.c.Traefik.Entrypoints[r.sc.listener]
	}
	return req
}

// checkTraffic measures what Traefik carries once a step's state is
// reached: the weights the step wants, split over the Services' backends
// within traffic.Tolerance; the versions, when the step names them; and for
// a header rule, every request with its header going to its backend. The
// split is measured until it matches (bounded); the times are printed.
func (r *run) checkTraffic(t *testing.T, st step, o observed, began time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*convergeTimeout)
	defer cancel()
	seen := r.generationSeen(t, o.generation)
	conv, err := r.c.Meter.Converge(ctx, r.request(nil), st.want.weights, measureRequests, seen, convergeTimeout)
	if err != nil {
		t.Fatalf("step %q: Traefik does not carry the route's weights: %v\nthe route's generations:\n  %s\nTraefik's view: %s/rawdata",
			st.name, err, strings.Join(r.watch.Since(began), "\n  "), r.c.TraefikAPI)
	}
	lines := []string{fmt.Sprintf("%s: %s", st.name, conv.Counts.Describe(st.want.weights))}
	lines = append(lines, "    "+r.timing(o.generation, seen, began, conv))
	if st.want.versions != nil {
		versions, err := r.versions(ctx, conv.Counts)
		if err != nil {
			t.Fatal(err)
		}
		if m := versions.Mismatches(st.want.versions, traffic.Tolerance); len(m) > 0 {
			t.Errorf("step %q: the versions behind the Services got %s, want %v: %s", st.name, versions.Describe(st.want.versions), st.want.versions, strings.Join(m, "; "))
		}
		lines = append(lines, "    versions: "+versions.Describe(st.want.versions))
	}
	if h := st.want.header; h != nil {
		want := map[string]int64{h.backend: 1} // the rule's one backendRef: all of it
		req := r.request(map[string]string{h.name: h.value})
		hc, err := r.c.Meter.Converge(ctx, req, want, measureRequests, seen, convergeTimeout)
		if err != nil {
			t.Fatalf("step %q: requests with %s: %s do not all go to %s: %v", st.name, h.name, h.value, h.backend, err)
		}
		lines = append(lines, fmt.Sprintf("    with %s: %s: %s", h.name, h.value, hc.Counts.Describe(want)))
	}
	if st.want.sticky != nil {
		lines = append(lines, r.checkSticky(ctx, t, st, seen)...)
	}
	r.record(t, lines...)
}

// generationSeen waits (bounded) until the route's watch has seen the
// generation and returns when it first did.
func (r *run) generationSeen(t *testing.T, gen int64) time.Time {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if seen, _, ok := r.watch.Generation(gen); ok {
			return seen
		}
		if time.Now().After(deadline) {
			t.Fatalf("the watch on %s %s/%s never saw generation %d", r.sc.route.kind, r.ns, r.sc.route.name, gen)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// timing says how long after the route's write Traefik's status and its
// traffic followed, or that the step did not change the route.
func (r *run) timing(gen int64, seen, began time.Time, conv traffic.Convergence) string {
	if seen.Before(began) {
		return fmt.Sprintf("route unchanged in this step (generation %d, written %s before it began): %d requests matched %s after that write",
			gen, ms(began.Sub(seen)), measureRequests, ms(conv.Matched))
	}
	_, status, _ := r.watch.Generation(gen)
	moved := "traffic moved by " + ms(conv.Moved)
	if conv.Already {
		moved = "traffic already moved when measuring began " + ms(conv.Moved)
	}
	return fmt.Sprintf("after the write (generation %d): Traefik status current %s, %s, %d requests matched by %s",
		gen, after(seen, status), moved, measureRequests, ms(conv.Matched))
}

func after(from, to time.Time) string {
	if to.IsZero() {
		return "(not seen)"
	}
	return ms(to.Sub(from))
}

func ms(d time.Duration) string { return fmt.Sprintf("+%dms", d.Milliseconds()) }

// versions adds the counts up by the version each Service's pods run
// (cluster.ServiceVersion); what no backend answered keeps its key.
func (r *run) versions(ctx context.Context, counts traffic.Counts) (traffic.Counts, error) {
	out := traffic.Counts{}
	for svc, n := range counts {
		if strings.HasPrefix(svc, "(") {
			out[svc] += n
			continue
		}
		v, err := r.c.ServiceVersion(ctx, r.ns, svc)
		if err != nil {
			return nil, fmt.Errorf("the version behind Service %s/%s: %w", r.ns, svc, err)
		}
		out[v] += n
	}
	return out, nil
}

// checkVerified checks VerifyWeight's answers for a step, as the controller
// logged them: at least one "not yet verified" after the step's action, then
// "verified"; and the requests the sampler sent right after the "verified"
// line arrived (up to measureRequests, and only those before the route's next
// change) split as the weight says. It prints the timeline: the write, the
// NotVerified answers and why (the plugin's log), Traefik's status, the
// traffic, Verified.
func (r *run) checkVerified(t *testing.T, st step, began time.Time, sampler *traffic.Sampler) {
	t.Helper()
	v := st.want.verified
	prefix := fmt.Sprintf("Desired weight (stepIdx: %s) %d ", v.stepIndex, v.weight)
	var verifiedAt time.Time
	var notYet []cluster.Line
	deadline := time.Now().Add(30 * time.Second)
	for verifiedAt.IsZero() {
		notYet = nil
		for _, l := range r.c.ControllerLog.FindLines(100000, "Desired weight", "namespace="+r.ns) {
			switch {
			case l.At.Before(began):
			case strings.Contains(l.Text, prefix+"not yet verified"):
				if verifiedAt.IsZero() {
					notYet = append(notYet, l)
				}
			case strings.Contains(l.Text, prefix+"verified") && verifiedAt.IsZero():
				verifiedAt = l.At
			}
		}
		if verifiedAt.IsZero() {
			if time.Now().After(deadline) {
				sampler.Stop()
				t.Fatalf("step %q: the controller never logged %q after the step's action", st.name, prefix+"verified")
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hits, err := sampler.WaitFor(ctx, verifiedAt, measureRequests)
	all := sampler.Stop()
	if err != nil {
		t.Fatalf("step %q: %v", st.name, err)
	}
	// Requests after the route's next change are not about this weight.
	if _, next, _, ok := r.watch.FirstAfter(verifiedAt); ok {
		for i, h := range hits {
			if !h.At.Before(next) {
				hits = hits[:i]
				break
			}
		}
	}
	if len(hits) == 0 {
		t.Fatalf("step %q: no request between Verified and the route's next change", st.name)
	}
	counts := traffic.Count(hits)
	if m := counts.Mismatches(v.split, traffic.Tolerance); len(m) > 0 {
		t.Errorf("step %q: when the controller logged %q, Traefik carried %s, want %v: %s",
			st.name, prefix+"verified", counts.Describe(v.split), v.split, strings.Join(m, "; "))
	}
	if len(notYet) == 0 {
		t.Errorf("step %q: VerifyWeight answered Verified at its first call after the write: the data plane had no time to follow", st.name)
	}

	gen, written, status, _ := r.watch.FirstAfter(began)
	var b strings.Builder
	fmt.Fprintf(&b, "VerifyWeight %d (generation %d written at 0): ", v.weight, gen)
	if len(notYet) > 0 {
		fmt.Fprintf(&b, "NotVerified x%d (first %s), ", len(notYet), ms(notYet[0].At.Sub(written)))
	}
	fmt.Fprintf(&b, "Traefik status current %s, ", after(written, status))
	if moved, ok := traffic.MovedAt(traffic.Since(all, written), v.split, traffic.DefaultWindow); ok {
		fmt.Fprintf(&b, "traffic moved by %s, ", ms(moved.Sub(written)))
	}
	fmt.Fprintf(&b, "Verified %s", ms(verifiedAt.Sub(written)))
	reasons := r.c.ControllerLog.FindLines(100000, r.ns+"/"+r.sc.rollout)
	behind, settling := 0, 0
	for _, l := range reasons {
		if l.At.Before(written) || l.At.After(verifiedAt) {
			continue
		}
		switch {
		case strings.Contains(l.Text, "weights not verified yet"):
			behind++
		case strings.Contains(l.Text, "waiting for its data plane"):
			settling++
		}
	}
	r.record(t,
		b.String(),
		fmt.Sprintf("    the plugin said why: %d x status behind, %d x waiting for the data plane (settle)", behind, settling),
		fmt.Sprintf("    the %d requests sent right after Verified: %s", len(hits), counts.Describe(v.split)))
}

// checkGatewayErrors measures what Traefik answers once it carries a rule
// it cannot (the step's route has one, by assumeGatewayFeatures): it waits
// (bounded) for the first answer of the gateway's own, then counts
// measureRequests answers and prints them. No such answer at all fails the
// step: the reason the plugin refuses such rules would be gone.
func (r *run) checkGatewayErrors(t *testing.T, st step) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), convergeTimeout)
	defer cancel()
	start := time.Now()
	for {
		h := r.c.Meter.Do(ctx, r.request(nil))
		if h.Backend == "" && h.Status >= 500 {
			break
		}
		if ctx.Err() != nil {
			t.Errorf("step %q: in %s Traefik never answered an error of its own; the rule it lacks a feature for is carried after all", st.name, ms(time.Since(start)))
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	hits, err := r.c.Meter.Measure(ctx, r.request(nil), measureRequests)
	if err != nil {
		t.Fatalf("step %q: %v", st.name, err)
	}
	r.record(t, fmt.Sprintf("%s: %s", st.name, traffic.Count(hits).Describe(nil)),
		fmt.Sprintf("    first gateway error %s after the step was reached", ms(time.Since(start))))
}
