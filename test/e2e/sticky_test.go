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
			rolloutYAML("st", `
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
	if !s.oldCookie {
		lines = append(lines, r.checkVisitors(ctx, t, st)...)
	}
	return lines
}

// Visitors browsing during the canary, each keeping the cookie it is
// given as a browser does: stickyVisitors of them, stickyPages requests
// each, one visitor after another.
const (
	stickyVisitors = 200
	stickyPages    = 10
)

// visitors counts, over stickyVisitors visitors of stickyPages pages each,
// how many were first answered by the canary, how many were ever answered
// by it, and how many saw both versions. keepStable false is a browser
// that drops the stable's cookie: what users would get if only the canary
// set one.
func (r *run) visitors(ctx context.Context, t *testing.T, canary string, keepStable bool) (firstCanary, reachedCanary, sawBoth int) {
	t.Helper()
	for range stickyVisitors {
		cookie := ""
		seen := map[string]bool{}
		for page := range stickyPages {
			var header map[string]string
			if cookie != "" {
				header = map[string]string{"Cookie": cookie}
			}
			h := r.c.Meter.Do(ctx, r.request(header))
			if h.Backend == "" {
				t.Fatalf("a visitor's page %d got no backend's answer: %s", page+1, h.Key())
			}
			if page == 0 && h.Backend == canary {
				firstCanary++
			}
			seen[h.Backend] = true
			if h.SetCookie != "" && (keepStable || h.Backend == canary) {
				cookie, _, _ = strings.Cut(h.SetCookie, ";")
			}
		}
		if seen[canary] {
			reachedCanary++
		}
		if len(seen) > 1 {
			sawBoth++
		}
	}
	return firstCanary, reachedCanary, sawBoth
}

// checkVisitors measures what the stable's cookie is for: with both
// cookies no visitor sees both versions and the visitors on the canary
// are those its weight sent there first; a browser keeping only the
// canary's cookie (as if stable set none) lands on the canary sooner or
// later, so the canary's share of visitors grows far past its weight.
func (r *run) checkVisitors(ctx context.Context, t *testing.T, st step) []string {
	t.Helper()
	canary := st.want.sticky.canary
	first, reached, both := r.visitors(ctx, t, canary, true)
	if both != 0 {
		t.Errorf("step %q: %d of %d visitors saw both versions with both cookies kept; want none", st.name, both, stickyVisitors)
	}
	if reached != first {
		t.Errorf("step %q: %d visitors reached the canary, %d were first answered by it; want the same", st.name, reached, first)
	}
	first2, reached2, both2 := r.visitors(ctx, t, canary, false)
	if reached2 <= 2*reached {
		t.Errorf("step %q: without the stable's cookie %d of %d visitors reached the canary, with it %d; want far more without", st.name, reached2, stickyVisitors, reached)
	}
	return []string{
		fmt.Sprintf("    %d visitors × %d pages, both cookies kept: %d on the canary (first answer %d), %d saw both versions",
			stickyVisitors, stickyPages, reached, first, both),
		fmt.Sprintf("    the same, only the canary's cookie kept: %d reached the canary (first answer %d), %d saw both versions",
			reached2, first2, both2),
	}
}
