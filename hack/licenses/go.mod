module github.com/gatewayapi-ssa/rollouts-plugin/hack/licenses

go 1.26.8
