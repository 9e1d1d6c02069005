package transform

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"k8s.io/apimachinery/pkg/runtime"
)

// Confinement: a rule the plugin adds for a Rollout matches only requests
// that the Rollout's own rule (the weighted rule it comes from) matches, so
// that on a route several tenants share, one Rollout's step never takes
// another's requests. Header and sticky rules copy their source rule's
// matches and add a header to each, so they are confined as built. A mirror
// rule's matches come from the step: each is intersected with each match of
// the source rule, and a step match that no request of the source rule can
// meet is refused, as is one whose intersection the plugin cannot tell (a
// regular expression against anything but itself or a catch-all).

// confine returns the step's matches (in the route kind's form) intersected
// with the matches of source, weighted rule i of the route: for each step
// match, its intersection with each source match that some request meets,
// duplicates dropped.
func confine(r routes.Route, source routes.Rule, i int, step []any) ([]any, error) {
	sources := sourceMatches(r.Kind, source)
	var out []any
	for j, m := range step {
		sm, _ := m.(map[string]any)
		var hints []string
		found := false
		for _, s := range sources {
			got, p := intersect(r.Kind, sm, s)
			if p != nil && p.undecided {
				return nil, fmt.Errorf("match %d (%s): the plugin cannot tell which requests both it and the Rollout's rule %d of %s (%s) match, %s; so it cannot keep the rule to the Rollout's own requests: %s",
					j, describeMatch(r.Kind, sm), i, r.Ref, describeMatches(r.Kind, sources), p.what, p.hint)
			}
			if p != nil {
				hints = appendNew(hints, p.hint)
				continue
			}
			found = true
			if !containsMatch(out, got) {
				out = append(out, got)
			}
		}
		if !found {
			return nil, fmt.Errorf("match %d (%s) matches no request that the Rollout's rule %d of %s matches (%s), so it would take other rules' traffic; %s",
				j, describeMatch(r.Kind, sm), i, r.Ref, describeMatches(r.Kind, sources), strings.Join(hints, "; or "))
		}
	}
	return out, nil
}

// sourceMatches are a rule's matches as the requests they take: no matches
// is the one match of every request (on an HTTPRoute, PathPrefix /).
func sourceMatches(kind routes.Kind, rule routes.Rule) []map[string]any {
	raw, _ := rule["matches"].([]any)
	if len(raw) == 0 {
		raw = []any{map[string]any{}}
	}
	out := make([]map[string]any, 0, len(raw))
	for _, m := range raw {
		mm, _ := m.(map[string]any)
		if mm == nil {
			mm = map[string]any{}
		}
		out = append(out, mm)
	}
	return out
}

// noIntersection says why no match is the intersection of two: no request
// meets both (undecided false), or the plugin cannot tell which do
// (undecided true); hint says what the step could match instead.
type noIntersection struct {
	undecided bool
	what      string
	hint      string
}

// intersect is the match that takes exactly the requests both step and
// source take: the source match (every field of it, those this build does
// not know included) with the path, method and headers of both combined.
func intersect(kind routes.Kind, step, source map[string]any) (map[string]any, *noIntersection) {
	out, _ := runtime.DeepCopyJSONValue(source).(map[string]any)
	var p *noIntersection
	if kind == routes.GRPCRoute {
		p = intersectField(out, "method", step, source, intersectGRPCMethod)
	} else {
		p = intersectField(out, "path", step, source, intersectPath)
		if p == nil {
			p = intersectField(out, "method", step, source, intersectHTTPMethod)
		}
	}
	if p != nil {
		return nil, p
	}
	headers, p := intersectHeaders(step["headers"], source["headers"])
	if p != nil {
		return nil, p
	}
	if len(headers) > 0 {
		out["headers"] = headers
	}
	return out, nil
}

// intersectField sets out[key] to the intersection of step's and source's
// values of key, by combine; absent on one side means any value.
func intersectField(out map[string]any, key string, step, source map[string]any, combine func(a, b any) (any, *noIntersection)) *noIntersection {
	a, b := step[key], source[key]
	if a == nil {
		return nil // the source's, copied
	}
	if b == nil {
		out[key] = runtime.DeepCopyJSONValue(a)
		return nil
	}
	v, p := combine(a, b)
	if p == nil {
		out[key] = v
	}
	return p
}

// intersectPath combines two HTTPRoute path matches (Gateway API's
// semantics: PathPrefix matches whole path elements, a trailing / ignored).
func intersectPath(a, b any) (any, *noIntersection) {
	typA, valA := pathOf(a)
	typB, valB := pathOf(b)
	switch {
	case typB == "PathPrefix" && strings.TrimSuffix(valB, "/") == "":
		return a, nil // the source takes every path
	case typA == "PathPrefix" && strings.TrimSuffix(valA, "/") == "":
		return b, nil
	case typA == typB && valA == valB:
		return b, nil
	case typA == "RegularExpression" || typB == "RegularExpression":
		return nil, &noIntersection{undecided: true,
			what: fmt.Sprintf("path %s %s and path %s %s (a regular expression is compared only with itself or with PathPrefix /)", typA, valA, typB, valB),
			hint: pathHint(typB, valB)}
	case typA == "Exact" && typB == "PathPrefix" && underPrefix(valA, valB),
		typA == "PathPrefix" && typB == "PathPrefix" && underPrefix(strings.TrimSuffix(valA, "/"), valB) && !underPrefix(strings.TrimSuffix(valB, "/"), valA):
		return a, nil
	case typA == "PathPrefix" && typB == "Exact" && underPrefix(valB, valA),
		typA == "PathPrefix" && typB == "PathPrefix" && underPrefix(strings.TrimSuffix(valB, "/"), valA):
		return b, nil
	}
	return nil, &noIntersection{hint: pathHint(typB, valB)}
}

// pathOf is an HTTPRoute path match's type and value, the CRD's defaults
// (PathPrefix, /) where one is missing.
func pathOf(v any) (string, string) {
	m, _ := v.(map[string]any)
	typ, _ := m["type"].(string)
	value, _ := m["value"].(string)
	if typ == "" {
		typ = "PathPrefix"
	}
	if value == "" {
		value = "/"
	}
	return typ, value
}

// underPrefix says whether path p is matched by PathPrefix prefix: equal to
// it or below it by whole elements, a trailing / of prefix ignored.
func underPrefix(p, prefix string) bool {
	prefix = strings.TrimSuffix(prefix, "/")
	return prefix == "" || p == prefix || strings.HasPrefix(p, prefix+"/")
}

// pathHint is what a step's path could be to stay within the source's.
func pathHint(typ, value string) string {
	switch typ {
	case "PathPrefix":
		return fmt.Sprintf("match a path within %s (path prefix %s or below it, or exact)", value, value)
	case "Exact":
		return fmt.Sprintf("match path exact %s, or give no path", value)
	}
	return "give no path, so that the rule takes the Rollout's rule's own path match"
}

// intersectHTTPMethod combines two HTTPRoute methods: they must be equal.
func intersectHTTPMethod(a, b any) (any, *noIntersection) {
	if reflect.DeepEqual(a, b) {
		return b, nil
	}
	return nil, &noIntersection{hint: fmt.Sprintf("match method %v, or give no method", b)}
}

// intersectGRPCMethod combines two GRPCRoute method matches: Exact ones
// field by field (a missing service or method matches any); a regular
// expression only with itself.
func intersectGRPCMethod(a, b any) (any, *noIntersection) {
	ma, _ := a.(map[string]any)
	mb, _ := b.(map[string]any)
	typA, typB := typeOf(ma), typeOf(mb)
	if typA == typB && reflect.DeepEqual(ma["service"], mb["service"]) && reflect.DeepEqual(ma["method"], mb["method"]) {
		return runtime.DeepCopyJSONValue(b), nil
	}
	hint := grpcHint(mb)
	if typA != "Exact" || typB != "Exact" {
		return nil, &noIntersection{undecided: true,
			what: fmt.Sprintf("method %s and method %s (a regular expression is compared only with itself)", describeGRPCMethod(ma), describeGRPCMethod(mb)),
			hint: "give no path, so that the rule takes the Rollout's rule's own method match"}
	}
	out := map[string]any{"type": "Exact"}
	for _, k := range []string{"service", "method"} {
		x, _ := ma[k].(string)
		y, _ := mb[k].(string)
		switch {
		case x != "" && y != "" && x != y:
			return nil, &noIntersection{hint: hint}
		case x != "":
			out[k] = x
		case y != "":
			out[k] = y
		}
	}
	return out, nil
}

func grpcHint(source map[string]any) string {
	service, _ := source["service"].(string)
	method, _ := source["method"].(string)
	switch {
	case service != "" && method != "":
		return fmt.Sprintf("match path exact /%s/%s, or give no path", service, method)
	case service != "":
		return fmt.Sprintf("match a method of service %s (path prefix /%s/ or exact /%s/<method>), or give no path", service, service, service)
	}
	return fmt.Sprintf("match path exact /<service>/%s, or give no path", method)
}

// typeOf is a match's type, the CRD's default Exact where it is missing.
func typeOf(m map[string]any) string {
	if t, _ := m["type"].(string); t != "" {
		return t
	}
	return "Exact"
}

// intersectHeaders is the union of two header match lists, the source's
// first: a request must carry both. A header both match (names compared
// without case) must be matched alike on both sides; two exact values that
// differ meet no request, anything else the plugin cannot compare.
func intersectHeaders(step, source any) ([]any, *noIntersection) {
	have, _ := source.([]any)
	out := make([]any, 0, len(have))
	for _, h := range have {
		out = append(out, runtime.DeepCopyJSONValue(h))
	}
	add, _ := step.([]any)
	for _, h := range add {
		hm, _ := h.(map[string]any)
		name, _ := hm["name"].(string)
		k := -1
		for i, e := range have {
			if en, _ := e.(map[string]any)["name"].(string); strings.EqualFold(en, name) {
				k = i
				break
			}
		}
		if k < 0 {
			out = append(out, runtime.DeepCopyJSONValue(h))
			continue
		}
		em, _ := have[k].(map[string]any)
		switch {
		case typeOf(hm) == typeOf(em) && reflect.DeepEqual(hm["value"], em["value"]):
		case typeOf(hm) == "Exact" && typeOf(em) == "Exact":
			return nil, &noIntersection{hint: headerHint(em)}
		default:
			return nil, &noIntersection{undecided: true,
				what: fmt.Sprintf("header %s %s %v and header %s %s %v", name, typeOf(hm), hm["value"], em["name"], typeOf(em), em["value"]),
				hint: headerHint(em)}
		}
	}
	return out, nil
}

func headerHint(source map[string]any) string {
	return fmt.Sprintf("match header %v as the Rollout's rule does (%s %v), or leave it out", source["name"], typeOf(source), source["value"])
}

// describeMatches shows a rule's matches for an error: each as
// describeMatch does, joined by "or".
func describeMatches(kind routes.Kind, ms []map[string]any) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = describeMatch(kind, m)
	}
	return strings.Join(parts, " or ")
}

// describeMatch shows one match for an error, in Gateway API's terms:
// "path PathPrefix /a, method GET, header X-Tenant Exact a".
func describeMatch(kind routes.Kind, m map[string]any) string {
	var parts []string
	if kind == routes.GRPCRoute {
		if mm, ok := m["method"].(map[string]any); ok {
			parts = append(parts, "method "+describeGRPCMethod(mm))
		}
	} else {
		if p, ok := m["path"]; ok {
			typ, v := pathOf(p)
			parts = append(parts, fmt.Sprintf("path %s %s", typ, v))
		}
		if method, ok := m["method"].(string); ok {
			parts = append(parts, "method "+method)
		}
	}
	for _, list := range []struct{ key, what string }{{"headers", "header"}, {"queryParams", "query param"}} {
		items, _ := m[list.key].([]any)
		for _, h := range items {
			hm, _ := h.(map[string]any)
			parts = append(parts, fmt.Sprintf("%s %v %s %v", list.what, hm["name"], typeOf(hm), hm["value"]))
		}
	}
	if len(parts) == 0 {
		return "every request"
	}
	return strings.Join(parts, ", ")
}

// describeGRPCMethod shows a GRPCRoute method match: "Exact shop.Cart/Add",
// "Exact shop.Cart/*", "RegularExpression shop\..*/Get".
func describeGRPCMethod(m map[string]any) string {
	service, _ := m["service"].(string)
	method, _ := m["method"].(string)
	if service == "" {
		service = "*"
	}
	if method == "" {
		method = "*"
	}
	return fmt.Sprintf("%s %s/%s", typeOf(m), service, method)
}

func containsMatch(ms []any, m map[string]any) bool {
	for _, x := range ms {
		if reflect.DeepEqual(x, m) {
			return true
		}
	}
	return false
}

func appendNew(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}
