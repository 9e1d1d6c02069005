package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/kube"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

const inspectUsage = `usage: rollouts-gatewayapi-ssa inspect KIND/NAME [-n NAMESPACE] [flags]

Explains what the plugin holds on a route (KIND: httproute, grpcroute,
tcproute, tlsroute, udproute): who owns spec.rules and the other fields, what
each Rollout's claim records against what the route has now, whether the
plugin's next call would report a conflict, and whether it would give up its
ownership. With --cluster, the route is read in that route cluster, reached
with the kubeconfig --route-cluster gives it (the plugin's own values).

flags:
`

// runInspect runs the inspect command: it reads one route and explains on
// out what the plugin holds on it.
func runInspect(args []string, out, errOut io.Writer) int {
	fs := newFlags("inspect", inspectUsage, errOut)
	output := fs.String("o", "text", "output: text, json or yaml")
	fs.selectCluster()
	positional, ok := parseInterspersed(fs, args)
	if !ok {
		return 2
	}
	if len(positional) != 1 || !strings.Contains(" text json yaml ", " "+*output+" ") {
		fs.Usage()
		return 2
	}
	ref, err := parseRouteArg(positional[0], fs.conn.namespace)
	if err != nil {
		fmt.Fprintln(errOut, err)
		return 2
	}
	rc, err := fs.routeCluster()
	if err != nil {
		fmt.Fprintln(errOut, err)
		return 2
	}
	in, err := inspect(fs.routesConnection(rc), ref, fs.fieldManager)
	if err == nil {
		err = writeInspection(out, *output, in, fs.fieldManager)
	}
	if err != nil {
		fmt.Fprintln(errOut, err)
		return 1
	}
	return 0
}

// parseInterspersed parses args with fs, flags before and after the
// positional arguments, as kubectl takes them, and returns the positional
// ones; not ok when a flag does not parse.
func parseInterspersed(fs *commandFlags, args []string) (positional []string, ok bool) {
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return nil, false
		}
		if fs.NArg() == 0 {
			break
		}
		positional, args = append(positional, fs.Arg(0)), fs.Args()[1:]
	}
	return positional, true
}

// inspect reads the route where conn reaches it and explains what the
// plugin, writing as fieldManager, holds on it, with whether each claim's
// Rollout may reach the route.
func inspect(conn *connection, ref routes.Ref, fieldManager string) (desired.Inspection, error) {
	cfg, err := conn.config()
	if err != nil {
		return desired.Inspection{}, err
	}
	gw, err := gateway.NewForConfig(cfg)
	if err != nil {
		return desired.Inspection{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reader := kube.NewCluster(gw.GatewayV1().RESTClient(), quietLog())
	defer reader.Close()
	live, err := reader.Fresh(ctx, ref)
	if err != nil {
		return desired.Inspection{}, fmt.Errorf("reading %s: %w", ref, err)
	}
	in, err := desired.Inspect(live, fieldManager)
	if err != nil {
		return desired.Inspection{}, err
	}
	if err := reachOfClaims(ctx, reader, live.Ref, in.Claims); err != nil {
		return desired.Inspection{}, err
	}
	return in, nil
}

// writeInspection writes the inspection as text, JSON or YAML.
func writeInspection(out io.Writer, format string, in desired.Inspection, fieldManager string) error {
	if format != "text" {
		return encode(out, format, in)
	}
	_, err := out.Write(inspectText(in, fieldManager))
	return err
}

// reachOfClaims says, for each claim, whether its Rollout may reach the
// route: a Rollout of another namespace only where the route's namespace
// grants it (as the plugin checks with -require-reference-grants).
func reachOfClaims(ctx context.Context, reader kube.Reader, route routes.Ref, claims []desired.ClaimState) error {
	for i, c := range claims {
		ns, _, _ := strings.Cut(c.Rollout, "/")
		if ns == route.Namespace {
			continue
		}
		refused, err := kube.Reach(ctx, reader, ns, routes.Targets{Named: []routes.Ref{route}})
		switch {
		case err != nil:
			return fmt.Errorf("reading the ReferenceGrants of namespace %s: %w", route.Namespace, err)
		case len(refused) > 0:
			claims[i].Reach = "not granted: the plugin refuses its calls: " + refused[0].Error()
		default:
			claims[i].Reach = "granted by a ReferenceGrant of namespace " + route.Namespace
		}
	}
	return nil
}

// parseRouteArg reads KIND/NAME, kind in kubectl's spelling.
func parseRouteArg(arg, namespace string) (routes.Ref, error) {
	kind, name, ok := strings.Cut(arg, "/")
	if namespace == "" {
		namespace = "default"
	}
	for _, k := range routes.Kinds {
		if ok && name != "" && (strings.EqualFold(kind, string(k)) || strings.EqualFold(kind, k.Resource())) {
			return routes.Ref{Kind: k, Namespace: namespace, Name: name}, nil
		}
	}
	var kinds []string
	for _, k := range routes.Kinds {
		kinds = append(kinds, strings.ToLower(string(k)))
	}
	return routes.Ref{}, fmt.Errorf("%q is not KIND/NAME with KIND one of %s", arg, strings.Join(kinds, ", "))
}

// inspectText is the inspection as inspect prints it: the route's owners,
// who owns spec.rules, each Rollout's claim against what the route has now,
// and whether the next call gives up the plugin's ownership.
func inspectText(in desired.Inspection, fieldManager string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\n\nowners:\n", in.Route)
	for _, o := range in.Owners {
		what := o.Operation
		if o.APIVersion != "" {
			what += ", " + o.APIVersion
		}
		if o.Time != "" {
			what += ", " + o.Time
		}
		fmt.Fprintf(&b, "  %s (%s): %s\n", o.Manager, what, strings.Join(o.Fields, ", "))
	}
	rulesOwners := strings.Join(in.RulesOwners, ", ")
	if rulesOwners == "" {
		rulesOwners = "nobody"
	}
	fmt.Fprintf(&b, "\nspec.rules is owned by: %s\n", rulesOwners)
	if len(in.Claims) == 0 {
		b.WriteString("\nclaims: none (no Rollout has anything on this route)\n")
	}
	for _, c := range in.Claims {
		writeClaim(&b, c)
		writeConflict(&b, c, in.PluginOwnsRules, fieldManager)
	}
	fmt.Fprintf(&b, "\nrelease at the next call: %v\n", in.Release)
	return b.Bytes()
}

// writeClaim writes what a Rollout's claim records and what of it the
// route has now: weights, experiment backendRefs, added rules and filters.
func writeClaim(b *bytes.Buffer, c desired.ClaimState) {
	cluster := ""
	if c.Cluster != "" {
		cluster = ", of cluster " + c.Cluster
	}
	fmt.Fprintf(b, "\nRollout %s (active: %v, canary weight %d%s):\n", c.Rollout, c.Active, c.CanaryWeight, cluster)
	if c.Reach != "" {
		fmt.Fprintf(b, "  reach: %s\n", c.Reach)
	}
	for _, w := range c.Weights {
		now := fmt.Sprint(w.Now)
		if w.Now < 0 {
			now = "gone"
		}
		fmt.Fprintf(b, "  weight rule %d %s: set %d, now %s\n", w.Rule, w.Service, w.Set, now)
	}
	for _, be := range c.Backends {
		fmt.Fprintf(b, "  experiment backendRef: %s\n", be)
	}
	for _, r := range c.Rules {
		fmt.Fprintf(b, "  added rule %q: %s\n", r.Name, ruleState(r))
	}
	for _, f := range c.Filters {
		fmt.Fprintf(b, "  mirror filter %s\n", f)
	}
	for _, f := range c.Cookies {
		fmt.Fprintf(b, "  sticky cookie filter %s\n", f)
	}
}

// ruleState says whether an added rule is still as the plugin wrote it.
func ruleState(r desired.RuleState) string {
	state := "as written"
	switch {
	case !r.Present:
		state = "gone"
	case r.Changed:
		state = "changed by someone else"
	}
	if r.Unnamed {
		state += " (stored without a name: the CRD had no rule names; known by its content)"
	}
	return state
}

// writeConflict says whether the plugin's next call that sets the claim's
// values again would report a conflict, and why.
func writeConflict(b *bytes.Buffer, c desired.ClaimState, pluginOwnsRules bool, fieldManager string) {
	switch {
	case len(c.Changed) > 0:
		fmt.Fprintf(b, "  conflict: yes: %s; a call that sets these again fails until the change is reverted, the other owner ignores the weights, or conflictPolicy: Force\n", strings.Join(c.Changed, "; "))
	case pluginOwnsRules:
		fmt.Fprintf(b, "  conflict: no (%s still owns spec.rules: nobody changed them since its last write)\n", fieldManager)
	default:
		b.WriteString("  conflict: no (what the plugin set is still there)\n")
	}
}
