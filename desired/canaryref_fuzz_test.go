package desired

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/transform"
)

// withEnv is a call decided with its env changed.
type withEnv struct {
	c   Intent
	env func(*Env)
}

func (w withEnv) Desired(live routes.Route, env Env) (Result, error) {
	w.env(&env)
	return w.c.Desired(live, env)
}

// With addCanaryBackendRef, any route (rules with stable alone among
// them) walks to the split, every rule holding stable also holds the
// canary at its weight, the same call again writes nothing, and the end
// of the rollout gives back the rules as they were, owning nothing.
func FuzzAddCanaryBackendRef(f *testing.F) {
	for _, seed := range [][]byte{{}, {0, 1, 0, 2, 1, 0, 30}, {0, 0, 2, 2, 0, 0, 0, 0, 0, 2, 1, 1, 50, 1, 20}, {2, 2, 2, 0, 1, 2, 1, 0, 99}} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := &choices{b: data}
		kind := fuzzKind(c, routes.HTTPRoute, routes.GRPCRoute, routes.TCPRoute)
		max := []int64{100, 1000}[c.n(2)]
		original := fuzzRules(c, kind, max)
		s := newFuzzServer(t, kind, original)
		set := SetWeight{
			Split:      transform.Split{Stable: svc("stable"), Canary: svc("canary"), CanaryWeight: max * int64(c.n(101)) / 100, MaxWeight: max},
			Experiment: transform.ExperimentInput{RolloutNamespace: ns, Stable: svc("stable"), Canary: svc("canary")},
		}
		if c.n(2) == 1 {
			d := transform.ExperimentDestination{Service: "exp-a", Weight: max * int64(c.n(60)) / 100, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}
			set.Experiment.Destinations = append(set.Experiment.Destinations, d)
			set.Split.Reserved += d.Weight
		}
		call := withEnv{set, func(e *Env) { e.AddCanaryBackendRef = true }}
		if _, err := decideAndApply(t, s, call); err != nil {
			return
		}
		if !set.ends() {
			for i, r := range s.route.Rules {
				if r.CountRefs(ns, svc("stable")) != 1 {
					continue
				}
				j := r.LastRef(ns, svc("canary"))
				if j < 0 {
					t.Fatalf("rule %d holds stable and no canary: %v", i, r)
				}
				if w := r.BackendRefs()[j].Weight(); w != set.Split.CanaryWeight {
					t.Fatalf("rule %d: canary %d, want %d", i, w, set.Split.CanaryWeight)
				}
			}
		}
		twiceIsOnce(t, s, call)
		end := set
		end.Split.CanaryWeight, end.Split.Reserved, end.Experiment.Destinations = 0, 0, nil
		if _, err := decideAndApply(t, s, withEnv{end, call.env}); err != nil {
			t.Fatalf("the end of the rollout failed: %v", err)
		}
		restored(t, s, original, "SetWeight(0) with addCanaryBackendRef")
	})
}
