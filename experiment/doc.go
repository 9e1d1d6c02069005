// Package experiment adds, weighs and removes the backendRefs of experiment
// Services: with an experiment step Argo Rollouts passes the Services it
// created for the experiment's templates to SetWeight as
// additionalDestinations, each with a weight.
//
// Apply is pure: it gets the live rules and what the plugin recorded it had
// added for the Rollout (routes.Claim.Backends), and returns the rules with
// exactly the requested experiment backends at their weights, plus the new
// record. It removes only backendRefs it finds in that record, so a
// backendRef someone else added is never touched, even one that points at a
// Service named like an experiment Service.
package experiment
