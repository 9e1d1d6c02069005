package kube

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// servedJSON is a route as the apiserver serves it after a few steps: every
// part the plugin reads, and parts it drops (uid, timestamps, hostnames). It
// is routes' testdata/served-route.json, which routes/route_test.go reads too.
func servedJSON(tb testing.TB) []byte {
	tb.Helper()
	data, err := os.ReadFile("../routes/testdata/served-route.json")
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// readLongWay is what the plugin read before decodeRoute: the JSON as an
// unstructured object, then routes.FromUnstructured.
func readLongWay(data []byte) (routes.Route, error) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		return routes.Route{}, err
	}
	return routes.FromUnstructured(u)
}

// fieldsAsValues compares managedFields' field sets as JSON values: decodeRoute
// keeps them as served, the long way writes them again with sorted keys.
var fieldsAsValues = cmp.Transformer("fieldsV1", func(f *metav1.FieldsV1) any {
	if f == nil {
		return nil
	}
	var v any
	if err := json.Unmarshal(f.GetRawBytes(), &v); err != nil {
		return "invalid: " + f.GetRawString()
	}
	return v
})

// ownership is what a route's ManagedFields say, question by question, of
// every manager of its entries (and one of none), every label key an entry
// names and the plugin's in-progress label: what two reads of the same
// entries must answer alike.
type ownership struct {
	Entries     []metav1.ManagedFieldsEntry
	Owned       map[string]routes.Owned
	OwnsRules   map[string]bool
	WroteRules  map[string]bool
	OwnsAny     map[string]bool
	RulesOwners map[string][]string
	LabelOwners map[string][]string
}

func ownershipSays(m routes.ManagedFields) ownership {
	o := ownership{Entries: m.Entries(), Owned: map[string]routes.Owned{}, OwnsRules: map[string]bool{}, WroteRules: map[string]bool{},
		OwnsAny: map[string]bool{}, RulesOwners: map[string][]string{}, LabelOwners: map[string][]string{}}
	managers := []string{"nobody", "argo-rollouts-gatewayapi"}
	keys := []string{"rollouts.argoproj.io/gatewayapi-canary"}
	for _, e := range m.Entries() {
		managers = append(managers, e.Manager)
		var set struct {
			Metadata struct {
				Labels map[string]any `json:"f:labels"`
			} `json:"f:metadata"`
		}
		if e.FieldsV1 != nil && json.Unmarshal(e.FieldsV1.GetRawBytes(), &set) == nil {
			for k := range set.Metadata.Labels {
				keys = append(keys, strings.TrimPrefix(k, "f:"))
			}
		}
	}
	for _, manager := range managers {
		owned := m.Owned(manager)
		o.Owned[manager] = owned
		keys = append(keys, owned.Labels...)
		o.OwnsRules[manager], o.WroteRules[manager], o.OwnsAny[manager] = m.OwnsRules(manager), m.WroteRules(manager), m.OwnsAnything(manager)
		o.RulesOwners[manager] = m.RulesOwners(manager)
	}
	for _, key := range keys {
		o.LabelOwners[key] = m.LabelOwners(key, "argo-rollouts-gatewayapi")
	}
	return o
}

// ownershipAsSaid compares ManagedFields by what they say, entries
// included (with fieldsAsValues).
var ownershipAsSaid = cmp.Transformer("ownership", ownershipSays)

// checkDecode fails the test unless decodeRoute and the long way agree on data:
// the same Route, or both an error. It says whether the one pass read it.
func checkDecode(t *testing.T, data []byte) (fast bool) {
	t.Helper()
	want, wantErr := readLongWay(data)
	got, err := decodeRoute(data)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("decodeRoute: error %v, the long way: error %v, for\n%s", err, wantErr, data)
	}
	if err != nil {
		return false
	}
	if diff := cmp.Diff(want, got, ownershipAsSaid, fieldsAsValues); diff != "" {
		t.Fatalf("decodeRoute read another route than the long way (-long way +decodeRoute):\n%s\nfor %s", diff, data)
	}
	_, fast = decodeFast(data)
	return fast
}

// decodeRoute reads the apiserver's JSON in one pass; whatever it is given, it
// must answer what reading the same JSON as an unstructured object answers.
func TestDecodeReadsWhatTheLongWayReads(t *testing.T) {
	served := func(edit func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(servedJSON(t), &m); err != nil {
			t.Fatal(err)
		}
		edit(m)
		data, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	meta := func(m map[string]any) map[string]any { return m["metadata"].(map[string]any) }
	spec := func(m map[string]any) map[string]any { return m["spec"].(map[string]any) }
	for _, tc := range []struct {
		name string
		data []byte
		fast bool // the one pass reads it
	}{
		{"a route as served", servedJSON(t), true},
		{"a routes.GRPCRoute in v1alpha2", served(func(m map[string]any) {
			m["kind"], m["apiVersion"] = "GRPCRoute", routes.Group+"/v1alpha2"
		}), true},
		{"no rules", served(func(m map[string]any) { delete(spec(m), "rules") }), true},
		{"rules null", served(func(m map[string]any) { spec(m)["rules"] = nil }), true},
		{"rules empty", served(func(m map[string]any) { spec(m)["rules"] = []any{} }), true},
		{"no spec, no status, no labels", served(func(m map[string]any) {
			delete(m, "spec")
			delete(m, "status")
			delete(meta(m), "labels")
		}), true},
		{"managedFields empty", served(func(m map[string]any) { meta(m)["managedFields"] = []any{} }), true},
		{"labels empty", served(func(m map[string]any) { meta(m)["labels"] = map[string]any{} }), true},
		{"a label that is not a string", served(func(m map[string]any) { meta(m)["labels"] = map[string]any{"n": 1} }), false},
		{"a label null", served(func(m map[string]any) { meta(m)["labels"] = map[string]any{"n": nil} }), false},
		{"a rule that is not an object", served(func(m map[string]any) { spec(m)["rules"] = []any{"x"} }), false},
		{"a rule null", served(func(m map[string]any) { spec(m)["rules"] = []any{nil} }), false},
		{"rules that are not a list", served(func(m map[string]any) { spec(m)["rules"] = "not a list" }), false},
		{"a managedFields entry of the wrong type", served(func(m map[string]any) {
			meta(m)["managedFields"] = []any{map[string]any{"manager": 7}}
		}), false},
		{"a managedFields entry null", served(func(m map[string]any) { meta(m)["managedFields"] = []any{nil} }), false},
		{"a managedFields entry empty", served(func(m map[string]any) {
			meta(m)["managedFields"] = []any{map[string]any{}}
		}), false},
		{"a time that is not a time", served(func(m map[string]any) {
			meta(m)["managedFields"] = []any{map[string]any{"manager": "m", "time": "yesterday"}}
		}), false},
		{"generation not an integer", served(func(m map[string]any) { meta(m)["generation"] = 1.5 }), false},
		{"not a routes.Gateway API route", served(func(m map[string]any) { m["kind"], m["apiVersion"] = "Service", "v1" }), false},
		{"a kind the plugin does not read", served(func(m map[string]any) { m["kind"] = "Gateway" }), false},
		{"no kind", served(func(m map[string]any) { delete(m, "kind") }), false},
		{"not JSON", []byte(`{"kind":`), false},
		{"a list", []byte(`[]`), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if fast := checkDecode(t, tc.data); fast != tc.fast {
				t.Errorf("the one pass read it: %v, want %v", fast, tc.fast)
			}
		})
	}
}

// The route decodeRoute returns holds what the apiserver served, field by field.
func TestDecodeKeepsTheFieldsThePluginReads(t *testing.T) {
	r, err := decodeRoute(servedJSON(t))
	if err != nil {
		t.Fatal(err)
	}
	if r.Ref != (routes.Ref{Kind: routes.HTTPRoute, Namespace: "shop", Name: "web"}) || r.Version != "v1" || r.ResourceVersion != "419" || r.Generation != 5 {
		t.Errorf("identity: %+v %s %s %d", r.Ref, r.Version, r.ResourceVersion, r.Generation)
	}
	if mf := r.ManagedFields.Entries(); len(mf) != 3 || mf[2].Subresource != "status" || !strings.Contains(mf[1].FieldsV1.GetRawString(), `"f:gatewayapi-ssa.dev/claims"`) {
		t.Errorf("managedFields: %+v", mf)
	}
	if !r.ManagedFields.OwnsRules("argo-rollouts-gatewayapi") || !r.ManagedFields.WroteRules("kubectl-create") ||
		!slices.Equal(r.ManagedFields.LabelOwners("app"), []string{"kubectl-create (Update, gateway.networking.k8s.io/v1)"}) {
		t.Errorf("ownership read: %+v", ownershipSays(r.ManagedFields))
	}
	if w := r.Rules[0].BackendRefs()[1].Weight(); w != 20 {
		t.Errorf("canary weight %d, want 20", w)
	}
	if _, isInt := r.Rules[0].BackendRefs()[1]["weight"].(int64); !isInt {
		t.Errorf("weight decoded as %T, want int64 as in an unstructured object", r.Rules[0].BackendRefs()[1]["weight"])
	}
	if got := r.Parents.Refs[0]; got != (routes.ParentRef{Group: routes.Group, Kind: "Gateway", Namespace: "shop", Name: "gw", SectionName: "http", Port: 80}) {
		t.Errorf("parentRef %+v", got)
	}
	if c := r.Parents.Status[0].Conditions[0]; c.Type != routes.ConditionAccepted || c.ObservedGeneration != 5 {
		t.Errorf("condition %+v", c)
	}
}

// FuzzDecode feeds any JSON object to decodeRoute and the long way (make fuzz).
// The input is written again from its decoded form first: the apiserver
// serves no object with a key twice, which only a map (the long way) reads
// as the last one wins throughout.
func FuzzDecode(f *testing.F) {
	f.Add(servedJSON(f))
	f.Add([]byte(`{"apiVersion":"gateway.networking.k8s.io/v1alpha2","kind":"TCPRoute","metadata":{"name":"t","labels":{"a":"b"}},"spec":{"rules":[{"backendRefs":[{"name":"s","port":1e3}]}]}}`))
	f.Add([]byte(`{"apiVersion":"gateway.networking.k8s.io/v1","kind":"UDPRoute","metadata":{"name":"dns","namespace":"n"},"spec":{"rules":[{"name":"main","backendRefs":[{"name":"dns-stable","port":53,"weight":100}]}]}}`))
	f.Add([]byte(`{"apiVersion":"gateway.networking.k8s.io/v1","kind":"TLSRoute","metadata":{"managedFields":[{"manager":"m","fieldsV1":null,"time":null}]},"spec":null,"status":{"parents":[null,{"parentRef":{"group":""}}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if canonical, ok := canonicalJSON(data); ok {
			checkDecode(t, canonical)
		}
	})
}

// canonicalJSON is data written again from its decoded form, as an
// apiserver writes an object (no key twice); ok is false for what is not a
// JSON object.
func canonicalJSON(data []byte) ([]byte, bool) {
	var m map[string]any
	if json.Unmarshal(data, &m) != nil {
		return nil, false
	}
	canonical, err := json.Marshal(m)
	return canonical, err == nil
}

// BenchmarkDecode: reading a served route in one pass, and the long way.
func BenchmarkDecode(b *testing.B) {
	data := servedJSON(b)
	b.Run("one pass", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeRoute(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unstructured", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(data); err != nil {
				b.Fatal(err)
			}
			if _, err := routes.FromUnstructuredNoCopy(u); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// An answer that is no route, without a kind (as a Secret read through a
// path that climbed out of its namespace might be served), is an error that
// quotes none of it.
func TestDecodeQuotesNoAnswer(t *testing.T) {
	for _, answer := range []string{
		`{"apiVersion":"v1","metadata":{"name":"db","namespace":"kube-system"},"data":{"password":"aHVudGVyMg=="}}`,
		`{"kind":"Secret","metadata":{"name":"db","namespace":"kube-system"},"data":{"password":"aHVudGVyMg=="}}`,
	} {
		_, err := decodeRoute([]byte(answer))
		if err == nil || strings.Contains(err.Error(), "aHVudGVyMg") {
			t.Errorf("decodeRoute(%s): %v, want an error that quotes nothing of the answer", answer, err)
		}
		a, err := AnswerOf(routes.Ref{Kind: routes.HTTPRoute, Namespace: "shop", Name: "web"}, []byte(`{"metadata":{"resourceVersion":"1"},"data":{"password":"aHVudGVyMg=="}}`))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Object(); err == nil || strings.Contains(err.Error(), "aHVudGVyMg") {
			t.Errorf("Answer.Object: %v, want an error that quotes nothing of the answer", err)
		}
	}
}
