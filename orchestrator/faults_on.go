//go:build faultinject

package orchestrator

import (
	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// PanicAnnotation on a route makes a faultinject build panic while working on
// it: "decide" in the core's decision (on the RPC goroutine), "write" just
// before its write (on the route's goroutine).
const PanicAnnotation = "faultinject.gatewayapi-ssa.dev/panic"

type panicking struct{ desired.Intent }

func (c panicking) Desired(live routes.Route, env desired.Env) (desired.Result, error) {
	if live.Annotations[PanicAnnotation] == "decide" {
		panic("faultinject: a transform panicked deciding " + live.Ref.String())
	}
	return c.Intent.Desired(live, env)
}

func faulty(c desired.Intent) desired.Intent { return panicking{c} }

func faultyWrite(p Plan) {
	if p.Live.Annotations[PanicAnnotation] == "write" {
		panic("faultinject: a write panicked on " + p.Live.Ref.String())
	}
}
