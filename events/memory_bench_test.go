package events

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
)

// acceptingSink answers every request at once.
type acceptingSink struct{}

func (acceptingSink) create(_ context.Context, e *eventsv1.Event) (string, error) { return e.Name, nil }
func (acceptingSink) patch(context.Context, string, string, []byte) error         { return nil }

// BenchmarkRecorderHolds is what a Recorder keeps after steps of a Rollout
// over 200 routes, each route's weights changed in every step: a series per
// route and step, remembered for changeEnd (make bench-micro prints
// bytes/series).
func BenchmarkRecorderHolds(b *testing.B) {
	const routesN, steps = 200, 12
	log := logrus.NewEntry(logrus.New())
	var held, series float64
	for range b.N {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		r := newRecorder(acceptingSink{}, Options{Controller: "bench", Instance: "host/1"}, log)
		now := time.Now()
		for step := range steps {
			for i := range routesN {
				rollout := corev1.ObjectReference{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Namespace: "shop", Name: "demo"}
				r.state.observe(Event{
					Regarding: corev1.ObjectReference{APIVersion: "gateway.networking.k8s.io/v1", Kind: "HTTPRoute",
						Namespace: "shop", Name: fmt.Sprintf("route-%d", i), UID: "0a1b2c3d-0a1b-0a1b-0a1b-0a1b2c3d4e5f"},
					Related: &rollout, Type: corev1.EventTypeNormal, Reason: reasonWeightsChanged, Action: "SetWeight",
					Note: fmt.Sprintf("rollout shop/demo: SetWeight(%d): rule 0 Service shop/stable %d→%d; rule 0 Service shop/canary %d→%d",
						step+1, 100-step, 99-step, step, step+1),
				}, now.Add(time.Duration(step)*time.Second))
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		held += float64(after.HeapAlloc) - float64(before.HeapAlloc)
		series += float64(r.state.series.len())
		runtime.KeepAlive(r)
	}
	b.ReportMetric(held/series, "bytes/series")
	b.ReportMetric(series/float64(b.N), "series")
}
