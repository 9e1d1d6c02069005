package events

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gatewayapi-ssa/rollouts-plugin/decode"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// The reasons of the Normal Events on a route, one per kind of change.
const (
	reasonWeightsChanged            = "WeightsChanged"
	reasonExperimentBackendsAdded   = "ExperimentBackendsAdded"
	reasonExperimentBackendsRemoved = "ExperimentBackendsRemoved"
	reasonRulesAdded                = "RulesAdded"
	reasonRulesChanged              = "RulesChanged"
	reasonRulesRemoved              = "RulesRemoved"
	reasonRulesAdopted              = "RulesAdopted"
	reasonMirrorFiltersAdded        = "MirrorFiltersAdded"
	reasonMirrorFiltersRemoved      = "MirrorFiltersRemoved"
	reasonStickyCookiesAdded        = "StickyCookiesAdded"
	reasonStickyCookiesRemoved      = "StickyCookiesRemoved"
	reasonRulesTakenOver            = "RulesTakenOver"
	reasonOwnershipReleased         = "OwnershipReleased"
)

// changeReasons is the order a write's Events are recorded in.
var changeReasons = []string{
	reasonRulesTakenOver, reasonWeightsChanged, reasonExperimentBackendsAdded, reasonExperimentBackendsRemoved,
	reasonRulesAdopted, reasonRulesAdded, reasonRulesChanged, reasonRulesRemoved, reasonMirrorFiltersAdded, reasonMirrorFiltersRemoved,
	reasonStickyCookiesAdded, reasonStickyCookiesRemoved,
}

// Routes records Events on the routes of one cluster, with that cluster's
// client (orchestrator.RouteEvents). A nil *Routes records nothing.
type Routes struct{ rec *Recorder }

// NewRoutes returns a Routes that records with rec.
func NewRoutes(rec *Recorder) *Routes { return &Routes{rec: rec} }

// Changed records what a write of the call for the Rollout (namespace/name)
// changed on the route: one Normal Event per kind of change. changes are the
// write's, as desired.Result.Changes says them; the plugin's own label and
// claims annotation are bookkeeping, not told.
func (r *Routes) Changed(route routes.Route, call decode.Call, changes []routes.Change) {
	if r == nil {
		return
	}
	byReason := map[string][]string{}
	for _, c := range changes {
		if why := changeReason[c.Kind]; why != "" {
			byReason[why] = append(byReason[why], c.Text)
		}
	}
	for _, why := range changeReasons {
		if cs := byReason[why]; len(cs) > 0 {
			r.record(route, call, corev1.EventTypeNormal, why, strings.Join(cs, "; "))
		}
	}
}

// Released records that the plugin gave its ownership of the route's
// spec.rules back after the call for the Rollout; dropped are the
// managedFields entries it removed.
func (r *Routes) Released(route routes.Route, call decode.Call, dropped []string) {
	if r == nil {
		return
	}
	entries := "entry"
	if len(dropped) > 1 {
		entries = "entries"
	}
	r.record(route, call, corev1.EventTypeNormal, reasonOwnershipReleased,
		fmt.Sprintf("the plugin gave its ownership of spec.rules back, removing its managedFields %s (%s); every value kept: GitOps tools see the route's own changes again",
			entries, strings.Join(dropped, ", ")))
}

// Refused records, as a Warning, that the call for the Rollout was refused
// on the route for what the route (its gateway, its CRD) is: err, the
// route's own error. Errors that are the Rollout's or the plugin's to fix
// (a permission, the apiserver) are told on the Rollout only.
func (r *Routes) Refused(route routes.Route, call decode.Call, err error) {
	if r == nil {
		return
	}
	if why := Reason(err); refusedOnRoute[why] {
		r.record(route, call, corev1.EventTypeWarning, why, strings.ReplaceAll(err.Error(), "\n", "; "))
	}
}

func (r *Routes) record(route routes.Route, call decode.Call, typ, why, what string) {
	related := rolloutRef(call.Rollout)
	related.UID = "" // as the claims know it: by namespace and name
	r.rec.Record(Event{
		Regarding: corev1.ObjectReference{
			APIVersion: apiVersion(route.Version), Kind: string(route.Kind),
			Namespace: route.Namespace, Name: route.Name, UID: route.UID,
		},
		Related: &related,
		Type:    typ, Reason: why, Action: string(call.Label.Method),
		Note: fmt.Sprintf("rollout %s: %s: %s", call.Rollout, call.Label, what),
	})
}

// apiVersion is the apiVersion of a route of version v: a constant for the
// versions the plugin serves, so that the series the Recorder keeps (one
// per route and step) do not each hold a copy.
func apiVersion(v string) string {
	switch v {
	case "v1":
		return routes.Group + "/v1"
	case "v1beta1":
		return routes.Group + "/v1beta1"
	case "v1alpha2":
		return routes.Group + "/v1alpha2"
	}
	return routes.Group + "/" + v
}

// changeReasons are the Event reasons of the kinds of change; the plugin's
// bookkeeping (its label, its claims annotation) is not told.
var changeReason = map[routes.ChangeKind]string{
	routes.WeightChanged: reasonWeightsChanged, routes.BackendAdded: reasonExperimentBackendsAdded,
	routes.BackendRemoved: reasonExperimentBackendsRemoved, routes.RuleAdded: reasonRulesAdded,
	routes.RuleChanged: reasonRulesChanged, routes.RuleRemoved: reasonRulesRemoved, routes.RuleAdopted: reasonRulesAdopted,
	routes.MirrorFilterAdded: reasonMirrorFiltersAdded, routes.MirrorFilterRemoved: reasonMirrorFiltersRemoved,
	routes.CookieAdded: reasonStickyCookiesAdded, routes.CookieRemoved: reasonStickyCookiesRemoved,
	routes.RulesTakenOver: reasonRulesTakenOver,
}
