package transform

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// The checks of the matches of setHeaderRoute and setMirrorRoute steps, and
// their Gateway API form: values Gateway API validates only loosely (RE2
// regular expressions, header names, paths, gRPC names) are checked before
// anything is written.

// token is an RFC 7230 token: Gateway API's HTTPHeaderName, and an RFC 6265
// cookie-name.
var token = regexp.MustCompile(`^[A-Za-z0-9!#$%&'*+\-.^_` + "`" + `|~]+$`)

// IsToken says s is an RFC 7230 token (a header name, a cookie name).
func IsToken(s string) bool { return token.MatchString(s) }

// headerMatches turns a setHeaderRoute step's matches into Gateway API header
// matches (the same for HTTPRoute and GRPCRoute): exact stays Exact; prefix
// becomes a RegularExpression of the escaped prefix, anchored at the start
// and followed by ".*" so that it means the same in dialects that match the
// whole value (RE2 in Envoy) and in those that search; regex is passed as a
// RegularExpression.
func headerMatches(match []HeaderMatch) ([]map[string]any, error) {
	out := make([]map[string]any, 0, len(match))
	seen := map[string]bool{}
	for i, m := range match {
		h, err := headerMatch(m.Name, m.Value)
		if err != nil {
			return nil, fmt.Errorf("match %d: %w", i, err)
		}
		if seen[strings.ToLower(m.Name)] {
			return nil, fmt.Errorf("match %d: header %s is matched twice", i, m.Name)
		}
		seen[strings.ToLower(m.Name)] = true
		out = append(out, h)
	}
	return out, nil
}

func headerMatch(name string, value *StringMatch) (map[string]any, error) {
	if len(name) > 256 || !token.MatchString(name) {
		return nil, fmt.Errorf("%q is not an HTTP header name", name)
	}
	if value == nil {
		return nil, fmt.Errorf("header %s has no value to match (give exact, prefix or regex)", name)
	}
	typ, v, err := stringMatch(*value, "header "+name)
	if err != nil {
		return nil, err
	}
	if err := checkHeaderValue(name, typ, v); err != nil {
		return nil, err
	}
	return map[string]any{"name": name, "type": typ, "value": v}, nil
}

// Gateway API's length limits on match values (CRD maxLength).
const (
	maxHeaderValue = 4096
	maxPathValue   = 1024
)

// checkHeaderValue refuses a header match value that the CRD takes but no
// request can match: too long, or an exact value with a control character or
// with white space at either end, which HTTP strips from header values.
func checkHeaderValue(name, typ, v string) error {
	if len(v) > maxHeaderValue {
		return fmt.Errorf("header %s: the value to match is %d bytes (a prefix counts as the regular expression it becomes); Gateway API allows %d", name, len(v), maxHeaderValue)
	}
	if typ != "Exact" {
		return nil
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return fmt.Errorf("header %s: exact value %q holds a control character (byte %d), which an HTTP header value cannot carry; the rule would never match", name, v, i)
		}
	}
	if strings.Trim(v, " \t") != v {
		return fmt.Errorf("header %s: exact value %q starts or ends with white space, which HTTP strips from header values; the rule would never match: remove it", name, v)
	}
	return nil
}

// checkRE2 refuses a regular expression that is not RE2, the syntax of the
// gateways that take Gateway API regular expressions (Envoy-based ones and
// Go-based ones): they would refuse the route or match something else.
func checkRE2(what, expr string) error {
	if _, err := regexp.Compile(expr); err != nil {
		return fmt.Errorf("%s: regex %q is not a valid RE2 regular expression (%v): Envoy- and Go-based gateways would refuse or misread it; fix the expression", what, expr, err)
	}
	return nil
}

// CheckHeaderMatches checks a setHeaderRoute step's matches on their own,
// before any route is read: what every route's transform would refuse.
func CheckHeaderMatches(match []HeaderMatch) error {
	_, err := headerMatches(match)
	return err
}

// CheckRequestMatches checks what a setMirrorRoute step's matches hold
// independently of the route's kind: each string match well formed (regular
// expressions RE2) and each header match valid. The kind's own rules (HTTP
// paths and methods, gRPC services) are checked per route.
func CheckRequestMatches(match []RequestMatch) error {
	for i, m := range match {
		for what, s := range map[string]*StringMatch{"method": m.Method, "path": m.Path} {
			if s == nil {
				continue
			}
			if _, _, err := stringMatch(*s, what); err != nil {
				return fmt.Errorf("match %d: %w", i, err)
			}
		}
		for _, name := range slices.Sorted(maps.Keys(m.Headers)) {
			value := m.Headers[name]
			if _, err := headerMatch(name, &value); err != nil {
				return fmt.Errorf("match %d: %w", i, err)
			}
		}
	}
	return nil
}

// stringMatch maps a step's StringMatch to a Gateway API match type
// ("Exact" or "RegularExpression") and value.
func stringMatch(s StringMatch, what string) (string, string, error) {
	set := 0
	for _, v := range []string{s.Exact, s.Prefix, s.Regex} {
		if v != "" {
			set++
		}
	}
	if set != 1 {
		return "", "", fmt.Errorf("%s must give exactly one of exact, prefix and regex", what)
	}
	switch {
	case s.Exact != "":
		return "Exact", s.Exact, nil
	case s.Prefix != "":
		return "RegularExpression", "^" + regexp.QuoteMeta(s.Prefix) + ".*", nil
	}
	if err := checkRE2(what, s.Regex); err != nil {
		return "", "", err
	}
	return "RegularExpression", s.Regex, nil
}

// pathChars are the characters Gateway API allows in an Exact or PathPrefix
// path (its CRD's CEL rule): a URL path, percent-encoded.
var pathChars = regexp.MustCompile(`^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$`)

// checkPath refuses an HTTPRoute path match the apiserver or the gateway
// would refuse, with the reason Gateway API gives.
func checkPath(typ, v string) error {
	if len(v) > maxPathValue {
		return fmt.Errorf("path is %d bytes; Gateway API allows %d", len(v), maxPathValue)
	}
	if typ == "RegularExpression" {
		return nil // checked as RE2 by stringMatch
	}
	if !strings.HasPrefix(v, "/") {
		return fmt.Errorf("path %q must start with /", v)
	}
	for _, bad := range []string{"//", "/./", "/../", "%2f", "%2F", "#"} {
		if strings.Contains(v, bad) {
			return fmt.Errorf("path %q must not contain %q (Gateway API refuses it)", v, bad)
		}
	}
	if strings.HasSuffix(v, "/..") || strings.HasSuffix(v, "/.") {
		return fmt.Errorf("path %q must not end with /. or /.. (Gateway API refuses it)", v)
	}
	if !pathChars.MatchString(v) {
		return fmt.Errorf("path %q holds characters a URL path cannot; percent-encode them", v)
	}
	return nil
}

// httpMethods are the methods an HTTPRoute match can name.
var httpMethods = []string{"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}

// mirrorMatches turns a setMirrorRoute step's matches into the route kind's
// matches, every server default written out so that the applied rule equals
// the stored one.
//
// HTTPRoute: path exact → Exact, prefix → PathPrefix (Gateway API matches
// whole path elements: /api matches /api/v1, not /apiv1), regex →
// RegularExpression; no path → PathPrefix "/"; method exact only.
// GRPCRoute: path exact "/<service>/<method>" → that method, prefix
// "/<service>/" → every method of the service; HTTP methods do not apply.
func mirrorMatches(kind routes.Kind, match []RequestMatch) ([]any, error) {
	out := make([]any, 0, len(match))
	for i, m := range match {
		mm, err := mirrorMatch(kind, m)
		if err != nil {
			return nil, fmt.Errorf("match %d: %w", i, err)
		}
		out = append(out, mm)
	}
	return out, nil
}

// mirrorMatch is one match of a setMirrorRoute step as the route kind's
// match: its path (and method) as mirrorMatches says, and its headers.
func mirrorMatch(kind routes.Kind, m RequestMatch) (map[string]any, error) {
	mm := map[string]any{}
	var err error
	if kind == routes.GRPCRoute {
		err = grpcMirrorMatch(mm, m)
	} else {
		err = httpMirrorMatch(mm, m)
	}
	if err != nil {
		return nil, err
	}
	if len(m.Headers) > 0 {
		var headers []any
		for _, name := range slices.Sorted(maps.Keys(m.Headers)) {
			value := m.Headers[name]
			h, err := headerMatch(name, &value)
			if err != nil {
				return nil, err
			}
			headers = append(headers, h)
		}
		mm["headers"] = headers
	}
	return mm, nil
}

// grpcMirrorMatch sets the GRPCRoute match mm to the step's path, a gRPC
// service or method; an HTTP method does not apply.
func grpcMirrorMatch(mm map[string]any, m RequestMatch) error {
	if m.Method != nil {
		return errors.New("a GRPCRoute matches gRPC services and methods, not HTTP methods; use path /<service>/<method>")
	}
	if m.Path != nil {
		method, err := grpcMethodMatch(*m.Path)
		if err != nil {
			return err
		}
		mm["method"] = method
	}
	return nil
}

// httpMirrorMatch sets the HTTPRoute match mm to the step's path (prefix
// "/" without one) and its method, which must be exact.
func httpMirrorMatch(mm map[string]any, m RequestMatch) error {
	path := map[string]any{"type": "PathPrefix", "value": "/"}
	if m.Path != nil {
		typ, v, err := stringMatch(*m.Path, "path")
		if err != nil {
			return err
		}
		if m.Path.Prefix != "" {
			typ, v = "PathPrefix", m.Path.Prefix
		}
		if err := checkPath(typ, v); err != nil {
			return err
		}
		path = map[string]any{"type": typ, "value": v}
	}
	mm["path"] = path
	if m.Method != nil {
		if m.Method.Exact == "" || m.Method.Prefix != "" || m.Method.Regex != "" {
			return errors.New("an HTTPRoute matches a method exactly; give method exact")
		}
		if !slices.Contains(httpMethods, m.Method.Exact) {
			return fmt.Errorf("method %q is not one of %s", m.Method.Exact, strings.Join(httpMethods, ", "))
		}
		mm["method"] = m.Method.Exact
	}
	return nil
}

// grpcService and grpcMethod are what Gateway API allows in an Exact
// GRPCMethodMatch (its CRD's CEL rules).
var (
	grpcService = regexp.MustCompile(`^(?i)\.?[a-z_][a-z_0-9]*(\.[a-z_][a-z_0-9]*)*$`)
	grpcMethod  = regexp.MustCompile(`^[A-Za-z_][A-Za-z_0-9]*$`)
)

func grpcMethodMatch(path StringMatch) (map[string]any, error) {
	switch {
	case path.Exact != "" && path.Prefix == "" && path.Regex == "":
		service, method, ok := strings.Cut(strings.TrimPrefix(path.Exact, "/"), "/")
		if ok && strings.HasPrefix(path.Exact, "/") && service != "" && method != "" && !strings.Contains(method, "/") {
			return map[string]any{"type": "Exact", "service": service, "method": method}, checkGRPC(service, method)
		}
	case path.Prefix != "" && path.Exact == "" && path.Regex == "":
		service, rest, ok := strings.Cut(strings.TrimPrefix(path.Prefix, "/"), "/")
		if ok && strings.HasPrefix(path.Prefix, "/") && service != "" && rest == "" {
			return map[string]any{"type": "Exact", "service": service}, checkGRPC(service, "")
		}
	}
	return nil, fmt.Errorf("a GRPCRoute path match must be exact /<service>/<method> or prefix /<service>/, not %s", path)
}

func checkGRPC(service, method string) error {
	switch {
	case len(service) > maxPathValue || !grpcService.MatchString(service):
		return fmt.Errorf("gRPC service %q is not a service name (package.Service, letters, digits and _)", service)
	case method != "" && (len(method) > maxPathValue || !grpcMethod.MatchString(method)):
		return fmt.Errorf("gRPC method %q is not a method name (letters, digits and _)", method)
	}
	return nil
}
