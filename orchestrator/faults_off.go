//go:build !faultinject

package orchestrator

import (
	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
)

// faulty and faultyWrite are where a build with the faultinject tag makes a
// decision or a write panic on request (faults_on.go), to prove that no panic
// crosses the RPC boundary. In every other build they do nothing.
func faulty(c desired.Intent) desired.Intent { return c }

func faultyWrite(Plan) {}
