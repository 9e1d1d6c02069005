package ssa

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	sigsjson "sigs.k8s.io/json"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// The cheap check is a shortcut, taken only where it is proven: whatever
// rules fillFast accepts, the full round trip (decodeLossless) finds
// lossless too, and both give the same typed configuration, so the write is
// byte for byte what it was before the shortcut.

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
	} {
		t.Run(name, func(t *testing.T) {
			rules := servedRules()
			tc.edit(rules[0])
			if got := carriesRules(k.rules, rules); got != tc.want {
				t.Errorf("carries = %v, want %v", got, tc.want)
			}
		})
	}
}

// Every kind and version has the shape of its rules.
func TestEveryApplyHasTheShapeOfItsRules(t *testing.T) {
	for kv, k := range applies {
		if k.rules == nil || k.rules.kind != reflect.Struct || k.rules.fields["backendRefs"] == nil {
			t.Errorf("%s %s: no shape of its rules' backendRefs", kv.kind, kv.version)
		}
	}
}

// Generated rules, valid and not, for every kind and version: whatever the
// shortcut accepts, the round trip accepts, with the same configuration.
func TestFillFastIsTheRoundTripWhereItApplies(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 42))
	for kv, k := range applies {
		fast := 0
		for range 3000 {
			rules := make([]routes.Rule, 1+rng.IntN(3))
			for i := range rules {
				for rules[i] == nil {
					rules[i], _ = generate(rng, k.rules, 0).(map[string]any)
				}
			}
			if checkFillFast(t, kv, k, rules) {
				fast++
			}
		}
		t.Logf("%s %s: the shortcut took %d of 3000 generated rule sets", kv.kind, kv.version, fast)
		if fast < 300 {
			t.Errorf("%s %s: the shortcut took only %d of 3000: the generator tests too little of it", kv.kind, kv.version, fast)
		}
	}
}

// FuzzFillFast feeds any JSON as HTTPRoute rules (make fuzz).
func FuzzFillFast(f *testing.F) {
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
		checkFillFast(t, kv, applies[kv], rules)
	})
}

// checkFillFast says whether the shortcut took the rules, and fails the test
// if the round trip does not agree with what it made.
func checkFillFast(t *testing.T, kv kindVersion, k kindApply, rules []routes.Rule) bool {
	t.Helper()
	live := routes.Route{Ref: routes.Ref{Kind: kv.kind, Namespace: "shop", Name: "web"}, Version: kv.version, ResourceVersion: "42"}
	obj := applyObject(live, desired.Result{Rules: rules, Labels: map[string]string{"l": "v"}})
	ac, ok := k.fillFast(obj, rules)
	if !ok {
		return false
	}
	full := k.newConfig()
	if err := decodeLossless(obj, full, rulesOf); err != nil {
		data, _ := json.Marshal(rules)
		t.Fatalf("%s %s: the shortcut took rules the round trip refuses (%v):\n%s", kv.kind, kv.version, err, data)
	}
	if diff := cmp.Diff(full, ac); diff != "" {
		t.Fatalf("%s %s: the shortcut made another configuration (-round trip +shortcut):\n%s", kv.kind, kv.version, diff)
	}
	return true
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
