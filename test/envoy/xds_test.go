//go:build envoy

package envoy

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The few fields of Envoy's configuration dump (envoy.admin.v3.ConfigDump,
// as protojson writes it) the checks read.

type configDump struct {
	Configs []json.RawMessage `json:"configs"`
}

type routesDump struct {
	DynamicRouteConfigs []struct {
		RouteConfig struct {
			Name         string        `json:"name"`
			VirtualHosts []virtualHost `json:"virtualHosts"`
		} `json:"routeConfig"`
	} `json:"dynamicRouteConfigs"`
}

type virtualHost struct {
	Name    string     `json:"name"`
	Domains []string   `json:"domains"`
	Routes  []xdsRoute `json:"routes"`
}

// xdsRoute is an entry of a virtual host's route table: Envoy takes the
// first whose match a request meets.
type xdsRoute struct {
	Name                 string          `json:"name"`
	Match                routeMatch      `json:"match"`
	Route                *routeAction    `json:"route"`
	DirectResponse       *directResponse `json:"directResponse"`
	Metadata             *filterMetadata `json:"metadata"`
	ResponseHeadersToAdd []headerToAdd   `json:"responseHeadersToAdd"`
}

type directResponse struct {
	Status int `json:"status"`
}

type routeMatch struct {
	Prefix              *string          `json:"prefix"`
	Path                *string          `json:"path"`
	PathSeparatedPrefix *string          `json:"pathSeparatedPrefix"`
	SafeRegex           *regexMatcher    `json:"safeRegex"`
	Headers             []headerMatcher  `json:"headers"`
	QueryParameters     []map[string]any `json:"queryParameters"`
	Grpc                map[string]any   `json:"grpc"`
}

type regexMatcher struct {
	Regex string `json:"regex"`
}

type headerMatcher struct {
	Name         string         `json:"name"`
	StringMatch  *stringMatcher `json:"stringMatch"`
	PresentMatch bool           `json:"presentMatch"`
	InvertMatch  bool           `json:"invertMatch"`
}

type stringMatcher struct {
	Exact      *string       `json:"exact"`
	Prefix     *string       `json:"prefix"`
	Suffix     *string       `json:"suffix"`
	Contains   *string       `json:"contains"`
	SafeRegex  *regexMatcher `json:"safeRegex"`
	IgnoreCase bool          `json:"ignoreCase"`
}

type routeAction struct {
	Cluster string `json:"cluster"`
	// ClusterNotFoundResponseCode is what Envoy answers for a weighted
	// cluster it does not have.
	ClusterNotFoundResponseCode string `json:"clusterNotFoundResponseCode"`
	WeightedClusters            *struct {
		Clusters []struct {
			Name                 string        `json:"name"`
			Weight               uint32        `json:"weight"`
			ResponseHeadersToAdd []headerToAdd `json:"responseHeadersToAdd"`
		} `json:"clusters"`
	} `json:"weightedClusters"`
	RequestMirrorPolicies []struct {
		Cluster         string `json:"cluster"`
		RuntimeFraction *struct {
			DefaultValue struct {
				Numerator   uint32 `json:"numerator"`
				Denominator string `json:"denominator"`
			} `json:"defaultValue"`
		} `json:"runtimeFraction"`
	} `json:"requestMirrorPolicies"`
}

type headerToAdd struct {
	Header struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	} `json:"header"`
}

type filterMetadata struct {
	FilterMetadata map[string]struct {
		Resources []struct {
			Kind, Name, Namespace, SectionName string
		} `json:"resources"`
	} `json:"filterMetadata"`
}

type endpointsDump struct {
	DynamicEndpointConfigs []struct {
		EndpointConfig struct {
			ClusterName string `json:"clusterName"`
			Endpoints   []struct {
				LoadBalancingWeight uint32          `json:"loadBalancingWeight"`
				Metadata            *filterMetadata `json:"metadata"`
			} `json:"endpoints"`
		} `json:"endpointConfig"`
	} `json:"dynamicEndpointConfigs"`
}

type listenersDump struct {
	DynamicListeners []struct {
		ActiveState struct {
			Listener json.RawMessage `json:"listener"`
		} `json:"activeState"`
	} `json:"dynamicListeners"`
}

// locality is one backend of a cluster: Envoy Gateway gives each backendRef
// of a rule its own locality, weighted as the backendRef, and names the
// Service in the locality's metadata.
type locality struct {
	Service string
	Weight  uint32
}

// envoyConfig is the part of one Gateway's xDS the checks read.
type envoyConfig struct {
	// VirtualHosts are the HTTP listeners' virtual hosts, each with its
	// route table in Envoy's order.
	VirtualHosts []virtualHost
	// Localities are each cluster's load assignment (EDS).
	Localities map[string][]locality
	// ListenerClusters are the clusters each listener names (TCP, TLS and
	// UDP proxies name theirs there).
	ListenerClusters map[string][]string
}

func parseConfigDump(raw json.RawMessage) (*envoyConfig, error) {
	var dump configDump
	if err := json.Unmarshal(raw, &dump); err != nil {
		return nil, err
	}
	c := &envoyConfig{Localities: map[string][]locality{}, ListenerClusters: map[string][]string{}}
	for _, cfg := range dump.Configs {
		var typed struct {
			Type string `json:"@type"`
		}
		if err := json.Unmarshal(cfg, &typed); err != nil {
			return nil, err
		}
		switch typed.Type {
		case "type.googleapis.com/envoy.admin.v3.RoutesConfigDump":
			var r routesDump
			if err := json.Unmarshal(cfg, &r); err != nil {
				return nil, fmt.Errorf("routes: %w", err)
			}
			for _, rc := range r.DynamicRouteConfigs {
				c.VirtualHosts = append(c.VirtualHosts, rc.RouteConfig.VirtualHosts...)
			}
		case "type.googleapis.com/envoy.admin.v3.EndpointsConfigDump":
			var e endpointsDump
			if err := json.Unmarshal(cfg, &e); err != nil {
				return nil, fmt.Errorf("endpoints: %w", err)
			}
			for _, ec := range e.DynamicEndpointConfigs {
				for _, l := range ec.EndpointConfig.Endpoints {
					c.Localities[ec.EndpointConfig.ClusterName] = append(c.Localities[ec.EndpointConfig.ClusterName],
						locality{Service: serviceOf(l.Metadata), Weight: l.LoadBalancingWeight})
				}
			}
		case "type.googleapis.com/envoy.admin.v3.ListenersConfigDump":
			var l listenersDump
			if err := json.Unmarshal(cfg, &l); err != nil {
				return nil, fmt.Errorf("listeners: %w", err)
			}
			for _, dl := range l.DynamicListeners {
				var v map[string]any
				if err := json.Unmarshal(dl.ActiveState.Listener, &v); err != nil {
					return nil, err
				}
				name, _ := v["name"].(string)
				c.ListenerClusters[name] = clustersNamed(v)
			}
		}
	}
	return c, nil
}

// serviceOf is the name of the Service a locality's metadata names.
func serviceOf(m *filterMetadata) string {
	if m == nil {
		return "?"
	}
	for _, r := range m.FilterMetadata["envoy-gateway"].Resources {
		return r.Name
	}
	return "?"
}

// clustersNamed collects every "cluster" value of a listener (the TCP and
// UDP proxies' targets), in order.
func clustersNamed(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && k == "cluster" {
				out = append(out, s)
			} else {
				out = append(out, clustersNamed(x)...)
			}
		}
	case []any:
		for _, x := range v {
			out = append(out, clustersNamed(x)...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// split is the backends a cluster sends to and their weights, as Envoy
// weighs them: by the localities' weights.
func (c *envoyConfig) split(cluster string) (map[string]uint32, error) {
	ls, ok := c.Localities[cluster]
	if !ok {
		return nil, fmt.Errorf("no load assignment for cluster %s", cluster)
	}
	out := map[string]uint32{}
	for _, l := range ls {
		out[l.Service] += l.Weight
	}
	return out, nil
}

// served is the backends a route sends its requests to, with their
// weights: one cluster's localities, or the weighted clusters' weights
// (each cluster one backend).
func (c *envoyConfig) served(r *xdsRoute) (map[string]uint32, error) {
	switch {
	case r.DirectResponse != nil:
		return nil, fmt.Errorf("route %s: Envoy answers %d itself", r.Name, r.DirectResponse.Status)
	case r.Route == nil:
		return nil, fmt.Errorf("route %s: no route action", r.Name)
	case r.Route.WeightedClusters != nil:
		out := map[string]uint32{}
		for _, wc := range r.Route.WeightedClusters.Clusters {
			if _, ok := c.Localities[wc.Name]; !ok && r.Route.ClusterNotFoundResponseCode != "" {
				out[answeredBy(r.Route.ClusterNotFoundResponseCode)] += wc.Weight
				continue
			}
			s, err := c.split(wc.Name)
			if err != nil {
				return nil, err
			}
			if len(s) != 1 {
				return nil, fmt.Errorf("route %s: weighted cluster %s has %d backends", r.Name, wc.Name, len(s))
			}
			for svc := range s {
				out[svc] += wc.Weight
			}
		}
		return out, nil
	}
	return c.split(r.Route.Cluster)
}

// answeredBy names the share of requests Envoy answers itself, with the
// code it answers for a cluster it does not have.
func answeredBy(code string) string { return "Envoy answers " + code }

// mirror is one of a route's mirror policies: the backend and the fraction
// of requests, numerator/denominator.
type mirror struct {
	Backend                string
	Numerator, Denominator uint32
}

func (m mirror) String() string {
	return fmt.Sprintf("%s %d/%d", m.Backend, m.Numerator, m.Denominator)
}

// denominators are envoy.type.v3.FractionalPercent's; HUNDRED is the
// default, which protojson leaves out.
var denominators = map[string]uint32{"": 100, "HUNDRED": 100, "TEN_THOUSAND": 10_000, "MILLION": 1_000_000}

func (c *envoyConfig) mirrors(r *xdsRoute) ([]mirror, error) {
	if r.Route == nil {
		return nil, nil
	}
	var out []mirror
	for _, p := range r.Route.RequestMirrorPolicies {
		s, err := c.split(p.Cluster)
		if err != nil {
			return nil, err
		}
		m := mirror{Backend: strings.Join(sortedKeys(s), "+"), Numerator: 100, Denominator: 100}
		if p.RuntimeFraction != nil {
			d, ok := denominators[p.RuntimeFraction.DefaultValue.Denominator]
			if !ok {
				return nil, fmt.Errorf("route %s: denominator %q", r.Name, p.RuntimeFraction.DefaultValue.Denominator)
			}
			m.Numerator, m.Denominator = p.RuntimeFraction.DefaultValue.Numerator, d
		}
		out = append(out, m)
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := keys(m)
	slices.Sort(out)
	return out
}

// request is what a route table is matched against.
type request struct {
	Host, Method, Path string
	Headers            map[string]string
}

func (r request) String() string {
	s := r.Method + " " + r.Path
	for _, k := range sortedKeys(r.Headers) {
		s += fmt.Sprintf(" %s: %s", k, r.Headers[k])
	}
	return s
}

// pick is the route Envoy takes for a request: the first of the virtual
// host's table whose match the request meets (the virtual host whose
// domains name the request's host, else the one for "*").
func (c *envoyConfig) pick(req request) (*xdsRoute, error) {
	var vh *virtualHost
	for i := range c.VirtualHosts {
		if slices.Contains(c.VirtualHosts[i].Domains, req.Host) {
			vh = &c.VirtualHosts[i]
		}
	}
	for i := range c.VirtualHosts {
		if vh == nil && slices.Contains(c.VirtualHosts[i].Domains, "*") {
			vh = &c.VirtualHosts[i]
		}
	}
	if vh == nil {
		return nil, fmt.Errorf("no virtual host for %q", req.Host)
	}
	for i := range vh.Routes {
		ok, err := matches(vh.Routes[i].Match, req)
		if err != nil {
			return nil, fmt.Errorf("route %s: %w", vh.Routes[i].Name, err)
		}
		if ok {
			return &vh.Routes[i], nil
		}
	}
	return nil, nil
}

// matches is Envoy's route match (config.route.v3.RouteMatch) for the
// matchers Envoy Gateway writes: path, headers (":method" is the method),
// gRPC; a query parameter matcher never matches (requests here carry none).
func matches(m routeMatch, req request) (bool, error) {
	switch {
	case m.Prefix != nil:
		if !strings.HasPrefix(req.Path, *m.Prefix) {
			return false, nil
		}
	case m.Path != nil:
		if req.Path != *m.Path {
			return false, nil
		}
	case m.PathSeparatedPrefix != nil:
		p := *m.PathSeparatedPrefix
		if req.Path != p && !strings.HasPrefix(req.Path, p+"/") {
			return false, nil
		}
	case m.SafeRegex != nil:
		ok, err := fullMatch(m.SafeRegex.Regex, req.Path)
		if err != nil || !ok {
			return false, err
		}
	default:
		return false, fmt.Errorf("a path matcher this check does not know")
	}
	if len(m.QueryParameters) > 0 {
		return false, nil
	}
	// A gRPC matcher takes requests of content-type application/grpc.
	if m.Grpc != nil && !strings.HasPrefix(req.Headers["content-type"], "application/grpc") {
		return false, nil
	}
	for _, h := range m.Headers {
		value, present := req.Headers[strings.ToLower(h.Name)]
		if strings.EqualFold(h.Name, ":method") {
			value, present = req.Method, true
		}
		var ok bool
		switch s := h.StringMatch; {
		case h.PresentMatch:
			ok = present
		case s == nil:
			return false, fmt.Errorf("header %s: a matcher this check does not know", h.Name)
		case !present:
			ok = false
		default:
			v := value
			cmp := func(p string) string { return p }
			if s.IgnoreCase {
				v, cmp = strings.ToLower(v), strings.ToLower
			}
			switch {
			case s.Exact != nil:
				ok = v == cmp(*s.Exact)
			case s.Prefix != nil:
				ok = strings.HasPrefix(v, cmp(*s.Prefix))
			case s.Suffix != nil:
				ok = strings.HasSuffix(v, cmp(*s.Suffix))
			case s.Contains != nil:
				ok = strings.Contains(v, cmp(*s.Contains))
			case s.SafeRegex != nil:
				var err error
				if ok, err = fullMatch(s.SafeRegex.Regex, value); err != nil {
					return false, err
				}
			}
		}
		if ok == h.InvertMatch {
			return false, nil
		}
	}
	return true, nil
}

// fullMatch is RE2 matching the whole value, as Envoy's safe_regex does.
func fullMatch(expr, s string) (bool, error) {
	re, err := regexp.Compile(`^(?:` + expr + `)$`)
	if err != nil {
		return false, fmt.Errorf("regex %q: %w", expr, err)
	}
	return re.MatchString(s), nil
}

// ruleOf is the rule index Envoy Gateway's name of an xDS route or cluster
// gives ("httproute/ns/name/rule/2/match/0/*" is rule 2), -1 for none.
func ruleOf(name, kind, ns, route string) (int, bool) {
	prefix := strings.ToLower(kind) + "/" + ns + "/" + route + "/rule/"
	if !strings.HasPrefix(name, prefix) {
		return 0, false
	}
	n, _, _ := strings.Cut(strings.TrimPrefix(name, prefix), "/")
	i, err := strconv.Atoi(n)
	return i, err == nil
}
