package orchestrator

import "sync/atomic"

// Writes counts what came of an orchestrator's route writes since it
// started, for people watching the plugin (package metrics). A call's write
// of one route ends as Applied (the apiserver stored an apply), Unchanged
// (nothing to send), Refused (its decision refused the route: a conflict
// with another manager's values, a limit, a rule without both Services) or
// Failed (the apiserver refused or did not answer, the deadline passed);
// on the way it may meet Conflicts (an apply answered 409: another
// manager's change of spec.rules, or a stale resourceVersion) and send
// Retried applies after them; Released counts the ownerships given back.
type Writes struct {
	Applied, Unchanged, Refused, Failed uint64
	Conflicts, Retried, Released        uint64
}

// writeCounts are the counters behind Writes.
type writeCounts struct {
	applied, unchanged, refused, failed atomic.Uint64
	conflicts, retried, released        atomic.Uint64
}

// Writes says what came of the orchestrator's route writes so far.
func (o *Orchestrator) Writes() Writes {
	c := &o.counts
	return Writes{
		Applied: c.applied.Load(), Unchanged: c.unchanged.Load(), Refused: c.refused.Load(), Failed: c.failed.Load(),
		Conflicts: c.conflicts.Load(), Retried: c.retried.Load(), Released: c.released.Load(),
	}
}

// ended counts how a route's write ended with err (nil: applied or
// unchanged, counted where that is known).
func (c *writeCounts) ended(err error) {
	switch {
	case err == nil:
	case refused([]error{err}):
		c.refused.Add(1)
	default:
		c.failed.Add(1)
	}
}
