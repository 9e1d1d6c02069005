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

func runInspect(args []string, out, errOut io.Writer) int {
	fs := newFlags("inspect", inspectUsage, errOut)
	conn, fieldManager := &fs.conn, &fs.fieldManager
	output := fs.String("o", "text", "output: text, json or yaml")
	fs.selectCluster()
	// Flags may follow the route, as with kubectl.
	var positional []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		positional, args = append(positional, fs.Arg(0)), fs.Args()[1:]
	}
	if len(positional) != 1 || !strings.Contains(" text json yaml ", " "+*output+" ") {
		fs.Usage()
		return 2
	}
	ref, err := parseRouteArg(positional[0], conn.namespace)
	if err != nil {
		fmt.Fprintln(errOut, err)
		return 2
	}
	rc, err := fs.routeCluster()
	if err != nil {
		fmt.Fprintln(errOut, err)
		return 2
	}
	cfg, err := fs.routesConnection(rc).config()
	if err != nil {
		fmt.Fprintln(errOut, err)
		return 1
	}
	gw, err := gateway.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintln(errOut, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reader := kube.NewCluster(gw.GatewayV1().RESTClient(), quietLog())
	defer reader.Close()
	live, err := reader.Fresh(ctx, ref)
	if err != nil {
		fmt.Fprintf(errOut, "reading %s: %v\n", ref, err)
		return 1
	}
	in, err := desired.Inspect(live, *fieldManager)
	if err != nil {
		fmt.Fprintln(errOut, err)
		return 1
	}
	if err := reachOfClaims(ctx, reader, live.Ref, in.Claims); err != nil {
		fmt.Fprintln(errOut, err)
		return 1
	}
	if *output == "text" {
		_, err = out.Write(inspectText(in, *fieldManager))
	} else {
		err = encode(out, *output, in)
	}
	if err != nil {
		fmt.Fprintln(errOut, err)
		return 1
	}
	return 0
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
		cluster := ""
		if c.Cluster != "" {
			cluster = ", of cluster " + c.Cluster
		}
		fmt.Fprintf(&b, "\nRollout %s (active: %v, canary weight %d%s):\n", c.Rollout, c.Active, c.CanaryWeight, cluster)
		if c.Reach != "" {
			fmt.Fprintf(&b, "  reach: %s\n", c.Reach)
		}
		for _, w := range c.Weights {
			now := fmt.Sprint(w.Now)
			if w.Now < 0 {
				now = "gone"
			}
			fmt.Fprintf(&b, "  weight rule %d %s: set %d, now %s\n", w.Rule, w.Service, w.Set, now)
		}
		for _, be := range c.Backends {
			fmt.Fprintf(&b, "  experiment backendRef: %s\n", be)
		}
		for _, r := range c.Rules {
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
			fmt.Fprintf(&b, "  added rule %q: %s\n", r.Name, state)
		}
		for _, f := range c.Filters {
			fmt.Fprintf(&b, "  mirror filter %s\n", f)
		}
		for _, f := range c.Cookies {
			fmt.Fprintf(&b, "  sticky cookie filter %s\n", f)
		}
		switch {
		case len(c.Changed) > 0:
			fmt.Fprintf(&b, "  conflict: yes: %s; a call that sets these again fails until the change is reverted, the other owner ignores the weights, or conflictPolicy: Force\n", strings.Join(c.Changed, "; "))
		case in.PluginOwnsRules:
			fmt.Fprintf(&b, "  conflict: no (%s still owns spec.rules: nobody changed them since its last write)\n", fieldManager)
		default:
			b.WriteString("  conflict: no (what the plugin set is still there)\n")
		}
	}
	fmt.Fprintf(&b, "\nrelease at the next call: %v\n", in.Release)
	return b.Bytes()
}
