package metrics

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gatewayapi-ssa/rollouts-plugin/events"
	"github.com/gatewayapi-ssa/rollouts-plugin/kube"
	"github.com/gatewayapi-ssa/rollouts-plugin/kubeclient"
	"github.com/gatewayapi-ssa/rollouts-plugin/orchestrator"
)

// prefix begins the name of every metric of the plugin's own.
const prefix = "rollouts_gatewayapi_ssa_"

// resultOK is the result of a call that answered without an error; any
// other result is the reason of the Warning the call recorded.
const resultOK = "ok"

// activeFor is how recently a Rollout must have called to count as active:
// the controller calls the plugin at every reconcile of a Rollout with
// traffic routing, so one that has not called for this long is done or
// paused for long.
const activeFor = 10 * time.Minute

// callBuckets bound the calls' durations, in seconds: from a step answered
// from the watch caches to the 30 s deadline (-call-timeout) and beyond it.
var callBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60}

// Metrics are the plugin's metrics. A nil *Metrics (no -metrics-address)
// observes nothing.
type Metrics struct {
	registry *prometheus.Registry
	calls    *prometheus.CounterVec
	took     *prometheus.HistogramVec

	mu sync.Mutex
	// clusters are what the plugin works with in each route cluster, by
	// name ("" for the controller's own).
	clusters map[string]Cluster
	// lastCall is when each Rollout last called, by route cluster; never a
	// label, only counted (rollouts_active).
	lastCall map[caller]time.Time
	pruned   time.Time
}

// Cluster is what the plugin reads and writes one cluster's routes with,
// as far as it counts: each part's counts become metrics labelled with the
// cluster's name. Any part may be nil.
type Cluster struct {
	// Requests are the clients' (kubeclient.Clients.Requests).
	Requests interface {
		Counts() map[kubeclient.RequestKind]uint64
	}
	// Reader is the cluster's watch caches (*kube.Cluster).
	Reader interface{ Held() kube.Held }
	// Writes is the orchestrator of its routes (*orchestrator.Orchestrator),
	// and so is Logged.
	Writes interface{ Writes() orchestrator.Writes }
	Logged interface{ GatewaysLogged() int }
	// Events is the recorder of its Events (*events.Recorder).
	Events interface {
		Recorded() (queued, dropped int64)
	}
	// Peers are the plugin's processes there (*peers.Peers).
	Peers interface{ Others() int }
}

// caller is a Rollout (namespace/name) whose routes are in a route cluster.
type caller struct{ cluster, rollout string }

// New returns the plugin's metrics, with the Go runtime's and the
// process's, and version as build_info says it.
func New(version string) *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "calls_total",
			Help: "Calls of the Argo Rollouts controller, by method and result: ok, or the reason of the Warning Event the call recorded on the Rollout.",
		}, []string{"method", "result", "route_cluster"}),
		took: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    prefix + "call_duration_seconds",
			Help:    "How long the calls of the Argo Rollouts controller took, by method, from the call's arrival to its answer.",
			Buckets: callBuckets,
		}, []string{"method", "route_cluster"}),
		clusters: map[string]Cluster{},
		lastCall: map[caller]time.Time{},
	}
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: prefix + "build_info", Help: "The plugin's version; always 1.", ConstLabels: prometheus.Labels{"version": version},
	})
	build.Set(1)
	m.registry.MustRegister(m.calls, m.took, build, collector{m},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Watch shows the counts of what the plugin works with in a cluster: name
// is the route cluster's (-route-cluster), "" the controller's own. A
// cluster watched again is shown with its new parts.
func (m *Metrics) Watch(name string, c Cluster) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.clusters[name] = c
}

// Call observes one call of the controller: its method (SetWeight, ...),
// the route cluster its routes are in ("" for the controller's own, and
// for a call refused before that was known), the Rollout (namespace/name;
// counted, never a label), its error (nil: ok) and how long it took.
func (m *Metrics) Call(method, cluster, rollout string, err error, took time.Duration) {
	if m == nil {
		return
	}
	result := resultOK
	if err != nil {
		result = events.Reason(err)
	}
	m.calls.WithLabelValues(method, result, cluster).Inc()
	m.took.WithLabelValues(method, cluster).Observe(took.Seconds())
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastCall[caller{cluster, rollout}] = now
	if now.Sub(m.pruned) > activeFor {
		m.forgetInactive(now)
	}
}

// forgetInactive drops the Rollouts that have not called for activeFor;
// m.mu is held.
func (m *Metrics) forgetInactive(now time.Time) {
	for c, at := range m.lastCall {
		if now.Sub(at) > activeFor {
			delete(m.lastCall, c)
		}
	}
	m.pruned = now
}

// Serve serves the metrics on address (HOST:PORT, or :PORT for every
// interface of the pod) at /metrics, from now on, and says where it
// listens (port 0 picks a free one). It fails at once when address cannot
// be listened on.
func (m *Metrics) Serve(address string) (net.Addr, error) {
	if _, _, err := net.SplitHostPort(address); err != nil {
		var addrErr *net.AddrError
		if errors.As(err, &addrErr) {
			err = errors.New(addrErr.Err)
		}
		return nil, fmt.Errorf("%q is not an address to listen on (%v): give HOST:PORT, or :PORT for every interface, e.g. :8091", address, err)
	}
	ln, err := net.Listen("tcp", address)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr(), nil
}
