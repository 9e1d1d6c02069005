package cleanup

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/orchestrator"
	"github.com/gatewayapi-ssa/rollouts-plugin/rollout"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// rolloutsResource is the resource of Argo Rollouts' Rollout.
var rolloutsResource = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}

// Reader is what the Cleaner reads of the routes' cluster besides the
// routes: the version each route kind is served in, and the ReferenceGrants
// of a namespace (a kube.Reader has both).
type Reader interface {
	ServedVersion(ctx context.Context, kind routes.Kind) (string, error)
	ReferenceGrants(ctx context.Context, namespace string) ([]routes.ReferenceGrant, error)
}

// defaultPageSize is the limit of each LIST when the Cleaner sets none.
const defaultPageSize = 500

// Cleaner finds and undoes Rollouts' claims on routes: only the claims of
// its own cluster's Rollouts, and only where the Rollout may reach the
// route.
type Cleaner struct {
	// Dynamic lists the routes; Rollouts reads the Rollouts, in the
	// controller's cluster (nil: with Dynamic, when the routes are there
	// too).
	Dynamic  dynamic.Interface
	Rollouts dynamic.Interface
	// Versions reads the routes' cluster: the served versions and the
	// ReferenceGrants.
	Versions     Reader
	Orchestrator *orchestrator.Orchestrator
	FieldManager string
	// SharedRoutes says the routes are in a route cluster, which the
	// Rollouts of several clusters may share: a claim that names no cluster
	// may be any of theirs, so it is left (the next call of its Rollout
	// names its cluster).
	SharedRoutes bool
	// Cluster and ClusterUID name the cluster the Rollouts run in
	// (kube.NameCluster). A fleet runs the same Rollout in several member
	// clusters against one route: with SharedRoutes the Cleaner takes back
	// only the claims of its UID, whatever their name, and those without a
	// UID (written before claims had one) that carry its name. On the
	// cluster's own routes it takes back the claims that name no cluster
	// (its Rollouts' claims there name none), and those of its name without
	// a UID (written before) when Cluster is set; it needs no name.
	Cluster, ClusterUID string
	// IgnoreReferenceGrants lets a claim on a route in another namespace
	// than the Rollout's be undone where that namespace grants the
	// Rollout's nothing (the plugin's -require-reference-grants=false). By
	// default such a route is left, and its Outcome says which grant is
	// missing.
	IgnoreReferenceGrants bool
	// PageSize is the limit of each LIST of routes and of Rollouts (0:
	// 500), so no LIST holds a whole cluster at once.
	PageSize int64
	Log      *logrus.Entry
}

// Routes lists every route (of every kind the cluster serves) in namespace,
// "" for all, with the claims it carries. A kind the cluster does not serve
// is skipped.
func (c *Cleaner) Routes(ctx context.Context, namespace string) ([]routes.Route, error) {
	var out []routes.Route
	err := c.eachRoute(ctx, namespace, func(r routes.Route) { out = append(out, r) })
	return out, err
}

// eachRoute hands each route of namespace ("" for all) to fn, listing them
// a page at a time.
func (c *Cleaner) eachRoute(ctx context.Context, namespace string, fn func(routes.Route)) error {
	for _, kind := range routes.Kinds {
		version, err := c.Versions.ServedVersion(ctx, kind)
		if err != nil {
			continue // not installed: nothing of the plugin's can be there
		}
		opts := metav1.ListOptions{Limit: c.pageSize()}
		for {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("listing %s: %w", kind.Resource(), err)
			}
			list, err := c.Dynamic.Resource(kind.GVR(version)).Namespace(namespace).List(ctx, opts)
			if err != nil {
				return fmt.Errorf("listing %s: %w", kind.Resource(), err)
			}
			for i := range list.Items {
				r, err := routes.FromUnstructured(&list.Items[i])
				if err != nil {
					return err
				}
				fn(r)
			}
			if opts.Continue = list.GetContinue(); opts.Continue == "" {
				break
			}
		}
	}
	return nil
}

func (c *Cleaner) pageSize() int64 {
	if c.PageSize > 0 {
		return c.PageSize
	}
	return defaultPageSize
}

// ours says whether the claim is the Cleaner's cluster's to take back: one
// of its UID; without a UID, one of its name, or on its own routes one
// that names no cluster. A claim on its own routes with a name and no UID
// may be a fleet member's, written through a route cluster before claims
// had a UID: without the cluster's name it is left.
func (c *Cleaner) ours(claim routes.Claim) bool {
	switch {
	case claim.ClusterUID != "":
		return c.SharedRoutes && claim.ClusterUID == c.ClusterUID
	case claim.Cluster == "":
		return !c.SharedRoutes
	}
	return claim.Cluster == c.Cluster
}

// Claimed are the routes among rs on which rollout ("<namespace>/<name>")
// has a claim of the Cleaner's cluster that records anything.
func (c *Cleaner) Claimed(rs []routes.Route, rollout string) []routes.Route {
	var out []routes.Route
	for _, r := range rs {
		claims, err := routes.ReadClaims(r)
		if claim := claims[rollout]; err == nil && !claim.Empty() && c.ours(claim) {
			out = append(out, r)
		}
	}
	return out
}

// ForeignClaim is a claim of a Rollout of the same namespace and name that
// another cluster made on a route: the Cleaner leaves it.
type ForeignClaim struct {
	Route routes.Ref
	// Cluster is the cluster that made the claim.
	Cluster string
}

// ClaimedElsewhere are the claims of rollout ("<namespace>/<name>") on rs
// that another cluster than the Cleaner's made (in a fleet, the same
// Rollout of another member cluster).
func (c *Cleaner) ClaimedElsewhere(rs []routes.Route, rollout string) []ForeignClaim {
	var out []ForeignClaim
	for _, r := range rs {
		claims, err := routes.ReadClaims(r)
		if claim := claims[rollout]; err == nil && !claim.Empty() && !c.ours(claim) {
			out = append(out, ForeignClaim{Route: r.Ref, Cluster: claim.Cluster})
		}
	}
	return out
}

// readClaims reads a route's claims annotation: routes.ReadClaims (a test
// counts the reads).
var readClaims = routes.ReadClaims

// claimIndex is what the claims annotations of a sweep's routes say, each
// read once (indexClaims).
type claimIndex struct {
	// rollouts are the Rollouts with a claim of the Cleaner's cluster
	// recording anything on any of the routes, sorted; malformed, apart,
	// the keys of such claims that name no Rollout (not
	// "<namespace>/<name>"): the plugin never wrote them.
	rollouts, malformed []string
	// claimed are the routes each of them has such a claim on, in the order
	// of the routes.
	claimed map[string][]routes.Route
	// unclaimed are the routes whose claims annotation can be read and
	// names no Rollout, and of which the plugin owns fields.
	unclaimed []routes.Route
}

// indexClaims reads the claims annotation of each of rs, once.
func (c *Cleaner) indexClaims(rs []routes.Route) claimIndex {
	idx := claimIndex{claimed: map[string][]routes.Route{}}
	for _, r := range rs {
		claims, err := readClaims(r)
		if err != nil {
			continue
		}
		if len(claims.Rollouts()) == 0 && r.ManagedFields.OwnsAnything(c.FieldManager) {
			idx.unclaimed = append(idx.unclaimed, r)
		}
		for k, claim := range claims {
			if !claim.Empty() && c.ours(claim) {
				idx.claimed[k] = append(idx.claimed[k], r)
			}
		}
	}
	for k := range idx.claimed {
		if ns, name, ok := strings.Cut(k, "/"); ok && ns != "" && name != "" && !strings.Contains(name, "/") {
			idx.rollouts = append(idx.rollouts, k)
		} else {
			idx.malformed = append(idx.malformed, k)
		}
	}
	sort.Strings(idx.rollouts)
	sort.Strings(idx.malformed)
	return idx
}

// Exists says whether the Rollout ("<namespace>/<name>") exists.
func (c *Cleaner) Exists(ctx context.Context, rollout string) (bool, error) {
	ns, name, ok := strings.Cut(rollout, "/")
	if !ok {
		return false, fmt.Errorf("%q is not <namespace>/<name>", rollout)
	}
	_, err := c.rollouts().Resource(rolloutsResource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("reading Rollout %s: %w", rollout, err)
}

// rollouts is the client of the Rollouts' cluster.
func (c *Cleaner) rollouts() dynamic.Interface {
	if c.Rollouts != nil {
		return c.Rollouts
	}
	return c.Dynamic
}

// existing says which of the Rollouts ("<namespace>/<name>") exist, with
// one LIST of the Rollouts of every namespace, a page at a time: one
// LIST however many Rollouts it is asked about, as their names come from
// the routes' claims annotations, which a route's owner may write.
func (c *Cleaner) existing(ctx context.Context, rollouts []string) (map[string]bool, error) {
	out := make(map[string]bool, len(rollouts))
	for _, r := range rollouts {
		out[r] = false
	}
	opts := metav1.ListOptions{Limit: c.pageSize()}
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("listing Rollouts: %w", err)
		}
		list, err := c.rollouts().Resource(rolloutsResource).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing Rollouts: %w", err)
		}
		for _, u := range list.Items {
			key := u.GetNamespace() + "/" + u.GetName()
			if _, asked := out[key]; asked {
				out[key] = true
			}
		}
		if opts.Continue = list.GetContinue(); opts.Continue == "" {
			return out, nil
		}
	}
}

// Outcome is what undoing a claim did, or would do, on one route.
type Outcome struct {
	Route   routes.Ref
	Changes []string
	// Unchanged says the route needed no write.
	Unchanged bool
	Err       error
}

// Undo takes rollout's claim back on each route. With dryRun it only says
// what it would change. policy says what to do with values another manager
// changed since the plugin set them. A route in another namespace than the
// Rollout's that does not grant it the route (a ReferenceGrant, as for the
// plugin's calls) is not written: its Outcome's Err is the
// *routes.NotGrantedError.
func (c *Cleaner) Undo(ctx context.Context, ro string, rs []routes.Route, policy desired.ConflictPolicy, dryRun bool) []Outcome {
	env := desired.Env{Rollout: ro, FieldManager: c.FieldManager, ConflictPolicy: policy}
	if c.SharedRoutes { // desired.Env: the cluster's own routes need no name
		env.Cluster, env.ClusterUID = c.Cluster, c.ClusterUID
	}
	ns, name, _ := strings.Cut(ro, "/")
	by := rollout.Call{Rollout: rollout.Rollout{Namespace: ns, Name: name}, Label: rollout.Label{Method: rollout.Cleanup}}
	grants := map[string][]routes.ReferenceGrant{}
	out := make([]Outcome, 0, len(rs))
	for _, r := range rs {
		o := Outcome{Route: r.Ref}
		if err := ctx.Err(); err != nil {
			o.Err = fmt.Errorf("%s not undone: %w", r.Ref, err)
			out = append(out, o)
			continue
		}
		if err := c.reach(ctx, ro, r.Ref, grants); err != nil {
			o.Err = err
			out = append(out, o)
			continue
		}
		plan, err := c.Orchestrator.MakePlan(ctx, r, env, desired.Undo{})
		if err != nil {
			o.Err = err
		} else if o.Changes, o.Unchanged = routes.ChangeTexts(plan.Desired.Changes), plan.Desired.Unchanged; !dryRun {
			o.Err = c.Orchestrator.Write(ctx, plan, by)
		}
		out = append(out, o)
	}
	return out
}

// reach says whether rollout may reach the route ref: one in its own
// namespace, or in one whose ReferenceGrants grant it (read once per
// namespace into grants); nil also when the Cleaner ignores the grants, or
// for no Rollout (rollout ""). Else a *routes.NotGrantedError, or the
// error of the read.
func (c *Cleaner) reach(ctx context.Context, rollout string, ref routes.Ref, grants map[string][]routes.ReferenceGrant) error {
	ns, _, _ := strings.Cut(rollout, "/")
	if rollout == "" || ns == ref.Namespace || c.IgnoreReferenceGrants {
		return nil
	}
	if _, read := grants[ref.Namespace]; !read {
		g, err := c.Versions.ReferenceGrants(ctx, ref.Namespace)
		if err != nil {
			return err
		}
		grants[ref.Namespace] = g
	}
	if missing := routes.Reach(ns, routes.Targets{Named: []routes.Ref{ref}}, grants); len(missing) > 0 {
		return missing[0]
	}
	return nil
}

// Failed joins the errors of the outcomes.
func Failed(outcomes []Outcome) error {
	var errs []error
	for _, o := range outcomes {
		if o.Err != nil {
			errs = append(errs, o.Err)
		}
	}
	return errors.Join(errs...)
}
