package desired

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// dataPlaneSettle holds, by the controllerName a gateway implementation
// reports in status.parents, how long after writing a route's status its data
// plane is known to carry the route. Only implementations measured against a
// real data plane are listed (docs/verify-weight.md has the figures).
var dataPlaneSettle = map[string]time.Duration{
	// Traefik writes status.parents while it builds a new configuration, and
	// hands that configuration on after its providers throttle
	// (providersThrottleDuration, default 2 s) at the latest, then builds its
	// handlers. With the default throttle, traffic moved up to about 2.5 s
	// after the status was written (make e2e, 2 cores); 4 s is the throttle
	// plus 2 s for the handlers on a loaded machine.
	"traefik.io/gateway-controller": 4 * time.Second,
}

// Settle is how long VerifyWeight waits, after the status for a route's
// current generation was written, before it says the weights are carried.
type Settle struct {
	// Wait is that time; 0 for none.
	Wait time.Duration
	// Source says where Wait comes from: the Rollout's config key or the
	// controllers it was chosen for.
	Source string
}

// SettleFor is a route's settle: override (the Rollout's verifyWeightSettle)
// when given, else the longest dataPlaneSettle of the controllers that
// report status for the parents spec.parentRefs names (none known: 0).
func SettleFor(r routes.Route, override *time.Duration) Settle {
	if override != nil {
		return Settle{Wait: *override, Source: "verifyWeightSettle"}
	}
	var s Settle
	var known []string
	for _, name := range reportingControllers(r) {
		if d, ok := dataPlaneSettle[name]; ok {
			known = append(known, name)
			s.Wait = max(s.Wait, d)
		}
	}
	if len(known) > 0 {
		s.Source = "settle time of " + strings.Join(known, ", ")
	}
	return s
}

// reportingControllers are the controllerNames of the status.parents entries
// for parents that spec.parentRefs names, sorted, without duplicates.
func reportingControllers(r routes.Route) []string {
	var out []string
	for _, st := range r.Parents.Status {
		if slices.Contains(r.Parents.Refs, st.ParentRef) && st.ControllerName != "" && !slices.Contains(out, st.ControllerName) {
			out = append(out, st.ControllerName)
		}
	}
	slices.Sort(out)
	return out
}

// statusWritten is when the route's status was last written, as the
// apiserver recorded it in metadata.managedFields (the newest entry for the
// status subresource), plus one second: those times are truncated to the
// second, so the write happened before the time returned. ok is false when
// no status write is recorded.
func statusWritten(r routes.Route) (at time.Time, ok bool) {
	for _, e := range r.ManagedFields.Entries() {
		if e.Subresource == "status" && e.Time != nil && e.Time.After(at) {
			at, ok = e.Time.Time, true
		}
	}
	if !ok {
		return time.Time{}, false
	}
	return at.Add(time.Second), true
}

// Remaining is how much longer than now the route must wait: the settle
// after statusWritten, 0 when it has passed. Call it once the status is
// current for the route's generation (VerifyStatus): the newest status write
// is then the one that made it current, or a later one. A route that needs a
// settle but has no status write recorded is an error, since nothing says
// when the wait began.
func (s Settle) Remaining(r routes.Route, now time.Time) (time.Duration, error) {
	if s.Wait <= 0 {
		return 0, nil
	}
	written, ok := statusWritten(r)
	if !ok {
		return 0, fmt.Errorf("%s: metadata.managedFields records no write of the status subresource, so the %s wait (%s) has no start; "+
			"set verifyWeightSettle: 0s to verify by status alone", r.Ref, s.Source, s.Wait)
	}
	return max(0, written.Add(s.Wait).Sub(now)), nil
}
