package rollout

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzParseConfig: any bytes under the plugin's name in a Rollout are a
// config or an error naming where it is, never a panic. A config that
// parses names at least one route, every one in a namespace that is a name,
// and every selector non-empty; and the Config it decodes to, written back as
// JSON, parses to the same settings (no key is read one way and written
// another).
func FuzzParseConfig(f *testing.F) {
	for _, seed := range []string{
		`{"httpRoute": "web"}`,
		`{"httpRoutes": [{"name": "a", "useHeaderRoutes": true}, {"name": "b"}], "namespace": "shop"}`,
		`{"grpcRouteSelector": {"matchLabels": {"app": "web"}}, "tcpRoute": "t", "conflictPolicy": "Force"}`,
		`{"tlsRouteSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["a"]}]}}`,
		`{"udpRoute": "dns", "udpRouteRuleName": "main", "udpRoutes": [{"name": "ntp", "ruleName": "r", "useHeaderRoutes": true}], "udpRouteSelector": {"matchLabels": {"app": "dns"}}}`,
		`{"httpRoute": "web", "inProgressLabelKey": "example.com/canary", "inProgressLabelValue": "yes", "verifyWeight": true}`,
		`{"httpRoute": "web", "disableInProgressLabel": true, "configMap": "x", "selectedRoutesUseHeaderRoutes": true}`,
		`{"httpRoutez": []}`, `{}`, `[]`, `{"httpRoute": 7}`, `{"httpRouteSelector": {}}`, ``, `{"httpRoute": "web"} x`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		s, err := ParseConfig(cfgRollout(DefaultPluginName, string(raw)), DefaultPluginName)
		if err != nil {
			if !strings.HasPrefix(err.Error(), `spec.strategy.canary.trafficRouting.plugins["argoproj-labs/gatewayAPI"]`) {
				t.Fatalf("error does not say where: %v", err)
			}
			return
		}
		if len(s.Targets.Named) == 0 && len(s.Targets.Selectors) == 0 {
			t.Fatal("a config that names no route parsed")
		}
		for _, ref := range s.Targets.Named {
			if ref.Name == "" || len(validation.IsDNS1123Label(ref.Namespace)) > 0 {
				t.Fatalf("route %+v parsed", ref)
			}
		}
		for _, sel := range s.Targets.Selectors {
			if sel.Selector.Empty() {
				t.Fatalf("an empty %s selector parsed", sel.Kind)
			}
		}
		cfg, err := decodeConfig(raw)
		if err != nil {
			t.Fatalf("parsed, but does not decode: %v", err)
		}
		again, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		s2, err := ParseConfig(cfgRollout(DefaultPluginName, string(again)), DefaultPluginName)
		if err != nil || settingsString(s) != settingsString(s2) {
			t.Fatalf("the config written back parses differently: %v\n%s\n%s", err, settingsString(s), settingsString(s2))
		}
	})
}

func settingsString(s Settings) string {
	var headerRoutes, listed []string
	for _, ref := range s.Targets.Named {
		if s.HeaderRoutes[ref] {
			headerRoutes = append(headerRoutes, ref.String())
		}
		if s.ListedForHeaderRoutes[ref] {
			listed = append(listed, ref.String())
		}
	}
	data, _ := json.Marshal([]any{s.Targets.Named, selectorStrings(s), headerRoutes, listed,
		s.InProgressLabel, s.VerifyWeight, s.ConflictPolicy, s.SelectedHeaderRoutes})
	return string(data)
}

func selectorStrings(s Settings) []string {
	var out []string
	for _, sel := range s.Targets.Selectors {
		out = append(out, sel.String())
	}
	return out
}
