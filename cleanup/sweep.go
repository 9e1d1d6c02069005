package cleanup

import (
	"context"
	"errors"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// Sweeper undoes, on the routes of a cluster, the claims of Rollouts that
// no longer exist (the plugin's -cleanup-deleted-rollouts): the claims of
// its Cleaner's cluster, where the Rollout may reach the route. A Rollout
// counts as gone only when two sweeps an interval apart found it missing: a
// Rollout deleted and created again in between is left alone. Values
// another manager changed since the plugin set them are not overwritten:
// that route is logged as a conflict and left as it is.
//
// What a sweep costs is bounded by the routes, not by what their claims
// annotations say (a route's owner may write them): the routes are listed
// a page at a time, each route's claims read once per sweep, and the
// Rollouts with one LIST per sweep, however many Rollouts the claims name.
// A sweep ends where its context does, between any two of its requests.
type Sweeper struct {
	Cleaner  *Cleaner
	Interval time.Duration
	// Namespaces are the namespaces whose routes it sweeps (a route
	// cluster's -route-namespaces); nil for every namespace.
	Namespaces []string
	// missing records since when each Rollout was seen missing.
	missing map[string]time.Time
	// notGranted are the routes of deleted Rollouts whose namespace does
	// not grant them (by "<rollout> <route>"), as logged: each is logged
	// once while it lasts.
	notGranted map[string]bool
}

// Run sweeps every interval until ctx ends.
func (s *Sweeper) Run(ctx context.Context) {
	t := time.NewTicker(s.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.Sweep(ctx, now)
		}
	}
}

// Sweep is one pass; now is the time of the pass.
func (s *Sweeper) Sweep(ctx context.Context, now time.Time) {
	c := s.Cleaner
	ctx, cancel := context.WithTimeout(ctx, s.Interval)
	defer cancel()
	claimed, err := s.routes(ctx)
	if err != nil {
		c.Log.WithError(err).Warn("cleanup sweep: cannot list routes; the next sweep tries again")
		return
	}
	idx := c.indexClaims(claimed)
	claimed = nil // idx holds what is still needed of them
	notGranted := map[string]bool{}
	for _, rollout := range s.gone(ctx, now, idx) {
		if ctx.Err() != nil {
			c.Log.WithError(ctx.Err()).Warn("cleanup sweep: stopped before it was done; the next sweep carries on")
			return
		}
		undone := 0
		for _, o := range c.Undo(ctx, rollout, idx.claimed[rollout], desired.ReportConflicts, false) {
			entry := c.Log.WithFields(logrus.Fields{"rollout": rollout, "route": o.Route.String()})
			var ungranted *routes.NotGrantedError
			switch {
			case errors.As(o.Err, &ungranted):
				key := rollout + " " + o.Route.String()
				if notGranted[key] = true; !s.notGranted[key] {
					entry.WithError(o.Err).Warn("cleanup sweep: the route's namespace does not grant the deleted Rollout's namespace; its claim there is left as it is")
				}
			case o.Err != nil:
				entry.WithError(o.Err).Error("cleanup sweep: the deleted Rollout's claim could not be undone; run the cleanup command, with --force to take over")
			default:
				undone++
			}
		}
		if undone > 0 {
			c.Log.WithFields(logrus.Fields{"rollout": rollout, "routes": undone}).Info("cleanup sweep: undid the claims of a deleted Rollout")
		}
	}
	s.notGranted = notGranted
	s.releaseUnclaimed(ctx, idx.unclaimed)
}

// routes lists the routes of the Sweeper's namespaces that matter to it:
// those that carry claims, and those the plugin owns fields of. It lists
// them a page at a time, and keeps no other.
func (s *Sweeper) routes(ctx context.Context) ([]routes.Route, error) {
	c := s.Cleaner
	namespaces := s.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	var out []routes.Route
	for _, ns := range namespaces {
		err := c.eachRoute(ctx, ns, func(r routes.Route) {
			if _, claims := r.Annotations[routes.ClaimsAnnotation]; claims || r.ManagedFields.OwnsAnything(c.FieldManager) {
				out = append(out, r)
			}
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// gone are the Rollouts with a claim of the Cleaner's cluster on the routes
// that count as gone now: missing from this sweep's LIST of Rollouts, and
// from one at least half an interval before. It remembers the Rollouts
// missing now, and forgets every other.
func (s *Sweeper) gone(ctx context.Context, now time.Time, idx claimIndex) []string {
	c := s.Cleaner
	claiming, malformed := idx.rollouts, idx.malformed
	if len(malformed) > 0 {
		c.Log.WithField("claims", malformed).Warn("cleanup sweep: claims whose key is not <namespace>/<name> name no Rollout; leaving them")
	}
	if len(claiming) == 0 {
		s.missing = nil
		return nil
	}
	exists, err := c.existing(ctx, claiming)
	if err != nil {
		c.Log.WithError(err).Warn("cleanup sweep: cannot tell which Rollouts exist; leaving every claim until the next sweep")
		return nil
	}
	missing := map[string]time.Time{}
	var gone []string
	for _, rollout := range claiming {
		if exists[rollout] {
			continue
		}
		since, seen := s.missing[rollout]
		if !seen {
			since = now
		}
		missing[rollout] = since
		if seen && now.Sub(since) >= s.Interval/2 {
			gone = append(gone, rollout)
		}
	}
	s.missing = missing
	return gone
}

// releaseUnclaimed gives up the plugin's ownership of the unclaimed
// routes, on which no Rollout has a claim left (a Rollout deleted right
// after its last rule went, before a SetWeight could release the route).
func (s *Sweeper) releaseUnclaimed(ctx context.Context, unclaimed []routes.Route) {
	c := s.Cleaner
	for _, r := range unclaimed {
		if ctx.Err() != nil {
			return
		}
		for _, o := range c.Undo(ctx, "", []routes.Route{r}, desired.ReportConflicts, false) {
			if o.Err != nil {
				c.Log.WithError(o.Err).WithField("route", o.Route.String()).Warn("cleanup sweep: cannot give up ownership of a route no Rollout claims")
			}
		}
	}
}
