//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/argoproj/argo-rollouts/utils/plugin/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/e2e/cluster"
	"github.com/gatewayapi-ssa/rollouts-plugin/test/e2e/traffic"
	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// verifyTimingSteps are the weights verify-timing sets, each after a pause
// of its own, so that the writes fall at different moments of Traefik's 2 s
// reload throttle (other scenarios' routes reload it too).
var verifyTimingSteps = []struct {
	weight int32
	pause  time.Duration
}{{30, 0}, {70, 1200 * time.Millisecond}, {10, 300 * time.Millisecond}, {90, 2500 * time.Millisecond}, {50, 700 * time.Millisecond}, {0, 1800 * time.Millisecond}}

// runVerifyTiming times VerifyWeight against Traefik with its default
// settings: the plugin binary over RPC, as the controller runs it, but
// asked every 20 ms instead of every 10 s, so the moments are precise. Per
// weight change it prints when Traefik's status became current, when the
// traffic moved, when VerifyWeight by status alone (verifyWeightSettle: 0s)
// said Verified, and when VerifyWeight with Traefik's settle time (the
// default) did. It fails if, at that last moment, the next 1,000 requests do
// not split as the weight says, or if the first answer after the write was
// already Verified.
func runVerifyTiming(t *testing.T, c *cluster.Cluster) {
	r := &run{c: c, sc: scenario{name: "verify-timing", rollout: "vt-settle", route: routeRef{"HTTPRoute", "vt"}, host: host("vt"),
		backends: backends("vt-stable", "vt-canary")}, ns: "e2e-verify-timing"}
	r.sc.objects = service("vt-stable", "vt", 80) + service("vt-canary", "vt", 80) + httpRoute("vt", "vt-stable", "vt-canary")
	// The claims on the route are the RPC-only Rollout "vt-settle"'s: a Rollout
	// of that name must exist, or the plugin the controller runs (with
	// -cleanup-deleted-rollouts) takes them back. This one routes nothing.
	r.sc.objects += rolloutYAML("vt-settle", "steps:\n- pause: {}")
	start := time.Now()
	t.Cleanup(func() { r.dump(t); c.Measure(fmt.Sprintf("scenario %s (%s)", r.sc.name, passed(t)), start) })
	r.setup(t)

	logPath := filepath.Join(c.LogDir, "plugin-verify-timing.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	p, err := harness.StartPlugin(c.Plugin, c.Kubeconfig, logFile)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	withSettle := timingRollout(r.ns, "vt-settle", `{"httpRoute": "vt", "verifyWeight": true}`)
	statusOnly := timingRollout(r.ns, "vt-status", `{"httpRoute": "vt", "verifyWeight": true, "verifyWeightSettle": "0s"}`)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sampler := c.Meter.Sample(ctx, r.request(nil), traffic.MaxRequests, 500*time.Microsecond)
	defer sampler.Stop()
	r.record(t, "VerifyWeight called every 20 ms over RPC; times after the write was seen (watch); Traefik with its default 2 s throttle; logs in "+logPath)
	for _, st := range verifyTimingSteps {
		time.Sleep(st.pause)
		split := map[string]int64{"vt-stable": int64(100 - st.weight), "vt-canary": int64(st.weight)}
		began := time.Now()
		if e := p.Plugin.SetWeight(withSettle, st.weight, nil); e.HasError() {
			t.Fatalf("SetWeight(%d): %s", st.weight, e.ErrorString)
		}
		var first types.RpcVerified
		var statusOnlyAt, verifiedAt time.Time
		calls := 0
		for deadline := time.Now().Add(30 * time.Second); verifiedAt.IsZero(); {
			v, e := p.Plugin.VerifyWeight(withSettle, st.weight, nil)
			if e.HasError() {
				t.Fatalf("VerifyWeight(%d): %s", st.weight, e.ErrorString)
			}
			if calls == 0 {
				first = v
			}
			calls++
			if v == types.Verified {
				verifiedAt = time.Now()
			}
			if statusOnlyAt.IsZero() {
				if v, e := p.Plugin.VerifyWeight(statusOnly, st.weight, nil); e.HasError() {
					t.Fatalf("VerifyWeight(%d) with verifyWeightSettle 0s: %s", st.weight, e.ErrorString)
				} else if v == types.Verified {
					statusOnlyAt = time.Now()
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("VerifyWeight(%d) not Verified within 30s", st.weight)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if first == types.Verified {
			t.Errorf("weight %d: the first VerifyWeight after the write answered Verified", st.weight)
		}
		hits, err := sampler.WaitFor(ctx, verifiedAt, measureRequests)
		if err != nil {
			t.Fatal(err)
		}
		counts := traffic.Count(hits)
		if m := counts.Mismatches(split, traffic.Tolerance); len(m) > 0 {
			t.Errorf("weight %d: right after Verified, Traefik carried %s", st.weight, counts.Describe(split))
		}
		gen, written, status, _ := r.watch.FirstAfter(began)
		line := fmt.Sprintf("weight %d (generation %d): Traefik status current %s, status-only Verified %s, ", st.weight, gen,
			after(written, status), after(written, statusOnlyAt))
		if moved, ok := traffic.MovedAt(traffic.Since(sampler.Hits(), written), split, traffic.DefaultWindow); ok {
			line += fmt.Sprintf("traffic moved by %s, ", ms(moved.Sub(written)))
			if !statusOnlyAt.IsZero() && statusOnlyAt.Before(moved) {
				line += fmt.Sprintf("(status alone: Verified %dms before the traffic moved), ", moved.Sub(statusOnlyAt).Milliseconds())
			}
		}
		line += fmt.Sprintf("Verified %s after %d calls", after(written, verifiedAt), calls)
		r.record(t, line, fmt.Sprintf("    the %d requests right after Verified: %s", len(hits), counts.Describe(split)))
	}
}

func timingRollout(ns, name, config string) *v1alpha1.Rollout {
	return &v1alpha1.Rollout{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.RolloutSpec{Strategy: v1alpha1.RolloutStrategy{Canary: &v1alpha1.CanaryStrategy{
			StableService: "vt-stable",
			CanaryService: "vt-canary",
			TrafficRouting: &v1alpha1.RolloutTrafficRouting{
				Plugins: map[string]json.RawMessage{cluster.PluginName: json.RawMessage(config)},
			},
		}}},
	}
}

func passed(t *testing.T) string {
	switch {
	case t.Skipped():
		return "skipped"
	case t.Failed():
		return "FAILED"
	}
	return "passed"
}
