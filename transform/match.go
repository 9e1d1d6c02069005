package transform

import (
	"fmt"
	"strings"
)

// The matches of setHeaderRoute and setMirrorRoute steps, as the plugin
// receives them. They mirror Argo Rollouts' types field for field (the RPC
// adapter copies them over), so that this package, and everything that
// writes, does not depend on Argo Rollouts.

// StringMatch matches a value: exactly one of Exact, Prefix and Regex is set.
type StringMatch struct {
	Exact, Prefix, Regex string
}

// String shows the match as the Rollout spells it: `prefix: "/a"`, with
// every field given, or `nothing` when none is.
func (m StringMatch) String() string {
	var parts []string
	for _, f := range []struct{ key, value string }{{"exact", m.Exact}, {"prefix", m.Prefix}, {"regex", m.Regex}} {
		if f.value != "" {
			parts = append(parts, fmt.Sprintf("%s: %q", f.key, f.value))
		}
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// HeaderMatch is one header of a setHeaderRoute step; Value nil is an error.
type HeaderMatch struct {
	Name  string
	Value *StringMatch
}

// RequestMatch is one match of a setMirrorRoute step: every field given must
// match.
type RequestMatch struct {
	Method  *StringMatch
	Path    *StringMatch
	Headers map[string]StringMatch
}
