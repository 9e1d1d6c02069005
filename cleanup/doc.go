// Package cleanup gives users a way back when a Rollout is deleted while it
// holds traffic. Nothing calls the plugin for a Rollout that is gone, so its
// canary weight, experiment backends and header and mirror rules would stay
// on its routes for ever; the claims annotation on each route says what was
// the Rollout's.
//
// Cleaner finds the routes that carry a Rollout's claim and undoes it with
// desired.Undo, written by package ssa like every other change: the
// `cleanup` command runs it for one Rollout a person names, and Sweeper runs
// it in the plugin, opt-in, for every Rollout that has a claim on a route but
// no longer exists. A Rollout deleted and created again under the same name
// exists, so its claim is left alone: the new Rollout's calls carry on from
// it.
//
// It takes back only what the plugin's calls could have written: the claims
// of its own cluster's Rollouts (in a fleet, the same Rollout of another
// member cluster has its own claim on a shared route), on routes of the
// Rollout's namespace or of one that grants it them with a ReferenceGrant.
package cleanup
