// Package cli holds the commands a person runs with the plugin's binary,
// beside the RPC server Argo Rollouts starts: `plan` shows and checks every
// step of a Rollout before it runs, `inspect` explains what the plugin holds
// on a route, `cleanup` undoes a deleted Rollout's claims on its routes.
// These take kubectl's connection flags (--kubeconfig, --context, -n) and run
// exactly the code the plugin runs for a call: the core in package desired
// and the writes of package ssa. `copy` copies the binary to a file: how the
// plugin's image, which holds nothing else, installs it from an initContainer.
package cli
