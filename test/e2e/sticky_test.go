//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/e2e/traffic"
)

// stickyRequests is how many requests carry one cookie in a measurement.
const stickyRequests = 200

// stickyWant is what stickyCanary must do at a step with weight on both
// sides: an answer of each Service sets its cookie; stickyRequests requests
// with the canary cookie all reach the canary, with the stable cookie all
// stable. oldCookie: the canary cookie of the step before (an older
// revision) follows the weights. toStable: the canary cookie of the step
// before reaches stable only (after promotion, nothing is sticky).
type stickyWant struct {
	stable, canary string
	oldCookie      bool
	toStable       bool
}

// stickyScenario walks a Rollout with stickyCanary: setWeight 20, a new
// canary revision at 20 %, then promotion.
func stickyScenario() scenario {
	return scenario{
		name: "sticky",
		objects: service("st-stable", "st", 80) + service("st-canary", "st", 80) +
			httpRoute("st", "st-stable", "st-canary") +
			rollout("st", `
stableService: st-stable
canaryService: st-canary
trafficRouting:
  plugins:
    argoproj-labs/gatewayAPI:
      httpRoute: st
      stickyCanary: {cookieName: st-version, maxAgeSeconds: 600}
steps:
- setWeight: 20
- pause: {}`),
		rollout:  "st",
		route:    routeRef{"HTTPRoute", "st"},
		backends: backends("st-stable", "st-canary"),
		host:     host("st"),
		steps: []step{
			installed(map[string]int64{"st-stable": 100, "st-canary": 0}),
			{name: "image v2: 80/20 with the cookie rules, paused", do: img("st", "v2"),
				want: want{phase: "Paused", stepIndex: index(1), rules: 3, weights: map[string]int64{"st-stable": 80, "st-canary": 20},
					sticky: &stickyWant{stable: "st-stable", canary: "st-canary"}}},
			{name: "image v3: a new canary revision, 80/20, paused", do: img("st", "v3"),
				want: want{phase: "Paused", stepIndex: index(1), rules: 3, weights: map[string]int64{"st-stable": 80, "st-canary": 20},
					sticky: &stickyWant{stable: "st-stable", canary: "st-canary", oldCookie: true}}},
			{name: "promote: no cookie rule, stable 100", do: action{kind: promote},
				want: want{phase: "Healthy", promoted: true, rules: 1, weights: map[string]int64{"st-stable": 100, "st-canary": 0},
					sticky: &stickyWant{stable: "st-stable", canary: "st-canary", toStable: true}}},
		},
	}
}

// checkSticky measures the cookies of a step (see stickyWant) and returns
// the lines for the report.
func (r *run) checkSticky(ctx context.Context, t *testing.T, st step, seen time.Time) []string {
	t.Helper()
	s := st.want.sticky
	only := func(cookie, backend string) string {
		want := map[string]int64{backend: 1}
		req := r.request(map[string]string{"Cookie": cookie})
		if _, err := r.c.Meter.Converge(ctx, req, want, stickyRequests, seen, convergeTimeout); err != nil {
			t.Fatalf("step %q: requests with cookie %s do not all reach %s: %v", st.name, cookie, backend, err)
		}
		hits, err := r.c.Meter.Measure(ctx, req, stickyRequests)
		if err != nil {
			t.Fatal(err)
		}
		counts := traffic.Count(hits)
		if counts[backend] != stickyRequests {
			t.Errorf("step %q: with cookie %s: %s, want all %d on %s", st.name, cookie, counts.Describe(want), stickyRequests, backend)
		}
		return fmt.Sprintf("    with cookie %s: %s", cookie, counts.Describe(want))
	}
	if s.toStable {
		return []string{only(r.canaryCookie, s.stable) + " (the last canary cookie, after promotion)"}
	}
	var lines []string
	if s.oldCookie {
		req := r.request(map[string]string{"Cookie": r.canaryCookie})
		conv, err := r.c.Meter.Converge(ctx, req, st.want.weights, measureRequests, seen, convergeTimeout)
		if err != nil {
			t.Fatalf("step %q: requests with the old canary cookie %s do not follow the weights: %v", st.name, r.canaryCookie, err)
		}
		lines = append(lines, fmt.Sprintf("    with the old canary cookie %s: %s", r.canaryCookie, conv.Counts.Describe(st.want.weights)))
	}
	// A client's first requests, without a cookie, until each side answered once.
	cookies := map[string]string{}
	for i := 0; i < measureRequests && len(cookies) < 2; i++ {
		h := r.c.Meter.Do(ctx, r.request(nil))
		if h.Backend != "" && h.SetCookie != "" && cookies[h.Backend] == "" {
			cookies[h.Backend], _, _ = strings.Cut(h.SetCookie, ";")
		}
	}
	for _, b := range []string{s.canary, s.stable} {
		if cookies[b] == "" {
			t.Fatalf("step %q: no answer of %s set a cookie in %d requests (got %v)", st.name, b, measureRequests, cookies)
		}
	}
	if s.oldCookie && cookies[s.canary] == r.canaryCookie {
		t.Errorf("step %q: the new canary revision sets the old cookie %s", st.name, r.canaryCookie)
	}
	lines = append(lines, only(cookies[s.canary], s.canary), only(cookies[s.stable], s.stable))
	r.canaryCookie = cookies[s.canary]
	return lines
}
