package metrics

import (
	"maps"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The metrics read at scrape time from what each cluster's parts count.
var (
	requestsDesc = prometheus.NewDesc(prefix+"apiserver_requests_total",
		"Requests the plugin sent to the apiserver of a route cluster, every attempt of a retried request counted, by Kubernetes verb and HTTP status code (<error>: no answer came). The Events API's requests are not counted here.",
		[]string{"route_cluster", "verb", "code"}, nil)
	writesDesc = prometheus.NewDesc(prefix+"route_writes_total",
		"Route writes by what came of them: a call's write of one route ends as applied, unchanged, refused or failed; conflict counts the applies answered 409 on the way, retried the applies sent again after them, released the ownerships of spec.rules given back.",
		[]string{"route_cluster", "outcome"}, nil)
	cachesDesc = prometheus.NewDesc(prefix+"watch_caches",
		"Watch caches running, each with one watch open on the apiserver, by kind: routes (one kind in one namespace), parents (GatewayClasses, Gateways, ListenerSets), grants (the ReferenceGrants of one namespace).",
		[]string{"route_cluster", "kind"}, nil)
	routesDesc = prometheus.NewDesc(prefix+"routes_held",
		"Routes the watch caches keep whole because a call read them (of the others only their identity and labels), until their cache stops.",
		[]string{"route_cluster"}, nil)
	rememberedDesc = prometheus.NewDesc(prefix+"remembered",
		"What the plugin remembers for calls, each bounded, by what: missing_routes (named routes found missing, remembered 10 s), configmaps (reads of the argoproj-labs plugin's ConfigMaps), gateways_logged (parents logged as not saying what they carry).",
		[]string{"route_cluster", "what"}, nil)
	rolloutsDesc = prometheus.NewDesc(prefix+"rollouts_active",
		"Rollouts that called the plugin within the last 10 minutes, by the route cluster their routes are in.",
		[]string{"route_cluster"}, nil)
	eventsDesc = prometheus.NewDesc(prefix+"events_recorded_total",
		"Kubernetes Events handed to the recorder of a cluster and queued to be sent (a repeat counts; it is sent as its Event's count).",
		[]string{"route_cluster"}, nil)
	droppedDesc = prometheus.NewDesc(prefix+"events_dropped_total",
		"Kubernetes Events dropped because the recorder's queue was full (the Events API slow or unreachable).",
		[]string{"route_cluster"}, nil)
	peersDesc = prometheus.NewDesc(prefix+"peers",
		"The plugin's other processes of the same field manager seen live through their Leases in a cluster (sharded controllers, a rolling update); 0: this process writes alone.",
		[]string{"route_cluster"}, nil)
)

// collector reads the clusters' counts when Prometheus scrapes.
type collector struct{ m *Metrics }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{requestsDesc, writesDesc, cachesDesc, routesDesc, rememberedDesc, rolloutsDesc, eventsDesc, droppedDesc, peersDesc} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	clusters, active := c.m.snapshot(time.Now())
	counter := func(d *prometheus.Desc, n uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(n), labels...)
	}
	gauge := func(d *prometheus.Desc, n int, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(n), labels...)
	}
	for _, name := range slices.Sorted(maps.Keys(active)) {
		gauge(rolloutsDesc, active[name], name)
	}
	for _, name := range slices.Sorted(maps.Keys(clusters)) {
		cl := clusters[name]
		if cl.Requests != nil {
			for kind, n := range cl.Requests.Counts() {
				counter(requestsDesc, n, name, kind.Verb, kind.Code)
			}
		}
		if cl.Writes != nil {
			w := cl.Writes.Writes()
			for outcome, n := range map[string]uint64{
				"applied": w.Applied, "unchanged": w.Unchanged, "refused": w.Refused, "failed": w.Failed,
				"conflict": w.Conflicts, "retried": w.Retried, "released": w.Released,
			} {
				counter(writesDesc, n, name, outcome)
			}
		}
		if cl.Reader != nil {
			h := cl.Reader.Held()
			gauge(cachesDesc, h.RouteCaches, name, "routes")
			gauge(cachesDesc, h.ParentCaches, name, "parents")
			gauge(cachesDesc, h.GrantCaches, name, "grants")
			gauge(routesDesc, h.WholeRoutes, name)
			gauge(rememberedDesc, h.MissingRoutes, name, "missing_routes")
			gauge(rememberedDesc, h.PredecessorReads, name, "configmaps")
		}
		if cl.Logged != nil {
			gauge(rememberedDesc, cl.Logged.GatewaysLogged(), name, "gateways_logged")
		}
		if cl.Events != nil {
			queued, dropped := cl.Events.Recorded()
			counter(eventsDesc, uint64(queued), name)
			counter(droppedDesc, uint64(dropped), name)
		}
		if cl.Peers != nil {
			gauge(peersDesc, cl.Peers.Others(), name)
		}
	}
}

// snapshot is the clusters watched, and how many Rollouts called lately
// for each of them (0 for a cluster none did), as of now.
func (m *Metrics) snapshot(now time.Time) (map[string]Cluster, map[string]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forgetInactive(now)
	active := map[string]int{}
	for name := range m.clusters {
		active[name] = 0
	}
	for c := range m.lastCall {
		active[c.cluster]++
	}
	return maps.Clone(m.clusters), active
}
