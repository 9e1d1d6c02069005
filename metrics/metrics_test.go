package metrics

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gatewayapi-ssa/rollouts-plugin/kube"
	"github.com/gatewayapi-ssa/rollouts-plugin/kubeclient"
	"github.com/gatewayapi-ssa/rollouts-plugin/orchestrator"
)

// The parts of a cluster as a scenario sets their counts.
type (
	requests map[kubeclient.RequestKind]uint64
	held     kube.Held
	writes   orchestrator.Writes
	recorded [2]int64
	others   int
	logged   int
)

func (r requests) Counts() map[kubeclient.RequestKind]uint64 { return r }
func (h held) Held() kube.Held                               { return kube.Held(h) }
func (w writes) Writes() orchestrator.Writes                 { return orchestrator.Writes(w) }
func (r recorded) Recorded() (int64, int64)                  { return r[0], r[1] }
func (o others) Others() int                                 { return int(o) }
func (l logged) GatewaysLogged() int                         { return int(l) }

// ownNames are the metrics of the plugin's own (not the Go runtime's).
var ownNames = []string{
	"rollouts_gatewayapi_ssa_build_info", "rollouts_gatewayapi_ssa_calls_total", "rollouts_gatewayapi_ssa_call_duration_seconds",
	"rollouts_gatewayapi_ssa_apiserver_requests_total", "rollouts_gatewayapi_ssa_route_writes_total",
	"rollouts_gatewayapi_ssa_watch_caches", "rollouts_gatewayapi_ssa_routes_held", "rollouts_gatewayapi_ssa_remembered", "rollouts_gatewayapi_ssa_rollouts_active",
	"rollouts_gatewayapi_ssa_events_recorded_total", "rollouts_gatewayapi_ssa_events_dropped_total", "rollouts_gatewayapi_ssa_peers",
}

// A plugin with the controller's cluster and a fleet's config cluster
// (-route-cluster fleet): shop/web walks 10 → 30 on the controller's
// cluster, and its second step takes 2 s; shop/api's SetWeight is refused
// for a route that is not there; eu/web's SetWeight goes to the fleet. A
// scrape shows each call once, by method and result, its duration in the
// histogram, each cluster's counts under its name, and the two Rollouts
// that called the controller's cluster and the one that called the fleet.
func TestAScrapeShowsTheCallsAndEachClustersCounts(t *testing.T) {
	m := New("v1.2.3")
	m.Watch("", Cluster{
		Requests: requests{{Verb: "patch", Code: "200"}: 2, {Verb: "get", Code: "404"}: 1, {Verb: "watch", Code: "200"}: 1},
		Reader:   held{RouteCaches: 1, ParentCaches: 0, GrantCaches: 0, WholeRoutes: 1, MissingRoutes: 2, PredecessorReads: 1},
		Writes:   writes{Applied: 2, Refused: 0},
		Logged:   logged(3),
		Events:   recorded{3, 0},
		Peers:    others(0),
	})
	m.Watch("fleet", Cluster{
		Requests: requests{{Verb: "patch", Code: "409"}: 1, {Verb: "patch", Code: "200"}: 1},
		Writes:   writes{Applied: 1, Conflicts: 1, Retried: 1},
		Events:   recorded{1, 4},
		Peers:    others(1),
	})
	m.Call("SetWeight", "", "shop/web", nil, 40*time.Millisecond)
	m.Call("SetWeight", "", "shop/web", nil, 2*time.Second)
	m.Call("SetWeight", "", "shop/api", &kube.MissingError{}, 3*time.Millisecond)
	m.Call("SetWeight", "fleet", "eu/web", nil, 70*time.Millisecond)

	want := `
# HELP rollouts_gatewayapi_ssa_build_info The plugin's version; always 1.
# TYPE rollouts_gatewayapi_ssa_build_info gauge
rollouts_gatewayapi_ssa_build_info{version="v1.2.3"} 1
# HELP rollouts_gatewayapi_ssa_calls_total Calls of the Argo Rollouts controller, by method and result: ok, or the reason of the Warning Event the call recorded on the Rollout.
# TYPE rollouts_gatewayapi_ssa_calls_total counter
rollouts_gatewayapi_ssa_calls_total{method="SetWeight",result="RouteNotFound",route_cluster=""} 1
rollouts_gatewayapi_ssa_calls_total{method="SetWeight",result="ok",route_cluster=""} 2
rollouts_gatewayapi_ssa_calls_total{method="SetWeight",result="ok",route_cluster="fleet"} 1
# HELP rollouts_gatewayapi_ssa_apiserver_requests_total ` + help(requestsDesc) + `
# TYPE rollouts_gatewayapi_ssa_apiserver_requests_total counter
rollouts_gatewayapi_ssa_apiserver_requests_total{code="200",route_cluster="",verb="patch"} 2
rollouts_gatewayapi_ssa_apiserver_requests_total{code="200",route_cluster="",verb="watch"} 1
rollouts_gatewayapi_ssa_apiserver_requests_total{code="404",route_cluster="",verb="get"} 1
rollouts_gatewayapi_ssa_apiserver_requests_total{code="200",route_cluster="fleet",verb="patch"} 1
rollouts_gatewayapi_ssa_apiserver_requests_total{code="409",route_cluster="fleet",verb="patch"} 1
# HELP rollouts_gatewayapi_ssa_route_writes_total ` + help(writesDesc) + `
# TYPE rollouts_gatewayapi_ssa_route_writes_total counter
rollouts_gatewayapi_ssa_route_writes_total{outcome="applied",route_cluster=""} 2
rollouts_gatewayapi_ssa_route_writes_total{outcome="conflict",route_cluster=""} 0
rollouts_gatewayapi_ssa_route_writes_total{outcome="failed",route_cluster=""} 0
rollouts_gatewayapi_ssa_route_writes_total{outcome="refused",route_cluster=""} 0
rollouts_gatewayapi_ssa_route_writes_total{outcome="released",route_cluster=""} 0
rollouts_gatewayapi_ssa_route_writes_total{outcome="retried",route_cluster=""} 0
rollouts_gatewayapi_ssa_route_writes_total{outcome="unchanged",route_cluster=""} 0
rollouts_gatewayapi_ssa_route_writes_total{outcome="applied",route_cluster="fleet"} 1
rollouts_gatewayapi_ssa_route_writes_total{outcome="conflict",route_cluster="fleet"} 1
rollouts_gatewayapi_ssa_route_writes_total{outcome="failed",route_cluster="fleet"} 0
rollouts_gatewayapi_ssa_route_writes_total{outcome="refused",route_cluster="fleet"} 0
rollouts_gatewayapi_ssa_route_writes_total{outcome="released",route_cluster="fleet"} 0
rollouts_gatewayapi_ssa_route_writes_total{outcome="retried",route_cluster="fleet"} 1
rollouts_gatewayapi_ssa_route_writes_total{outcome="unchanged",route_cluster="fleet"} 0
# HELP rollouts_gatewayapi_ssa_watch_caches ` + help(cachesDesc) + `
# TYPE rollouts_gatewayapi_ssa_watch_caches gauge
rollouts_gatewayapi_ssa_watch_caches{kind="grants",route_cluster=""} 0
rollouts_gatewayapi_ssa_watch_caches{kind="parents",route_cluster=""} 0
rollouts_gatewayapi_ssa_watch_caches{kind="routes",route_cluster=""} 1
# HELP rollouts_gatewayapi_ssa_routes_held ` + help(routesDesc) + `
# TYPE rollouts_gatewayapi_ssa_routes_held gauge
rollouts_gatewayapi_ssa_routes_held{route_cluster=""} 1
# HELP rollouts_gatewayapi_ssa_remembered ` + help(rememberedDesc) + `
# TYPE rollouts_gatewayapi_ssa_remembered gauge
rollouts_gatewayapi_ssa_remembered{route_cluster="",what="configmaps"} 1
rollouts_gatewayapi_ssa_remembered{route_cluster="",what="gateways_logged"} 3
rollouts_gatewayapi_ssa_remembered{route_cluster="",what="missing_routes"} 2
# HELP rollouts_gatewayapi_ssa_rollouts_active ` + help(rolloutsDesc) + `
# TYPE rollouts_gatewayapi_ssa_rollouts_active gauge
rollouts_gatewayapi_ssa_rollouts_active{route_cluster=""} 2
rollouts_gatewayapi_ssa_rollouts_active{route_cluster="fleet"} 1
# HELP rollouts_gatewayapi_ssa_events_recorded_total ` + help(eventsDesc) + `
# TYPE rollouts_gatewayapi_ssa_events_recorded_total counter
rollouts_gatewayapi_ssa_events_recorded_total{route_cluster=""} 3
rollouts_gatewayapi_ssa_events_recorded_total{route_cluster="fleet"} 1
# HELP rollouts_gatewayapi_ssa_events_dropped_total ` + help(droppedDesc) + `
# TYPE rollouts_gatewayapi_ssa_events_dropped_total counter
rollouts_gatewayapi_ssa_events_dropped_total{route_cluster=""} 0
rollouts_gatewayapi_ssa_events_dropped_total{route_cluster="fleet"} 4
# HELP rollouts_gatewayapi_ssa_peers ` + help(peersDesc) + `
# TYPE rollouts_gatewayapi_ssa_peers gauge
rollouts_gatewayapi_ssa_peers{route_cluster=""} 0
rollouts_gatewayapi_ssa_peers{route_cluster="fleet"} 1
`
	counted := slices.DeleteFunc(slices.Clone(ownNames), func(n string) bool { return strings.HasSuffix(n, "_seconds") })
	if err := testutil.GatherAndCompare(m.registry, strings.NewReader(want), counted...); err != nil {
		t.Error(err)
	}

	// The controller's cluster's SetWeights: 3 ms, 40 ms and 2 s.
	wantDurations := `
# HELP rollouts_gatewayapi_ssa_call_duration_seconds How long the calls of the Argo Rollouts controller took, by method, from the call's arrival to its answer.
# TYPE rollouts_gatewayapi_ssa_call_duration_seconds histogram
rollouts_gatewayapi_ssa_call_duration_seconds_bucket{method="SetWeight",route_cluster="",le="0.005"} 1
rollouts_gatewayapi_ssa_call_duration_seconds_bucket{method="SetWeight",route_cluster="",le="0.01"} 1
rollouts_gatewayapi_ssa_call_duration_seconds_bucket{method="SetWeight",route_cluster="",le="0.025"} 1
rollouts_gatewayapi_ssa_call_duration_seconds_bucket{method="SetWeight",route_cluster="",le="0.05"} 2
rollouts_gatewayapi_ssa_call_duration_seconds_bucket{method="SetWeight",route_cluster="",le="0.1"} 2
rollouts_gatewayapi_ssa_call_duration_seconds_bucket{method="SetWeight",route_cluster="",le="0.25"} 2
rollouts_gatewayapi_ssa_call_duration_seconds_bucket{method="SetWeight",route_cluster="",le="0.5"} 2
rollouts_gatewayapi_ssa_call_duration_seconds_bucket{method="SetWeight",route_cluster="",le="1"} 2
rollouts_gatewayapi_ssa_call_duration_seconds_bucket{method="SetWeight",route_cluster="",le="2.5"} 3
rollouts_gatewayapi_ssa_call_duration_seconds_bucket{method="SetWeight",route_cluster="",le="5"} 3
rollouts_gatewayapi_ssa_call_duration_seconds_bucket{method="SetWeight",route_cluster="",le="10"} 3
rollouts_gatewayapi_ssa_call_duration_seconds_bucket{method="SetWeight",route_cluster="",le="20"} 3
rollouts_gatewayapi_ssa_call_duration_seconds_bucket{method="SetWeight",route_cluster="",le="30"} 3
rollouts_gatewayapi_ssa_call_duration_seconds_bucket{method="SetWeight",route_cluster="",le="60"} 3
rollouts_gatewayapi_ssa_call_duration_seconds_bucket{method="SetWeight",route_cluster="",le="+Inf"} 3
rollouts_gatewayapi_ssa_call_duration_seconds_sum{method="SetWeight",route_cluster=""} 2.043
rollouts_gatewayapi_ssa_call_duration_seconds_count{method="SetWeight",route_cluster=""} 3
`
	if err := testutil.CollectAndCompare(onlyCluster{m, ""}, strings.NewReader(wantDurations)); err != nil {
		t.Error(err)
	}
}

// onlyCluster collects the call durations of one route cluster.
type onlyCluster struct {
	m       *Metrics
	cluster string
}

func (o onlyCluster) Describe(ch chan<- *prometheus.Desc) { o.m.took.Describe(ch) }
func (o onlyCluster) Collect(ch chan<- prometheus.Metric) {
	o.m.took.WithLabelValues("SetWeight", o.cluster).(prometheus.Histogram).Collect(ch)
}

// help is a metric's help text.
func help(d *prometheus.Desc) string {
	s := d.String()
	_, s, _ = strings.Cut(s, `help: "`)
	s, _, _ = strings.Cut(s, `", constLabels`)
	return s
}

// A thousand Rollouts, each naming routes that are not there, call once
// each: the calls count under the one result they share, and the Rollouts
// are counted, not labelled. The series are those of the first call.
func TestNoSeriesPerRollout(t *testing.T) {
	m := New("dev")
	m.Watch("", Cluster{})
	notFound := &kube.MissingError{}
	m.Call("SetWeight", "", "shop/rollout-0", notFound, time.Millisecond)
	before := series(t, m)
	for i := range 1000 {
		m.Call("SetWeight", "", fmt.Sprintf("shop/rollout-%d", i), notFound, time.Millisecond)
	}
	if diff := cmp.Diff(before, series(t, m)); diff != "" {
		t.Errorf("series after 1000 Rollouts' calls (-after one +after 1000):\n%s", diff)
	}
	if n := testutil.ToFloat64(m.calls.WithLabelValues("SetWeight", "RouteNotFound", "")); n != 1001 {
		t.Errorf("%v calls counted, want 1001", n)
	}
	_, active := m.snapshot(time.Now())
	if diff := cmp.Diff(map[string]int{"": 1000}, active); diff != "" {
		t.Errorf("active Rollouts (-want +got):\n%s", diff)
	}
}

// series are the plugin's own series (name and labels) a scrape shows.
func series(t *testing.T, m *Metrics) []string {
	t.Helper()
	families, err := m.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), prefix) {
			continue
		}
		for _, metric := range f.GetMetric() {
			var labels []string
			for _, l := range metric.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			out = append(out, f.GetName()+"{"+strings.Join(labels, ",")+"}")
		}
	}
	return out
}

// A Rollout that has not called for ten minutes is no longer active; one
// that called since is.
func TestARolloutIsActiveForTenMinutesAfterItsLastCall(t *testing.T) {
	m := New("dev")
	m.Call("SetWeight", "", "shop/done", nil, time.Millisecond)
	m.Call("SetWeight", "fleet", "eu/done", nil, time.Millisecond)
	m.mu.Lock()
	for c := range m.lastCall {
		m.lastCall[c] = time.Now().Add(-activeFor - time.Second)
	}
	m.mu.Unlock()
	m.Call("RemoveManagedRoutes", "", "shop/walking", nil, time.Millisecond)
	_, active := m.snapshot(time.Now())
	if diff := cmp.Diff(map[string]int{"": 1}, active); diff != "" {
		t.Errorf("active Rollouts (-want +got):\n%s", diff)
	}
}

// /metrics answers in Prometheus' text format on the address given; port 0
// picks a free one and Serve says which.
func TestServeAnswersOnMetrics(t *testing.T) {
	m := New("v1.2.3")
	m.Call("SetWeight", "", "shop/web", nil, time.Millisecond)
	addr, err := m.Serve("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics: %s, Content-Type %q", resp.Status, resp.Header.Get("Content-Type"))
	}
	for _, line := range []string{
		`rollouts_gatewayapi_ssa_build_info{version="v1.2.3"} 1`,
		`rollouts_gatewayapi_ssa_calls_total{method="SetWeight",result="ok",route_cluster=""} 1`,
		`go_goroutines `, `process_resident_memory_bytes `,
	} {
		if !strings.Contains(string(body), "\n"+line) {
			t.Errorf("GET /metrics has no line %q:\n%s", line, body)
		}
	}
}

// An address that is not HOST:PORT, or one taken, is refused at once, in
// words that say what to give.
func TestServeRefusesAnAddressItCannotListenOn(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for address, want := range map[string]string{
		"8091":                `"8091" is not an address to listen on (missing port in address): give HOST:PORT, or :PORT for every interface, e.g. :8091`,
		"127.0.0.1":           `"127.0.0.1" is not an address to listen on (missing port in address): give HOST:PORT, or :PORT for every interface, e.g. :8091`,
		taken.Addr().String(): "listen tcp " + taken.Addr().String() + ": bind: address already in use",
	} {
		_, err := New("dev").Serve(address)
		if err == nil || err.Error() != want {
			t.Errorf("Serve(%q): %v, want %q", address, err, want)
		}
	}
	var opErr *net.OpError
	if _, err := New("dev").Serve(taken.Addr().String()); !errors.As(err, &opErr) {
		t.Errorf("a taken address: %T, want the *net.OpError of net.Listen", err)
	}
}
