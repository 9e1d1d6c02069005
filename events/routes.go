package events

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gatewayapi-ssa/rollouts-plugin/rollout"
)

// reasonOwnershipReleased is the reason of the Event that says the plugin
// gave its ownership of spec.rules back. A write's changes say their own
// reasons (routes.Changes.Notes).
const reasonOwnershipReleased = "OwnershipReleased"

// Routes records Events on the routes of one cluster, with that cluster's
// client (orchestrator.RouteEvents). A nil *Routes records nothing.
type Routes struct{ rec *Recorder }

// NewRoutes returns a Routes that records with rec.
func NewRoutes(rec *Recorder) *Routes { return &Routes{rec: rec} }

// Changed records, as a Normal Event of reason, what a write of the call
// changed on the route: note says the changes of that reason (one call
// per routes.Note of the write, in their order).
func (r *Routes) Changed(route corev1.ObjectReference, call rollout.Call, reason, note string) {
	if r == nil {
		return
	}
	r.record(route, call, corev1.EventTypeNormal, reason, note)
}

// Released records that the plugin gave its ownership of the route's
// spec.rules back after the call for the Rollout; dropped are the
// managedFields entries it removed.
func (r *Routes) Released(route corev1.ObjectReference, call rollout.Call, dropped []string) {
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
func (r *Routes) Refused(route corev1.ObjectReference, call rollout.Call, err error) {
	if r == nil {
		return
	}
	if why := Reason(err); refusedOnRoute[why] {
		r.record(route, call, corev1.EventTypeWarning, why, strings.ReplaceAll(err.Error(), "\n", "; "))
	}
}

func (r *Routes) record(route corev1.ObjectReference, call rollout.Call, typ, why, what string) {
	related := rolloutRef(call.Rollout)
	related.UID = "" // as the claims know it: by namespace and name
	r.rec.Record(Event{
		Regarding: route,
		Related:   &related,
		Type:      typ, Reason: why, Action: string(call.Label.Method),
		Note: fmt.Sprintf("rollout %s: %s: %s", call.Rollout, call.Label, what),
	})
}
