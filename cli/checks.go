package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/kube"
	"github.com/gatewayapi-ssa/rollouts-plugin/plan"
	"github.com/gatewayapi-ssa/rollouts-plugin/rollout"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/ssa"
)

// clusterChecks checks a plan against a cluster: the routes where they are
// (a route cluster, or the kubeconfig's cluster), the Services and the
// Rollout's permissions in the kubeconfig's cluster.
type clusterChecks struct {
	reader   *kube.Cluster
	dyn      dynamic.Interface
	gw       gateway.Interface
	writer   *ssa.Writer
	identity string
	// reviewer asks SelfSubjectAccessReviews as identity.
	reviewer authorizationclient.SelfSubjectAccessReviewInterface
	// routeReviewer and routeIdentity ask about the routes: reviewer and
	// identity, or, in a route cluster, the kubeconfig's user there (the
	// plugin's identity in that cluster).
	routeReviewer authorizationclient.SelfSubjectAccessReviewInterface
	routeIdentity string
	fm            string
	// routeCluster names the route cluster of the routes, "" for the
	// kubeconfig's own; requireGrants and peersNamespace are the plugin's
	// -require-reference-grants and -peers-namespace.
	routeCluster   string
	requireGrants  bool
	peersNamespace string
	// notes are the permissions the plugin goes on without.
	notes []string
}

func newClusterChecks(conn *connection, rc *rollout.RouteCluster, fieldManager, as string) (*clusterChecks, error) {
	cfg, err := conn.config()
	if err != nil {
		return nil, err
	}
	routesCfg := cfg
	if rc != nil {
		if routesCfg, err = (&connection{kubeconfig: rc.Kubeconfig}).config(); err != nil {
			return nil, fmt.Errorf("route cluster %s: %w", rc.Name, err)
		}
	}
	dyn, dynErr := dynamic.NewForConfig(cfg)
	routesDyn, routesDynErr := dynamic.NewForConfig(routesCfg)
	gw, gwErr := gateway.NewForConfig(routesCfg)
	impersonated := rest.CopyConfig(cfg)
	if as != "" {
		impersonated.Impersonate = rest.ImpersonationConfig{UserName: as, Groups: groupsOf(as)}
	}
	authz, revErr := authorizationclient.NewForConfig(impersonated)
	routesAuthz, routesRevErr := authz, error(nil)
	if rc != nil {
		routesAuthz, routesRevErr = authorizationclient.NewForConfig(routesCfg)
	}
	for _, err := range []error{dynErr, routesDynErr, gwErr, revErr, routesRevErr} {
		if err != nil {
			return nil, fmt.Errorf("building the Kubernetes clients: %w", err)
		}
	}
	log := quietLog()
	reader := kube.NewCluster(gw.GatewayV1().RESTClient(), log)
	identity := as
	if identity == "" {
		identity = "you (the kubeconfig's user; give --as for the controller's ServiceAccount)"
	}
	routeIdentity := identity
	if rc != nil {
		routeIdentity = fmt.Sprintf("the user of route cluster %s's kubeconfig (the plugin's identity there)", rc.Name)
	}
	return &clusterChecks{reader: reader, dyn: dyn, gw: gw, writer: ssa.NewWriter(gw, routesDyn, fieldManager, log),
		identity: identity, reviewer: authz.SelfSubjectAccessReviews(), routeReviewer: routesAuthz.SelfSubjectAccessReviews(),
		routeIdentity: routeIdentity, fm: fieldManager, routeCluster: routeClusterName(rc)}, nil
}

// routeClusterName is rc's name, "" for none.
func routeClusterName(rc *rollout.RouteCluster) string {
	if rc == nil {
		return ""
	}
	return rc.Name
}

// groupsOf are the groups Kubernetes gives a ServiceAccount's tokens.
func groupsOf(user string) []string {
	sa, ok := strings.CutPrefix(user, "system:serviceaccount:")
	if !ok {
		return nil
	}
	ns, _, _ := strings.Cut(sa, ":")
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
}

// run runs every check and adds what fails to the plan's problems; it says
// which checks ran.
func (c *clusterChecks) run(ctx context.Context, ro *v1alpha1.Rollout, pluginName string, p *plan.Plan) []string {
	checks := []string{"every computed route sent as a server-side dry-run apply"}
	c.dryRun(ctx, p)
	checks = append(checks, "the Rollout's Services exist")
	c.services(ctx, ro, p)
	if settings, err := rollout.ParseConfig(ro, pluginName); err == nil {
		checks = append(checks, "ReferenceGrants of cross-namespace backends", "permissions of "+c.identity)
		if c.routeIdentity != c.identity {
			checks = append(checks, "permissions on the routes of "+c.routeIdentity)
		}
		c.referenceGrants(ctx, ro, p)
		c.permissions(ctx, ro, settings, p)
	}
	return checks
}

// dryRun sends every route each step changed, as the plugin would write it
// then, as a server-side dry-run apply on the route as it is now.
func (c *clusterChecks) dryRun(ctx context.Context, p *plan.Plan) {
	for i, ref := range p.Routes {
		live, err := c.reader.Fresh(ctx, ref)
		if err != nil {
			p.Problems = append(p.Problems, plan.Problem{Step: "dry run", Route: ref.String(), Reason: err.Error()})
			continue
		}
		for k, step := range p.Steps {
			rs := step.Routes[i]
			if rs.Unchanged || rs.Error != "" {
				continue
			}
			after := p.After[k][i]
			d := desired.Result{Rules: after.Rules, Labels: owned(after.Labels, after.ManagedFields.Owned(c.fm).Labels),
				Annotations: owned(after.Annotations, after.ManagedFields.Owned(c.fm).Annotations)}
			if err := c.writer.DryRun(ctx, live, ssa.Content{Rules: d.Rules, Labels: d.Labels, Annotations: d.Annotations}); err != nil {
				p.Problems = append(p.Problems, plan.Problem{Step: stepName(step), Route: ref.String(), Reason: "the apiserver refuses the route: " + err.Error()})
			}
		}
	}
}

func owned(values map[string]string, keys []string) map[string]string {
	out := map[string]string{}
	for _, k := range keys {
		if v, ok := values[k]; ok {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func stepName(s plan.Step) string {
	if s.Index > 0 {
		return fmt.Sprintf("step %d (%s)", s.Index, s.Name)
	}
	return s.Name
}

// services checks that the stable and canary Services exist: a backendRef to
// a missing Service gets the gateway's error for its share.
func (c *clusterChecks) services(ctx context.Context, ro *v1alpha1.Rollout, p *plan.Plan) {
	stable, canary, err := rollout.StableAndCanary(ro)
	if err != nil {
		return // the plan reported it
	}
	for _, name := range []string{stable, canary} {
		_, err := c.dyn.Resource(kube.ServicesResource).Namespace(ro.Namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			p.Problems = append(p.Problems, plan.Problem{Step: "Services", Reason: fmt.Sprintf("Service %s/%s does not exist: the routes' backendRefs to it would fail", ro.Namespace, name)})
		case err != nil:
			p.Problems = append(p.Problems, plan.Problem{Step: "Services", Reason: fmt.Sprintf("reading Service %s/%s: %v", ro.Namespace, name, err)})
		}
	}
}

// referenceGrants checks that a route in another namespace than the
// Rollout's may point at the Rollout's Services.
func (c *clusterChecks) referenceGrants(ctx context.Context, ro *v1alpha1.Rollout, p *plan.Plan) {
	for _, ref := range p.Routes {
		if ref.Namespace == ro.Namespace {
			continue
		}
		grants, err := c.gw.GatewayV1beta1().ReferenceGrants(ro.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			p.Problems = append(p.Problems, plan.Problem{Step: "ReferenceGrants", Route: ref.String(), Reason: fmt.Sprintf("listing ReferenceGrants in %s: %v", ro.Namespace, err)})
			continue
		}
		granted := false
		for _, g := range grants.Items {
			from, to := false, false
			for _, f := range g.Spec.From {
				from = from || (string(f.Group) == routes.Group && string(f.Kind) == string(ref.Kind) && string(f.Namespace) == ref.Namespace)
			}
			for _, t := range g.Spec.To {
				to = to || (string(t.Group) == "" && string(t.Kind) == "Service")
			}
			granted = granted || (from && to)
		}
		if !granted {
			p.Problems = append(p.Problems, plan.Problem{Step: "ReferenceGrants", Route: ref.String(), Reason: fmt.Sprintf(
				"no ReferenceGrant in namespace %s lets %ss of namespace %s refer to Services there: the gateway would refuse the backendRefs; create one (docs/experiments.md)",
				ro.Namespace, ref.Kind, ref.Namespace)})
		}
	}
}

// permissions checks, with SelfSubjectAccessReviews as the identity, the
// verbs the plugin needs for each feature the Rollout uses (permissionsFor):
// what a feature cannot do without is a problem, what the plugin goes on
// without (it logs what to grant) a note. It stops at the first review the
// apiserver does not answer.
func (c *clusterChecks) permissions(ctx context.Context, ro *v1alpha1.Rollout, s rollout.Settings, p *plan.Plan) {
	for _, need := range c.permissionsFor(ro, s) {
		reviewer, identity := c.reviewer, c.identity
		if need.inRouteCluster {
			reviewer, identity = c.routeReviewer, c.routeIdentity
		}
		missing, err := missingVerbs(ctx, reviewer, identity, need.permissionTarget, need.verbs)
		if err != nil {
			p.Problems = append(p.Problems, plan.Problem{Step: "permissions", Reason: err.Error()})
			return
		}
		if len(missing) == 0 {
			continue
		}
		res := need.resource
		if need.name != "" {
			res += " " + need.name
		}
		if need.group != "" {
			res += "." + need.group
		}
		where := " in namespace " + need.namespace
		if need.namespace == "" {
			where = ""
		}
		if !need.required {
			c.notes = append(c.notes, fmt.Sprintf("%s may not %s %s%s, which %s needs; the plugin goes on without it (docs/install.md)",
				identity, strings.Join(missing, ", "), res, where, need.feature))
			continue
		}
		p.Problems = append(p.Problems, plan.Problem{Step: "permissions", Reason: fmt.Sprintf("%s may not %s %s%s; grant it (docs/install.md): %s needs it",
			identity, strings.Join(missing, ", "), res, where, need.feature)})
	}
}

// permissionTarget is a resource in a namespace ("" cluster-wide), or one
// object of it by name, the plugin acts on.
type permissionTarget struct{ group, resource, namespace, name string }

// permission is what one feature needs: verbs on a target, asked of the
// identity in the routes' cluster (inRouteCluster) or in the kubeconfig's.
// Without a required one the feature fails; without another the plugin
// goes on and logs what to grant.
type permission struct {
	permissionTarget
	verbs          []string
	feature        string
	required       bool
	inRouteCluster bool
}

// permissionsFor are the permissions each feature the Rollout uses needs,
// each once, in the order the config names them: its routes' kinds in
// their namespaces, the ReferenceGrants of other namespaces, Services in
// its own for an experiment step, kube-system and the ClusterProperty to
// name the cluster where the routes are in a route cluster, the Leases,
// Events and access reviews.
func (c *clusterChecks) permissionsFor(ro *v1alpha1.Rollout, s rollout.Settings) []permission {
	var out []permission
	add := func(p permission) {
		if !slices.ContainsFunc(out, func(q permission) bool { return q.permissionTarget == p.permissionTarget && q.feature == p.feature }) {
			out = append(out, p)
		}
	}
	var namespaces []string
	kinds := func(kind routes.Kind, ns string) {
		t := permissionTarget{group: routes.Group, resource: kind.Resource(), namespace: ns}
		add(permission{permissionTarget: t, verbs: []string{"get", "patch"}, feature: "every write to the routes", required: true, inRouteCluster: true})
		add(permission{permissionTarget: t, verbs: []string{"list", "watch"}, feature: "the watch caches of the routes (without them reads go by GET)", inRouteCluster: true})
		if !slices.Contains(namespaces, ns) {
			namespaces = append(namespaces, ns)
		}
	}
	for _, ref := range s.Targets.Named {
		kinds(ref.Kind, ref.Namespace)
	}
	for _, sel := range s.Targets.Selectors {
		kinds(sel.Kind, sel.Namespace)
	}
	for _, ns := range namespaces {
		if ns != ro.Namespace && c.requireGrants {
			add(permission{permissionTarget: permissionTarget{group: routes.Group, resource: "referencegrants", namespace: ns}, verbs: []string{"list", "watch"},
				feature: "a route in another namespace than the Rollout's (its ReferenceGrants)", required: true, inRouteCluster: true})
		}
	}
	for _, st := range ro.Spec.Strategy.Canary.Steps {
		if st.Experiment != nil {
			add(permission{permissionTarget: permissionTarget{resource: "services", namespace: ro.Namespace}, verbs: []string{"get"},
				feature: "an experiment step (the Services' ports)", required: true})
			break
		}
	}
	if c.routeCluster != "" {
		naming := "naming this cluster in the claims on route cluster " + c.routeCluster + "'s routes"
		add(permission{permissionTarget: permissionTarget{resource: "namespaces", name: "kube-system"}, verbs: []string{"get"}, feature: naming, required: true})
		add(permission{permissionTarget: permissionTarget{group: "about.k8s.io", resource: "clusterproperties", name: "cluster.clusterset.k8s.io"}, verbs: []string{"get"},
			feature: naming + " by its ClusterProperty"})
	}
	if c.peersNamespace != "" {
		add(permission{permissionTarget: permissionTarget{group: "coordination.k8s.io", resource: "leases", namespace: c.peersNamespace},
			verbs: []string{"get", "list", "watch", "create", "patch", "delete"}, feature: "knowing of the plugin's other processes (without it every write carries its resourceVersion)", inRouteCluster: true})
	}
	add(permission{permissionTarget: permissionTarget{group: "events.k8s.io", resource: "events", namespace: ro.Namespace}, verbs: []string{"create", "patch"},
		feature: "Events on the Rollout"})
	for _, ns := range namespaces {
		add(permission{permissionTarget: permissionTarget{group: "events.k8s.io", resource: "events", namespace: ns}, verbs: []string{"create", "patch"},
			feature: "Events on the routes", inRouteCluster: true})
	}
	add(permission{permissionTarget: permissionTarget{group: "authorization.k8s.io", resource: "selfsubjectaccessreviews"}, verbs: []string{"create"},
		feature: "the checks of get and patch before a rollout's first and last write", inRouteCluster: true})
	return out
}

// missingVerbs are the verbs of verbs the reviewer's identity may not use
// on the target, in order; the error says which review the apiserver did
// not answer.
func missingVerbs(ctx context.Context, reviewer authorizationclient.SelfSubjectAccessReviewInterface, identity string, t permissionTarget, verbs []string) ([]string, error) {
	var missing []string
	for _, verb := range verbs {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: t.namespace, Verb: verb, Group: t.group, Resource: t.resource, Name: t.name}}}
		got, err := reviewer.Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("asking whether %s may %s %s: %v", identity, verb, t.resource, err)
		}
		if !got.Status.Allowed {
			missing = append(missing, verb)
		}
	}
	return missing, nil
}
