package rollout

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/transform"
)

// DefaultPluginName is the name the plugin is registered under in Argo
// Rollouts' trafficRouterPlugins, and so the key of its config in a Rollout.
// It is the name of the widely used argoproj-labs plugin, so a Rollout written
// for that plugin works unchanged.
const DefaultPluginName = "argoproj-labs/gatewayAPI"

// Default in-progress label, as in the argoproj-labs plugin.
const (
	defaultInProgressLabelKey   = "rollouts.argoproj.io/gatewayapi-canary"
	defaultInProgressLabelValue = "in-progress"
)

// Config is a Rollout's spec.strategy.canary.trafficRouting.plugins.<name>.
// It accepts every key of the argoproj-labs/gatewayAPI plugin's config.
type Config struct {
	HTTPRoute  string       `json:"httpRoute,omitempty"`
	GRPCRoute  string       `json:"grpcRoute,omitempty"`
	TCPRoute   string       `json:"tcpRoute,omitempty"`
	TLSRoute   string       `json:"tlsRoute,omitempty"`
	UDPRoute   string       `json:"udpRoute,omitempty"`
	HTTPRoutes []NamedRoute `json:"httpRoutes,omitempty"`
	GRPCRoutes []NamedRoute `json:"grpcRoutes,omitempty"`
	TCPRoutes  []NamedRoute `json:"tcpRoutes,omitempty"`
	TLSRoutes  []NamedRoute `json:"tlsRoutes,omitempty"`
	UDPRoutes  []NamedRoute `json:"udpRoutes,omitempty"`
	// HTTPRouteRuleName and the others target one rule, by name, of the
	// single route of that kind (as ruleName does for a list entry).
	HTTPRouteRuleName string `json:"httpRouteRuleName,omitempty"`
	GRPCRouteRuleName string `json:"grpcRouteRuleName,omitempty"`
	TCPRouteRuleName  string `json:"tcpRouteRuleName,omitempty"`
	TLSRouteRuleName  string `json:"tlsRouteRuleName,omitempty"`
	UDPRouteRuleName  string `json:"udpRouteRuleName,omitempty"`
	// Namespace holds the routes; default: the Rollout's namespace.
	Namespace string `json:"namespace,omitempty"`
	// Cluster names the route cluster that holds the routes (one the
	// platform team configured with -route-cluster); default: the
	// controller's own cluster.
	Cluster string `json:"cluster,omitempty"`
	// ConfigMap is where the argoproj-labs plugin (up to its v0.12) kept the
	// header rules it added, in the routes' namespace. This plugin keeps
	// what it needs on the routes themselves; it reads the ConfigMap only to
	// adopt those rules (desired.Predecessor).
	ConfigMap string `json:"configMap,omitempty"`

	HTTPRouteSelector *metav1.LabelSelector `json:"httpRouteSelector,omitempty"`
	GRPCRouteSelector *metav1.LabelSelector `json:"grpcRouteSelector,omitempty"`
	TCPRouteSelector  *metav1.LabelSelector `json:"tcpRouteSelector,omitempty"`
	TLSRouteSelector  *metav1.LabelSelector `json:"tlsRouteSelector,omitempty"`
	UDPRouteSelector  *metav1.LabelSelector `json:"udpRouteSelector,omitempty"`

	DisableInProgressLabel bool   `json:"disableInProgressLabel,omitempty"`
	InProgressLabelKey     string `json:"inProgressLabelKey,omitempty"`
	InProgressLabelValue   string `json:"inProgressLabelValue,omitempty"`

	// Options of this plugin, additive to the argoproj-labs config.

	// VerifyWeight makes VerifyWeight check that the gateway accepted the
	// weights (status.parents); off, VerifyWeight answers NotImplemented.
	VerifyWeight bool `json:"verifyWeight,omitempty"`
	// VerifyWeightSettle (a duration, e.g. "3s") replaces the gateway's known
	// settle time: how long after the status is current Verified waits for
	// the data plane. "0s" verifies by status alone.
	VerifyWeightSettle string `json:"verifyWeightSettle,omitempty"`
	// ConflictPolicy says what to do when another manager changed what the
	// plugin manages mid-rollout: "Error" (default) or "Force".
	ConflictPolicy desired.ConflictPolicy `json:"conflictPolicy,omitempty"`
	// SelectedRoutesUseHeaderRoutes makes the HTTPRoutes and GRPCRoutes found
	// by a selector take setHeaderRoute rules, as useHeaderRoutes does for a
	// named one.
	SelectedRoutesUseHeaderRoutes bool `json:"selectedRoutesUseHeaderRoutes,omitempty"`
	// MirrorMode says how setMirrorRoute steps mirror: "rule" (default: a rule
	// of their own with the step's matches) or "filter" (a RequestMirror
	// filter on the weighted rules).
	MirrorMode desired.MirrorMode `json:"mirrorMode,omitempty"`
	// AssumeGatewayFeatures are Gateway API features (supportedFeatures
	// names) the Rollout's gateways carry whatever their GatewayClasses
	// publish: the plugin writes what needs them without checking.
	AssumeGatewayFeatures []string `json:"assumeGatewayFeatures,omitempty"`
	// StickyCanary keeps a person on the revision that first answered them
	// while the canary has weight (HTTPRoutes only).
	StickyCanary *StickyCanary `json:"stickyCanary,omitempty"`
	// AddCanaryBackendRef lets the plugin add the canary backendRef to the
	// rules that hold only the stable one, for the rollout.
	AddCanaryBackendRef bool `json:"addCanaryBackendRef,omitempty"`

	// UseHeaderRoutes at the top level is accepted and does nothing: no
	// release of the argoproj-labs plugin had it (its decoder ignored it;
	// the single-route forms take header routes, list entries by their own
	// useHeaderRoutes), and configs carry it.
	UseHeaderRoutes bool `json:"useHeaderRoutes,omitempty"`
	// ActiveRolloutsAnnotationKey (the argoproj-labs plugin's open PR 164)
	// is refused when set: the claims annotation, whose key is fixed, is
	// what it would rename.
	ActiveRolloutsAnnotationKey string `json:"activeRolloutsAnnotationKey,omitempty"`
}

// StickyCanary is the stickyCanary key.
type StickyCanary struct {
	// CookieName is the cookie's name; default "<rollout name>-canary".
	CookieName string `json:"cookieName,omitempty"`
	// MaxAgeSeconds is the cookie's Max-Age; default 86400 (one day).
	MaxAgeSeconds *int64 `json:"maxAgeSeconds,omitempty"`
}

// defaultStickyMaxAge is stickyCanary's default Max-Age: one day, Flagger's
// default for its session affinity cookie.
const defaultStickyMaxAge = 86400

// maxCookieName bounds a cookie's name, so that the header match the plugin
// writes stays far from Gateway API's limit on a match value.
const maxCookieName = 256

// NamedRoute is one entry of httpRoutes, grpcRoutes, tcpRoutes, tlsRoutes or
// udpRoutes.
type NamedRoute struct {
	Name string `json:"name"`
	// UseHeaderRoutes marks the route for setHeaderRoute steps.
	UseHeaderRoutes bool `json:"useHeaderRoutes,omitempty"`
	// RuleName targets one rule of the route, by its name: weights,
	// experiment backends and the rules header and mirror steps copy come
	// from that rule only.
	RuleName string `json:"ruleName,omitempty"`
}

// Settings is a validated Config: the Rollout's routes and how the plugin
// treats them. It is parsed once per call.
type Settings struct {
	Targets routes.Targets
	// Cluster is the route cluster that holds the routes, "" for the
	// controller's own.
	Cluster string
	// InProgressLabel is nil when the label is disabled.
	InProgressLabel map[string]string
	// HeaderRoutes are the named routes setHeaderRoute steps add rules to:
	// the single-route forms, and list entries with useHeaderRoutes: true.
	HeaderRoutes map[routes.Ref]bool
	// ListedForHeaderRoutes are the list entries with useHeaderRoutes: true
	// (nil when there are none): on a kind without matches, a step that adds
	// a rule is an error for them, where the single form skips the route.
	ListedForHeaderRoutes map[routes.Ref]bool
	// SelectedHeaderRoutes: routes found by a selector (and not named) take
	// them too.
	SelectedHeaderRoutes bool
	VerifyWeight         bool
	// VerifyWeightSettle is the Rollout's verifyWeightSettle; nil: the
	// gateway's known settle time (desired.SettleFor).
	VerifyWeightSettle *time.Duration
	ConflictPolicy     desired.ConflictPolicy
	// RuleNames are the rules the Rollout targets on named routes (ruleName);
	// nil when none.
	RuleNames map[routes.Ref]string
	// MirrorMode is desired.MirrorRule or desired.MirrorFilter.
	MirrorMode desired.MirrorMode
	// AddCanaryBackendRef is addCanaryBackendRef.
	AddCanaryBackendRef bool
	// AssumedFeatures is assumeGatewayFeatures.
	AssumedFeatures []string
	// Sticky is stickyCanary with its defaults; nil without it.
	Sticky *StickySettings
	// Predecessor is what adopting the argoproj-labs plugin's header rules
	// takes of the Rollout (its managedRoutes, its canary, configMap); nil
	// when it has no managedRoutes.
	Predecessor *desired.Predecessor
}

// StickySettings is a validated stickyCanary.
type StickySettings struct {
	Cookie string
	MaxAge int64
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
	cfg, err := decodeConfig(raw)
	if err != nil {
		return Settings{}, fmt.Errorf("%s: %w", where, err)
	}
	s, err := cfg.settings(ro.Namespace, ro.Name)
	if err != nil {
		return Settings{}, fmt.Errorf("%s: %w", where, err)
	}
	if s.AddCanaryBackendRef && c.PingPong != nil {
		return Settings{}, fmt.Errorf("%s: key \"addCanaryBackendRef\" does not work with ping-pong (a promotion makes the added Service stable): list both ping and pong in the rule", where)
	}
	s.Predecessor = predecessor(ro, cfg.ConfigMap, pluginName)
	return s, nil
}

// predecessor is what adopting the argoproj-labs plugin's header rules
// takes of the Rollout: its managedRoutes names and its canary Service (as
// that plugin wrote them: by name, in the route's namespace, which is the
// Rollout's where adoption finds them), that plugin's ConfigMap, and its
// field manager: the name Argo Rollouts gave its binary, the last element
// of the name it was registered under, which this plugin now has.
func predecessor(ro *v1alpha1.Rollout, configMap, pluginName string) *desired.Predecessor {
	c := ro.Spec.Strategy.Canary
	if c.CanaryService == "" || len(c.TrafficRouting.ManagedRoutes) == 0 {
		return nil
	}
	p := &desired.Predecessor{Manager: path.Base(pluginName), Canary: routes.ServiceRef(ro.Namespace, c.CanaryService),
		ConfigMap: cmp.Or(configMap, routes.PredecessorConfigMap)}
	for _, m := range c.TrafficRouting.ManagedRoutes {
		p.Entries = append(p.Entries, m.Name)
	}
	return p
}

// fields maps each config key, spelled exactly, to where it is decoded.
func (c *Config) fields() map[string]any {
	return map[string]any{
		"httpRoute": &c.HTTPRoute, "httpRoutes": &c.HTTPRoutes, "httpRouteSelector": &c.HTTPRouteSelector, "httpRouteRuleName": &c.HTTPRouteRuleName,
		"grpcRoute": &c.GRPCRoute, "grpcRoutes": &c.GRPCRoutes, "grpcRouteSelector": &c.GRPCRouteSelector, "grpcRouteRuleName": &c.GRPCRouteRuleName,
		"tcpRoute": &c.TCPRoute, "tcpRoutes": &c.TCPRoutes, "tcpRouteSelector": &c.TCPRouteSelector, "tcpRouteRuleName": &c.TCPRouteRuleName,
		"tlsRoute": &c.TLSRoute, "tlsRoutes": &c.TLSRoutes, "tlsRouteSelector": &c.TLSRouteSelector, "tlsRouteRuleName": &c.TLSRouteRuleName,
		"udpRoute": &c.UDPRoute, "udpRoutes": &c.UDPRoutes, "udpRouteSelector": &c.UDPRouteSelector, "udpRouteRuleName": &c.UDPRouteRuleName,
		"namespace": &c.Namespace, "cluster": &c.Cluster, "configMap": &c.ConfigMap,
		"disableInProgressLabel": &c.DisableInProgressLabel, "inProgressLabelKey": &c.InProgressLabelKey,
		"inProgressLabelValue": &c.InProgressLabelValue,
		"verifyWeight":         &c.VerifyWeight, "verifyWeightSettle": &c.VerifyWeightSettle, "conflictPolicy": &c.ConflictPolicy,
		"selectedRoutesUseHeaderRoutes": &c.SelectedRoutesUseHeaderRoutes, "mirrorMode": &c.MirrorMode,
		"assumeGatewayFeatures": &c.AssumeGatewayFeatures, "stickyCanary": &c.StickyCanary,
		"addCanaryBackendRef": &c.AddCanaryBackendRef, "useHeaderRoutes": &c.UseHeaderRoutes,
		"activeRolloutsAnnotationKey": &c.ActiveRolloutsAnnotationKey,
	}
}

// decodeConfig decodes key by key, so an error names the key it is about,
// also for an unknown field nested inside one.
func decodeConfig(raw []byte) (Config, error) {
	var cfg Config
	var top map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&top); err != nil {
		return Config{}, errors.New(describeJSONError(err, ""))
	}
	if _, err := dec.Token(); err != io.EOF {
		return Config{}, errors.New("malformed JSON: unexpected data after the config object")
	}
	fields := cfg.fields()
	var errs []error
	for _, key := range slices.Sorted(maps.Keys(top)) {
		into, ok := fields[key]
		if !ok {
			errs = append(errs, fmt.Errorf("unknown key %q; known keys: %s", key, strings.Join(slices.Sorted(maps.Keys(fields)), ", ")))
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(top[key]))
		dec.DisallowUnknownFields()
		if err := dec.Decode(into); err != nil {
			errs = append(errs, errors.New(describeJSONError(err, key)))
		}
	}
	return cfg, errors.Join(errs...)
}

func describeJSONError(err error, key string) string {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return fmt.Sprintf("key %q: unknown field %s", key, strings.TrimPrefix(err.Error(), "json: unknown field "))
	case errors.As(err, &typeErr) && key == "":
		return fmt.Sprintf("the config must be a JSON object, not a JSON %s", typeErr.Value)
	case errors.As(err, &typeErr):
		where := key
		if typeErr.Field != "" {
			where = key + "." + typeErr.Field
		}
		return fmt.Sprintf("key %q must be %s, not a JSON %s", where, typeName(typeErr), typeErr.Value)
	case errors.As(err, &syntaxErr):
		return fmt.Sprintf("malformed JSON at byte %d: %v", syntaxErr.Offset, err)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "malformed JSON: the config is empty or cut short"
	}
	return "malformed config: " + err.Error()
}

func typeName(e *json.UnmarshalTypeError) string {
	switch e.Type.Kind() {
	case reflect.Slice:
		return "a list"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int32, reflect.Int64:
		return "a whole number"
	}
	return "an object"
}

// settings validates the config of Rollout rolloutName in namespace
// rolloutNamespace: its routes first, then each option, in the order of
// the errors it reports.
func (cfg Config) settings(rolloutNamespace, rolloutName string) (Settings, error) {
	tg, err := cfg.targets(rolloutNamespace)
	if err != nil {
		return Settings{}, err
	}
	s, err := cfg.options()
	if err != nil {
		return Settings{}, err
	}
	if s.Sticky, err = cfg.sticky(rolloutName, tg.t); err != nil {
		return Settings{}, err
	}
	s.Targets, s.HeaderRoutes, s.ListedForHeaderRoutes, s.RuleNames = tg.t, tg.headerRoutes, tg.listed, tg.ruleNames.names
	return s, nil
}

// targets reads the routes the config names and selects, in its
// namespace (default: the Rollout's): an error when the namespace is not
// one, any key is wrong, or no route is named.
func (cfg Config) targets(rolloutNamespace string) (*targeting, error) {
	ns := cfg.Namespace
	if ns == "" {
		ns = rolloutNamespace
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return nil, fmt.Errorf("key \"namespace\": %q is not a namespace name: %s", ns, strings.Join(errs, "; "))
	}
	tg := &targeting{ns: ns, headerRoutes: map[routes.Ref]bool{}}
	tg.named(routes.HTTPRoute, cfg.HTTPRoute, cfg.HTTPRouteRuleName, cfg.HTTPRoutes, "httpRoutes")
	tg.named(routes.GRPCRoute, cfg.GRPCRoute, cfg.GRPCRouteRuleName, cfg.GRPCRoutes, "grpcRoutes")
	tg.named(routes.TCPRoute, cfg.TCPRoute, cfg.TCPRouteRuleName, cfg.TCPRoutes, "tcpRoutes")
	tg.named(routes.TLSRoute, cfg.TLSRoute, cfg.TLSRouteRuleName, cfg.TLSRoutes, "tlsRoutes")
	tg.named(routes.UDPRoute, cfg.UDPRoute, cfg.UDPRouteRuleName, cfg.UDPRoutes, "udpRoutes")
	tg.selected(routes.HTTPRoute, "httpRouteSelector", cfg.HTTPRouteSelector)
	tg.selected(routes.GRPCRoute, "grpcRouteSelector", cfg.GRPCRouteSelector)
	tg.selected(routes.TCPRoute, "tcpRouteSelector", cfg.TCPRouteSelector)
	tg.selected(routes.TLSRoute, "tlsRouteSelector", cfg.TLSRouteSelector)
	tg.selected(routes.UDPRoute, "udpRouteSelector", cfg.UDPRouteSelector)
	if err := errors.Join(tg.errs...); err != nil {
		return nil, err
	}
	if n := len(tg.t.Named); n > maxNamedRoutes {
		return nil, fmt.Errorf("key %q: the config names %d routes, and a Rollout may name at most %d (each missing one costs a read on every call); label them and select them with a route selector (httpRouteSelector, grpcRouteSelector, ...)",
			tg.pastBound, n, maxNamedRoutes)
	}
	if len(tg.t.Named) == 0 && len(tg.t.Selectors) == 0 {
		return nil, errors.New("names no route: set httpRoute(s), grpcRoute(s), tcpRoute(s), tlsRoute(s), udpRoute(s) or a route selector")
	}
	return tg, nil
}

// options are the settings of the config's options but its routes and
// stickyCanary: conflictPolicy, verifyWeight and its settle time,
// mirrorMode, the in-progress label, assumeGatewayFeatures and cluster,
// each validated in that order.
func (cfg Config) options() (Settings, error) {
	policy, err := either("conflictPolicy", cfg.ConflictPolicy, desired.ReportConflicts, desired.TakeOver)
	if err != nil {
		return Settings{}, err
	}
	settle, err := cfg.verifyWeightSettle()
	if err != nil {
		return Settings{}, err
	}
	mirrorMode, err := either("mirrorMode", cfg.MirrorMode, desired.MirrorRule, desired.MirrorFilter)
	if err != nil {
		return Settings{}, err
	}
	label, err := cfg.inProgressLabel()
	if err != nil {
		return Settings{}, err
	}
	for _, f := range cfg.AssumeGatewayFeatures {
		if !slices.Contains(transform.CheckedFeatures, f) {
			return Settings{}, fmt.Errorf("key \"assumeGatewayFeatures\": %q is not a feature the plugin checks; the names are Gateway API's supportedFeatures names: %s",
				f, strings.Join(transform.CheckedFeatures, ", "))
		}
	}
	if cfg.ConfigMap != "" {
		if why := notASubdomain(cfg.ConfigMap); why != "" {
			return Settings{}, fmt.Errorf("key \"configMap\": %q is not a ConfigMap name (a DNS-1123 subdomain): %s", cfg.ConfigMap, why)
		}
	}
	if cfg.ActiveRolloutsAnnotationKey != "" {
		return Settings{}, errors.New("key \"activeRolloutsAnnotationKey\" is refused: the plugin tracks the Rollouts in progress on a route in its claims annotation, " +
			"whose key (gatewayapi-ssa.dev/claims) cannot change; remove the key")
	}
	if cfg.Cluster != "" {
		if errs := validation.IsDNS1123Label(cfg.Cluster); len(errs) > 0 {
			return Settings{}, fmt.Errorf("key \"cluster\": %q is not a cluster name (a DNS label): %s", cfg.Cluster, strings.Join(errs, "; "))
		}
	}
	return Settings{Cluster: cfg.Cluster, AssumedFeatures: cfg.AssumeGatewayFeatures, SelectedHeaderRoutes: cfg.SelectedRoutesUseHeaderRoutes,
		VerifyWeight: cfg.VerifyWeight, ConflictPolicy: policy, MirrorMode: mirrorMode, VerifyWeightSettle: settle, InProgressLabel: label,
		AddCanaryBackendRef: cfg.AddCanaryBackendRef}, nil
}

// For is what stickyCanary asks of the Rollout's routes now: the cookie
// values name its revisions, status.stableRS and status.currentPodHash; nil
// without stickyCanary.
func (s *StickySettings) For(ro *v1alpha1.Rollout) *transform.Sticky {
	if s == nil {
		return nil
	}
	return &transform.Sticky{Cookie: s.Cookie, MaxAge: s.MaxAge, StableHash: ro.Status.StableRS,
		CanaryHash: ro.Status.CurrentPodHash, RuleBase: ro.Name + "-sticky"}
}

// sticky validates stickyCanary for the Rollout's routes: HTTPRoutes only.
func (cfg Config) sticky(rolloutName string, t routes.Targets) (*StickySettings, error) {
	if cfg.StickyCanary == nil {
		return nil, nil
	}
	for _, ref := range t.Named {
		if ref.Kind != routes.HTTPRoute {
			return nil, fmt.Errorf("key \"stickyCanary\" works on HTTPRoutes only, and the Rollout also names %s; a %s carries no cookies: remove stickyCanary, or the %s from the Rollout's routes", ref, ref.Kind, ref.Kind)
		}
	}
	for _, sel := range t.Selectors {
		if sel.Kind != routes.HTTPRoute {
			return nil, fmt.Errorf("key \"stickyCanary\" works on HTTPRoutes only, and the Rollout also selects %ss (key %q); a %s carries no cookies: remove stickyCanary, or that selector", sel.Kind, sel.Key(), sel.Kind)
		}
	}
	s := StickySettings{Cookie: cfg.StickyCanary.CookieName, MaxAge: defaultStickyMaxAge}
	if s.Cookie == "" {
		s.Cookie = rolloutName + "-canary"
	}
	if len(s.Cookie) > maxCookieName || !transform.IsToken(s.Cookie) {
		return nil, fmt.Errorf("key \"stickyCanary.cookieName\": %q is not a cookie name (an RFC 6265 token of at most %d characters: letters, digits and !#$%%&'*+-.^_`|~)", s.Cookie, maxCookieName)
	}
	if m := cfg.StickyCanary.MaxAgeSeconds; m != nil {
		if *m <= 0 {
			return nil, fmt.Errorf("key \"stickyCanary.maxAgeSeconds\" must be more than 0, not %d (leave it out for the default, %d: one day)", *m, defaultStickyMaxAge)
		}
		s.MaxAge = *m
	}
	return &s, nil
}

// maxNamedRoutes bounds the routes a config names (every key of routes by
// name together): each is a read of every call, a GET while it is missing.
// A selector reaches more (kube bounds the routes of one call).
const maxNamedRoutes = 100

// targeting collects the routes a config names and selects in namespace ns,
// with every error in them.
type targeting struct {
	ns string
	// pastBound is the key whose route went past maxNamedRoutes.
	pastBound    string
	t            routes.Targets
	headerRoutes map[routes.Ref]bool
	listed       map[routes.Ref]bool
	ruleNames    ruleTargets
	errs         []error
}

// named adds the routes of kind the single key (with its rule) and the
// list key name.
func (tg *targeting) named(kind routes.Kind, single, singleRule string, list []NamedRoute, listKey string) {
	singleKey := strings.TrimSuffix(listKey, "s")
	if single != "" {
		if why := notASubdomain(single); why != "" {
			tg.errs = append(tg.errs, fmt.Errorf("key %q: %q is not a route name (a DNS-1123 subdomain): %s", singleKey, single, why))
			return
		}
		// The single-route form has always taken header routes.
		ref := routes.Ref{Kind: kind, Namespace: tg.ns, Name: single}
		tg.add(ref, singleKey)
		tg.headerRoutes[ref] = true
		tg.errs = append(tg.errs, tg.ruleNames.add(ref, singleRule, singleKey+"RuleName"))
	} else if singleRule != "" {
		tg.errs = append(tg.errs, fmt.Errorf("key %q names a rule of the %q route, but %q is not set; set it, or use ruleName in a %q entry", singleKey+"RuleName", singleKey, singleKey, listKey))
	}
	for i, r := range list {
		if r.Name == "" {
			tg.errs = append(tg.errs, fmt.Errorf("key %q: entry %d has no name", listKey, i))
			continue
		}
		if why := notASubdomain(r.Name); why != "" {
			tg.errs = append(tg.errs, fmt.Errorf("key %q: entry %d name %q is not a route name (a DNS-1123 subdomain): %s", listKey, i, r.Name, why))
			continue
		}
		ref := routes.Ref{Kind: kind, Namespace: tg.ns, Name: r.Name}
		tg.add(ref, listKey)
		tg.errs = append(tg.errs, tg.ruleNames.add(ref, r.RuleName, fmt.Sprintf("%s[%d].ruleName", listKey, i)))
		if r.UseHeaderRoutes {
			tg.headerRoutes[ref] = true
			if tg.listed == nil {
				tg.listed = map[routes.Ref]bool{}
			}
			tg.listed[ref] = true
		}
	}
}

// add adds a route named under key.
func (tg *targeting) add(ref routes.Ref, key string) {
	if tg.t.Named = append(tg.t.Named, ref); len(tg.t.Named) == maxNamedRoutes+1 {
		tg.pastBound = key
	}
}

// selected adds the routes of kind the selector key selects.
func (tg *targeting) selected(kind routes.Kind, key string, s *metav1.LabelSelector) {
	if s == nil {
		return
	}
	if len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0 {
		tg.errs = append(tg.errs, fmt.Errorf("key %q is empty: it would select every %s in namespace %s; give matchLabels or matchExpressions", key, kind, tg.ns))
		return
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		tg.errs = append(tg.errs, fmt.Errorf("key %q is not a valid label selector: %w", key, err))
		return
	}
	tg.t.Selectors = append(tg.t.Selectors, routes.Selection{Kind: kind, Namespace: tg.ns, Selector: sel})
}

// inProgressLabel is the label the plugin sets on a route while a rollout is
// in progress, nil when it is disabled.
func (cfg Config) inProgressLabel() (map[string]string, error) {
	if cfg.DisableInProgressLabel {
		return nil, nil
	}
	key, value := cfg.InProgressLabelKey, cfg.InProgressLabelValue
	if key == "" {
		key = defaultInProgressLabelKey
	}
	if value == "" {
		value = defaultInProgressLabelValue
	}
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return nil, fmt.Errorf("key \"inProgressLabelKey\": %q is not a label key: %s", key, strings.Join(errs, "; "))
	}
	if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
		return nil, fmt.Errorf("key \"inProgressLabelValue\": %q is not a label value: %s", value, strings.Join(errs, "; "))
	}
	return map[string]string{key: value}, nil
}

// anyTakesHeaderRoutes says whether any route of the config can take header
// rules: an HTTPRoute or GRPCRoute that takes header routes.
func (s Settings) anyTakesHeaderRoutes() bool {
	for ref, ok := range s.HeaderRoutes {
		if ok && ref.Kind.HasMatches() {
			return true
		}
	}
	for _, sel := range s.Targets.Selectors {
		if s.SelectedHeaderRoutes && sel.Kind.HasMatches() {
			return true
		}
	}
	return false
}

// ruleTargets collects the ruleName of each named route.
type ruleTargets struct {
	names map[routes.Ref]string
	keys  map[routes.Ref]string
}

// add records that the route targets rule name (none when empty), refusing
// a name that is not a rule name and one route targeting two rules.
func (r *ruleTargets) add(ref routes.Ref, name, key string) error {
	if name == "" {
		return nil
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("key %q: %q is not a rule name (a Gateway API SectionName: lower case letters, digits, '-' and '.'): %s", key, name, strings.Join(errs, "; "))
	}
	if r.names == nil {
		r.names, r.keys = map[routes.Ref]string{}, map[routes.Ref]string{}
	}
	if other, ok := r.names[ref]; ok && other != name {
		return fmt.Errorf("key %q targets rule %q of %s, but key %q targets rule %q of the same route; a Rollout targets one rule per route", key, name, ref, r.keys[ref], other)
	}
	r.names[ref], r.keys[ref] = name, key
	return nil
}

// maxVerifyWeightSettle bounds verifyWeightSettle: Argo Rollouts retries
// VerifyWeight every 10 s, so a longer wait only holds the step longer.
const maxVerifyWeightSettle = 10 * time.Minute

// verifyWeightSettle parses verifyWeightSettle; nil when it is not set.
func (cfg Config) verifyWeightSettle() (*time.Duration, error) {
	if cfg.VerifyWeightSettle == "" {
		return nil, nil
	}
	if !cfg.VerifyWeight {
		return nil, errors.New("key \"verifyWeightSettle\" needs \"verifyWeight\": true (without it VerifyWeight answers NotImplemented and waits for nothing)")
	}
	d, err := time.ParseDuration(cfg.VerifyWeightSettle)
	if err != nil || d < 0 || d > maxVerifyWeightSettle {
		return nil, fmt.Errorf("key \"verifyWeightSettle\" must be a duration from 0s to %s, such as \"3s\", not %q", maxVerifyWeightSettle, cfg.VerifyWeightSettle)
	}
	return &d, nil
}

// either is the value of a key that takes one of two values; unset, the
// first (the default).
func either[T ~string](key string, v, def, other T) (T, error) {
	switch v {
	case "":
		return def, nil
	case def, other:
		return v, nil
	}
	return "", fmt.Errorf("key %q must be %q or %q, not %q", key, def, other, v)
}
