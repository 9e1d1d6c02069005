package rollout

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

const cfgRolloutNS = "shop"

// cfgRollout is a canary Rollout in namespace shop whose trafficRouting
// plugins hold raw under pluginName.
func cfgRollout(pluginName, raw string) *v1alpha1.Rollout {
	return &v1alpha1.Rollout{
		ObjectMeta: metav1.ObjectMeta{Namespace: cfgRolloutNS, Name: "web"},
		Spec: v1alpha1.RolloutSpec{Strategy: v1alpha1.RolloutStrategy{Canary: &v1alpha1.CanaryStrategy{
			StableService: "web-stable",
			CanaryService: "web-canary",
			TrafficRouting: &v1alpha1.RolloutTrafficRouting{
				Plugins: map[string]json.RawMessage{pluginName: json.RawMessage(raw)},
			},
		}}},
	}
}

// cfgSelector parses a selector in its string form, for expected values.
func cfgSelector(t *testing.T, s string) labels.Selector {
	t.Helper()
	sel, err := labels.Parse(s)
	if err != nil {
		t.Fatalf("labels.Parse(%q): %v", s, err)
	}
	return sel
}

// cfgCompareSelectors compares labels.Selector values by their string form.
var cfgCompareSelectors = cmp.Comparer(func(a, b labels.Selector) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.String() == b.String()
})

var cfgDefaultLabel = map[string]string{defaultInProgressLabelKey: defaultInProgressLabelValue}

// cfgHeader is the set of routes that take header routes.
func cfgHeader(refs ...routes.Ref) map[routes.Ref]bool {
	out := map[routes.Ref]bool{}
	for _, r := range refs {
		out[r] = true
	}
	return out
}

func TestParseConfig(t *testing.T) {
	http := func(ns, name string) routes.Ref { return routes.Ref{Kind: routes.HTTPRoute, Namespace: ns, Name: name} }
	grpc := func(ns, name string) routes.Ref { return routes.Ref{Kind: routes.GRPCRoute, Namespace: ns, Name: name} }
	tcp := func(ns, name string) routes.Ref { return routes.Ref{Kind: routes.TCPRoute, Namespace: ns, Name: name} }
	tls := func(ns, name string) routes.Ref { return routes.Ref{Kind: routes.TLSRoute, Namespace: ns, Name: name} }
	udp := func(ns, name string) routes.Ref { return routes.Ref{Kind: routes.UDPRoute, Namespace: ns, Name: name} }
	// oneHTTPRoute is what {"httpRoute": "web", ...} gives with every other option at its default.
	oneHTTPRoute := func() Settings {
		return Settings{
			Targets:         routes.Targets{Named: []routes.Ref{http("shop", "web")}},
			InProgressLabel: cfgDefaultLabel,
			HeaderRoutes:    cfgHeader(http("shop", "web")),
			ConflictPolicy:  desired.ReportConflicts,
			MirrorMode:      desired.MirrorRule,
		}
	}

	tests := []struct {
		name       string
		pluginName string // default: DefaultPluginName
		raw        string
		want       func(t *testing.T) Settings
	}{
		{
			name: "httpRoute",
			raw:  `{"httpRoute": "web"}`,
			want: func(*testing.T) Settings {
				return Settings{
					Targets:         routes.Targets{Named: []routes.Ref{http("shop", "web")}},
					InProgressLabel: map[string]string{"rollouts.argoproj.io/gatewayapi-canary": "in-progress"},
					HeaderRoutes:    map[routes.Ref]bool{http("shop", "web"): true},
					VerifyWeight:    false,
					ConflictPolicy:  "Error",
					MirrorMode:      desired.MirrorRule,
				}
			},
		},
		{
			name: "grpcRoute",
			raw:  `{"grpcRoute": "api"}`,
			want: func(*testing.T) Settings {
				return Settings{Targets: routes.Targets{Named: []routes.Ref{grpc("shop", "api")}}, InProgressLabel: cfgDefaultLabel,
					HeaderRoutes: cfgHeader(grpc("shop", "api")), ConflictPolicy: desired.ReportConflicts, MirrorMode: desired.MirrorRule}
			},
		},
		{
			name: "tcpRoute",
			raw:  `{"tcpRoute": "db"}`,
			want: func(*testing.T) Settings {
				return Settings{Targets: routes.Targets{Named: []routes.Ref{tcp("shop", "db")}}, InProgressLabel: cfgDefaultLabel,
					HeaderRoutes: cfgHeader(tcp("shop", "db")), ConflictPolicy: desired.ReportConflicts, MirrorMode: desired.MirrorRule}
			},
		},
		{
			name: "tlsRoute",
			raw:  `{"tlsRoute": "edge"}`,
			want: func(*testing.T) Settings {
				return Settings{Targets: routes.Targets{Named: []routes.Ref{tls("shop", "edge")}}, InProgressLabel: cfgDefaultLabel,
					HeaderRoutes: cfgHeader(tls("shop", "edge")), ConflictPolicy: desired.ReportConflicts, MirrorMode: desired.MirrorRule}
			},
		},
		{
			name: "udpRoute",
			raw:  `{"udpRoute": "dns"}`,
			want: func(*testing.T) Settings {
				return Settings{Targets: routes.Targets{Named: []routes.Ref{udp("shop", "dns")}}, InProgressLabel: cfgDefaultLabel,
					HeaderRoutes: cfgHeader(udp("shop", "dns")), ConflictPolicy: desired.ReportConflicts, MirrorMode: desired.MirrorRule}
			},
		},
		{
			name: "the five route lists: only entries with useHeaderRoutes take header routes",
			raw: `{
				"httpRoutes": [{"name": "web-a", "useHeaderRoutes": true}, {"name": "web-b"}],
				"grpcRoutes": [{"name": "api-a", "useHeaderRoutes": false}],
				"tcpRoutes":  [{"name": "db-a"}, {"name": "db-b", "useHeaderRoutes": true}],
				"tlsRoutes":  [{"name": "edge-a"}],
				"udpRoutes":  [{"name": "dns-a"}, {"name": "dns-b", "useHeaderRoutes": true}]
			}`,
			want: func(*testing.T) Settings {
				return Settings{
					Targets: routes.Targets{Named: []routes.Ref{
						http("shop", "web-a"), http("shop", "web-b"),
						grpc("shop", "api-a"),
						tcp("shop", "db-a"), tcp("shop", "db-b"),
						tls("shop", "edge-a"),
						udp("shop", "dns-a"), udp("shop", "dns-b"),
					}},
					InProgressLabel: cfgDefaultLabel,
					HeaderRoutes:    cfgHeader(http("shop", "web-a"), tcp("shop", "db-b"), udp("shop", "dns-b")),
					// Only list entries are listed: for a TCPRoute or a UDPRoute that makes a header step an error.
					ListedForHeaderRoutes: cfgHeader(http("shop", "web-a"), tcp("shop", "db-b"), udp("shop", "dns-b")),
					ConflictPolicy:        desired.ReportConflicts,
					MirrorMode:            desired.MirrorRule,
				}
			},
		},
		{
			name: "single names come before their kind's list, kinds in the order HTTP, gRPC, TCP, TLS, UDP",
			raw: `{
				"udpRoutes": [{"name": "u2"}], "udpRoute": "u1",
				"tlsRoutes": [{"name": "t2"}], "tlsRoute": "t1",
				"tcpRoutes": [{"name": "c2"}], "tcpRoute": "c1",
				"grpcRoutes": [{"name": "g2"}], "grpcRoute": "g1",
				"httpRoutes": [{"name": "h2"}], "httpRoute": "h1"
			}`,
			want: func(*testing.T) Settings {
				return Settings{
					Targets: routes.Targets{Named: []routes.Ref{
						http("shop", "h1"), http("shop", "h2"),
						grpc("shop", "g1"), grpc("shop", "g2"),
						tcp("shop", "c1"), tcp("shop", "c2"),
						tls("shop", "t1"), tls("shop", "t2"),
						udp("shop", "u1"), udp("shop", "u2"),
					}},
					InProgressLabel: cfgDefaultLabel,
					HeaderRoutes:    cfgHeader(http("shop", "h1"), grpc("shop", "g1"), tcp("shop", "c1"), tls("shop", "t1"), udp("shop", "u1")),
					ConflictPolicy:  desired.ReportConflicts,
					MirrorMode:      desired.MirrorRule,
				}
			},
		},
		{
			name: "namespace holds the routes",
			raw:  `{"httpRoute": "web", "grpcRoutes": [{"name": "api"}], "namespace": "gateways"}`,
			want: func(*testing.T) Settings {
				return Settings{
					Targets:         routes.Targets{Named: []routes.Ref{http("gateways", "web"), grpc("gateways", "api")}},
					InProgressLabel: cfgDefaultLabel,
					HeaderRoutes:    cfgHeader(http("gateways", "web")),
					ConflictPolicy:  desired.ReportConflicts,
					MirrorMode:      desired.MirrorRule,
				}
			},
		},
		{
			name: "configMap is accepted and ignored",
			raw:  `{"httpRoute": "web", "configMap": "argo-gatewayapi-configmap"}`,
			want: func(*testing.T) Settings { return oneHTTPRoute() },
		},
		{
			name: "the five selectors, in the order HTTP, gRPC, TCP, TLS, UDP, after named routes",
			raw: `{
				"udpRouteSelector":  {"matchLabels": {"app": "dns"}},
				"tlsRouteSelector":  {"matchLabels": {"app": "edge"}},
				"tcpRouteSelector":  {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["db", "cache"]}]},
				"grpcRouteSelector": {"matchExpressions": [{"key": "canary", "operator": "Exists"}]},
				"httpRouteSelector": {"matchLabels": {"app": "web", "team": "shop"}, "matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["dev"]}]},
				"httpRoute": "web",
				"namespace": "gateways"
			}`,
			want: func(t *testing.T) Settings {
				return Settings{
					Targets: routes.Targets{
						Named: []routes.Ref{http("gateways", "web")},
						Selectors: []routes.Selection{
							{Kind: routes.HTTPRoute, Namespace: "gateways", Selector: cfgSelector(t, "app=web,env notin (dev),team=shop")},
							{Kind: routes.GRPCRoute, Namespace: "gateways", Selector: cfgSelector(t, "canary")},
							{Kind: routes.TCPRoute, Namespace: "gateways", Selector: cfgSelector(t, "tier in (cache,db)")},
							{Kind: routes.TLSRoute, Namespace: "gateways", Selector: cfgSelector(t, "app=edge")},
							{Kind: routes.UDPRoute, Namespace: "gateways", Selector: cfgSelector(t, "app=dns")},
						},
					},
					InProgressLabel: cfgDefaultLabel,
					HeaderRoutes:    cfgHeader(http("gateways", "web")),
					ConflictPolicy:  desired.ReportConflicts,
					MirrorMode:      desired.MirrorRule,
				}
			},
		},
		{
			name: "a selector alone is enough",
			raw:  `{"grpcRouteSelector": {"matchLabels": {"app": "api"}}}`,
			want: func(t *testing.T) Settings {
				return Settings{
					Targets: routes.Targets{Selectors: []routes.Selection{
						{Kind: routes.GRPCRoute, Namespace: "shop", Selector: cfgSelector(t, "app=api")},
					}},
					InProgressLabel: cfgDefaultLabel,
					HeaderRoutes:    cfgHeader(),
					ConflictPolicy:  desired.ReportConflicts,
					MirrorMode:      desired.MirrorRule,
				}
			},
		},
		{
			name: "disableInProgressLabel: no label",
			raw:  `{"httpRoute": "web", "disableInProgressLabel": true}`,
			want: func(*testing.T) Settings {
				s := oneHTTPRoute()
				s.InProgressLabel = nil
				return s
			},
		},
		{
			name: "disableInProgressLabel wins over a custom label, even an invalid one",
			raw:  `{"httpRoute": "web", "disableInProgressLabel": true, "inProgressLabelKey": "not a key!", "inProgressLabelValue": "x"}`,
			want: func(*testing.T) Settings {
				s := oneHTTPRoute()
				s.InProgressLabel = nil
				return s
			},
		},
		{
			name: "disableInProgressLabel false keeps the default label",
			raw:  `{"httpRoute": "web", "disableInProgressLabel": false}`,
			want: func(*testing.T) Settings { return oneHTTPRoute() },
		},
		{
			name: "inProgressLabelKey and inProgressLabelValue",
			raw:  `{"httpRoute": "web", "inProgressLabelKey": "example.com/canary", "inProgressLabelValue": "running"}`,
			want: func(*testing.T) Settings {
				s := oneHTTPRoute()
				s.InProgressLabel = map[string]string{"example.com/canary": "running"}
				return s
			},
		},
		{
			name: "inProgressLabelKey alone keeps the default value",
			raw:  `{"httpRoute": "web", "inProgressLabelKey": "canary"}`,
			want: func(*testing.T) Settings {
				s := oneHTTPRoute()
				s.InProgressLabel = map[string]string{"canary": defaultInProgressLabelValue}
				return s
			},
		},
		{
			name: "inProgressLabelValue alone keeps the default key",
			raw:  `{"httpRoute": "web", "inProgressLabelValue": "yes"}`,
			want: func(*testing.T) Settings {
				s := oneHTTPRoute()
				s.InProgressLabel = map[string]string{defaultInProgressLabelKey: "yes"}
				return s
			},
		},
		{
			name: "verifyWeight",
			raw:  `{"httpRoute": "web", "verifyWeight": true}`,
			want: func(*testing.T) Settings {
				s := oneHTTPRoute()
				s.VerifyWeight = true
				return s
			},
		},
		{
			name: "rule names: the singular keys and ruleName on list entries",
			raw: `{"httpRoute": "web", "httpRouteRuleName": "split",
				"grpcRoutes": [{"name": "api", "ruleName": "grpc-split"}, {"name": "other"}],
				"tlsRoute": "edge", "tlsRouteRuleName": "tls-split",
				"udpRoute": "dns", "udpRouteRuleName": "udp-split",
				"udpRoutes": [{"name": "ntp", "ruleName": "ntp-split"}]}`,
			want: func(*testing.T) Settings {
				return Settings{
					Targets: routes.Targets{Named: []routes.Ref{http("shop", "web"), grpc("shop", "api"), grpc("shop", "other"), tls("shop", "edge"),
						udp("shop", "dns"), udp("shop", "ntp")}},
					InProgressLabel: cfgDefaultLabel,
					HeaderRoutes:    cfgHeader(http("shop", "web"), tls("shop", "edge"), udp("shop", "dns")),
					ConflictPolicy:  desired.ReportConflicts,
					MirrorMode:      desired.MirrorRule,
					RuleNames: map[routes.Ref]string{http("shop", "web"): "split", grpc("shop", "api"): "grpc-split", tls("shop", "edge"): "tls-split",
						udp("shop", "dns"): "udp-split", udp("shop", "ntp"): "ntp-split"},
				}
			},
		},
		{
			name: "mirrorMode filter",
			raw:  `{"httpRoute": "web", "mirrorMode": "filter"}`,
			want: func(*testing.T) Settings {
				s := oneHTTPRoute()
				s.MirrorMode = desired.MirrorFilter
				return s
			},
		},
		{
			name: "stickyCanary with its defaults",
			raw:  `{"httpRoute": "web", "stickyCanary": {}}`,
			want: func(*testing.T) Settings {
				s := oneHTTPRoute()
				s.Sticky = &StickySettings{Cookie: "web-canary", MaxAge: 86400}
				return s
			},
		},
		{
			name: "stickyCanary with a cookie name and a max age",
			raw:  `{"httpRoutes": [{"name": "web"}], "stickyCanary": {"cookieName": "shop_v", "maxAgeSeconds": 600}}`,
			want: func(*testing.T) Settings {
				s := oneHTTPRoute()
				s.HeaderRoutes = cfgHeader()
				s.Sticky = &StickySettings{Cookie: "shop_v", MaxAge: 600}
				return s
			},
		},
		{
			name: "assumeGatewayFeatures",
			raw:  `{"httpRoute": "web", "assumeGatewayFeatures": ["HTTPRouteRequestMirror"]}`,
			want: func(*testing.T) Settings {
				s := oneHTTPRoute()
				s.AssumedFeatures = []string{"HTTPRouteRequestMirror"}
				return s
			},
		},
		{
			name: "verifyWeightSettle",
			raw:  `{"httpRoute": "web", "verifyWeight": true, "verifyWeightSettle": "2500ms"}`,
			want: func(*testing.T) Settings {
				s := oneHTTPRoute()
				s.VerifyWeight = true
				d := 2500 * time.Millisecond
				s.VerifyWeightSettle = &d
				return s
			},
		},
		{
			name: "verifyWeightSettle 0s: by status alone",
			raw:  `{"httpRoute": "web", "verifyWeight": true, "verifyWeightSettle": "0s"}`,
			want: func(*testing.T) Settings {
				s := oneHTTPRoute()
				s.VerifyWeight = true
				d := time.Duration(0)
				s.VerifyWeightSettle = &d
				return s
			},
		},
		{
			name: "conflictPolicy Force",
			raw:  `{"httpRoute": "web", "conflictPolicy": "Force"}`,
			want: func(*testing.T) Settings {
				s := oneHTTPRoute()
				s.ConflictPolicy = desired.TakeOver
				return s
			},
		},
		{
			name: "conflictPolicy Error spelled out",
			raw:  `{"httpRoute": "web", "conflictPolicy": "Error"}`,
			want: func(*testing.T) Settings { return oneHTTPRoute() },
		},
		{
			name:       "a custom plugin name reads the config under that name",
			pluginName: "acme/gateway-ssa",
			raw:        `{"httpRoute": "web"}`,
			want:       func(*testing.T) Settings { return oneHTTPRoute() },
		},
		{
			name: "every key of the argoproj-labs config at once",
			raw: `{
				"httpRoute": "h", "grpcRoute": "g", "tcpRoute": "c", "tlsRoute": "t",
				"httpRoutes": [{"name": "hs", "useHeaderRoutes": true}],
				"grpcRoutes": [{"name": "gs", "useHeaderRoutes": true}],
				"tcpRoutes": [{"name": "cs", "useHeaderRoutes": false}],
				"tlsRoutes": [{"name": "ts", "useHeaderRoutes": false}],
				"namespace": "gateways",
				"configMap": "cm",
				"httpRouteSelector": {"matchLabels": {"k": "h"}},
				"grpcRouteSelector": {"matchLabels": {"k": "g"}},
				"tcpRouteSelector": {"matchLabels": {"k": "c"}},
				"tlsRouteSelector": {"matchLabels": {"k": "t"}},
				"disableInProgressLabel": false,
				"inProgressLabelKey": "rollout",
				"inProgressLabelValue": "on"
			}`,
			want: func(t *testing.T) Settings {
				return Settings{
					Targets: routes.Targets{
						Named: []routes.Ref{
							http("gateways", "h"), http("gateways", "hs"),
							grpc("gateways", "g"), grpc("gateways", "gs"),
							tcp("gateways", "c"), tcp("gateways", "cs"),
							tls("gateways", "t"), tls("gateways", "ts"),
						},
						Selectors: []routes.Selection{
							{Kind: routes.HTTPRoute, Namespace: "gateways", Selector: cfgSelector(t, "k=h")},
							{Kind: routes.GRPCRoute, Namespace: "gateways", Selector: cfgSelector(t, "k=g")},
							{Kind: routes.TCPRoute, Namespace: "gateways", Selector: cfgSelector(t, "k=c")},
							{Kind: routes.TLSRoute, Namespace: "gateways", Selector: cfgSelector(t, "k=t")},
						},
					},
					InProgressLabel: map[string]string{"rollout": "on"},
					HeaderRoutes: cfgHeader(
						http("gateways", "h"), http("gateways", "hs"),
						grpc("gateways", "g"), grpc("gateways", "gs"),
						tcp("gateways", "c"), tls("gateways", "t"),
					),
					ListedForHeaderRoutes: cfgHeader(http("gateways", "hs"), grpc("gateways", "gs")),
					ConflictPolicy:        desired.ReportConflicts,
					MirrorMode:            desired.MirrorRule,
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pluginName := tc.pluginName
			if pluginName == "" {
				pluginName = DefaultPluginName
			}
			got, err := ParseConfig(cfgRollout(pluginName, tc.raw), pluginName)
			if err != nil {
				t.Fatalf("ParseConfig: unexpected error: %v", err)
			}
			if diff := cmp.Diff(tc.want(t), got, cfgCompareSelectors); diff != "" {
				t.Errorf("Settings (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParseConfigSelectorMatches checks the parsed selectors select what the
// config says, not only that they print the same.
func TestParseConfigSelectorMatches(t *testing.T) {
	raw := `{"httpRouteSelector": {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["dev"]}]}}`
	s, err := ParseConfig(cfgRollout(DefaultPluginName, raw), DefaultPluginName)
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	if len(s.Targets.Selectors) != 1 {
		t.Fatalf("got %d selectors, want 1: %v", len(s.Targets.Selectors), s.Targets.Selectors)
	}
	sel := s.Targets.Selectors[0].Selector
	tests := []struct {
		labels labels.Set
		want   bool
	}{
		{labels.Set{"app": "web"}, true},
		{labels.Set{"app": "web", "env": "prod"}, true},
		{labels.Set{"app": "web", "env": "dev"}, false},
		{labels.Set{"app": "api"}, false},
		{labels.Set{}, false},
	}
	for _, tc := range tests {
		if got := sel.Matches(tc.labels); got != tc.want {
			t.Errorf("selector %q matches %v = %v, want %v", sel, tc.labels, got, tc.want)
		}
	}
}

func TestParseConfigErrors(t *testing.T) {
	where := `spec.strategy.canary.trafficRouting.plugins["argoproj-labs/gatewayAPI"]`
	tests := []struct {
		name       string
		rollout    *v1alpha1.Rollout
		pluginName string // default: DefaultPluginName
		wantErr    []string
	}{
		{
			name:    "unknown key",
			rollout: cfgRollout(DefaultPluginName, `{"httpRoute": "web", "headerRoutes": true}`),
			wantErr: []string{where, `unknown key "headerRoutes"`, "known keys: activeRolloutsAnnotationKey, addCanaryBackendRef, assumeGatewayFeatures, cluster, configMap, conflictPolicy"},
		},
		{
			name:    "stickyCanary on a GRPCRoute",
			rollout: cfgRollout(DefaultPluginName, `{"httpRoute": "web", "grpcRoute": "api", "stickyCanary": {}}`),
			wantErr: []string{where, `key "stickyCanary" works on HTTPRoutes only, and the Rollout also names GRPCRoute shop/api; a GRPCRoute carries no cookies: remove stickyCanary, or the GRPCRoute from the Rollout's routes`},
		},
		{
			name:    "stickyCanary with a TCPRoute selector",
			rollout: cfgRollout(DefaultPluginName, `{"httpRoute": "web", "tcpRouteSelector": {"matchLabels": {"app": "web"}}, "stickyCanary": {}}`),
			wantErr: []string{where, `key "stickyCanary" works on HTTPRoutes only, and the Rollout also selects TCPRoutes (key "tcpRouteSelector"); a TCPRoute carries no cookies: remove stickyCanary, or that selector`},
		},
		{
			name:    "stickyCanary with a cookie name that is not a token",
			rollout: cfgRollout(DefaultPluginName, `{"httpRoute": "web", "stickyCanary": {"cookieName": "shop canary"}}`),
			wantErr: []string{where, `key "stickyCanary.cookieName": "shop canary" is not a cookie name (an RFC 6265 token of at most 256 characters: letters, digits and !#$%&'*+-.^_` + "`" + `|~)`},
		},
		{
			name:    "stickyCanary with no max age",
			rollout: cfgRollout(DefaultPluginName, `{"httpRoute": "web", "stickyCanary": {"maxAgeSeconds": 0}}`),
			wantErr: []string{where, `key "stickyCanary.maxAgeSeconds" must be more than 0, not 0 (leave it out for the default, 86400: one day)`},
		},
		{
			name:    "stickyCanary with an unknown field",
			rollout: cfgRollout(DefaultPluginName, `{"httpRoute": "web", "stickyCanary": {"cookie": "x"}}`),
			wantErr: []string{where, `key "stickyCanary": unknown field "cookie"`},
		},
		{
			name:    "a feature the plugin does not check",
			rollout: cfgRollout(DefaultPluginName, `{"httpRoute": "web", "assumeGatewayFeatures": ["HTTPRouteRequestMirrors"]}`),
			wantErr: []string{where, `key "assumeGatewayFeatures": "HTTPRouteRequestMirrors" is not a feature the plugin checks`,
				"HTTPRouteRequestMirror, HTTPRouteRequestMultipleMirrors"},
		},
		{
			name:    "an unknown mirror mode",
			rollout: cfgRollout(DefaultPluginName, `{"httpRoute": "web", "mirrorMode": "shadow"}`),
			wantErr: []string{where, `key "mirrorMode" must be "rule" or "filter", not "shadow"`},
		},
		{
			name:    "a rule name for a single route that is not set",
			rollout: cfgRollout(DefaultPluginName, `{"httpRoutes": [{"name": "web"}], "httpRouteRuleName": "split"}`),
			wantErr: []string{where, `key "httpRouteRuleName" names a rule of the "httpRoute" route, but "httpRoute" is not set`},
		},
		{
			name:    "a rule name that is not a rule name",
			rollout: cfgRollout(DefaultPluginName, `{"tcpRoutes": [{"name": "db", "ruleName": "Main_Rule"}]}`),
			wantErr: []string{where, `key "tcpRoutes[0].ruleName": "Main_Rule" is not a rule name`},
		},
		{
			name:    "a UDPRoute rule name for a single route that is not set",
			rollout: cfgRollout(DefaultPluginName, `{"udpRoutes": [{"name": "dns"}], "udpRouteRuleName": "split"}`),
			wantErr: []string{where, `key "udpRouteRuleName" names a rule of the "udpRoute" route, but "udpRoute" is not set`, `use ruleName in a "udpRoutes" entry`},
		},
		{
			name:    "one route, two rule names",
			rollout: cfgRollout(DefaultPluginName, `{"grpcRoute": "api", "grpcRouteRuleName": "a", "grpcRoutes": [{"name": "api", "ruleName": "b"}]}`),
			wantErr: []string{where, `key "grpcRoutes[0].ruleName" targets rule "b" of GRPCRoute shop/api, but key "grpcRouteRuleName" targets rule "a"`},
		},
		{
			name:    "empty raw message",
			rollout: cfgRollout(DefaultPluginName, ``),
			wantErr: []string{where, "malformed JSON", "empty"},
		},
		{
			name:    "empty object names no route",
			rollout: cfgRollout(DefaultPluginName, `{}`),
			wantErr: []string{where, "names no route", "httpRoute(s)", "udpRoute(s)", "route selector"},
		},
		{
			name:    "null names no route",
			rollout: cfgRollout(DefaultPluginName, `null`),
			wantErr: []string{where, "names no route"},
		},
		{
			name:    "only keys that name no route",
			rollout: cfgRollout(DefaultPluginName, `{"namespace": "gateways", "configMap": "cm", "httpRoutes": []}`),
			wantErr: []string{where, "names no route"},
		},
		{
			name:    "malformed JSON: cut short",
			rollout: cfgRollout(DefaultPluginName, `{"httpRoute":`),
			wantErr: []string{where, "malformed JSON", "cut short"},
		},
		{
			name:    "malformed JSON: syntax error",
			rollout: cfgRollout(DefaultPluginName, `{"httpRoute" "web"}`),
			wantErr: []string{where, "malformed JSON at byte 14"},
		},
		{
			name:    "trailing garbage",
			rollout: cfgRollout(DefaultPluginName, `{"httpRoute": "web"} x`),
			wantErr: []string{where, "malformed JSON", "unexpected data after the config object"},
		},
		{
			name:    "a second object after the config",
			rollout: cfgRollout(DefaultPluginName, `{"httpRoute": "web"}{"httpRoute": "other"}`),
			wantErr: []string{where, "unexpected data after the config object"},
		},
		{
			name:    "httpRoutes as a string",
			rollout: cfgRollout(DefaultPluginName, `{"httpRoutes": "web"}`),
			wantErr: []string{where, `key "httpRoutes" must be a list, not a JSON string`},
		},
		{
			name:    "httpRoute as a list",
			rollout: cfgRollout(DefaultPluginName, `{"httpRoute": ["web"]}`),
			wantErr: []string{where, `key "httpRoute" must be a string, not a JSON array`},
		},
		{
			name:    "disableInProgressLabel as a string",
			rollout: cfgRollout(DefaultPluginName, `{"httpRoute": "web", "disableInProgressLabel": "yes"}`),
			wantErr: []string{where, `key "disableInProgressLabel" must be true or false, not a JSON string`},
		},
		{
			name:    "a selector as a string",
			rollout: cfgRollout(DefaultPluginName, `{"tlsRouteSelector": "app=web"}`),
			wantErr: []string{where, `key "tlsRouteSelector" must be an object, not a JSON string`},
		},
		{
			name: "invalid selector: bad operator in matchExpressions",
			rollout: cfgRollout(DefaultPluginName,
				`{"httpRoute": "web", "tcpRouteSelector": {"matchExpressions": [{"key": "tier", "operator": "Like", "values": ["db"]}]}}`),
			wantErr: []string{where, `key "tcpRouteSelector" is not a valid label selector`, `"Like"`},
		},
		{
			name:    "invalid selector: bad label value in matchLabels",
			rollout: cfgRollout(DefaultPluginName, `{"httpRouteSelector": {"matchLabels": {"app": "not a value!"}}}`),
			wantErr: []string{where, `key "httpRouteSelector" is not a valid label selector`},
		},
		{
			name:    "empty selector",
			rollout: cfgRollout(DefaultPluginName, `{"httpRoute": "web", "grpcRouteSelector": {}}`),
			wantErr: []string{where, `key "grpcRouteSelector" is empty`, "every GRPCRoute in namespace shop"},
		},
		{
			name:    "selector with empty matchLabels and matchExpressions",
			rollout: cfgRollout(DefaultPluginName, `{"httpRouteSelector": {"matchLabels": {}, "matchExpressions": []}}`),
			wantErr: []string{where, `key "httpRouteSelector" is empty`},
		},
		{
			name:    "httpRoutes entry without name",
			rollout: cfgRollout(DefaultPluginName, `{"httpRoutes": [{"name": "web"}, {"useHeaderRoutes": true}]}`),
			wantErr: []string{where, `key "httpRoutes": entry 1 has no name`},
		},
		{
			name:    "every bad entry is reported",
			rollout: cfgRollout(DefaultPluginName, `{"tlsRoutes": [{"name": ""}], "grpcRoutes": [{}], "tcpRouteSelector": {}, "udpRoutes": [{"ruleName": "a"}], "udpRouteSelector": {}}`),
			wantErr: []string{where, `key "tlsRoutes": entry 0 has no name`, `key "grpcRoutes": entry 0 has no name`, `key "tcpRouteSelector" is empty`,
				`key "udpRoutes": entry 0 has no name`, `key "udpRouteSelector" is empty: it would select every UDPRoute in namespace shop`},
		},
		{
			name:    "invalid inProgressLabelKey",
			rollout: cfgRollout(DefaultPluginName, `{"httpRoute": "web", "inProgressLabelKey": "not a key!"}`),
			wantErr: []string{where, `key "inProgressLabelKey"`, `"not a key!" is not a label key`},
		},
		{
			name:    "invalid inProgressLabelValue",
			rollout: cfgRollout(DefaultPluginName, `{"httpRoute": "web", "inProgressLabelValue": "not a value!"}`),
			wantErr: []string{where, `key "inProgressLabelValue"`, `"not a value!" is not a label value`},
		},
		{
			name:    "invalid namespace",
			rollout: cfgRollout(DefaultPluginName, `{"httpRoute": "web", "namespace": "Not_A_Namespace"}`),
			wantErr: []string{where, `key "namespace"`, `"Not_A_Namespace" is not a namespace name`},
		},
		{
			name:    "conflictPolicy not Error or Force",
			rollout: cfgRollout(DefaultPluginName, `{"httpRoute": "web", "conflictPolicy": "force"}`),
			wantErr: []string{where, `key "conflictPolicy" must be "Error" or "Force", not "force"`},
		},
		{
			name:    "verifyWeight as a string",
			rollout: cfgRollout(DefaultPluginName, `{"httpRoute": "web", "verifyWeight": "true"}`),
			wantErr: []string{where, `key "verifyWeight" must be true or false, not a JSON string`},
		},
		{
			name:    "verifyWeightSettle without verifyWeight",
			rollout: cfgRollout(DefaultPluginName, `{"httpRoute": "web", "verifyWeightSettle": "3s"}`),
			wantErr: []string{where, `key "verifyWeightSettle" needs "verifyWeight": true`},
		},
		{
			name:    "verifyWeightSettle not a duration",
			rollout: cfgRollout(DefaultPluginName, `{"httpRoute": "web", "verifyWeight": true, "verifyWeightSettle": "3"}`),
			wantErr: []string{where, `key "verifyWeightSettle" must be a duration from 0s to 10m0s, such as "3s", not "3"`},
		},
		{
			name:    "verifyWeightSettle negative",
			rollout: cfgRollout(DefaultPluginName, `{"httpRoute": "web", "verifyWeight": true, "verifyWeightSettle": "-1s"}`),
			wantErr: []string{where, `key "verifyWeightSettle" must be a duration from 0s to 10m0s`},
		},
		{
			name:    "verifyWeightSettle as a number",
			rollout: cfgRollout(DefaultPluginName, `{"httpRoute": "web", "verifyWeight": true, "verifyWeightSettle": 3}`),
			wantErr: []string{where, `key "verifyWeightSettle" must be a string, not a JSON number`},
		},
		{
			name:    "useHeaderRoutes as a string",
			rollout: cfgRollout(DefaultPluginName, `{"httpRoutes": [{"name": "web", "useHeaderRoutes": "yes"}]}`),
			wantErr: []string{where, `httpRoutes.useHeaderRoutes" must be true or false`},
		},
		{
			name:    "config missing under the plugin name",
			rollout: cfgRollout("acme/other", `{"httpRoute": "web"}`),
			wantErr: []string{where, "is missing", "acme/other", "-plugin-name"},
		},
		{
			name:       "config under the default name, plugin registered under another",
			rollout:    cfgRollout(DefaultPluginName, `{"httpRoute": "web"}`),
			pluginName: "acme/gateway-ssa",
			wantErr:    []string{`plugins["acme/gateway-ssa"] is missing`, DefaultPluginName, "-plugin-name"},
		},
		{
			name: "no trafficRouting at all",
			rollout: func() *v1alpha1.Rollout {
				ro := cfgRollout(DefaultPluginName, `{"httpRoute": "web"}`)
				ro.Spec.Strategy.Canary.TrafficRouting = nil
				return ro
			}(),
			wantErr: []string{"spec.strategy.canary.trafficRouting is not set"},
		},
		{
			name: "no canary strategy",
			rollout: &v1alpha1.Rollout{
				ObjectMeta: metav1.ObjectMeta{Namespace: cfgRolloutNS, Name: "web"},
				Spec:       v1alpha1.RolloutSpec{Strategy: v1alpha1.RolloutStrategy{BlueGreen: &v1alpha1.BlueGreenStrategy{ActiveService: "web"}}},
			},
			wantErr: []string{"spec.strategy.canary.trafficRouting is not set"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pluginName := tc.pluginName
			if pluginName == "" {
				pluginName = DefaultPluginName
			}
			got, err := ParseConfig(tc.rollout, pluginName)
			if err == nil {
				t.Fatalf("ParseConfig: no error, settings %+v", got)
			}
			for _, s := range tc.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error does not mention %q:\n%v", s, err)
				}
			}
			if diff := cmp.Diff(Settings{}, got, cfgCompareSelectors); diff != "" {
				t.Errorf("on error ParseConfig returned settings (-want +got):\n%s", diff)
			}
		})
	}
}

// An unknown field inside a key is reported under that key, not as a
// top-level key with the top-level list of known keys.
func TestParseConfigNestedUnknownKeyNamesItsParent(t *testing.T) {
	for raw, parent := range map[string]string{
		`{"httpRouteSelector": {"matchLabel": {"app": "web"}}}`: "httpRouteSelector",
		`{"httpRoutes": [{"nam": "web"}]}`:                      "httpRoutes",
	} {
		_, err := ParseConfig(cfgRollout(DefaultPluginName, raw), DefaultPluginName)
		if err == nil || !strings.Contains(err.Error(), parent) || strings.Contains(err.Error(), "known keys:") {
			t.Errorf("%s: error should name %q and not list the top-level keys; got:\n%v", raw, parent, err)
		}
	}
}

// Keys are matched as spelled: encoding/json alone would accept HTTPROUTE.
func TestParseConfigKeysAreCaseSensitive(t *testing.T) {
	_, err := ParseConfig(cfgRollout(DefaultPluginName, `{"HTTPROUTE": "web"}`), DefaultPluginName)
	if err == nil || !strings.Contains(err.Error(), `unknown key "HTTPROUTE"`) {
		t.Errorf("got %v, want an unknown key error", err)
	}
}

// A config that is not an object says so, without an empty key name.
func TestParseConfigNotAnObject(t *testing.T) {
	_, err := ParseConfig(cfgRollout(DefaultPluginName, `[]`), DefaultPluginName)
	if err == nil || !strings.Contains(err.Error(), "must be a JSON object") {
		t.Errorf("got %v", err)
	}
}
