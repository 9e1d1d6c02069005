package plugin

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gatewayapi-ssa/rollouts-plugin/metrics"
	"github.com/gatewayapi-ssa/rollouts-plugin/rollout"
)

// InitPlugin builds the backend once: called again, it builds nothing and
// keeps the backend (and its watch caches) it has. A first InitPlugin that
// fails builds it at the next.
func TestInitPluginTwiceBuildsOnce(t *testing.T) {
	var built []*fakeBackend
	fail := true
	p := New(Options{}, logrus.NewEntry(logrus.New()), func() (Backend, error) {
		if fail {
			fail = false
			return nil, errors.New("no kubeconfig")
		}
		b := &fakeBackend{}
		built = append(built, b)
		return b, nil
	})
	if e := p.InitPlugin(); e.ErrorString != "no kubeconfig" {
		t.Fatalf("InitPlugin = %q, want the error of connect", e.ErrorString)
	}
	for range 3 {
		if e := p.InitPlugin(); e.HasError() {
			t.Fatal(e.ErrorString)
		}
	}
	if len(built) != 1 || p.current() != built[0] {
		t.Errorf("InitPlugin built %d backends after its first failure, want 1 kept", len(built))
	}
}

// fakeBackend is a backend that was built; no call reaches it here.
type fakeBackend struct{ Backend }

func (*fakeBackend) Orchestrators() Orchestrators { return Orchestrators{} }

// Before InitPlugin, with metrics: a SetWeight with a misspelt config key
// is refused as InvalidConfig, one with a good config fails for want of a
// client, and a SetWeight of no Rollout at all panics and answers an
// internal error. Each call counts once, under its result, in the
// controller's cluster.
func TestEveryCallCountsOnceUnderItsResult(t *testing.T) {
	m := metrics.New("test")
	p := New(Options{Metrics: m}, logrus.NewEntry(logrus.New()), func() (Backend, error) { return nil, errors.New("not here") })
	config := func(c string) *v1alpha1.Rollout {
		return &v1alpha1.Rollout{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"}, Spec: v1alpha1.RolloutSpec{
			Strategy: v1alpha1.RolloutStrategy{Canary: &v1alpha1.CanaryStrategy{StableService: "stable", CanaryService: "canary",
				TrafficRouting: &v1alpha1.RolloutTrafficRouting{Plugins: map[string]json.RawMessage{rollout.DefaultPluginName: json.RawMessage(c)}}}}}}
	}
	for _, ro := range []*v1alpha1.Rollout{config(`{"httpRout": "web"}`), config(`{"httpRoute": "web"}`), nil} {
		if e := p.SetWeight(ro, 30, nil); !e.HasError() {
			t.Errorf("SetWeight(30) answered no error before InitPlugin")
		}
	}
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
	var calls []string
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "rollouts_gatewayapi_ssa_calls_total{") || strings.HasPrefix(line, "rollouts_gatewayapi_ssa_call_duration_seconds_count{") {
			calls = append(calls, line)
		}
	}
	want := []string{
		`rollouts_gatewayapi_ssa_call_duration_seconds_count{method="SetWeight",route_cluster=""} 3`,
		`rollouts_gatewayapi_ssa_calls_total{method="SetWeight",result="CallFailed",route_cluster=""} 1`,
		`rollouts_gatewayapi_ssa_calls_total{method="SetWeight",result="InternalError",route_cluster=""} 1`,
		`rollouts_gatewayapi_ssa_calls_total{method="SetWeight",result="InvalidConfig",route_cluster=""} 1`,
	}
	if diff := cmp.Diff(want, calls); diff != "" {
		t.Errorf("calls on /metrics (-want +got):\n%s", diff)
	}
}
