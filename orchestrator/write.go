package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/kube"
	"github.com/gatewayapi-ssa/rollouts-plugin/kubeclient"
	"github.com/gatewayapi-ssa/rollouts-plugin/retry"
	"github.com/gatewayapi-ssa/rollouts-plugin/rollout"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/ssa"
)

// Plan is a decided change to one route, not yet written: the route as it
// was read, what it must become, and what that was decided from (the
// intent, in env), so that Write decides again the same way after a
// conflict.
type Plan struct {
	Live    routes.Route
	Desired desired.Result
	Intent  desired.Intent
	Env     desired.Env
}

// MakePlan decides what the live route must become for intent in env
// (Decide, with what the orchestrator reads). Deciding every route's plan
// before writing any lets a caller refuse bad input with nothing written;
// Write makes the plan again through it after every optimistic-lock
// conflict.
func (o *Orchestrator) MakePlan(ctx context.Context, live routes.Route, env desired.Env, intent desired.Intent) (Plan, error) {
	d, err := Decide(ctx, o.reader, intent, live, env)
	if err != nil {
		return Plan{}, refusal{routes.RouteError(live.Ref, err)}
	}
	return Plan{Live: live, Desired: d, Intent: intent, Env: env}, nil
}

// refusal is a route's decision refusing the call (MakePlan): nothing is
// written to the route, whether the decision was made before the write or
// again after a conflict.
type refusal struct{ error }

func (r refusal) Unwrap() error { return r.error }

// refused says whether every error is a refusal.
func refused(errs []error) bool {
	for _, err := range errs {
		if !errors.As(err, new(refusal)) {
			return false
		}
	}
	return true
}

// Write applies the plan for the call. The process writes one route one
// call at a time: a plan decided before another call of the process wrote
// the route is decided again from that write's answer first. Each apply is
// guarded as the route's lock chooses (guard.go). After a conflict it reads
// the route again and decides again, as the retry policy says (package retry).
// It records every answer with the reader, logs one line per write that
// reached the apiserver, and tells the route's owners (RouteEvents) what it
// changed, or that it failed.
func (o *Orchestrator) Write(ctx context.Context, p Plan, call rollout.Call) (err error) {
	w := &routeWrite{o: o, call: call, plan: p, log: o.log.WithFields(logrus.Fields{"rollout": p.Env.Rollout, "call": call.Name})}
	defer func() {
		o.counts.ended(err)
		if err != nil {
			o.events.Refused(regarding(p.Live), call, err)
		}
	}()
	lock, written, err := o.locks.acquire(ctx, p.Live.Ref)
	if err != nil {
		return routes.RouteError(p.Live.Ref, fmt.Errorf("waiting for another call writing the route: %w", err))
	}
	defer lock.unlock()
	w.lock = lock
	if err := w.prepare(ctx, written); err != nil {
		return err
	}
	return w.run(ctx)
}

// routeWrite is one call's write of one route, from the moment it holds the
// route's lock: the plan it is at, and what the retry policy keeps of the
// attempts so far.
type routeWrite struct {
	o    *Orchestrator
	call rollout.Call
	plan Plan
	lock *routeLock
	log  *logrus.Entry
	// takeOver: an apply guarded by ownership met another manager's
	// rules; every later apply carries the resourceVersion.
	takeOver bool
	// attempts are the applies after which the rules changed (the first
	// included); busy those after which only what the plugin does not
	// write changed.
	attempts, busy int
}

// prepare makes the plan ready to write once the route's lock is held:
// decided again when the process wrote the route lately (written), maybe
// after the plan was decided (the reader holds that write's answer, or
// newer); and, when it writes, the access it needs to start or end the
// plugin's ownership reviewed.
func (w *routeWrite) prepare(ctx context.Context, written bool) error {
	if written {
		if err := w.replanIfNewer(ctx); err != nil {
			return err
		}
	}
	if p := w.plan; !p.Desired.Unchanged {
		if err := w.o.writer.ReviewOwnershipChange(ctx, p.Live, p.Desired.Release); err != nil {
			return routes.RouteError(p.Live.Ref, err)
		}
	}
	return nil
}

// run applies the plan until it is written, or refused, or the retry
// policy gives up. A conflict of an apply guarded by ownership (another
// manager took spec.rules) is answered once per write with a fresh read.
// An optimistic-lock conflict after which the write comes out the same
// (only what the plugin does not write changed) is answered at once, at
// most retry.BusyAttempts times, and counts as no attempt. One after which the
// rules changed is answered after a backoff and a fresh read, at most
// retry.ConflictAttempts times in all.
func (w *routeWrite) run(ctx context.Context) error {
	w.attempts = 1
	for again := false; ; again = true {
		if again && !w.plan.Desired.Unchanged {
			w.o.counts.retried.Add(1)
		}
		what, err := w.applyOnce(ctx)
		switch what {
		case finished:
			return err
		case rulesTaken:
			w.takeOver = true
			err = w.replan(ctx)
		case sameWriteAgain:
			if w.busy == retry.BusyAttempts {
				return routes.RouteError(w.plan.Live.Ref, keptChanging(w.attempts, w.busy))
			}
			w.busy++
		case rulesChanged:
			if w.attempts == retry.ConflictAttempts || w.busy == retry.BusyAttempts {
				return routes.RouteError(w.plan.Live.Ref, keptChanging(w.attempts, w.busy))
			}
			w.log.WithFields(logrus.Fields{"route": w.plan.Live.Ref.String(), "resourceVersion": w.plan.Live.ResourceVersion, "attempt": w.attempts}).
				Debug("route changed since it was read; reading it again")
			if err := retry.ConflictBackoff(ctx, w.attempts); err != nil {
				return routes.RouteError(w.plan.Live.Ref, fmt.Errorf("gave up after %d optimistic-lock conflicts: %w", w.attempts, err))
			}
			w.attempts++
			err = w.replan(ctx)
		}
		if err != nil {
			return err
		}
	}
}

// attempt is what one apply came to (applyOnce).
type attempt int

const (
	// finished: the write is over; applied (and released when the
	// rollouts are done), nothing to apply, or failed for good.
	finished attempt = iota
	// rulesTaken: the apply, guarded by ownership, conflicted: another
	// manager changed spec.rules since the route was read.
	rulesTaken
	// sameWriteAgain: an optimistic-lock conflict, and the write decided
	// again on the route as the watch cache brings it is the same: only
	// what the plugin does not write changed.
	sameWriteAgain
	// rulesChanged: an optimistic-lock conflict, and the write decided
	// again is not the same.
	rulesChanged
)

// applyOnce sends the plan's apply once, guarded as the route's lock
// chooses (routeLock.chooseGuard), and says what came of it; after an
// optimistic-lock conflict the plan is decided again on the route as the
// watch cache brings it.
func (w *routeWrite) applyOnce(ctx context.Context) (attempt, error) {
	p, o := w.plan, w.o
	if p.Desired.Unchanged {
		o.counts.unchanged.Add(1)
		return finished, w.releaseIfDone(ctx, p.Live, nil)
	}
	d := p.Desired
	guard, leave, err := w.lock.chooseGuard(ctx, p.Live, w.takeOver)
	if err != nil {
		return finished, routes.RouteError(p.Live.Ref, err)
	}
	answer, unstructured, err := o.writer.Apply(ctx, p.Live, ssa.Content{Rules: d.Rules, Labels: d.Labels, Annotations: d.Annotations}, guard)
	leave()
	if apierrors.IsConflict(err) {
		o.counts.conflicts.Add(1)
	}
	switch {
	case err == nil:
		o.counts.applied.Add(1)
		return finished, w.applied(ctx, answer, guard, unstructured)
	case guard == ssa.ByOwnership && ssa.IsOwnershipConflict(err):
		// The decision, made again on the route as it is, reports a change
		// of what the plugin manages as a conflict; what is left to write
		// takes the rules back, guarded by the resourceVersion.
		w.log.WithFields(logrus.Fields{"route": p.Live.Ref.String(), "error": err.Error()}).
			Debug("another manager changed the rules since the route was read; reading it again")
		return rulesTaken, nil
	case !ssa.IsStale(err) && !kubeclient.NotServed(err):
		return finished, routes.RouteError(p.Live.Ref, ssa.Explain(ctx, err, p.Live.Ref, "patch"))
	}
	// Decide again from the watch cache once it holds the change that made
	// the apply conflict (its event comes right after it: the quietest
	// moment to send the next attempt, and no request to read), else fresh.
	// So it does too when the apiserver no longer serves the route's version
	// (the reader discovers it again).
	if err := w.replanOnNextEvent(ctx); err != nil {
		return finished, err
	}
	if sameWrite(p.Desired, w.plan.Desired) {
		return sameWriteAgain, nil
	}
	return rulesChanged, nil
}

// applied records an apply's answer with the route's lock and the reader,
// logs it, tells the route's owners what it changed, and releases the
// route when the plan says the rollouts on it are done.
func (w *routeWrite) applied(ctx context.Context, answer *kube.Answer, guard ssa.Guard, unstructured string) error {
	p, o := w.plan, w.o
	d := p.Desired
	w.lock.wrote()
	o.reader.Written(answer)
	fields := logrus.Fields{
		"route":           p.Live.Ref.String(),
		"fieldManager":    o.writer.FieldManager(),
		"resourceVersion": p.Live.ResourceVersion + "→" + answer.ResourceVersion,
		"guard":           guard.String(),
		"changes":         routes.JoinChanges(d.Changes),
	}
	if unstructured != "" {
		fields["unstructured"] = unstructured
	}
	w.log.WithFields(fields).Info("applied route")
	route := regarding(p.Live)
	for _, n := range routes.Changes(d.Changes).Notes() {
		o.events.Changed(route, w.call, n.Reason, n.Text)
	}
	o.sayUnchecked(p.Live.Ref, d.Unchecked, w.log)
	if !d.Release {
		return nil
	}
	stored, err := answer.Route()
	if err != nil {
		return routes.RouteError(p.Live.Ref, fmt.Errorf("reading the apiserver's answer: %w", err))
	}
	return w.releaseIfDone(ctx, stored, answer)
}

// replan reads the route fresh and decides again.
func (w *routeWrite) replan(ctx context.Context) error {
	live, err := w.o.reader.Fresh(ctx, w.plan.Live.Ref)
	if err != nil {
		return routes.RouteError(w.plan.Live.Ref, ssa.Explain(ctx, err, w.plan.Live.Ref, "get"))
	}
	return w.decideAgain(ctx, live)
}

// decideAgain makes the plan anew from live.
func (w *routeWrite) decideAgain(ctx context.Context, live routes.Route) error {
	next, err := w.o.MakePlan(ctx, live, w.plan.Env, w.plan.Intent)
	if err == nil {
		w.plan = next
	}
	return err
}

// replanOnNextEvent decides again on the first version of the route newer
// than the plan's that the reader holds within retry.ConflictEventWait, waiting for the
// route's watch events; failing that, or when no watch tells, on a fresh
// read.
func (w *routeWrite) replanOnNextEvent(ctx context.Context) error {
	timeout := time.NewTimer(retry.ConflictEventWait)
	defer timeout.Stop()
	ref := w.plan.Live.Ref
	for {
		changed := w.o.reader.NextEvent(ref) // before the read: an event after it closes it
		live, err := w.o.reader.Get(ctx, ref)
		if err == nil && routes.NewerVersion(live.ResourceVersion, w.plan.Live.ResourceVersion) {
			return w.decideAgain(ctx, live)
		}
		if changed == nil {
			return w.replan(ctx)
		}
		select {
		case <-changed:
		case <-timeout.C:
			return w.replan(ctx)
		case <-ctx.Done():
			return w.replan(ctx)
		}
	}
}

// replanIfNewer decides again when the reader knows a newer version of the
// route than the plan was decided from.
func (w *routeWrite) replanIfNewer(ctx context.Context) error {
	ref := w.plan.Live.Ref
	if rv := w.o.reader.ResourceVersion(ctx, ref); rv != "" && !routes.NewerVersion(rv, w.plan.Live.ResourceVersion) {
		return nil // known without a copy of the route
	}
	live, err := w.o.reader.Get(ctx, ref)
	if err != nil {
		return routes.RouteError(ref, ssa.Explain(ctx, err, ref, "get"))
	}
	if !routes.NewerVersion(live.ResourceVersion, w.plan.Live.ResourceVersion) {
		return nil
	}
	return w.decideAgain(ctx, live)
}

// sameWrite says whether two decisions send the same apply.
func sameWrite(a, b desired.Result) bool {
	return a.Unchanged == b.Unchanged && a.Release == b.Release && reflect.DeepEqual(a.Rules, b.Rules) &&
		reflect.DeepEqual(a.Labels, b.Labels) && reflect.DeepEqual(a.Annotations, b.Annotations)
}

// releaseIfDone gives up the plugin's ownership when the plan says the
// rollouts on the route are done and the plugin still owns something there.
// answer is the apply's answer, nil if nothing was applied.
func (w *routeWrite) releaseIfDone(ctx context.Context, current routes.Route, answer *kube.Answer) error {
	o := w.o
	if !w.plan.Desired.Release {
		return nil
	}
	done, err := o.writer.Release(ctx, current, answer)
	if err != nil {
		return routes.RouteError(current.Ref, fmt.Errorf("giving up ownership: %w", ssa.Explain(ctx, err, current.Ref, "patch")))
	}
	if done == nil {
		return nil
	}
	o.counts.released.Add(1)
	w.lock.gaveBack()
	if done.Answer != nil {
		o.reader.Written(done.Answer)
	}
	w.log.WithFields(logrus.Fields{
		"route":           current.Ref.String(),
		"fieldManager":    o.writer.FieldManager(),
		"resourceVersion": done.From + "→" + done.To,
		"changes":         "ownership released (" + strings.Join(done.Dropped, ", ") + " entry removed), every value kept",
	}).Info("released route")
	o.events.Released(regarding(current), w.call, done.Dropped)
	return nil
}

// keptChanging is the error of a write whose attempts all ended in
// optimistic-lock conflicts, busy of them after changes only to what the
// plugin does not write.
func keptChanging(attempts, busy int) error {
	if busy == 0 {
		return fmt.Errorf("the route kept changing under the plugin: %d attempts ended in optimistic-lock conflicts; the call is safe to repeat", attempts)
	}
	return fmt.Errorf("the route kept changing under the plugin: %d attempts ended in optimistic-lock conflicts, %d of them after changes only to "+
		"what the plugin does not write (another manager writing the route more often than the plugin can read and write it); the call is safe to repeat",
		attempts+busy, busy)
}
