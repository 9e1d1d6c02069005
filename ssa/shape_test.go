package ssa

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	sigsjson "sigs.k8s.io/json"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// Writing the typed configuration's JSON straight (encode) is a shortcut,
// taken only where it is proven: whatever object encode writes, the full
// round trip (decodeLossless) finds lossless too, and the configuration it
// fills encodes to the same JSON, so the write says what it said before the
// shortcut.

// servedRules is a rule as the apiserver serves it, defaults included.
func servedRules() []routes.Rule {
	return []routes.Rule{{
		"name": "api",
		"matches": []any{map[string]any{
			"path":    map[string]any{"type": "PathPrefix", "value": "/api"},
			"headers": []any{map[string]any{"type": "Exact", "name": "x-env", "value": "prod"}},
		}},
		"filters": []any{map[string]any{
			"type":                  "RequestHeaderModifier",
			"requestHeaderModifier": map[string]any{"add": []any{map[string]any{"name": "x-a", "value": "b"}}},
		}},
		"timeouts": map[string]any{"request": "10s"},
		"backendRefs": []any{
			map[string]any{"group": "", "kind": "Service", "name": "stable", "port": int64(80), "weight": int64(70)},
			map[string]any{"group": "", "kind": "Service", "name": "canary", "port": int64(80), "weight": int64(0)},
		},
	}}
}

func TestCheapCheck(t *testing.T) {
	k := applies[kindVersion{routes.HTTPRoute, "v1"}]
	for name, tc := range map[string]struct {
		edit func(r routes.Rule)
		want bool
	}{
		"a served rule":               {func(routes.Rule) {}, true},
		"nulls and empty lists":       {func(r routes.Rule) { r["filters"] = []any{}; r["timeouts"] = nil }, true},
		"an unknown rule field":       {func(r routes.Rule) { r["futureField"] = true }, false},
		"an unknown backendRef field": {func(r routes.Rule) { r["backendRefs"].([]any)[0].(map[string]any)["futureWeighting"] = "x" }, false},
		"a key spelled otherwise":     {func(r routes.Rule) { r["BackendRefs"] = r["backendRefs"]; delete(r, "backendRefs") }, false},
		"a number as a string":        {func(r routes.Rule) { r["backendRefs"].([]any)[0].(map[string]any)["weight"] = "70" }, false},
		"a fraction":                  {func(r routes.Rule) { r["backendRefs"].([]any)[0].(map[string]any)["weight"] = 0.5 }, false},
		"a list where an object is":   {func(r routes.Rule) { r["timeouts"] = []any{} }, false},
		"an object where a list is":   {func(r routes.Rule) { r["filters"] = map[string]any{} }, false},
		"a null in a list":            {func(r routes.Rule) { r["matches"] = []any{nil} }, false},
		"a port out of range":         {func(r routes.Rule) { r["backendRefs"].([]any)[0].(map[string]any)["port"] = int64(1 << 31) }, false},
	} {
		t.Run(name, func(t *testing.T) {
			rules := servedRules()
			tc.edit(rules[0])
			obj := applyObject(liveHTTPRoute, Content{Rules: rules})
			if _, got := k.encode(obj); got != tc.want {
				t.Errorf("encode took it: %v, want %v", got, tc.want)
			}
		})
	}
}

// Every kind and version has the shape of its rules.
func TestEveryApplyHasTheShapeOfItsRules(t *testing.T) {
	for kv, k := range applies {
		if rules := rulesShape(k); rules == nil || rules.kind != reflect.Struct || rules.fields["backendRefs"] == nil {
			t.Errorf("%s %s: no shape of its rules' backendRefs", kv.kind, kv.version)
		}
	}
}

// Generated rules, valid and not, for every kind and version: whatever the
// shortcut writes, the round trip accepts, and its configuration encodes to
// the same JSON.
func TestEncodeIsTheRoundTripWhereItApplies(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 42))
	for kv, k := range applies {
		fast := 0
		for range 3000 {
			rules := make([]routes.Rule, 1+rng.IntN(3))
			for i := range rules {
				for rules[i] == nil {
					rules[i], _ = generate(rng, rulesShape(k), 0).(map[string]any)
				}
			}
			if checkEncode(t, kv, k, rules, generateLabels(rng)) {
				fast++
			}
		}
		t.Logf("%s %s: the shortcut took %d of 3000 generated rule sets", kv.kind, kv.version, fast)
		if fast < 300 {
			t.Errorf("%s %s: the shortcut took only %d of 3000: the generator tests too little of it", kv.kind, kv.version, fast)
		}
	}
}

// FuzzEncode feeds any JSON as HTTPRoute rules (make fuzz).
func FuzzEncode(f *testing.F) {
	seed, _ := json.Marshal(servedRules())
	f.Add(seed)
	f.Add([]byte(`[{"backendRefs":[{"name":"stable","weight":1e3}]}]`))
	f.Add([]byte(`[{"backendRefs":[{"name":"stable","port":99999999999}]}]`))
	f.Add([]byte(`[{"matches":[{"path":{"type":"Exact","value":"/\u003c"}}],"filters":null}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var rules []routes.Rule
		if sigsjson.UnmarshalCaseSensitivePreserveInts(data, &rules) != nil {
			return
		}
		for _, r := range rules {
			if r == nil {
				return
			}
		}
		kv := kindVersion{routes.HTTPRoute, "v1"}
		checkEncode(t, kv, applies[kv], rules, map[string]string{"l": "v"})
	})
}

// checkEncode says whether the shortcut wrote the object of the rules and
// labels, and fails the test if the round trip does not agree with what it
// wrote.
func checkEncode(t *testing.T, kv kindVersion, k kindApply, rules []routes.Rule, labels map[string]string) bool {
	t.Helper()
	live := routes.Route{Ref: routes.Ref{Kind: kv.kind, Namespace: "shop", Name: "web"}, Version: kv.version, ResourceVersion: "42"}
	obj := applyObject(live, Content{Rules: rules, Labels: labels, Annotations: labels})
	body, ok := k.encode(obj)
	if !ok {
		return false
	}
	full := k.newConfig()
	if err := decodeLossless(obj, full, rulesOf); err != nil {
		data, _ := json.Marshal(rules)
		t.Fatalf("%s %s: the shortcut wrote rules the round trip refuses (%v):\n%s", kv.kind, kv.version, err, data)
	}
	typed, err := json.Marshal(full)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(plainJSONOf(t, typed), plainJSONOf(t, body)); diff != "" {
		t.Fatalf("%s %s: the shortcut wrote other JSON than the typed configuration's (-typed +shortcut):\n%s", kv.kind, kv.version, diff)
	}
	return true
}

// plainJSONOf is data decoded into plain JSON values, numbers as written.
func plainJSONOf(t *testing.T, data []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("not JSON (%v): %s", err, data)
	}
	return v
}

// generateLabels makes the plugin's labels (and annotations): none, an
// empty map, or a few, with characters that need escaping.
func generateLabels(rng *rand.Rand) map[string]string {
	switch rng.IntN(3) {
	case 0:
		return nil
	case 1:
		return map[string]string{}
	}
	return map[string]string{"l": "v", "a/b": `{"x":"<&>"}`, "ü": ""}
}

// generate makes a JSON value of shape s, now and then one it does not have:
// an unknown or misspelt key, another type, a fraction, a number out of
// range, a null, an empty list.
func generate(rng *rand.Rand, s *shape, depth int) any {
	if rng.IntN(40) == 0 {
		return oddValue(rng)
	}
	if s.opaque {
		return "opaque"
	}
	switch s.kind {
	case reflect.Struct:
		m := map[string]any{}
		names := slices.Sorted(func(yield func(string) bool) {
			for n := range s.fields {
				if !yield(n) {
					return
				}
			}
		})
		for _, n := range names {
			if rng.IntN(3) == 0 || depth > 6 {
				continue
			}
			m[n] = generate(rng, s.fields[n], depth+1)
		}
		switch rng.IntN(60) {
		case 0:
			m["futureField"] = "x"
		case 1:
			if len(names) > 0 {
				n := names[rng.IntN(len(names))]
				m[strings.ToUpper(n[:1])+n[1:]] = "x"
			}
		}
		return m
	case reflect.Map:
		m := map[string]any{}
		for i := range rng.IntN(3) {
			m[fmt.Sprintf("k%d", i)] = generate(rng, s.elem, depth+1)
		}
		return m
	case reflect.Slice:
		var l []any
		for range rng.IntN(3) {
			l = append(l, generate(rng, s.elem, depth+1))
		}
		if l == nil {
			return []any{}
		}
		return l
	case reflect.String:
		return []string{"", "x", "/api", "<&>", "ü", `"q"`, "10s"}[rng.IntN(7)]
	case reflect.Bool:
		return rng.IntN(2) == 0
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return []int64{0, 1, 80, 1_000_000, -1, 1 << 40}[rng.IntN(6)]
	}
	return nil
}

func oddValue(rng *rand.Rand) any {
	return []any{nil, []any{}, map[string]any{}, "s", int64(7), 0.5, 3.0, true, []any{"x"}}[rng.IntN(9)]
}

// rulesShape is the shape of one entry of spec.rules in k's configuration.
func rulesShape(k kindApply) *shape {
	spec := k.object.fields["spec"]
	if spec == nil || spec.fields["rules"] == nil {
		return nil
	}
	return spec.fields["rules"].elem
}

// A field that does not leave itself out when empty (not a pointer, or a
// list or map without omitempty) comes back from the round trip with what
// the JSON did not have: no apply configuration has one today, and encode
// leaves an object with one to the round trip.
func TestAFieldThatIsNotLeftOutMakesTheRoundTripDecide(t *testing.T) {
	type withValue struct {
		Name *string `json:"name,omitempty"`
		Port int32   `json:"port,omitempty"`
	}
	type withList struct {
		Names []string `json:"names"`
	}
	type withPointerToList struct {
		Names *[]string `json:"names,omitempty"`
	}
	for name, tc := range map[string]struct {
		s   *shape
		obj map[string]any
	}{
		"a value field":            {shapeOf(reflect.TypeFor[withValue]()), map[string]any{"port": int64(0)}},         // comes back without port
		"a list without omitempty": {shapeOf(reflect.TypeFor[withList]()), map[string]any{}},                          // comes back with names: null
		"a pointer to a list":      {shapeOf(reflect.TypeFor[withPointerToList]()), map[string]any{"names": []any{}}}, // comes back with names: []
	} {
		if got, ok := tc.s.encode(nil, tc.obj); ok {
			t.Errorf("%s: encode wrote %s, which the round trip gives back otherwise", name, got)
		}
	}
	type allLeftOut struct {
		Name  *string           `json:"name,omitempty"`
		Names []string          `json:"names,omitempty"`
		Tags  map[string]string `json:"tags,omitempty"`
	}
	if got, ok := shapeOf(reflect.TypeFor[allLeftOut]()).encode(nil, map[string]any{"names": []any{}, "tags": nil}); !ok || string(got) != "{}" {
		t.Errorf("encode = %s, %v; want {}, true", got, ok)
	}
}
