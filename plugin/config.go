package plugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// DefaultPluginName is the name the plugin is registered under in Argo
// Rollouts' trafficRouterPlugins, and so the key of its config in a Rollout.
// It is the name of the widely used argoproj-labs plugin, so a Rollout written
// for that plugin works unchanged.
const DefaultPluginName = "argoproj-labs/gatewayAPI"

// Default in-progress label, as in the argoproj-labs plugin.
const (
	DefaultInProgressLabelKey   = "rollouts.argoproj.io/gatewayapi-canary"
	DefaultInProgressLabelValue = "in-progress"
)

// Config is a Rollout's spec.strategy.canary.trafficRouting.plugins.<name>.
// It accepts every key of the argoproj-labs/gatewayAPI plugin's config.
type Config struct {
	HTTPRoute  string       `json:"httpRoute,omitempty"`
	GRPCRoute  string       `json:"grpcRoute,omitempty"`
	TCPRoute   string       `json:"tcpRoute,omitempty"`
	TLSRoute   string       `json:"tlsRoute,omitempty"`
	HTTPRoutes []NamedRoute `json:"httpRoutes,omitempty"`
	GRPCRoutes []NamedRoute `json:"grpcRoutes,omitempty"`
	TCPRoutes  []NamedRoute `json:"tcpRoutes,omitempty"`
	TLSRoutes  []NamedRoute `json:"tlsRoutes,omitempty"`
	// Namespace holds the routes; default: the Rollout's namespace.
	Namespace string `json:"namespace,omitempty"`
	// ConfigMap is where the argoproj-labs plugin keeps its bookkeeping. This
	// plugin keeps what it needs on the routes themselves; the key is accepted
	// so existing Rollouts need no change, and ignored.
	ConfigMap string `json:"configMap,omitempty"`

	HTTPRouteSelector *metav1.LabelSelector `json:"httpRouteSelector,omitempty"`
	GRPCRouteSelector *metav1.LabelSelector `json:"grpcRouteSelector,omitempty"`
	TCPRouteSelector  *metav1.LabelSelector `json:"tcpRouteSelector,omitempty"`
	TLSRouteSelector  *metav1.LabelSelector `json:"tlsRouteSelector,omitempty"`

	DisableInProgressLabel bool   `json:"disableInProgressLabel,omitempty"`
	InProgressLabelKey     string `json:"inProgressLabelKey,omitempty"`
	InProgressLabelValue   string `json:"inProgressLabelValue,omitempty"`
}

// NamedRoute is one entry of httpRoutes, grpcRoutes, tcpRoutes or tlsRoutes.
type NamedRoute struct {
	Name string `json:"name"`
	// UseHeaderRoutes marks the route for setHeaderRoute steps.
	UseHeaderRoutes bool `json:"useHeaderRoutes,omitempty"`
}

// Settings is a validated Config: the routes to manage and how to label them.
type Settings struct {
	Targets routes.Targets
	// InProgressLabel is nil when the label is disabled.
	InProgressLabel map[string]string
}

var configKeys = []string{
	"httpRoute", "httpRoutes", "httpRouteSelector", "grpcRoute", "grpcRoutes", "grpcRouteSelector",
	"tcpRoute", "tcpRoutes", "tcpRouteSelector", "tlsRoute", "tlsRoutes", "tlsRouteSelector",
	"namespace", "configMap", "disableInProgressLabel", "inProgressLabelKey", "inProgressLabelValue",
}

// ParseConfig reads and validates the Rollout's config for the plugin
// registered as pluginName. Errors name the offending key.
func ParseConfig(ro *v1alpha1.Rollout, pluginName string) (Settings, error) {
	where := fmt.Sprintf("spec.strategy.canary.trafficRouting.plugins[%q]", pluginName)
	c := ro.Spec.Strategy.Canary
	if c == nil || c.TrafficRouting == nil {
		return Settings{}, errors.New("spec.strategy.canary.trafficRouting is not set")
	}
	raw, ok := c.TrafficRouting.Plugins[pluginName]
	if !ok {
		var names []string
		for n := range c.TrafficRouting.Plugins {
			names = append(names, n)
		}
		return Settings{}, fmt.Errorf("%s is missing (the Rollout configures %v): the plugin reads its config under the name it is registered with; start it with -plugin-name to change that name", where, names)
	}
	var cfg Config
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return Settings{}, fmt.Errorf("%s: %s", where, describeJSONError(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return Settings{}, fmt.Errorf("%s: malformed JSON: unexpected data after the config object", where)
	}
	s, err := cfg.settings(ro.Namespace)
	if err != nil {
		return Settings{}, fmt.Errorf("%s: %w", where, err)
	}
	return s, nil
}

func describeJSONError(err error) string {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		key := strings.TrimPrefix(err.Error(), "json: unknown field ")
		return fmt.Sprintf("unknown key %s; known keys: %s", key, strings.Join(configKeys, ", "))
	case errors.As(err, &typeErr):
		return fmt.Sprintf("key %q must be %s, not a JSON %s", typeErr.Field, typeName(typeErr), typeErr.Value)
	case errors.As(err, &syntaxErr):
		return fmt.Sprintf("malformed JSON at byte %d: %v", syntaxErr.Offset, err)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "malformed JSON: the config is empty or cut short"
	}
	return "malformed config: " + err.Error()
}

func typeName(e *json.UnmarshalTypeError) string {
	t := e.Type.String()
	switch {
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case t == "string":
		return "a string"
	case t == "bool":
		return "true or false"
	}
	return "an object"
}

func (cfg Config) settings(rolloutNamespace string) (Settings, error) {
	ns := cfg.Namespace
	if ns == "" {
		ns = rolloutNamespace
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return Settings{}, fmt.Errorf("key \"namespace\": %q is not a namespace name: %s", ns, strings.Join(errs, "; "))
	}
	var t routes.Targets
	var errs []error
	addNamed := func(kind routes.Kind, single string, singleKey string, list []NamedRoute, listKey string) {
		if single != "" {
			t.Named = append(t.Named, routes.Ref{Kind: kind, Namespace: ns, Name: single})
		}
		for i, r := range list {
			if r.Name == "" {
				errs = append(errs, fmt.Errorf("key %q: entry %d has no name", listKey, i))
				continue
			}
			t.Named = append(t.Named, routes.Ref{Kind: kind, Namespace: ns, Name: r.Name})
		}
	}
	addNamed(routes.HTTPRoute, cfg.HTTPRoute, "httpRoute", cfg.HTTPRoutes, "httpRoutes")
	addNamed(routes.GRPCRoute, cfg.GRPCRoute, "grpcRoute", cfg.GRPCRoutes, "grpcRoutes")
	addNamed(routes.TCPRoute, cfg.TCPRoute, "tcpRoute", cfg.TCPRoutes, "tcpRoutes")
	addNamed(routes.TLSRoute, cfg.TLSRoute, "tlsRoute", cfg.TLSRoutes, "tlsRoutes")

	for _, s := range []struct {
		kind routes.Kind
		key  string
		sel  *metav1.LabelSelector
	}{
		{routes.HTTPRoute, "httpRouteSelector", cfg.HTTPRouteSelector},
		{routes.GRPCRoute, "grpcRouteSelector", cfg.GRPCRouteSelector},
		{routes.TCPRoute, "tcpRouteSelector", cfg.TCPRouteSelector},
		{routes.TLSRoute, "tlsRouteSelector", cfg.TLSRouteSelector},
	} {
		if s.sel == nil {
			continue
		}
		if len(s.sel.MatchLabels) == 0 && len(s.sel.MatchExpressions) == 0 {
			errs = append(errs, fmt.Errorf("key %q is empty: it would select every %s in namespace %s; give matchLabels or matchExpressions", s.key, s.kind, ns))
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(s.sel)
		if err != nil {
			errs = append(errs, fmt.Errorf("key %q is not a valid label selector: %w", s.key, err))
			continue
		}
		t.Selectors = append(t.Selectors, routes.Selection{Kind: s.kind, Namespace: ns, Selector: sel})
	}
	if len(errs) > 0 {
		return Settings{}, errors.Join(errs...)
	}
	if len(t.Named) == 0 && len(t.Selectors) == 0 {
		return Settings{}, errors.New("names no route: set httpRoute(s), grpcRoute(s), tcpRoute(s), tlsRoute(s) or a route selector")
	}

	out := Settings{Targets: t}
	if !cfg.DisableInProgressLabel {
		key, value := cfg.InProgressLabelKey, cfg.InProgressLabelValue
		if key == "" {
			key = DefaultInProgressLabelKey
		}
		if value == "" {
			value = DefaultInProgressLabelValue
		}
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			return Settings{}, fmt.Errorf("key \"inProgressLabelKey\": %q is not a label key: %s", key, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
			return Settings{}, fmt.Errorf("key \"inProgressLabelValue\": %q is not a label value: %s", value, strings.Join(errs, "; "))
		}
		out.InProgressLabel = map[string]string{key: value}
	}
	return out, nil
}
