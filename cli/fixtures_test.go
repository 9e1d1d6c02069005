package cli

import (
	"strings"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// gatewayV1 is the path of the Gateway API's v1 on the apiserver.
const gatewayV1 = "/apis/" + routes.Group + "/v1"

// The routes of the commands' tests, as the apiserver serves them.

// claimsOfDemo is the claims annotation the plugin writes on route web for
// Rollout shop/demo after SetWeight(30) and SetHeaderRoute(beta, X-Canary:
// yes): the value its core (package desired) computes for those calls.
const claimsOfDemo = `{"shop/demo":{"canaryWeight":30,"rules":["beta"],` +
	`"weights":[{"rule":0,"service":"shop/stable","weight":70},{"rule":0,"service":"shop/canary","weight":30}],` +
	`"ruleDigests":{"beta":"bf23a36483e595ac"}}}`

// midCanaryRoute is route shop/web in the middle of Rollout shop/demo's
// canary: 30 % to canary, and the header rule beta the plugin added. The
// plugin's apply owns spec.rules, its label and the claims annotation.
var midCanaryRoute = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: web
  namespace: shop
  resourceVersion: "7"
  labels: {rollouts.argoproj.io/gatewayapi-canary: in-progress}
  annotations:
    owner: shop-team@example.com
    gatewayapi-ssa.dev/claims: '` + claimsOfDemo + `'
  managedFields:
  - manager: kubectl
    operation: Update
    apiVersion: gateway.networking.k8s.io/v1
    time: "2025-03-04T05:06:07Z"
    fieldsType: FieldsV1
    fieldsV1: {"f:metadata": {"f:annotations": {"f:owner": {}}}, "f:spec": {"f:parentRefs": {}}}
  - manager: argo-rollouts-gatewayapi
    operation: Apply
    apiVersion: gateway.networking.k8s.io/v1
    time: "2025-03-04T06:07:08Z"
    fieldsType: FieldsV1
    fieldsV1:
      "f:metadata":
        "f:annotations": {"f:gatewayapi-ssa.dev/claims": {}}
        "f:labels": {"f:rollouts.argoproj.io/gatewayapi-canary": {}}
      "f:spec": {"f:rules": {}}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /}}]
    backendRefs:
    - {group: "", kind: Service, name: stable, port: 80, weight: 70}
    - {group: "", kind: Service, name: canary, port: 80, weight: 30}
  - name: beta
    matches:
    - path: {type: PathPrefix, value: /}
      headers: [{name: X-Canary, type: Exact, value: "yes"}]
    backendRefs:
    - {group: "", kind: Service, name: canary, port: 80, weight: 1}
`

// plainRoute is route shop/web before any rollout: kubectl's, all traffic
// to stable, no claims.
var plainRoute = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: web
  namespace: shop
  resourceVersion: "5"
  annotations: {owner: shop-team@example.com}
  managedFields:
  - manager: kubectl
    operation: Update
    apiVersion: gateway.networking.k8s.io/v1
    time: "2025-03-04T05:06:07Z"
    fieldsType: FieldsV1
    fieldsV1: {"f:metadata": {"f:annotations": {"f:owner": {}}}, "f:spec": {"f:parentRefs": {}, "f:rules": {}}}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /}}]
    backendRefs:
    - {group: "", kind: Service, name: stable, port: 80, weight: 100}
    - {group: "", kind: Service, name: canary, port: 80, weight: 0}
`

// demoRollout is Rollout shop/demo as its author writes it: routes web,
// header route beta, a canary of 30 % then 60 %.
const demoRollout = `apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: demo, namespace: shop}
spec:
  replicas: 2
  selector: {matchLabels: {app: demo}}
  template:
    metadata: {labels: {app: demo}}
    spec:
      containers: [{name: app, image: "demo:v2", ports: [{name: http, containerPort: 8080}]}]
  strategy:
    canary:
      stableService: stable
      canaryService: canary
      trafficRouting:
        managedRoutes: [{name: beta}]
        plugins:
          argoproj-labs/gatewayAPI: {httpRoute: web}
      steps:
      - setWeight: 30
      - pause: {}
`

// serviceObject is Service shop/<name>.
func serviceObject(name string) string {
	return strings.ReplaceAll(`apiVersion: v1
kind: Service
metadata: {name: NAME, namespace: shop}
`, "NAME", name)
}
