package desired

import (
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/transform"
)

// Intent is one call of the controller, decided for one route at a time.
type Intent interface {
	// Desired decides what the live route must become for the call.
	Desired(live routes.Route, env Env) (Result, error)
}

// SetWeight is SetWeight(weight, additionalDestinations): the split on the
// weighted rules, and the experiment Services with their weights (none: the
// experiment backends the Rollout added leave).
type SetWeight struct {
	Split      transform.Split
	Experiment transform.ExperimentInput
	// Sticky is the Rollout's stickyCanary with its revisions; nil without
	// one. The cookies and their rules are on the route while both the canary
	// and stable have weight.
	Sticky *transform.Sticky
}

// SetHeader is SetHeaderRoute: the header rules of managedRoutes entry Name
// with the given header matches; no match removes them.
type SetHeader struct {
	Name  string
	Match []transform.HeaderMatch
	Rules transform.RolloutServices
}

// SetMirror is SetMirrorRoute: the mirror rule of managedRoutes entry Name
// with the given matches, mirroring Percent of them (nil: all); no match, or
// 0 %, removes it.
type SetMirror struct {
	Name    string
	Match   []transform.RequestMatch
	Percent *int32
	Rules   transform.RolloutServices
}

// RemoveManaged is RemoveManagedRoutes: every rule the plugin added for the
// Rollout goes.
type RemoveManaged struct{}

// Undoes says whether the call only takes back what the Rollout put on its
// routes: RemoveManagedRoutes, a header or mirror step's removal, and
// SetWeight(0) with no experiment Service (the end of an abort). Such a call
// may still be carried out on the routes where the Rollout has a claim once
// their namespace no longer grants it (a revoked ReferenceGrant).
func Undoes(i Intent) bool {
	switch c := i.(type) {
	case RemoveManaged, Undo:
		return true
	case SetHeader:
		return len(c.Match) == 0
	case SetMirror:
		return !c.adding()
	case SetWeight:
		return c.Split.CanaryWeight == 0 && len(c.Experiment.Destinations) == 0
	}
	return false
}

// adding says whether the mirror call adds a rule (or removes one).
func (c SetMirror) adding() bool {
	return len(c.Match) > 0 && (c.Percent == nil || *c.Percent != 0)
}

// ConflictPolicy says what the plugin does when another field manager changed
// values it manages while a rollout is in progress.
type ConflictPolicy string

const (
	// ReportConflicts leaves the route as it is and returns a ConflictError.
	ReportConflicts ConflictPolicy = "Error"
	// TakeOver writes anyway and says from whom it took spec.rules.
	TakeOver ConflictPolicy = "Force"
)

// Env is what a call runs in, for one route.
type Env struct {
	// Rollout is "<namespace>/<name>", the key of the Rollout's claim.
	Rollout string
	// Cluster names the cluster the Rollout runs in (kube.NameCluster) when
	// the route is in a route cluster, which the members of a fleet share:
	// its claims record it with ClusterUID, its kube-system's UID, and a
	// claim of the same Rollout recorded by another member is not this
	// one's (whose). "" for the cluster's own routes: no name is needed
	// there. ClusterSource says where the name was read.
	Cluster, ClusterUID, ClusterSource string
	// FieldManager is the plugin's server-side apply field manager.
	FieldManager   string
	ConflictPolicy ConflictPolicy
	// InProgressLabel is applied while any Rollout has a claim on the route;
	// nil when disabled.
	InProgressLabel map[string]string
	// TakesHeaderRoutes says whether setHeaderRoute rules go on this route;
	// ListedForHeaderRoutes whether the Rollout's config lists it with
	// useHeaderRoutes: true (an error on a kind without matches).
	TakesHeaderRoutes     bool
	ListedForHeaderRoutes bool
	// RuleName, when set, is the one rule of the route the Rollout targets
	// (ruleName in its config): weights, experiment backends and the rules
	// header and mirror steps copy come from that rule only.
	RuleName string
	// MirrorMode says how setMirrorRoute steps mirror (default MirrorRule).
	MirrorMode MirrorMode
	// AddCanaryBackendRef lets SetWeight add the canary backendRef to the
	// rules that hold only the stable one while the canary or an experiment
	// has weight (addCanaryBackendRef); the SetWeight(0) that ends the
	// rollout removes it.
	AddCanaryBackendRef bool
	// AssumedFeatures are features the Rollout's config says its gateways
	// carry whatever their classes publish (assumeGatewayFeatures).
	AssumedFeatures []string
	// PredecessorManager is the field manager of the argoproj-labs/gatewayAPI
	// plugin this one replaces (the last element of the name it is
	// registered under): its in-progress label is this plugin's to take.
	PredecessorManager string
	// Predecessor is what the argoproj-labs/gatewayAPI plugin recorded of
	// the header rules it added for the Rollout on the route, adopted at the
	// Rollout's first call there (adopt.go); nil: nothing to adopt.
	Predecessor *Predecessor
}

// MirrorMode says how a setMirrorRoute step mirrors.
type MirrorMode string

const (
	// MirrorRule adds a rule of its own with the step's matches, sending to
	// stable and mirroring the step's percentage of them to the canary: only
	// the requests the step matches are mirrored. The default.
	MirrorRule MirrorMode = "rule"
	// MirrorFilter adds a RequestMirror filter with the step's percentage to
	// every weighted rule: every request those rules carry may be mirrored;
	// the step's matches are not applied.
	MirrorFilter MirrorMode = "filter"
)

// Result is what the route must become.
type Result struct {
	// Rules, Labels and Annotations are what the plugin applies: spec.rules
	// whole, and its own labels and annotations (one it applied before and
	// leaves out goes away, unless another manager owns it).
	Rules       []routes.Rule
	Labels      map[string]string
	Annotations map[string]string
	// Claim is what the route records for the Rollout after the call.
	Claim routes.Claim
	// Unchanged says the live route already is what the call wants: nothing
	// is sent.
	Unchanged bool
	// Release says no Rollout has anything left on the route: once it is
	// written (or when nothing is), the plugin gives up its ownership. Only
	// SetWeight (and Undo) release: the controller follows every other call
	// with a SetWeight in the same reconcile.
	Release bool
	// Changes says what differs from the live route, for the write's log line.
	Changes []routes.Change
	// Needs are the features what the call adds (new or changed added
	// rules, new mirror filters) needs of the route's gateways.
	Needs []RuleNeed
	// Unchecked are the parents that could not say whether they carry
	// Needs (Check): written anyway, as gateways that publish
	// nothing cannot be asked, and logged.
	Unchecked []Unchecked
}
