package routes

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Schema says which of the optional fields the plugin writes the installed
// CRD of a route's kind lacks, in the version the route was read in. Gateway
// API releases differ here, and clusters run older releases than the
// plugin's: managed providers install the standard channel of the release
// that goes with the cluster's Kubernetes version.
//
// The zero value is a CRD with every field (what the plugin assumed before it
// read schemas, and what it assumes when it cannot read one): a route that
// does not know its schema is written as it always was.
type Schema struct {
	// LacksRuleNames: spec.rules[].name is not in the schema (the standard
	// channel before Gateway API v1.4). The plugin then writes the rules it
	// adds without names and knows them by content (package desired).
	LacksRuleNames bool
	// LacksMirrorPercent: a RequestMirror filter has no percent (the standard
	// channel before v1.3): it mirrors every request.
	LacksMirrorPercent bool
}

// Where each field first appears, for the errors that ask for it.
const (
	RuleNamesSince     = "Gateway API v1.4 (standard channel; the experimental channel has it since v1.2)"
	MirrorPercentSince = "Gateway API v1.3 (standard channel; the experimental channel has it since v1.2)"
)

// SchemaError says a step needs a field the installed CRD of the route's
// kind lacks. Nothing is written.
type SchemaError struct {
	Kind    Kind
	Version string
	// Field is the missing field; Since the release that has it; Need what
	// needs it; Instead what the user can do without upgrading.
	Field, Since, Need, Instead string
}

// Reason is the Event reason of the error (package events).
func (e *SchemaError) Reason() string { return "CRDTooOld" }

func (e *SchemaError) Error() string {
	return fmt.Sprintf("%s needs %s, which the installed %s CRD (%s) does not have: it is in %s and later; upgrade the Gateway API CRDs, or %s",
		e.Need, e.Field, e.Kind, e.Version, e.Since, e.Instead)
}

// openAPINode is the part of an OpenAPI v3 schema the plugin reads: nested
// properties, and the items of a list.
type openAPINode struct {
	Properties map[string]openAPINode `json:"properties"`
	Items      *openAPINode           `json:"items"`
}

// has says whether the schema defines the field at path: property names, "[]"
// for the items of a list.
func (n openAPINode) has(path ...string) bool {
	for _, p := range path {
		if p == "[]" {
			if n.Items == nil {
				return false
			}
			n = *n.Items
			continue
		}
		next, ok := n.Properties[p]
		if !ok {
			return false
		}
		n = next
	}
	return true
}

// SchemasFromOpenAPI reads, from the OpenAPI v3 document the apiserver
// publishes for Gateway API's group in one version
// (/openapi/v3/apis/gateway.networking.k8s.io/<version>), the schema of every
// route kind the document defines.
func SchemasFromOpenAPI(doc []byte, version string) (map[Kind]Schema, error) {
	var d struct {
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("decoding the OpenAPI document of %s/%s: %w", Group, version, err)
	}
	out := map[Kind]Schema{}
	for _, kind := range Kinds {
		raw, ok := d.Components.Schemas[openAPIName(version, kind)]
		if !ok {
			continue
		}
		var n openAPINode
		if err := json.Unmarshal(raw, &n); err != nil {
			return nil, fmt.Errorf("decoding the OpenAPI schema of %s %s: %w", kind, version, err)
		}
		if !n.has("spec", "rules", "[]") {
			continue // not a route schema the plugin can read: assume every field
		}
		out[kind] = schemaOf(kind, n)
	}
	return out, nil
}

// SchemasFromCRD reads the schema of a route kind's CRD (a
// CustomResourceDefinition of group gateway.networking.k8s.io, as JSON), for
// each version it serves: what a plan without a cluster takes from the CRD
// files it is given.
func SchemasFromCRD(crd []byte) (Kind, map[string]Schema, error) {
	var d struct {
		Spec struct {
			Group string `json:"group"`
			Names struct {
				Kind string `json:"kind"`
			} `json:"names"`
			Versions []struct {
				Name   string `json:"name"`
				Served bool   `json:"served"`
				Schema struct {
					OpenAPIV3Schema openAPINode `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(crd, &d); err != nil {
		return "", nil, fmt.Errorf("decoding a CustomResourceDefinition: %w", err)
	}
	kind := Kind(d.Spec.Names.Kind)
	if d.Spec.Group != Group || kind.Resource() == "" {
		return "", nil, nil
	}
	out := map[string]Schema{}
	for _, v := range d.Spec.Versions {
		if v.Served {
			out[v.Name] = schemaOf(kind, v.Schema.OpenAPIV3Schema)
		}
	}
	return kind, out, nil
}

// schemaOf is what a route kind's schema lacks.
func schemaOf(kind Kind, n openAPINode) Schema {
	rule := []string{"spec", "rules", "[]"}
	s := Schema{LacksRuleNames: !n.has(append(rule, "name")...)}
	if kind.HasMatches() {
		s.LacksMirrorPercent = !n.has(append(rule, "filters", "[]", "requestMirror", "percent")...)
	}
	return s
}

// openAPIName is the name the apiserver gives a CRD's schema in its OpenAPI
// documents: the group reversed, the version and the kind
// (io.k8s.networking.gateway.v1.HTTPRoute).
func openAPIName(version string, kind Kind) string {
	parts := strings.Split(Group, ".")
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return strings.Join(parts, ".") + "." + version + "." + string(kind)
}
