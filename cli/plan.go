package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/gatewayapi-ssa/rollouts-plugin/kube"
	"github.com/gatewayapi-ssa/rollouts-plugin/plan"
	"github.com/gatewayapi-ssa/rollouts-plugin/rollout"
)

const planUsage = `usage: rollouts-gatewayapi-ssa plan -f ROLLOUT.yaml [--routes FILE [--crds FILE]] [flags]

Shows, step by step, what the plugin would do to every route of the Rollout:
each canary step, the promotion and an abort, computed by the plugin's own
code from the routes as they are (in the cluster, or in --routes FILE, which
may hold the routes and the Rollout's Services; no cluster needed then; with
--crds, the Gateway API CRDs the cluster runs decide which fields the plugin
writes, as the cluster's do).
A route in another namespace than the Rollout's is read only where that
namespace grants the Rollout's namespace with a ReferenceGrant, as the plugin
does; plan lists the ReferenceGrants the Rollout lacks (as manifests to apply)
and plans no step until they are there.
Against a cluster it also sends every computed route as a server-side dry-run
apply (schema, CEL, limits), checks the Rollout's Services and the
ReferenceGrants of cross-namespace backends, and the permissions the plugin
needs, for --as (the controller's ServiceAccount). A Rollout whose config names
a route cluster ("cluster") has its routes read, dry-run and checked there,
reached with the kubeconfig --route-cluster gives it (the plugin's own values),
and its Services in the kubeconfig's cluster. Exit status 1 when any step or
check would fail, 0 when none would.

flags:
`

type planOptions struct {
	*commandFlags
	file, routesFile, as string
	crdsFile             string
	output               string
	pluginName           string
	timeout              time.Duration
	requireGrants        bool
	peersNamespace       string
}

func runPlan(args []string, out, errOut io.Writer) int {
	fs := newFlags("plan", planUsage, errOut)
	o := planOptions{commandFlags: fs}
	fs.StringVar(&o.file, "f", "", "the Rollout, as YAML (the file may hold other objects)")
	fs.StringVar(&o.routesFile, "routes", "", "read the routes (and Services) from this YAML file instead of the cluster")
	fs.StringVar(&o.crdsFile, "crds", "", "with --routes: the Gateway API CRDs the cluster runs, as YAML (e.g. its release's standard-install.yaml); default: CRDs with every field")
	fs.StringVar(&o.as, "as", "", "check the permissions of this identity, e.g. system:serviceaccount:argo-rollouts:argo-rollouts (default: your own)")
	fs.StringVar(&o.output, "o", "text", "output: text, json or yaml")
	fs.StringVar(&o.pluginName, "plugin-name", rollout.DefaultPluginName, "the plugin's -plugin-name")
	fs.DurationVar(&o.timeout, "timeout", time.Minute, "deadline of the whole command")
	fs.BoolVar(&o.requireGrants, "require-reference-grants", true, "the plugin's -require-reference-grants: routes in another namespace than the Rollout's need a ReferenceGrant there")
	fs.StringVar(&o.peersNamespace, "peers-namespace", "argo-rollouts", "the namespace of the plugin's Leases (its -peers-namespace, or the controller's): the permissions there are checked; empty: not checked")
	if err := fs.Parse(args); err != nil || o.file == "" || fs.NArg() > 0 || !strings.Contains(" text json yaml ", " "+o.output+" ") ||
		(o.crdsFile != "" && o.routesFile == "") {
		fs.Usage()
		return 2
	}
	ro, err := readRollout(o.file, o.conn.namespace)
	if err != nil {
		fmt.Fprintln(errOut, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	report, err := computePlan(ctx, &o, ro)
	if err != nil {
		fmt.Fprintln(errOut, err)
		return 1
	}
	if err := render(out, o.output, report); err != nil {
		fmt.Fprintln(errOut, err)
		return 1
	}
	if len(report.Problems) > 0 {
		return 1
	}
	return 0
}

// Report is what plan prints.
type Report struct {
	plan.Plan
	// Checks says which checks against the cluster ran.
	Checks []string `json:"checks"`
	// Notes are the permissions the plugin goes on without, and what for.
	Notes []string `json:"notes,omitempty"`
	OK    bool     `json:"ok"`
}

// computePlan computes the Rollout's plan from the routes of the files (--routes)
// or of the cluster, and against a cluster runs every check of the plan
// there.
func computePlan(ctx context.Context, o *planOptions, ro *v1alpha1.Rollout) (Report, error) {
	clusters, err := o.routeClusters.RouteClusters()
	if err != nil {
		return Report{}, err
	}
	in := plan.Input{Rollout: ro, Process: rollout.Process{PluginName: o.pluginName, FieldManager: o.fieldManager,
		RouteClusters: clusters, AnyNamespace: !o.requireGrants}}
	var c *clusterChecks
	if o.routesFile != "" {
		if err := o.readFiles(ro, &in); err != nil {
			return Report{}, err
		}
	} else {
		rc, err := routeClusterOf(ro, o)
		if err != nil {
			return Report{}, err
		}
		if c, err = newClusterChecks(&o.conn, rc, o.fieldManager, o.as); err != nil {
			return Report{}, err
		}
		c.requireGrants, c.peersNamespace = o.requireGrants, o.peersNamespace
		defer c.reader.Close() // its watch caches end with the command
		in.Reader, in.Services = c.reader, kube.DynamicServices{Dynamic: c.dyn}
	}
	r := Report{Plan: plan.Compute(ctx, in)}
	if c == nil {
		r.Checks = []string{"none against a cluster: routes from " + o.routesFile}
	} else {
		r.Checks = c.run(ctx, ro, o.pluginName, &r.Plan)
		r.Notes = c.notes
	}
	if r.Problems == nil {
		r.Problems = []plan.Problem{}
	}
	r.OK = len(r.Problems) == 0
	return r, nil
}

// readFiles makes the plan's input read the routes and Services of
// --routes, with the schemas of the CRDs of --crds, wherever the Rollout's
// config says its routes are: its route cluster needs no flags.
func (o *planOptions) readFiles(ro *v1alpha1.Rollout, in *plan.Input) error {
	if s, err := rollout.ParseConfig(ro, o.pluginName); err == nil && s.Cluster != "" &&
		!slices.ContainsFunc(in.Process.RouteClusters, func(c rollout.RouteCluster) bool { return c.Name == s.Cluster }) {
		in.Process.RouteClusters = append(in.Process.RouteClusters, rollout.RouteCluster{Name: s.Cluster, Namespaces: []string{rollout.AnyNamespace}})
	}
	f, err := os.Open(o.routesFile)
	if err != nil {
		return err
	}
	defer f.Close()
	files, err := plan.ReadFiles(ro.Namespace, f)
	if err != nil {
		return fmt.Errorf("%s: %w", o.routesFile, err)
	}
	if o.crdsFile != "" {
		crds, err := os.Open(o.crdsFile)
		if err != nil {
			return err
		}
		defer crds.Close()
		if err := files.Read(ro.Namespace, crds); err != nil {
			return fmt.Errorf("%s: %w", o.crdsFile, err)
		}
	}
	in.Reader, in.Services = files, files
	return nil
}

// routeClusterOf is the route cluster the Rollout's config names (nil: its
// routes are in the kubeconfig's cluster), refused as the plugin refuses it.
// A config that does not parse is the plan's first problem, reported there.
func routeClusterOf(ro *v1alpha1.Rollout, o *planOptions) (*rollout.RouteCluster, error) {
	settings, err := rollout.ParseConfig(ro, o.pluginName)
	if err != nil || settings.Cluster == "" {
		return nil, nil
	}
	clusters, err := o.routeClusters.RouteClusters()
	if err != nil {
		return nil, err
	}
	return settings.RouteClusterOf(clusters)
}

// readRollout reads the Rollout from a YAML file that may hold other objects.
func readRollout(path, namespace string) (*v1alpha1.Rollout, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLReader(bufioReader(data))
	for {
		doc, err := dec.Read()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s holds no Rollout (kind: Rollout, apiVersion: argoproj.io/v1alpha1)", path)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		var meta struct{ APIVersion, Kind string }
		if yaml.Unmarshal(doc, &meta) != nil || meta.Kind != "Rollout" || meta.APIVersion != "argoproj.io/v1alpha1" {
			continue
		}
		var ro v1alpha1.Rollout
		if err := yaml.UnmarshalStrict(doc, &ro); err != nil {
			return nil, fmt.Errorf("%s: the Rollout: %w", path, err)
		}
		if ro.Namespace == "" {
			ro.Namespace = namespace
		}
		if ro.Namespace == "" {
			ro.Namespace = "default"
		}
		if ro.Spec.Strategy.Canary == nil {
			return nil, fmt.Errorf("%s: Rollout %s has no canary strategy: the plugin routes canary rollouts only", path, ro.Name)
		}
		return &ro, nil
	}
}

// render prints the report as text, JSON or YAML.
func render(out io.Writer, format string, r Report) error {
	if format != "text" {
		return encode(out, format, r)
	}
	var b bytes.Buffer
	names := make([]string, len(r.Routes))
	for i, ref := range r.Routes {
		names[i] = ref.String()
	}
	fmt.Fprintf(&b, "Rollout %s: %d route(s): %s\n", r.Rollout, len(r.Routes), strings.Join(names, ", "))
	for _, s := range r.Steps {
		renderStep(&b, s)
	}
	if err := renderMissingGrants(&b, r.MissingGrants); err != nil {
		return err
	}
	fmt.Fprintf(&b, "\nchecks: %s\n", strings.Join(r.Checks, "; "))
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	renderProblems(&b, r)
	_, err := out.Write(b.Bytes())
	return err
}

// renderStep writes one step as text: its calls, then what it does to each
// route.
func renderStep(b *bytes.Buffer, s plan.Step) {
	label := s.Name
	if s.Index > 0 {
		label = fmt.Sprintf("step %d: %s", s.Index, s.Name)
	}
	fmt.Fprintf(b, "\n%s\n  calls: %s\n", label, strings.Join(s.Calls, ", "))
	for _, rs := range s.Routes {
		switch {
		case rs.Error != "":
			fmt.Fprintf(b, "  %s: FAILS: %s\n", rs.Route, rs.Error)
		case rs.Unchanged:
			fmt.Fprintf(b, "  %s: no change\n", rs.Route)
		default:
			fmt.Fprintf(b, "  %s:\n", rs.Route)
			for _, c := range rs.Changes {
				fmt.Fprintf(b, "    %s\n", c)
			}
		}
		for _, u := range rs.Unchecked {
			fmt.Fprintf(b, "    not checked: %s\n", u)
		}
	}
}

// renderMissingGrants writes the ReferenceGrants the Rollout lacks as
// manifests to apply, if any.
func renderMissingGrants(b *bytes.Buffer, grants []plan.Manifest) error {
	if len(grants) == 0 {
		return nil
	}
	b.WriteString("\nReferenceGrants the routes' namespaces lack for the Rollout (their owners create them: kubectl apply -f):\n")
	for _, g := range grants {
		data, err := yaml.Marshal(g)
		if err != nil {
			return err
		}
		fmt.Fprintf(b, "---\n%s", data)
	}
	return nil
}

// renderProblems writes how many problems the plan found and each one,
// with its step and route.
func renderProblems(b *bytes.Buffer, r Report) {
	if r.OK {
		b.WriteString("problems: none\n")
		return
	}
	fmt.Fprintf(b, "problems: %d\n", len(r.Problems))
	for _, p := range r.Problems {
		where := p.Step
		if p.Route != "" {
			where += ", " + p.Route
		}
		fmt.Fprintf(b, "  - %s: %s\n", where, p.Reason)
	}
}
