package test

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The real plugin with -metrics-address walks one Rollout 10 → 30 → 50,
// then the Rollout's config names a route whose rule lacks the canary and
// the next SetWeight is refused. /metrics counts each call once under its
// result, the four in the histogram, three applies and the one refusal;
// the Rollout is one active Rollout; its route cache and the two routes it
// read are what the watch caches hold.
func TestMetricsCountTheCallsOfAWalk(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	create(t, standard, ns, routeYAML("v1", "HTTPRoute", "route"))
	create(t, standard, ns, `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: stable-only
spec:
  parentRefs: [{name: gw}]
  rules:
  - backendRefs:
    - {name: stable, port: 80}
`)
	p, log := startPluginWith(t, pluginBin, standard.Kubeconfig, "-metrics-address", "127.0.0.1:0")
	scrape := metricsOf(t, log)

	for _, w := range []int32{10, 30, 50} {
		if err := p.SetWeight(rollout(ns, `{"httpRoute": "route"}`), w, nil); err.HasError() {
			t.Fatalf("SetWeight(%d): %s", w, err)
		}
	}
	err := p.SetWeight(rollout(ns, `{"httpRoute": "stable-only"}`), 50, nil)
	if !err.HasError() {
		t.Fatal("SetWeight(50) on a route whose rule lacks the canary answered no error")
	}
	t.Logf("the refused call: %s", err)

	got := scrape()
	want := map[string]float64{
		`rollouts_gatewayapi_ssa_calls_total{method="SetWeight",result="ok",route_cluster=""}`:            3,
		`rollouts_gatewayapi_ssa_calls_total{method="SetWeight",result="RouteMismatch",route_cluster=""}`: 1,
		`rollouts_gatewayapi_ssa_call_duration_seconds_count{method="SetWeight",route_cluster=""}`:        4,
		`rollouts_gatewayapi_ssa_route_writes_total{outcome="applied",route_cluster=""}`:                  3,
		`rollouts_gatewayapi_ssa_route_writes_total{outcome="refused",route_cluster=""}`:                  1,
		`rollouts_gatewayapi_ssa_route_writes_total{outcome="unchanged",route_cluster=""}`:                0,
		`rollouts_gatewayapi_ssa_route_writes_total{outcome="failed",route_cluster=""}`:                   0,
		`rollouts_gatewayapi_ssa_rollouts_active{route_cluster=""}`:                                       1,
		`rollouts_gatewayapi_ssa_watch_caches{kind="routes",route_cluster=""}`:                            1,
		`rollouts_gatewayapi_ssa_routes_held{route_cluster=""}`:                                           2,
		`rollouts_gatewayapi_ssa_events_dropped_total{route_cluster=""}`:                                  0,
		`rollouts_gatewayapi_ssa_peers{route_cluster=""}`:                                                 0,
	}
	picked := map[string]float64{}
	for s := range want {
		if v, ok := got[s]; ok {
			picked[s] = v
		}
	}
	if diff := cmp.Diff(want, picked); diff != "" {
		t.Errorf("/metrics after the walk (-want +got):\n%s", diff)
	}
	// Each apply is one PATCH answered 200 (the Lease's renewals are
	// PATCHes too); the calls' Events on the Rollout and the route are
	// queued, each once.
	if n := got[`rollouts_gatewayapi_ssa_apiserver_requests_total{code="200",route_cluster="",verb="patch"}`]; n < 3 {
		t.Errorf("%v PATCHes answered 200, want at least the 3 applies", n)
	}
	if n := got[`rollouts_gatewayapi_ssa_events_recorded_total{route_cluster=""}`]; n < 3 {
		t.Errorf("%v Events recorded, want at least the 3 changes of the route's weights", n)
	}
	var own []string
	for s := range got {
		if strings.HasPrefix(s, "rollouts_gatewayapi_ssa_") && !strings.Contains(s, "_bucket{") {
			own = append(own, fmt.Sprintf("%s %v", s, got[s]))
		}
	}
	sort.Strings(own)
	t.Logf("/metrics, the plugin's own series but the buckets:\n%s", strings.Join(own, "\n"))
}

// A Rollout naming 100 routes that are not there (the most a Rollout may
// name): its call is refused once, counted once, and adds no series: the
// series after it are those after a call naming one missing route. Nothing
// of a route (its name, its namespace) is a label.
func TestMetricsHaveNoSeriesPerRoute(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	p, log := startPluginWith(t, pluginBin, standard.Kubeconfig, "-metrics-address", "127.0.0.1:0")
	scrape := metricsOf(t, log)
	missing := func(n int) string {
		var names []string
		for i := range n {
			names = append(names, fmt.Sprintf(`{"name": "missing-%d"}`, i))
		}
		return `{"httpRoutes": [` + strings.Join(names, ", ") + `]}`
	}
	if err := p.SetWeight(rollout(ns, missing(1)), 30, nil); !err.HasError() {
		t.Fatal("SetWeight naming a missing route answered no error")
	}
	// The route cache's first LIST may end after the first call: its series
	// is there before the call that counts.
	list := `rollouts_gatewayapi_ssa_apiserver_requests_total{code="200",route_cluster="",verb="list"}`
	eventually(t, "the route cache's list counted", func() bool { _, ok := scrape()[list]; return ok })
	before := scrape()
	const n = 100
	if err := p.SetWeight(rollout(ns, missing(n)), 30, nil); !err.HasError() {
		t.Fatalf("SetWeight naming %d missing routes answered no error", n)
	}
	after := scrape()
	own := func(m map[string]float64) []string {
		var out []string
		for s := range m {
			if strings.HasPrefix(s, "rollouts_gatewayapi_ssa_") {
				out = append(out, s)
			}
		}
		sort.Strings(out)
		return out
	}
	if diff := cmp.Diff(own(before), own(after)); diff != "" {
		t.Errorf("the plugin's series after the call naming %d missing routes (-before +after):\n%s", n, diff)
	}
	notFound := `rollouts_gatewayapi_ssa_calls_total{method="SetWeight",result="RouteNotFound",route_cluster=""}`
	gets := `rollouts_gatewayapi_ssa_apiserver_requests_total{code="404",route_cluster="",verb="get"}`
	if before[notFound] != 1 || after[notFound] != 2 {
		t.Errorf("calls refused as RouteNotFound: %v, then %v; want 1, then 2", before[notFound], after[notFound])
	}
	// missing-0 is remembered missing since the first call: no GET again.
	if after[gets]-before[gets] < n-1 {
		t.Errorf("GETs answered 404: %v, then %v; want one more per missing route but missing-0", before[gets], after[gets])
	}
	t.Logf("%d series of the plugin's own before and after the call naming %d missing routes; GETs answered 404: %v, then %v",
		len(own(after)), n, before[gets], after[gets])
}

var metricsAddress = regexp.MustCompile(`msg="serving Prometheus metrics at /metrics" address="([^"]+)"`)

// metricsOf finds, in the plugin's log, where it serves its metrics, and
// returns what scrapes them: every sample of /metrics, by series.
func metricsOf(t *testing.T, log *pluginLog) func() map[string]float64 {
	t.Helper()
	log.mu.Lock()
	m := metricsAddress.FindStringSubmatch(log.b.String())
	log.mu.Unlock()
	if m == nil {
		t.Fatal("the plugin's log does not say where it serves its metrics")
	}
	url := "http://" + m[1] + "/metrics"
	return func() map[string]float64 {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s %v", url, resp.Status, err)
		}
		return samples(t, string(body))
	}
}

// samples reads Prometheus' text format: each sample's value by its series
// (name and labels as written).
func samples(t *testing.T, text string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			t.Fatalf("not a sample: %q", line)
		}
		out[line[:i]] = v
	}
	return out
}
