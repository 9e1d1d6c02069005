package rollout

import (
	"path"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// Envs are what the decision of each route of a Rollout runs in
// (desired.Env), built once for each parsed config (Configs keeps them with
// its Settings): each named route's own, and the one every route that only
// a selector finds shares. What no config says, the name the claims give
// the controller's cluster on the routes of a route cluster, the
// orchestrator adds (Call.Member).
type Envs struct {
	Named    map[routes.Ref]desired.Env
	Selected desired.Env
}

// envs are the Envs of Rollout rollout's settings in a process writing as
// fieldManager, whose config is read under pluginName. Their Predecessor is
// shared: a decision that adds a route's records to it copies it first
// (orchestrator.Decide).
func (s Settings) envs(rollout, fieldManager, pluginName string) Envs {
	base := desired.Env{
		Rollout:             rollout,
		FieldManager:        fieldManager,
		ConflictPolicy:      s.ConflictPolicy,
		InProgressLabel:     s.InProgressLabel,
		MirrorMode:          s.MirrorMode,
		AddCanaryBackendRef: s.AddCanaryBackendRef,
		AssumedFeatures:     s.AssumedFeatures,
		Predecessor:         s.Predecessor,
		PredecessorManager:  path.Base(pluginName),
	}
	e := Envs{Named: make(map[routes.Ref]desired.Env, len(s.Targets.Named)), Selected: base}
	e.Selected.TakesHeaderRoutes = s.SelectedHeaderRoutes
	for _, ref := range s.Targets.Named {
		env := base
		env.TakesHeaderRoutes = s.HeaderRoutes[ref]
		env.ListedForHeaderRoutes = s.ListedForHeaderRoutes[ref]
		env.RuleName = s.RuleNames[ref]
		e.Named[ref] = env
	}
	return e
}
