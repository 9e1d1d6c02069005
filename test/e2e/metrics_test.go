//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/e2e/cluster"
)

// The plugin's metrics under the real controller: after the events-walk
// scenario's walk, /metrics (-metrics-address on 127.0.0.1, the plugin in
// the controller's process tree) counts at least its SetWeights as ok,
// each in the histogram, and at least its applies; the route cluster has
// its own series. The other scenarios call the same plugin at the same
// time, so the counts are bounds from below.
func checkPluginMetrics(t *testing.T, c *cluster.Cluster, r *run, applied int) {
	t.Helper()
	if c.PluginMetrics == "" {
		t.Fatal("the cluster was started without the plugin's metrics (cluster.Options.PluginMetrics)")
	}
	ok := `rollouts_gatewayapi_ssa_calls_total{method="SetWeight",result="ok",route_cluster=""}`
	observed := `rollouts_gatewayapi_ssa_call_duration_seconds_count{method="SetWeight",route_cluster=""}`
	applies := `rollouts_gatewayapi_ssa_route_writes_total{outcome="applied",route_cluster=""}`
	active := `rollouts_gatewayapi_ssa_rollouts_active{route_cluster=""}`
	routeCluster := `rollouts_gatewayapi_ssa_route_writes_total{outcome="applied",route_cluster="` + cluster.RouteClusterName + `"}`
	var got map[string]float64
	err := c.Await(context.Background(), 30*time.Second, func() (string, error) {
		var err error
		if got, err = scrapePlugin(c.PluginMetrics); err != nil {
			return err.Error(), nil
		}
		switch _, seen := got[routeCluster]; {
		case got[ok] < float64(applied) || got[applies] < float64(applied):
			return fmt.Sprintf("%v SetWeights ok and %v applies counted, for the walk's %d writes", got[ok], got[applies], applied), nil
		case got[observed] < got[ok]:
			return fmt.Sprintf("%v SetWeights in the histogram, %v ok", got[observed], got[ok]), nil
		case got[active] < 1:
			return "no active Rollout", nil
		case !seen:
			return "no series of route cluster " + cluster.RouteClusterName, nil
		}
		return "", nil
	})
	var lines []string
	for s, v := range got {
		if strings.HasPrefix(s, "rollouts_gatewayapi_ssa_") && !strings.Contains(s, "_bucket{") {
			lines = append(lines, fmt.Sprintf("%s %v", s, v))
		}
	}
	sort.Strings(lines)
	if err != nil {
		t.Errorf("the plugin's metrics after the walk: %v\n%s", err, strings.Join(lines, "\n"))
	}
	r.record(t, append([]string{fmt.Sprintf("the plugin's /metrics after the walk (%d applies of its own; every scenario's calls counted):", applied)}, lines...)...)
}

// scrapePlugin reads every sample of the plugin's /metrics, by series.
func scrapePlugin(url string) (map[string]float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s %v", url, resp.Status, err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			return nil, fmt.Errorf("not a sample: %q", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("not a sample: %q", line)
		}
		out[line[:i]] = v
	}
	return out, nil
}
