package cleanup

import (
	"context"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// Sweeper undoes, on every route of the cluster, the claims of Rollouts that
// no longer exist (the plugin's -cleanup-deleted-rollouts). A Rollout counts
// as gone only when two sweeps an interval apart found it missing and a
// fresh read just before the write still does: a Rollout deleted and created
// again in between is left alone. Values another manager changed since the
// plugin set them are not overwritten: that route is logged as a conflict
// and left as it is.
type Sweeper struct {
	Cleaner  *Cleaner
	Interval time.Duration
	// missing records since when each Rollout was seen missing.
	missing map[string]time.Time
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
	if s.missing == nil {
		s.missing = map[string]time.Time{}
	}
	ctx, cancel := context.WithTimeout(ctx, s.Interval)
	defer cancel()
	all, err := c.Routes(ctx, "")
	if err != nil {
		c.Log.WithError(err).Warn("cleanup sweep: cannot list routes; the next sweep tries again")
		return
	}
	gone := map[string]bool{}
	for _, rollout := range claimingRollouts(all) {
		exists, err := c.Exists(ctx, rollout)
		switch {
		case err != nil:
			c.Log.WithError(err).WithField("rollout", rollout).Warn("cleanup sweep: cannot tell whether the Rollout exists; leaving its claims")
		case exists:
			delete(s.missing, rollout)
		default:
			since, seen := s.missing[rollout]
			if !seen {
				s.missing[rollout] = now
				continue
			}
			gone[rollout] = now.Sub(since) >= s.Interval/2
		}
	}
	for rollout, ripe := range gone {
		if !ripe {
			continue
		}
		if exists, err := c.Exists(ctx, rollout); err != nil || exists {
			delete(s.missing, rollout)
			continue
		}
		outcomes := c.Undo(ctx, rollout, Claimed(all, rollout), desired.ReportConflicts, false)
		for _, o := range outcomes {
			entry := c.Log.WithFields(logrus.Fields{"rollout": rollout, "route": o.Route.String()})
			if o.Err != nil {
				entry.WithError(o.Err).Error("cleanup sweep: the deleted Rollout's claim could not be undone; run the cleanup command, with --force to take over")
			}
		}
		if Failed(outcomes) == nil {
			delete(s.missing, rollout)
			c.Log.WithFields(logrus.Fields{"rollout": rollout, "routes": len(outcomes)}).Info("cleanup sweep: undid the claims of a deleted Rollout")
		}
	}
	s.releaseUnclaimed(ctx, all)
}

// releaseUnclaimed gives up the plugin's ownership of routes on which no
// Rollout has a claim left (a Rollout deleted right after its last rule went,
// before a SetWeight could release the route).
func (s *Sweeper) releaseUnclaimed(ctx context.Context, all []routes.Route) {
	c := s.Cleaner
	for _, r := range all {
		claims, err := routes.ReadClaims(r)
		if err != nil || len(claims.Rollouts()) > 0 || !routes.OwnsAnything(r.ManagedFields, c.FieldManager) {
			continue
		}
		for _, o := range c.Undo(ctx, "", []routes.Route{r}, desired.ReportConflicts, false) {
			if o.Err != nil {
				c.Log.WithError(o.Err).WithField("route", o.Route.String()).Warn("cleanup sweep: cannot give up ownership of a route no Rollout claims")
			}
		}
	}
}
