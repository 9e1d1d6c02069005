// Package decode turns a Rollout and one call of the controller into a
// value the orchestrator carries out: Decode reads the Rollout's plugin
// config (ParseConfig: Config, the keys as written, validated into
// Settings; the plugin keeps each Rollout's last in Configs), then the
// call's own values (weights, experiment Services and
// their ports, header and mirror steps), the same order for every call, and
// refuses bad input, naming the key or the step, before any route is read.
//
// The plugin, the offline plan (package plan) and the cli call the
// same functions, so what plan shows is what the plugin would do.
package rollout
