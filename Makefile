# The README's two commands: `make demo` (the main job) and `make test`.
# `make demo-plugin` is the plugin-only demo; `make e2e` the controller's scenarios.
#
# Tests that need an apiserver use envtest. hack/envtest-assets.sh finds or
# builds kube-apiserver and etcd: $KUBEBUILDER_ASSETS, then setup-envtest, then
# a build from the Go module proxy cached under ~/.cache (about 12 minutes the
# first time on 2 cores, seconds afterwards).

ENVTEST_K8S_VERSION ?= 1.34.5
ENVTEST_ETCD_VERSION ?= 3.6.16
export ENVTEST_K8S_VERSION ENVTEST_ETCD_VERSION

BIN ?= bin/rollouts-gatewayapi-ssa
GO ?= go

.PHONY: all help build release image image-test licenses test unit compat demo demo-plugin envtest-assets bench bench-scale bench-growth bench-ratio bench-micro vet lint clean fuzz envoy

all: build

## help: every target with its comment of this Makefile
help:
	@awk '/^## [a-z0-9-]+:/ { sub(/^## /, ""); print; next } /^## / { sub(/^## /, "    "); print }' $(firstword $(MAKEFILE_LIST))

## build: the plugin binary, statically linked, in $(BIN)
build:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN) .
	@sha256sum $(BIN)

## release: static binaries in dist/ for linux/amd64 and linux/arm64 (the plugin) and darwin/amd64 and darwin/arm64
## (its commands), SHA256SUMS, and the argo-rollouts-config entry with its sha256 for each Linux binary
## (VERSION=, BASE_URL=, PLATFORMS= to override; docs/install.md)
release:
	@bash hack/release.sh

## image: the plugin's OCI image without Docker (FROM scratch, user 65532, /rollouts-gatewayapi-ssa, linux/amd64 and
## linux/arm64): make release of the Linux binaries, then hack/image writes dist/image (an OCI layout) and
## dist/IMAGE-DIGEST, reads the image back and checks each binary and config (IMAGE=, PUSH=REF; docs/image.md)
image:
	@PLATFORMS="$${PLATFORMS:-linux/amd64 linux/arm64}" bash hack/release.sh

## image-test: hack/image's tests: a release's image read back (each binary's sha256, config, the amd64 binary run),
## the same digest twice, images that are not the release refused, a push to a registry in the test
image-test:
	cd hack/image && $(GO) vet . && $(GO) test -count=1 -timeout 15m .

## envtest-assets: print the directory holding kube-apiserver and etcd (building them if needed)
envtest-assets:
	@bash hack/envtest-assets.sh

## licenses: the license of every module linked into the plugin, told by the text of its LICENSE, LICENCE or COPYING
## file (hack/licenses, standard library only), counted by license (-v: each module: LICENSES_FLAGS=-v); fails
## naming each module whose license is missing, unknown or not allowed. make test runs it
licenses:
	@cd hack/licenses && $(GO) vet . && $(GO) test -count=1 -timeout 5m . && $(GO) run . -root $(CURDIR) $(LICENSES_FLAGS)

## vet: gofmt and go vet
vet:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi
	$(GO) vet ./...

## lint: staticcheck on every package, the e2e and envoy suites and the faultinject build included (built once into ~/.cache)
lint:
	@sc=$$(bash hack/staticcheck.sh) && $$sc ./... && $$sc -tags e2e ./test/e2e/... && $$sc -tags envoy ./test/envoy/... && $$sc -tags faultinject ./orchestrator/...

## unit: the tests that need no apiserver: every package of go list but test/ and those under it
## (. is troubleshooting_test.go: docs/troubleshooting.md quotes every error)
unit:
	$(GO) test -count=1 $$($(GO) list ./... | grep -v -e '/test$$' -e '/test/')

## test: vet, lint, licenses, unit tests and envtest integration tests (the real plugin binary over go-plugin RPC);
## ./... includes the short form of the compatibility matrix (test/compat with GATEWAY_API_RELEASES unset:
## Gateway API v1.2.1 and v1.7.0, both channels; about 2.5 minutes of it, beside the other packages).
## -parallel 4: test/'s tests in parallel mostly wait on the apiserver and their plugins, so more
## of them than the 2 cores at once is faster; 8 was no faster on 2 cores and made the parallel
## cases of TestEveryErrorIsOneWarningOnTheRollout miss a Warning (docs/development.md)
test: vet lint licenses
	@assets=$$(bash hack/envtest-assets.sh) && \
	  echo "envtest binaries: $$assets" && \
	  KUBEBUILDER_ASSETS="$$assets" $(GO) test -count=1 -timeout 20m -parallel 4 ./...

## compat: the whole Gateway API compatibility matrix of docs/performance/compatibility-matrix.md: every call on every route kind
## of each release and channel (all 12 pairs), each on an envtest of its own (about 4.5 minutes).
## GATEWAY_API_RELEASES=v1.4.1,v1.5.1 runs only those; make test runs the short form (see test)
compat:
	@assets=$$(bash hack/envtest-assets.sh) && \
	  KUBEBUILDER_ASSETS="$$assets" GATEWAY_API_RELEASES="$${GATEWAY_API_RELEASES:-all}" $(GO) test -count=1 -timeout 30m ./test/compat/

## demo: the real Argo Rollouts controller walks a Rollout with the plugin on a cluster of local processes,
## real requests through Traefik after every step (the first run builds every binary: 15 min 47 s after make test on a brand-new 2-core machine, README; test/e2e/cluster; needs root)
demo:
	@$(GO) run ./test/demo

## demo-plugin: the plugin alone, called over RPC as the controller would, on kube-apiserver and etcd
demo-plugin:
	@assets=$$(bash hack/envtest-assets.sh) && \
	  KUBEBUILDER_ASSETS="$$assets" $(GO) run ./test/demo -plugin-only

## fuzz: every fuzz target for FUZZTIME each (make test runs their seeds)
FUZZTIME ?= 30s
fuzz:
	@for t in FuzzSetWeights FuzzSetHeaderRules FuzzSetMirrorRule; do \
	  $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) ./desired/ || exit 1; done
	$(GO) test -run '^$$' -fuzz '^FuzzParseConfig$$' -fuzztime $(FUZZTIME) ./rollout/
	$(GO) test -run '^$$' -fuzz '^FuzzEncode$$' -fuzztime $(FUZZTIME) ./ssa/
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./kube/
	$(GO) test -run '^$$' -fuzz '^FuzzResourceVersionIn$$' -fuzztime $(FUZZTIME) ./kube/
	$(GO) test -run '^$$' -fuzz '^FuzzSetExperimentRefsThenRemove$$' -fuzztime $(FUZZTIME) ./transform/
	$(GO) test -run '^$$' -fuzz '^FuzzRequestsStayInReach$$' -fuzztime $(FUZZTIME) ./orchestrator/

## dev-cluster: the cluster of make e2e with the Argo Rollouts controller loading the plugin (file://), kept
## running until ^C, for trying things by hand and attaching a debugger (docs/development.md)
.PHONY: dev-cluster
dev-cluster:
	@$(GO) run ./test/devcluster

## bench: what a SetWeight step costs over 1, 10, 50 and 200 routes and with 10 Rollouts at once: the plugin
## binary over RPC against envtest, side by side with a bare client, in one table (docs/performance.md).
## BENCHFLAGS adds flags of test/bench, e.g. BENCHFLAGS="-profile /tmp/prof" for CPU and allocation profiles.
bench:
	@assets=$$(bash hack/envtest-assets.sh) && KUBEBUILDER_ASSETS="$$assets" $(GO) run ./test/bench $(BENCHFLAGS)

## bench-scale: the scale table of docs/performance.md: one Rollout over 200 and 1,000 routes, 100 Rollouts × 10 routes at once,
## and one Rollout over 50 routes beside 10,000 routes nobody selects (in its namespace; in 100 others), then how the step grows
## from 200 to 1,000 routes, interleaved (as bench-growth), and whether the aim (at most 5.5 ×) is met; about 11 minutes.
## BENCHFLAGS as for bench ("-repeat 5": the 200- and 1,000-route rows 5 times, each run's growth printed; about 35 minutes)
bench-scale:
	@assets=$$(bash hack/envtest-assets.sh) && KUBEBUILDER_ASSETS="$$assets" $(GO) run ./test/bench -scale $(BENCHFLAGS)

## bench-growth: how the step grows from 200 to 1,000 routes, alone: one plugin serves a Rollout over each, and 20 rounds step
## both, and the bare client over both, in an order drawn per round; step times, CPU per step, and whether the aim is met.
## About 4 minutes. BENCHFLAGS as for bench (-interleave FROM,TO, -interleave-rounds N)
bench-growth:
	@assets=$$(bash hack/envtest-assets.sh) && KUBEBUILDER_ASSETS="$$assets" $(GO) run ./test/bench -routes '' -together 0 -defaults-routes 0 -interleave 200,1000 $(BENCHFLAGS)

## bench-ratio: the paired ratio at 50 and 200 routes over 5 runs, each run right followed by a calibration run (the bare
## client on both sides), then a summary: each run's ratio, the means and sds, and whether the target (mean ≤ 1.20) is met.
## About 25 minutes (a row of 40 steps: about 50 s at 50 routes, 105 s at 200; 20 rows). BENCHFLAGS as for bench
bench-ratio:
	@assets=$$(bash hack/envtest-assets.sh) && KUBEBUILDER_ASSETS="$$assets" $(GO) run ./test/bench -routes 50,200 -together 0 -defaults-routes 0 -repeat 5 $(BENCHFLAGS)

## bench-micro: benchmarks of the pure transforms, and what the Events recorder holds
bench-micro:
	$(GO) test -run '^$$' -bench . -benchmem ./routes/... ./kube/ ./transform/... ./ssa/... ./events/

clean:
	rm -rf bin dist

## envoy: every route the plugin writes in its walks (the binary over RPC against envtest), translated by Envoy Gateway
## v1.9.1's own translator (egctl x translate, built once into ~/.cache by hack/egctl-assets.sh, about 7 minutes cold) and
## checked in Envoy's terms: weights, route order and matchers, mirror fractions, status (test/envoy; tag envoy; docs/providers/envoy-gateway.md); 1.5 minutes with egctl built
envoy:
	@assets=$$(bash hack/envtest-assets.sh) && egctl=$$(bash hack/egctl-assets.sh) && \
	  cd test/envoy && KUBEBUILDER_ASSETS="$$assets" EGCTL="$$egctl" $(GO) test -tags envoy -count=1 -timeout 20m

## e2e: the real Argo Rollouts controller drives the plugin on a cluster of local processes, every split measured through Traefik (docs/development.md; lab notes in docs/performance/e2e.md, traffic.md; needs root)
.PHONY: e2e
e2e:
	@bash hack/envtest-assets.sh >/dev/null && bash hack/e2e-assets.sh >/dev/null && bash hack/traefik-assets.sh >/dev/null
	$(GO) test -tags e2e ./test/e2e/ -count=1 -v -timeout 30m

## gitops: docs/gitops.md's Argo CD and Flux recipes run with Argo CD v3.1.8's diff code and Flux's apply code
## (kustomize-controller v1.9.4's libraries) while the plugin walks a rollout (test/gitops; own modules);
## docs/install.md's kustomize builds and Helm values checked for a plugin the controller can load
.PHONY: gitops gitops-all
gitops:
	@assets=$$(bash hack/envtest-assets.sh) && export KUBEBUILDER_ASSETS="$$assets" && \
	  cd test/gitops/argocd && $(GO) test -count=1 -timeout 20m . && \
	  cd ../flux && $(GO) test -count=1 -timeout 20m .

## gitops-all: gitops, and the Flux recipe with kustomize-controller v1.10.1's libraries too (they need
## Go 1.27.3, which the go command fetches from the module proxy; about 20 minutes more cold, so not in CI)
gitops-all: gitops
	@assets=$$(bash hack/envtest-assets.sh) && export KUBEBUILDER_ASSETS="$$assets" && \
	  cd test/gitops/flux && GOTOOLCHAIN=go1.27.3 $(GO) test -modfile=go.v1.10.mod -count=1 -timeout 20m .
