package events

import (
	"fmt"
	"sync"
	"time"

	"github.com/gatewayapi-ssa/rollouts-plugin/rollout"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// reasonRecovered is the Normal Event of a call that succeeds after errors.
const reasonRecovered = "Recovered"

// forgetFailuresAfter: a failing call not seen for this long (its Rollout
// deleted, say) is forgotten, when many are remembered.
const forgetFailuresAfter = time.Hour

// Rollouts records Events on Rollouts, with the client of the controller's
// cluster: a Warning for every error a call returns, and, when a call that
// failed succeeds again, a Normal Event saying so, once. A nil *Rollouts
// records nothing.
type Rollouts struct {
	rec *Recorder
	mu  sync.Mutex
	// failing are the calls whose last answer was an error, per Rollout
	// and method (the controller's calls of one reconcile fail and succeed
	// on their own: RemoveManagedRoutes may succeed while SetWeight fails).
	failing map[failingCall]failure
}

type failingCall struct {
	rollout types.UID
	ref     string
	method  string
}

type failure struct {
	since, last time.Time
	calls       int
	reason      string
}

// NewRollouts returns a Rollouts that records with rec.
func NewRollouts(rec *Recorder) *Rollouts {
	return &Rollouts{rec: rec, failing: map[failingCall]failure{}}
}

// Failed records that the call answered err, whose text, as the call
// returned it, is text.
func (r *Rollouts) Failed(call rollout.Call, text string, err error) {
	if r == nil {
		return
	}
	why := Reason(err)
	now := time.Now()
	method := string(call.Label.Method)
	k := failingCall{call.Rollout.UID, call.Rollout.String(), method}
	r.mu.Lock()
	f, ok := r.failing[k]
	if !ok {
		f.since = now
		if len(r.failing) >= 1024 {
			r.forget(now)
		}
	}
	f.last, f.calls, f.reason = now, f.calls+1, why
	r.failing[k] = f
	r.mu.Unlock()
	r.rec.Record(Event{Regarding: rolloutRef(call.Rollout), Type: corev1.EventTypeWarning, Reason: why, Action: method, Note: text})
}

// rolloutRef is the Rollout as Events name it.
func rolloutRef(r rollout.Rollout) corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Namespace: r.Namespace, Name: r.Name, UID: r.UID}
}

// Succeeded records that the call answered without an error: if the last
// call of its method on its Rollout failed, a Normal Event says that it
// works again.
func (r *Rollouts) Succeeded(call rollout.Call) {
	if r == nil {
		return
	}
	method := string(call.Label.Method)
	k := failingCall{call.Rollout.UID, call.Rollout.String(), method}
	r.mu.Lock()
	f, ok := r.failing[k]
	delete(r.failing, k)
	r.mu.Unlock()
	if !ok {
		return
	}
	calls := "call"
	if f.calls > 1 {
		calls = "calls"
	}
	r.rec.Record(Event{Regarding: rolloutRef(call.Rollout), Type: corev1.EventTypeNormal, Reason: reasonRecovered, Action: method,
		Note: fmt.Sprintf("rollout %s: %s: succeeded after %d failed %s %s since %s (the last with reason %s)",
			k.ref, call.Label, f.calls, method, calls, f.since.UTC().Format(time.RFC3339), f.reason)})
}

// forget drops the failures not seen for forgetFailuresAfter; r.mu is held.
func (r *Rollouts) forget(now time.Time) {
	for k, f := range r.failing {
		if now.Sub(f.last) > forgetFailuresAfter {
			delete(r.failing, k)
		}
	}
}
