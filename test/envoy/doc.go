// Package envoy checks the plugin's routes in Envoy's own terms, as Envoy
// Gateway would configure Envoy with them: `make envoy`. Its tests (build
// tag envoy) drive the real plugin binary over go-plugin RPC against envtest
// through walks (canary, experiment, ping-pong, maxTrafficWeight 1000, header
// and mirror steps, stickyCanary, every route kind); after every write they
// read the live route with its GatewayClass, Gateway and Services, translate
// them with Envoy Gateway's offline translator (`egctl x translate`, the
// binary in $EGCTL, hack/egctl-assets.sh) and compare Envoy's route table,
// load assignments and mirror policies, and the route status Envoy Gateway
// would write, with what the step asked for. It is the control plane's
// translation, not measured traffic.
//
// The table of checks per scenario is printed at the end (and written to
// the file $ENVOY_CHECKS names); $ENVOY_XDS_DIR keeps every translation's
// input and egctl's answer.
package envoy
