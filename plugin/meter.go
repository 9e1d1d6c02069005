package plugin

import (
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"

	"github.com/gatewayapi-ssa/rollouts-plugin/metrics"
	"github.com/gatewayapi-ssa/rollouts-plugin/rollout"
)

// callMeter observes one call of the controller for the plugin's metrics
// (package metrics): started when the call arrives, ended once, by fail,
// succeeded or recoverInto, with what the call answered.
type callMeter struct {
	metrics *metrics.Metrics
	method  rollout.Method
	rollout string
	start   time.Time
	// cluster is the route cluster the call's routes are in, once the
	// call is decoded ("" for the controller's own).
	cluster string
	ended   bool
}

// meter starts observing a call on the Rollout.
func (p *Plugin) meter(ro *v1alpha1.Rollout, method rollout.Method) *callMeter {
	m := &callMeter{metrics: p.opts.Metrics, method: method, start: time.Now()}
	if ro != nil {
		m.rollout = ro.Namespace + "/" + ro.Name
	}
	return m
}

// in says the call's routes are in routeCluster ("" the controller's own).
func (m *callMeter) in(routeCluster string) {
	if m != nil {
		m.cluster = routeCluster
	}
}

// end observes the call's answer, err (nil: none); only its first end
// counts. A nil *callMeter (InitPlugin's) observes nothing.
func (m *callMeter) end(err error) {
	if m == nil || m.ended {
		return
	}
	m.ended = true
	m.metrics.Call(string(m.method), m.cluster, m.rollout, err, time.Since(m.start))
}
