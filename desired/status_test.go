package desired

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes/routestest"
	"github.com/gatewayapi-ssa/rollouts-plugin/transform"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const stController = "example.com/gateway-controller"

// stGateway is the parent most cases use: Gateway shop/gw, defaults resolved.
var stGateway = routes.ParentRef{Group: routes.Group, Kind: "Gateway", Namespace: wtNS, Name: "gw"}

func stParent(name string) routes.ParentRef {
	p := stGateway
	p.Name = name
	return p
}

func stPtr(p routes.ParentRef) *routes.ParentRef { return &p }

// stCond is a condition as a gateway controller reports it.
func stCond(typ, status string, gen int64, reason string) routes.Condition {
	return routes.Condition{Type: typ, Status: status, Reason: reason, Message: typ + " " + status, ObservedGeneration: gen}
}

// stGood is the status of a parent that accepted generation gen.
func stGood(parent routes.ParentRef, gen int64) routes.ParentStatus {
	return routes.ParentStatus{ParentRef: parent, ControllerName: stController, Conditions: []routes.Condition{
		stCond(routes.ConditionAccepted, "True", gen, "Accepted"),
		stCond(routes.ConditionResolvedRefs, "True", gen, "ResolvedRefs"),
	}}
}

// stRoute is HTTPRoute shop/web at generation 3 whose one rule carries 70/30.
func stRoute(refs []routes.ParentRef, status ...routes.ParentStatus) routes.Route {
	return routes.Route{
		Ref:        routes.Ref{Kind: routes.HTTPRoute, Namespace: wtNS, Name: "web"},
		Generation: 3,
		Rules:      []routes.Rule{routestest.Rule("/", routestest.Backend("web-stable", 70), routestest.Backend("web-canary", 30))},
		Parents:    routes.Parents{Refs: refs, Status: status},
	}
}

var stSplit = transform.Split{Stable: wtStable, Canary: wtCanary, CanaryWeight: 30, MaxWeight: 100}

func TestVerifyStatus(t *testing.T) {
	webRef := routes.Ref{Kind: routes.HTTPRoute, Namespace: wtNS, Name: "web"}
	verdict := func(behind, failed []Finding) Verdict {
		return Verdict{Route: webRef, Generation: 3, Behind: behind, Failed: failed}
	}
	tests := []struct {
		name  string
		route routes.Route
		split transform.Split
		extra []BackendWeight
		want  Verdict
	}{
		{
			name:  "Accepted and ResolvedRefs True for the current generation: verified",
			route: stRoute([]routes.ParentRef{stGateway}, stGood(stGateway, 3)),
			want:  verdict(nil, nil),
		},
		{
			name:  "an observedGeneration newer than the read is verified too",
			route: stRoute([]routes.ParentRef{stGateway}, stGood(stGateway, 4)),
			want:  verdict(nil, nil),
		},
		{
			name:  "the spec does not carry the weights yet: that is the only finding, whatever the status says",
			route: stRoute([]routes.ParentRef{stGateway}, stGood(stGateway, 3)),
			split: transform.Split{Stable: wtStable, Canary: wtCanary, CanaryWeight: 50, MaxWeight: 100},
			want: verdict([]Finding{{
				Detail: "spec does not carry the desired weights yet: rule 0 Service shop/web-stable has weight 70, want 50, " +
					"rule 0 Service shop/web-canary has weight 30, want 50",
			}}, nil),
		},
		{
			name: "experiment backends at their weights, stable gets the rest: verified",
			route: func() routes.Route {
				r := stRoute([]routes.ParentRef{stGateway}, stGood(stGateway, 3))
				r.Rules = []routes.Rule{routestest.Rule("/", routestest.Backend("web-stable", 50), routestest.Backend("web-canary", 30), routestest.Backend("exp-a", 15), routestest.Backend("exp-b", 5))}
				return r
			}(),
			split: transform.Split{Stable: wtStable, Canary: wtCanary, CanaryWeight: 30, MaxWeight: 100, Reserved: 20},
			extra: []BackendWeight{{routes.ServiceRef(wtNS, "exp-a"), 15}, {routes.ServiceRef(wtNS, "exp-b"), 5}},
			want:  verdict(nil, nil),
		},
		{
			name: "an experiment backend missing or at another weight: the spec does not carry the weights",
			route: func() routes.Route {
				r := stRoute([]routes.ParentRef{stGateway}, stGood(stGateway, 3))
				r.Rules = []routes.Rule{routestest.Rule("/", routestest.Backend("web-stable", 50), routestest.Backend("web-canary", 30), routestest.Backend("exp-a", 10))}
				return r
			}(),
			split: transform.Split{Stable: wtStable, Canary: wtCanary, CanaryWeight: 30, MaxWeight: 100, Reserved: 20},
			extra: []BackendWeight{{routes.ServiceRef(wtNS, "exp-a"), 15}, {routes.ServiceRef(wtNS, "exp-b"), 5}},
			want: verdict([]Finding{{
				Detail: "spec does not carry the desired weights yet: rule 0 Service shop/exp-a has weight 10, want 15, " +
					"rule 0 has no backendRef to Service shop/exp-b (want weight 5)",
			}}, nil),
		},
		{
			name:  "no status at all",
			route: stRoute([]routes.ParentRef{stGateway}),
			want: verdict([]Finding{{
				Parent: stPtr(stGateway),
				Detail: "no status.parents entry: no gateway controller has reported on this parent yet",
			}}, nil),
		},
		{
			name:  "status for an older generation: both conditions behind",
			route: stRoute([]routes.ParentRef{stGateway}, stGood(stGateway, 2)),
			want: verdict([]Finding{
				{
					Parent: stPtr(stGateway), ControllerName: stController, Condition: routes.ConditionAccepted,
					Status: "True", Reason: "Accepted", Message: "Accepted True", ObservedGeneration: 2,
					Detail: stController + " reported Accepted=True for an older generation (observedGeneration 2 < generation 3)",
				},
				{
					Parent: stPtr(stGateway), ControllerName: stController, Condition: routes.ConditionResolvedRefs,
					Status: "True", Reason: "ResolvedRefs", Message: "ResolvedRefs True", ObservedGeneration: 2,
					Detail: stController + " reported ResolvedRefs=True for an older generation (observedGeneration 2 < generation 3)",
				},
			}, nil),
		},
		{
			name: "conditions without observedGeneration never verify",
			route: stRoute([]routes.ParentRef{stGateway}, routes.ParentStatus{ParentRef: stGateway, Conditions: []routes.Condition{
				{Type: routes.ConditionAccepted, Status: "True", Reason: "Accepted"},
				stCond(routes.ConditionResolvedRefs, "True", 3, "ResolvedRefs"),
			}}),
			want: verdict([]Finding{{
				Parent: stPtr(stGateway), Condition: routes.ConditionAccepted, Status: "True", Reason: "Accepted",
				Detail: "the gateway controller reported Accepted=True for an older generation (no observedGeneration < generation 3)",
			}}, nil),
		},
		{
			name: "ResolvedRefs False for the current generation fails, with reason and message",
			route: stRoute([]routes.ParentRef{stGateway}, routes.ParentStatus{ParentRef: stGateway, ControllerName: stController, Conditions: []routes.Condition{
				stCond(routes.ConditionAccepted, "True", 3, "Accepted"),
				{Type: routes.ConditionResolvedRefs, Status: "False", Reason: "BackendNotFound", Message: `service "web-canary" not found`, ObservedGeneration: 3},
			}}),
			want: verdict(nil, []Finding{{
				Parent: stPtr(stGateway), ControllerName: stController, Condition: routes.ConditionResolvedRefs,
				Status: "False", Reason: "BackendNotFound", Message: `service "web-canary" not found`, ObservedGeneration: 3,
				Detail: stController + ` reports ResolvedRefs=False for generation 3: reason BackendNotFound: service "web-canary" not found`,
			}}),
		},
		{
			name: "Accepted False for the current generation fails",
			route: stRoute([]routes.ParentRef{stGateway}, routes.ParentStatus{ParentRef: stGateway, ControllerName: stController, Conditions: []routes.Condition{
				stCond(routes.ConditionAccepted, "False", 3, "NotAllowedByListeners"),
				stCond(routes.ConditionResolvedRefs, "True", 3, "ResolvedRefs"),
			}}),
			want: verdict(nil, []Finding{{
				Parent: stPtr(stGateway), ControllerName: stController, Condition: routes.ConditionAccepted,
				Status: "False", Reason: "NotAllowedByListeners", Message: "Accepted False", ObservedGeneration: 3,
				Detail: stController + " reports Accepted=False for generation 3: reason NotAllowedByListeners: Accepted False",
			}}),
		},
		{
			name: "a False condition for an older generation is only behind: the controller has not seen the new spec",
			route: stRoute([]routes.ParentRef{stGateway}, routes.ParentStatus{ParentRef: stGateway, ControllerName: stController, Conditions: []routes.Condition{
				stCond(routes.ConditionAccepted, "True", 3, "Accepted"),
				stCond(routes.ConditionResolvedRefs, "False", 2, "BackendNotFound"),
			}}),
			want: verdict([]Finding{{
				Parent: stPtr(stGateway), ControllerName: stController, Condition: routes.ConditionResolvedRefs,
				Status: "False", Reason: "BackendNotFound", Message: "ResolvedRefs False", ObservedGeneration: 2,
				Detail: stController + " reported ResolvedRefs=False for an older generation (observedGeneration 2 < generation 3)",
			}}, nil),
		},
		{
			name: "Unknown for the current generation is behind",
			route: stRoute([]routes.ParentRef{stGateway}, routes.ParentStatus{ParentRef: stGateway, ControllerName: stController, Conditions: []routes.Condition{
				stCond(routes.ConditionAccepted, "Unknown", 3, "Pending"),
				stCond(routes.ConditionResolvedRefs, "True", 3, "ResolvedRefs"),
			}}),
			want: verdict([]Finding{{
				Parent: stPtr(stGateway), ControllerName: stController, Condition: routes.ConditionAccepted,
				Status: "Unknown", Reason: "Pending", Message: "Accepted Unknown", ObservedGeneration: 3,
				Detail: stController + " reports Accepted=Unknown for generation 3 (reason Pending: Accepted Unknown)",
			}}, nil),
		},
		{
			name: "a missing ResolvedRefs condition is behind",
			route: stRoute([]routes.ParentRef{stGateway}, routes.ParentStatus{ParentRef: stGateway, ControllerName: stController, Conditions: []routes.Condition{
				stCond(routes.ConditionAccepted, "True", 3, "Accepted"),
			}}),
			want: verdict([]Finding{{
				Parent: stPtr(stGateway), ControllerName: stController, Condition: routes.ConditionResolvedRefs,
				Detail: stController + " has no ResolvedRefs condition",
			}}, nil),
		},
		{
			name:  "two parents, one behind",
			route: stRoute([]routes.ParentRef{stParent("gw-a"), stParent("gw-b")}, stGood(stParent("gw-a"), 3), stGood(stParent("gw-b"), 2)),
			want: verdict([]Finding{
				{
					Parent: stPtr(stParent("gw-b")), ControllerName: stController, Condition: routes.ConditionAccepted,
					Status: "True", Reason: "Accepted", Message: "Accepted True", ObservedGeneration: 2,
					Detail: stController + " reported Accepted=True for an older generation (observedGeneration 2 < generation 3)",
				},
				{
					Parent: stPtr(stParent("gw-b")), ControllerName: stController, Condition: routes.ConditionResolvedRefs,
					Status: "True", Reason: "ResolvedRefs", Message: "ResolvedRefs True", ObservedGeneration: 2,
					Detail: stController + " reported ResolvedRefs=True for an older generation (observedGeneration 2 < generation 3)",
				},
			}, nil),
		},
		{
			name:  "two parents, one without status",
			route: stRoute([]routes.ParentRef{stParent("gw-a"), stParent("gw-b")}, stGood(stParent("gw-a"), 3)),
			want: verdict([]Finding{{
				Parent: stPtr(stParent("gw-b")),
				Detail: "no status.parents entry: no gateway controller has reported on this parent yet",
			}}, nil),
		},
		{
			name: "one parent failed and one behind: both reported",
			route: stRoute([]routes.ParentRef{stParent("gw-a"), stParent("gw-b")},
				routes.ParentStatus{ParentRef: stParent("gw-a"), ControllerName: stController, Conditions: []routes.Condition{
					stCond(routes.ConditionAccepted, "True", 3, "Accepted"),
					stCond(routes.ConditionResolvedRefs, "False", 3, "RefNotPermitted"),
				}}),
			want: verdict(
				[]Finding{{
					Parent: stPtr(stParent("gw-b")),
					Detail: "no status.parents entry: no gateway controller has reported on this parent yet",
				}},
				[]Finding{{
					Parent: stPtr(stParent("gw-a")), ControllerName: stController, Condition: routes.ConditionResolvedRefs,
					Status: "False", Reason: "RefNotPermitted", Message: "ResolvedRefs False", ObservedGeneration: 3,
					Detail: stController + " reports ResolvedRefs=False for generation 3: reason RefNotPermitted: ResolvedRefs False",
				}}),
		},
		{
			name:  "status of a parent the spec no longer names is ignored",
			route: stRoute([]routes.ParentRef{stParent("gw-a")}, stGood(stParent("gw-a"), 3), stGood(stParent("old-gw"), 1)),
			want:  verdict(nil, nil),
		},
		{
			name: "sectionName must match: status for another listener is not status for this parent",
			route: stRoute([]routes.ParentRef{{Group: routes.Group, Kind: "Gateway", Namespace: wtNS, Name: "gw", SectionName: "https"}},
				stGood(routes.ParentRef{Group: routes.Group, Kind: "Gateway", Namespace: wtNS, Name: "gw", SectionName: "http"}, 3)),
			want: verdict([]Finding{{
				Parent: &routes.ParentRef{Group: routes.Group, Kind: "Gateway", Namespace: wtNS, Name: "gw", SectionName: "https"},
				Detail: "no status.parents entry: no gateway controller has reported on this parent yet",
			}}, nil),
		},
		{
			name: "port must match",
			route: stRoute([]routes.ParentRef{{Group: routes.Group, Kind: "Gateway", Namespace: wtNS, Name: "gw", Port: 443}},
				stGood(routes.ParentRef{Group: routes.Group, Kind: "Gateway", Namespace: wtNS, Name: "gw", Port: 80}, 3)),
			want: verdict([]Finding{{
				Parent: &routes.ParentRef{Group: routes.Group, Kind: "Gateway", Namespace: wtNS, Name: "gw", Port: 443},
				Detail: "no status.parents entry: no gateway controller has reported on this parent yet",
			}}, nil),
		},
		{
			name: "namespace must match",
			route: stRoute([]routes.ParentRef{{Group: routes.Group, Kind: "Gateway", Namespace: "infra", Name: "gw"}},
				stGood(stGateway, 3)),
			want: verdict([]Finding{{
				Parent: &routes.ParentRef{Group: routes.Group, Kind: "Gateway", Namespace: "infra", Name: "gw"},
				Detail: "no status.parents entry: no gateway controller has reported on this parent yet",
			}}, nil),
		},
		{
			name: "kind and group must match: a Service parent (GAMMA) is not a Gateway of the same name",
			route: stRoute([]routes.ParentRef{{Group: "", Kind: "Service", Namespace: wtNS, Name: "gw"}},
				stGood(stGateway, 3)),
			want: verdict([]Finding{{
				Parent: &routes.ParentRef{Group: "", Kind: "Service", Namespace: wtNS, Name: "gw"},
				Detail: "no status.parents entry: no gateway controller has reported on this parent yet",
			}}, nil),
		},
		{
			name: "two controllers report on one parent: both must be current",
			route: stRoute([]routes.ParentRef{stGateway}, stGood(stGateway, 3), routes.ParentStatus{
				ParentRef: stGateway, ControllerName: "other.example.com/mesh",
				Conditions: []routes.Condition{stCond(routes.ConditionAccepted, "True", 3, "Accepted"), stCond(routes.ConditionResolvedRefs, "True", 1, "ResolvedRefs")},
			}),
			want: verdict([]Finding{{
				Parent: stPtr(stGateway), ControllerName: "other.example.com/mesh", Condition: routes.ConditionResolvedRefs,
				Status: "True", Reason: "ResolvedRefs", Message: "ResolvedRefs True", ObservedGeneration: 1,
				Detail: "other.example.com/mesh reported ResolvedRefs=True for an older generation (observedGeneration 1 < generation 3)",
			}}, nil),
		},
		{
			name:  "a parent named twice in spec is checked once",
			route: stRoute([]routes.ParentRef{stGateway, stGateway}),
			want: verdict([]Finding{{
				Parent: stPtr(stGateway),
				Detail: "no status.parents entry: no gateway controller has reported on this parent yet",
			}}, nil),
		},
		{
			name: "PartiallyInvalid True for the current generation fails: the dropped rules may carry the weights",
			route: stRoute([]routes.ParentRef{stGateway}, routes.ParentStatus{ParentRef: stGateway, ControllerName: stController, Conditions: []routes.Condition{
				stCond(routes.ConditionAccepted, "True", 3, "Accepted"),
				stCond(routes.ConditionResolvedRefs, "True", 3, "ResolvedRefs"),
				{Type: routes.ConditionPartiallyInvalid, Status: "True", Reason: "UnsupportedValue", Message: "Dropped Rule 0: bad filter", ObservedGeneration: 3},
			}}),
			want: verdict(nil, []Finding{{
				Parent: stPtr(stGateway), ControllerName: stController, Condition: routes.ConditionPartiallyInvalid,
				Status: "True", Reason: "UnsupportedValue", Message: "Dropped Rule 0: bad filter", ObservedGeneration: 3,
				Detail: stController + " reports PartiallyInvalid=True for generation 3 (reason UnsupportedValue: Dropped Rule 0: bad filter): " +
					"it dropped invalid rules, which may include the ones carrying the weights",
			}}),
		},
		{
			name: "PartiallyInvalid for an older generation is ignored",
			route: stRoute([]routes.ParentRef{stGateway}, routes.ParentStatus{ParentRef: stGateway, ControllerName: stController, Conditions: []routes.Condition{
				stCond(routes.ConditionAccepted, "True", 3, "Accepted"),
				stCond(routes.ConditionResolvedRefs, "True", 3, "ResolvedRefs"),
				stCond(routes.ConditionPartiallyInvalid, "True", 2, "UnsupportedValue"),
			}}),
			want: verdict(nil, nil),
		},
		{
			name:  "no parentRefs: no gateway serves the route",
			route: stRoute(nil, stGood(stGateway, 3)),
			want: verdict([]Finding{{
				Detail: "spec.parentRefs names no parent: no gateway serves this route, so none can carry the weights",
			}}, nil),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			split := tc.split
			if split == (transform.Split{}) {
				split = stSplit
			}
			before := tc.route.Rules[0].BackendRefs()[0].Weight()
			got, err := VerifyStatus(tc.route, split, tc.extra, "")
			if err != nil {
				t.Fatalf("VerifyStatus: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("VerifyStatus (-want +got):\n%s", diff)
			}
			if got.Verified() != (len(tc.want.Behind) == 0 && len(tc.want.Failed) == 0) {
				t.Errorf("Verified() = %v", got.Verified())
			}
			if after := tc.route.Rules[0].BackendRefs()[0].Weight(); after != before {
				t.Errorf("VerifyStatus changed the route's rules: weight %d → %d", before, after)
			}
		})
	}
}

func TestVerifyStatusErrors(t *testing.T) {
	t.Run("no managed rule", func(t *testing.T) {
		r := stRoute([]routes.ParentRef{stGateway}, stGood(stGateway, 3))
		r.Rules = []routes.Rule{routestest.Rule("/", routestest.Backend("web-stable", 100))}
		_, err := VerifyStatus(r, stSplit, nil, "")
		var noRule *transform.NoWeightedRuleError
		if !errors.As(err, &noRule) {
			t.Fatalf("error = %v, want a NoWeightedRuleError", err)
		}
	})
	t.Run("stable alone at weight 0 carries the split", func(t *testing.T) {
		r := stRoute([]routes.ParentRef{stGateway}, stGood(stGateway, 3))
		r.Rules = []routes.Rule{routestest.Rule("/", routestest.Backend("web-stable", 1))}
		zero := stSplit
		zero.CanaryWeight = 0
		got, err := VerifyStatus(r, zero, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(Verdict{Route: r.Ref, Generation: 3}, got); diff != "" {
			t.Errorf("verdict (-want +got):\n%s", diff)
		}
	})
	t.Run("weight over maxTrafficWeight", func(t *testing.T) {
		r := stRoute([]routes.ParentRef{stGateway}, stGood(stGateway, 3))
		_, err := VerifyStatus(r, transform.Split{Stable: wtStable, Canary: wtCanary, CanaryWeight: 101, MaxWeight: 100}, nil, "")
		if err == nil || !strings.Contains(err.Error(), "outside 0..100") {
			t.Fatalf("error = %v, want one about the range", err)
		}
	})
}

func TestVerdictString(t *testing.T) {
	v := Verdict{
		Route:      routes.Ref{Kind: routes.HTTPRoute, Namespace: wtNS, Name: "web"},
		Generation: 3,
		Behind:     []Finding{{Parent: stPtr(stParent("gw-b")), Detail: "no status.parents entry"}},
		Failed: []Finding{{
			Parent: &routes.ParentRef{Group: routes.Group, Kind: "Gateway", Namespace: "infra", Name: "gw-a", SectionName: "https", Port: 443},
			Detail: "x reports ResolvedRefs=False",
		}},
	}
	want := "HTTPRoute shop/web (generation 3): parent Gateway infra/gw-a sectionName https port 443: x reports ResolvedRefs=False; " +
		"parent Gateway shop/gw-b: no status.parents entry"
	if diff := cmp.Diff(want, v.String()); diff != "" {
		t.Errorf("String (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("Service.mesh.example.com shop/api", routes.ParentRef{Group: "mesh.example.com", Kind: "Service", Namespace: wtNS, Name: "api"}.String()); diff != "" {
		t.Errorf("ParentRef.String (-want +got):\n%s", diff)
	}
}

// FromUnstructured reads spec.parentRefs and status.parents with Gateway
// API's defaults resolved, as the apiserver and typed clients serve them.
func TestFromUnstructuredParents(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1",
		"kind":       "HTTPRoute",
		"metadata":   map[string]any{"name": "web", "namespace": wtNS, "generation": int64(4)},
		"spec": map[string]any{
			"parentRefs": []any{
				map[string]any{"name": "gw"},
				map[string]any{"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": "infra", "name": "edge", "sectionName": "https", "port": int64(443)},
				map[string]any{"group": "", "kind": "Service", "name": "mesh-svc"},
				"not an object",
			},
			"rules": []any{},
		},
		"status": map[string]any{
			"parents": []any{
				map[string]any{
					"parentRef":      map[string]any{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"},
					"controllerName": stController,
					"conditions": []any{
						map[string]any{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "ok",
							"observedGeneration": int64(4), "lastTransitionTime": "2025-01-01T00:00:00Z"},
						// A float, as a JSON decoder into any gives it.
						map[string]any{"type": "ResolvedRefs", "status": "False", "reason": "BackendNotFound", "message": "no canary",
							"observedGeneration": float64(3)},
					},
				},
				map[string]any{
					"parentRef":      map[string]any{"namespace": "infra", "name": "edge", "sectionName": "https", "port": int64(443)},
					"controllerName": stController,
				},
			},
		},
	}}
	r, err := routes.FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	want := routes.Parents{
		Refs: []routes.ParentRef{
			stGateway,
			{Group: routes.Group, Kind: "Gateway", Namespace: "infra", Name: "edge", SectionName: "https", Port: 443},
			{Group: "", Kind: "Service", Namespace: wtNS, Name: "mesh-svc"},
		},
		Status: []routes.ParentStatus{
			{
				ParentRef:      stGateway,
				ControllerName: stController,
				Conditions: []routes.Condition{
					{Type: "Accepted", Status: "True", Reason: "Accepted", Message: "ok", ObservedGeneration: 4},
					{Type: "ResolvedRefs", Status: "False", Reason: "BackendNotFound", Message: "no canary", ObservedGeneration: 3},
				},
			},
			{
				ParentRef:      routes.ParentRef{Group: routes.Group, Kind: "Gateway", Namespace: "infra", Name: "edge", SectionName: "https", Port: 443},
				ControllerName: stController,
			},
		},
	}
	if diff := cmp.Diff(want, r.Parents); diff != "" {
		t.Errorf("Parents (-want +got):\n%s", diff)
	}
	if r.Generation != 4 {
		t.Errorf("Generation = %d, want 4", r.Generation)
	}
}

// A route without parentRefs or status reads as empty Parents.
func TestFromUnstructuredNoParents(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1",
		"kind":       "HTTPRoute",
		"metadata":   map[string]any{"name": "web", "namespace": wtNS},
	}}
	r, err := routes.FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(routes.Parents{}, r.Parents); diff != "" {
		t.Errorf("Parents (-want +got):\n%s", diff)
	}
}

// An error about a route names it once: VerifyWeight puts the route in front
// of SetWeights' errors, some of which begin with it already.
func TestAboutNamesTheRouteOnce(t *testing.T) {
	ref := routes.Ref{Kind: routes.HTTPRoute, Namespace: wtNS, Name: "web"}
	r := routes.Route{Ref: ref, Rules: []routes.Rule{{"backendRefs": []any{routestest.Backend("other", 1)}}}}
	_, err := VerifyStatus(r, transform.Split{Stable: wtStable, Canary: wtCanary, CanaryWeight: 10, MaxWeight: 100}, nil, "")
	if err == nil {
		t.Fatal("a route without the Rollout's Services verified")
	}
	if got := routes.RouteError(ref, err).Error(); strings.Count(got, "HTTPRoute shop/web") != 1 {
		t.Errorf("route named %d times: %s", strings.Count(got, "HTTPRoute shop/web"), got)
	}
	bare := fmt.Errorf("canary weight 101 is outside 0..100 (maxTrafficWeight)")
	if got, want := routes.RouteError(ref, bare).Error(), "HTTPRoute shop/web: "+bare.Error(); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
