// Package transform holds the pure transforms of a route's rules: the
// weights of the weighted rules (SetWeights), the header and mirror rules the
// plugin adds for a managedRoutes entry (SetHeaderRules, SetMirrorRule), the
// RequestMirror filters of filter mode (SetMirrorFilters), the matches a
// step's values become (kept within the Rollout's own rule, confine.go), the
// backendRefs of experiment Services (SetExperimentRefs, experiment.go) and
// the canary backendRef added to rules that hold only the stable one
// (addCanary, canaryref.go), and the limits the Gateway API CRDs enforce.
// Weigh (weigh.go) is SetWeight's rule work in one entry: the canary
// backendRef, the weights, the experiment backendRefs and the record of the
// weights written, from one view of the route the decision builds.
//
// Each transform takes a route as read (package routes) and returns new
// rules; none changes its input, does I/O or decides what a call is for:
// package desired picks the transform a call needs and records what it did.
package transform
