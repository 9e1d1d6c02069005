package rollout

import (
	"strings"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func rollout(canary *v1alpha1.CanaryStrategy, stablePingPong v1alpha1.PingPongType) *v1alpha1.Rollout {
	ro := &v1alpha1.Rollout{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Spec:       v1alpha1.RolloutSpec{Strategy: v1alpha1.RolloutStrategy{Canary: canary}},
	}
	ro.Status.Canary.StablePingPong = stablePingPong
	return ro
}

func pingPong(ping, pong string) *v1alpha1.PingPongSpec {
	return &v1alpha1.PingPongSpec{PingService: ping, PongService: pong}
}

func TestStableAndCanary(t *testing.T) {
	type services struct{ Stable, Canary string }
	tests := []struct {
		name string
		ro   *v1alpha1.Rollout
		want services
	}{
		{
			name: "stableService and canaryService",
			ro:   rollout(&v1alpha1.CanaryStrategy{StableService: "web-stable", CanaryService: "web-canary"}, ""),
			want: services{Stable: "web-stable", Canary: "web-canary"},
		},
		{
			name: "stableService and canaryService ignore status.canary.stablePingPong",
			ro:   rollout(&v1alpha1.CanaryStrategy{StableService: "web-stable", CanaryService: "web-canary"}, v1alpha1.PPPong),
			want: services{Stable: "web-stable", Canary: "web-canary"},
		},
		{
			name: "pingPong with stablePingPong ping: ping is stable, pong canary",
			ro:   rollout(&v1alpha1.CanaryStrategy{PingPong: pingPong("web-ping", "web-pong")}, v1alpha1.PPPing),
			want: services{Stable: "web-ping", Canary: "web-pong"},
		},
		{
			name: "pingPong with stablePingPong pong: pong is stable, ping canary",
			ro:   rollout(&v1alpha1.CanaryStrategy{PingPong: pingPong("web-ping", "web-pong")}, v1alpha1.PPPong),
			want: services{Stable: "web-pong", Canary: "web-ping"},
		},
		{
			name: "pingPong with stablePingPong empty: pong is stable, ping canary",
			ro:   rollout(&v1alpha1.CanaryStrategy{PingPong: pingPong("web-ping", "web-pong")}, ""),
			want: services{Stable: "web-pong", Canary: "web-ping"},
		},
		{
			name: "pingPong with an unknown stablePingPong: the reverse of ping",
			ro:   rollout(&v1alpha1.CanaryStrategy{PingPong: pingPong("web-ping", "web-pong")}, "Ping"),
			want: services{Stable: "web-pong", Canary: "web-ping"},
		},
		{
			name: "pingPong wins over stableService and canaryService (ping)",
			ro: rollout(&v1alpha1.CanaryStrategy{
				StableService: "web-stable", CanaryService: "web-canary",
				PingPong: pingPong("web-ping", "web-pong"),
			}, v1alpha1.PPPing),
			want: services{Stable: "web-ping", Canary: "web-pong"},
		},
		{
			name: "pingPong wins over stableService and canaryService (pong)",
			ro: rollout(&v1alpha1.CanaryStrategy{
				StableService: "web-stable", CanaryService: "web-canary",
				PingPong: pingPong("web-ping", "web-pong"),
			}, v1alpha1.PPPong),
			want: services{Stable: "web-pong", Canary: "web-ping"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stable, canary, err := StableAndCanary(tc.ro)
			if err != nil {
				t.Fatalf("StableAndCanary: unexpected error: %v", err)
			}
			if diff := cmp.Diff(tc.want, services{Stable: stable, Canary: canary}); diff != "" {
				t.Errorf("StableAndCanary (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStableAndCanaryErrors(t *testing.T) {
	tests := []struct {
		name    string
		ro      *v1alpha1.Rollout
		wantErr []string
	}{
		{
			name:    "no canary strategy",
			ro:      rollout(nil, ""),
			wantErr: []string{"spec.strategy.canary is not set"},
		},
		{
			name: "blue-green strategy",
			ro: &v1alpha1.Rollout{Spec: v1alpha1.RolloutSpec{Strategy: v1alpha1.RolloutStrategy{
				BlueGreen: &v1alpha1.BlueGreenStrategy{ActiveService: "web-active", PreviewService: "web-preview"},
			}}},
			wantErr: []string{"spec.strategy.canary is not set"},
		},
		{
			name:    "no services at all",
			ro:      rollout(&v1alpha1.CanaryStrategy{}, ""),
			wantErr: []string{"stableService and canaryService"},
		},
		{
			name:    "stableService missing",
			ro:      rollout(&v1alpha1.CanaryStrategy{CanaryService: "web-canary"}, ""),
			wantErr: []string{"stableService and canaryService"},
		},
		{
			name:    "canaryService missing",
			ro:      rollout(&v1alpha1.CanaryStrategy{StableService: "web-stable"}, ""),
			wantErr: []string{"stableService and canaryService"},
		},
		{
			name:    "pingService missing",
			ro:      rollout(&v1alpha1.CanaryStrategy{PingPong: pingPong("", "web-pong")}, v1alpha1.PPPing),
			wantErr: []string{"spec.strategy.canary.pingPong", "pingService and pongService"},
		},
		{
			name:    "pongService missing",
			ro:      rollout(&v1alpha1.CanaryStrategy{PingPong: pingPong("web-ping", "")}, v1alpha1.PPPong),
			wantErr: []string{"spec.strategy.canary.pingPong", "pingService and pongService"},
		},
		{
			name: "pingPong without services does not fall back to stableService and canaryService",
			ro: rollout(&v1alpha1.CanaryStrategy{
				StableService: "web-stable", CanaryService: "web-canary",
				PingPong: pingPong("", ""),
			}, ""),
			wantErr: []string{"spec.strategy.canary.pingPong", "pingService and pongService"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stable, canary, err := StableAndCanary(tc.ro)
			if err == nil {
				t.Fatalf("StableAndCanary: no error; stable %q, canary %q", stable, canary)
			}
			for _, s := range tc.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
			if stable != "" || canary != "" {
				t.Errorf("on error StableAndCanary returned stable %q and canary %q, want both empty", stable, canary)
			}
		})
	}
}
