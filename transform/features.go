package transform

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// Need is a Gateway API feature (a name of status.supportedFeatures, as
// Gateway API's conformance defines it) that a rule needs of the gateway
// carrying it, and the part of the rule that needs it.
type Need struct {
	Feature string
	// Why names the part of the rule, e.g. "a RequestMirror filter".
	Why string
}

func (n Need) String() string { return fmt.Sprintf("%s (%s)", n.Feature, n.Why) }

// CheckedFeatures are the features Needs names, sorted.
var CheckedFeatures = []string{
	"HTTPRoute303RedirectStatusCode", "HTTPRoute307RedirectStatusCode", "HTTPRoute308RedirectStatusCode",
	"HTTPRouteBackendRequestHeaderModification", "HTTPRouteBackendTimeout", "HTTPRouteCORS", "HTTPRouteHostRewrite",
	"HTTPRouteMethodMatching", "HTTPRoutePathRedirect", "HTTPRoutePathRewrite", "HTTPRoutePortRedirect",
	"HTTPRouteQueryParamMatching", "HTTPRouteRequestMirror", "HTTPRouteRequestMultipleMirrors",
	"HTTPRouteRequestPercentageMirror", "HTTPRouteRequestTimeout", "HTTPRouteResponseHeaderModification",
	"HTTPRouteRetry", "HTTPRouteSchemeRedirect",
}

// Needs says which features beyond HTTPRoute's core a rule of an HTTPRoute
// needs: extended filters (RequestMirror, a mirror percentage, response
// header modification, rewrites, redirects with a port, scheme, path or
// status code, CORS), filters on backendRefs, method and query parameter
// matches, timeouts and retries. ExtensionRef filters are the
// implementation's own and need none. Other kinds have no feature names
// for the parts of their rules, so they need none here. Sorted by feature,
// each feature once.
func Needs(kind routes.Kind, rule routes.Rule) []Need {
	if kind != routes.HTTPRoute {
		return nil
	}
	var out needSet
	ruleFilterNeeds(rule, out.add)
	backendRefFilterNeeds(rule, out.add)
	matches, _ := rule["matches"].([]any)
	for _, mt := range matches {
		m, _ := mt.(map[string]any)
		if _, ok := m["method"]; ok {
			out.add("HTTPRouteMethodMatching", "a method match")
		}
		if q, _ := m["queryParams"].([]any); len(q) > 0 {
			out.add("HTTPRouteQueryParamMatching", "a query parameter match")
		}
	}
	timeouts, _ := rule["timeouts"].(map[string]any)
	if _, ok := timeouts["request"]; ok {
		out.add("HTTPRouteRequestTimeout", "timeouts.request")
	}
	if _, ok := timeouts["backendRequest"]; ok {
		out.add("HTTPRouteBackendTimeout", "timeouts.backendRequest")
	}
	if _, ok := rule["retry"]; ok {
		out.add("HTTPRouteRetry", "retry")
	}
	slices.SortFunc(out, func(a, b Need) int { return cmp.Compare(a.Feature, b.Feature) })
	return out
}

// needSet is what a rule needs, each feature once, with the first part of
// the rule found to need it.
type needSet []Need

// add adds the feature, unless the set has it already.
func (s *needSet) add(feature, why string) {
	if !slices.ContainsFunc(*s, func(n Need) bool { return n.Feature == feature }) {
		*s = append(*s, Need{Feature: feature, Why: why})
	}
}

// ruleFilterNeeds adds what the rule's own filters need: each filter's
// features, and multiple mirrors when it has more than one RequestMirror.
func ruleFilterNeeds(rule routes.Rule, add func(feature, why string)) {
	filters, _ := rule["filters"].([]any)
	mirrors := 0
	for _, f := range filters {
		if m, ok := f.(map[string]any); ok {
			filterNeeds(m, "", add)
			if m["type"] == "RequestMirror" {
				mirrors++
			}
		}
	}
	if mirrors > 1 {
		add("HTTPRouteRequestMultipleMirrors", fmt.Sprintf("%d RequestMirror filters", mirrors))
	}
}

// backendRefFilterNeeds adds what the filters on the rule's backendRefs
// need: header modification on a backendRef for a RequestHeaderModifier or
// a ResponseHeaderModifier, and what each filter but a
// RequestHeaderModifier needs anywhere.
func backendRefFilterNeeds(rule routes.Rule, add func(feature, why string)) {
	refs, _ := rule["backendRefs"].([]any)
	for _, r := range refs {
		ref, _ := r.(map[string]any)
		fs, _ := ref["filters"].([]any)
		for _, f := range fs {
			m, ok := f.(map[string]any)
			if !ok {
				continue
			}
			switch m["type"] {
			case "RequestHeaderModifier":
				add("HTTPRouteBackendRequestHeaderModification", "a RequestHeaderModifier filter on a backendRef")
				continue
			case "ResponseHeaderModifier":
				// Gateway API names no feature for response headers set per
				// backendRef: the filter needs both the response side and
				// filters on backendRefs (stickyCanary's Set-Cookie).
				add("HTTPRouteBackendRequestHeaderModification", "a ResponseHeaderModifier filter on a backendRef")
			}
			filterNeeds(m, " on a backendRef", add)
		}
	}
}

// partialMirror says whether a requestMirror mirrors only part of the
// requests: a percent or fraction below the whole (100 %, which a gateway
// without percentages does anyway, needs nothing).
func partialMirror(m map[string]any) bool {
	if p, ok := m["percent"]; ok && fmt.Sprint(p) != "100" {
		return true
	}
	f, ok := m["fraction"].(map[string]any)
	if !ok {
		return false
	}
	den, hasDen := f["denominator"]
	if !hasDen {
		den = 100
	}
	return fmt.Sprint(f["numerator"]) != fmt.Sprint(den)
}

// filterNeeds adds what one filter of an HTTPRoute needs; where says where
// it is, for Why.
func filterNeeds(f map[string]any, where string, add func(feature, why string)) {
	typ, _ := f["type"].(string)
	why := "a " + typ + " filter" + where
	switch typ {
	case "RequestMirror":
		add("HTTPRouteRequestMirror", why)
		m, _ := f["requestMirror"].(map[string]any)
		if partialMirror(m) {
			add("HTTPRouteRequestPercentageMirror", why+" with a percentage")
		}
	case "ResponseHeaderModifier":
		add("HTTPRouteResponseHeaderModification", why)
	case "CORS":
		add("HTTPRouteCORS", why)
	case "URLRewrite":
		m, _ := f["urlRewrite"].(map[string]any)
		if _, ok := m["hostname"]; ok {
			add("HTTPRouteHostRewrite", why+" of the hostname")
		}
		if _, ok := m["path"]; ok {
			add("HTTPRoutePathRewrite", why+" of the path")
		}
	case "RequestRedirect":
		m, _ := f["requestRedirect"].(map[string]any)
		if _, ok := m["port"]; ok {
			add("HTTPRoutePortRedirect", why+" with a port")
		}
		if _, ok := m["scheme"]; ok {
			add("HTTPRouteSchemeRedirect", why+" with a scheme")
		}
		if _, ok := m["path"]; ok {
			add("HTTPRoutePathRedirect", why+" with a path")
		}
		switch code := fmt.Sprint(m["statusCode"]); code {
		case "303", "307", "308":
			add("HTTPRoute"+code+"RedirectStatusCode", why+" with status code "+code)
		}
	}
}
