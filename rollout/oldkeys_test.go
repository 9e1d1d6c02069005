package rollout

import (
	"strings"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/google/go-cmp/cmp"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// The keys of issue 61: addCanaryBackendRef, and the argoproj-labs plugin's
// top-level useHeaderRoutes and activeRolloutsAnnotationKey.
func TestParseConfigIssue61Keys(t *testing.T) {
	web := routes.Ref{Kind: routes.HTTPRoute, Namespace: "shop", Name: "web"}
	single := Settings{Targets: routes.Targets{Named: []routes.Ref{web}}, InProgressLabel: cfgDefaultLabel,
		HeaderRoutes: cfgHeader(web), ConflictPolicy: desired.ReportConflicts, MirrorMode: desired.MirrorRule}
	listed := single
	listed.HeaderRoutes = map[routes.Ref]bool{}
	withCanary := single
	withCanary.AddCanaryBackendRef = true
	tests := []struct {
		name string
		raw  string
		want Settings
	}{
		{"addCanaryBackendRef", `{"httpRoute": "web", "addCanaryBackendRef": true}`, withCanary},
		{"addCanaryBackendRef false", `{"httpRoute": "web", "addCanaryBackendRef": false}`, single},
		// useHeaderRoutes at the top level did nothing in the argoproj-labs plugin's releases, nor here:
		// the single form takes header routes, a list entry only with its own useHeaderRoutes.
		{"top-level useHeaderRoutes, single route", `{"httpRoute": "web", "useHeaderRoutes": true}`, single},
		{"top-level useHeaderRoutes, listed route", `{"httpRoutes": [{"name": "web"}], "useHeaderRoutes": true}`, listed},
		{"top-level useHeaderRoutes false", `{"httpRoutes": [{"name": "web"}], "useHeaderRoutes": false}`, listed},
		{"activeRolloutsAnnotationKey empty", `{"httpRoute": "web", "activeRolloutsAnnotationKey": ""}`, single},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseConfig(cfgRollout(DefaultPluginName, tc.raw), DefaultPluginName)
			if err != nil {
				t.Fatalf("ParseConfig: %v", err)
			}
			got.Predecessor = nil
			if diff := cmp.Diff(tc.want, got, cfgCompareSelectors); diff != "" {
				t.Errorf("Settings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseConfigRefusesActiveRolloutsAnnotationKey(t *testing.T) {
	raw := `{"httpRoute": "web", "activeRolloutsAnnotationKey": "rollouts.argoproj.io/gatewayapi-active-rollouts"}`
	_, err := ParseConfig(cfgRollout(DefaultPluginName, raw), DefaultPluginName)
	want := `spec.strategy.canary.trafficRouting.plugins["argoproj-labs/gatewayAPI"]: key "activeRolloutsAnnotationKey" is refused: ` +
		"the plugin tracks the Rollouts in progress on a route in its claims annotation, whose key (gatewayapi-ssa.dev/claims) cannot change; remove the key"
	if err == nil {
		t.Fatal("no error")
	}
	if diff := cmp.Diff(want, strings.TrimSpace(err.Error())); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
}

func TestParseConfigRefusesAddCanaryBackendRefWithPingPong(t *testing.T) {
	ro := cfgRollout(DefaultPluginName, `{"httpRoute": "web", "addCanaryBackendRef": true}`)
	ro.Spec.Strategy.Canary.PingPong = &v1alpha1.PingPongSpec{PingService: "web-ping", PongService: "web-pong"}
	_, err := ParseConfig(ro, DefaultPluginName)
	want := `spec.strategy.canary.trafficRouting.plugins["argoproj-labs/gatewayAPI"]: key "addCanaryBackendRef" does not work with ping-pong ` +
		"(a promotion makes the added Service stable): list both ping and pong in the rule"
	if err == nil {
		t.Fatal("no error")
	}
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
}
