// Package pingpong answers one question for every call of the plugin: which
// Service is stable and which is canary for this Rollout now.
//
// With spec.strategy.canary.pingPong the two Services never change their
// selectors; Argo Rollouts records in status.canary.stablePingPong which of
// them is stable ("ping": the ping Service is stable and pong is canary;
// anything else, empty included: the reverse) and flips it at promotion. The
// plugin only moves weight between them.
//
// When a Rollout sets both pingPong and stableService/canaryService, pingPong
// wins: that is how the Argo Rollouts controller itself picks the Services for
// plugin-based traffic routers (trafficrouting.GetStableAndCanaryServices with
// ping-pong preferred, in rollout/canary.go and rollout/service.go).
package pingpong
