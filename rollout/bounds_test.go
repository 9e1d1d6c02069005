package rollout

import (
	"fmt"
	"strings"
	"testing"
)

// namedRoutes is a config naming http routes by httpRoutes and grpc by
// grpcRoutes.
func namedRoutes(http, grpc int) string {
	var entries []string
	for i := range http {
		entries = append(entries, fmt.Sprintf(`{"name": "web-%d"}`, i))
	}
	cfg := `{"httpRoute": "front", "httpRoutes": [` + strings.Join(entries, ",") + `]`
	entries = nil
	for i := range grpc {
		entries = append(entries, fmt.Sprintf(`{"name": "api-%d"}`, i))
	}
	return cfg + `, "grpcRoutes": [` + strings.Join(entries, ",") + `]}`
}

// A Rollout names at most maxNamedRoutes routes, every key together: one
// past it is refused, naming the key that went past and the count.
func TestAConfigNamesAtMostTheBoundOfRoutes(t *testing.T) {
	if s, err := ParseConfig(cfgRollout(DefaultPluginName, namedRoutes(60, 39)), DefaultPluginName); err != nil || len(s.Targets.Named) != maxNamedRoutes {
		t.Fatalf("a config naming %d routes: %d named, %v; want them all", maxNamedRoutes, len(s.Targets.Named), err)
	}
	for _, tc := range []struct {
		http, grpc int
		want       string
	}{
		{100, 0, `key "httpRoutes": the config names 101 routes, and a Rollout may name at most 100`},
		{60, 40, `key "grpcRoutes": the config names 101 routes, and a Rollout may name at most 100`},
		{60, 1000, `key "grpcRoutes": the config names 1061 routes`},
	} {
		_, err := ParseConfig(cfgRollout(DefaultPluginName, namedRoutes(tc.http, tc.grpc)), DefaultPluginName)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "select them with a route selector") {
			t.Errorf("%d HTTPRoutes and %d GRPCRoutes named: %v; want an error saying %q", 1+tc.http, tc.grpc, err, tc.want)
		}
	}
}
