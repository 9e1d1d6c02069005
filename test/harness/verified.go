package harness

import "github.com/argoproj/argo-rollouts/utils/plugin/types"

// VerifiedName is VerifyWeight's answer as the controller names it, for a
// test's message.
func VerifiedName(v types.RpcVerified) string {
	switch v {
	case types.Verified:
		return "Verified"
	case types.NotVerified:
		return "NotVerified"
	case types.NotImplemented:
		return "NotImplemented"
	}
	return "?"
}
