package plugin

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gatewayapi-ssa/rollouts-plugin/decode"
	"github.com/gatewayapi-ssa/rollouts-plugin/metrics"
)

// InitPlugin builds the clients once: called again, it builds nothing and
// keeps the reader (and its watch caches) it has.
func TestInitPluginTwiceBuildsOnce(t *testing.T) {
	var hits atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1); w.WriteHeader(404) }))
	defer s.Close()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+s.URL+`"}}]
users: [{name: u}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kubeconfig)
	p := New(Options{}, logrus.NewEntry(logrus.New()))
	if e := p.InitPlugin(); e.HasError() {
		t.Fatal(e.ErrorString)
	}
	reader, orch, dyn := p.reader, p.orch, p.dyn
	for range 3 {
		if e := p.InitPlugin(); e.HasError() {
			t.Fatal(e.ErrorString)
		}
	}
	if p.reader != reader || p.orch != orch || p.dyn != dyn {
		t.Error("InitPlugin called again built new clients")
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("InitPlugin sent %d requests; it builds clients, it does not call the apiserver", n)
	}
}

// Before InitPlugin, with metrics: a SetWeight with a misspelt config key
// is refused as InvalidConfig, one with a good config fails for want of a
// client, and a SetWeight of no Rollout at all panics and answers an
// internal error. Each call counts once, under its result, in the
// controller's cluster.
func TestEveryCallCountsOnceUnderItsResult(t *testing.T) {
	m := metrics.New("test")
	p := New(Options{Metrics: m}, logrus.NewEntry(logrus.New()))
	config := func(c string) *v1alpha1.Rollout {
		return &v1alpha1.Rollout{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"}, Spec: v1alpha1.RolloutSpec{
			Strategy: v1alpha1.RolloutStrategy{Canary: &v1alpha1.CanaryStrategy{StableService: "stable", CanaryService: "canary",
				TrafficRouting: &v1alpha1.RolloutTrafficRouting{Plugins: map[string]json.RawMessage{decode.DefaultPluginName: json.RawMessage(c)}}}}}}
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
