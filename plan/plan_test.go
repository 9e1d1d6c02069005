package plan

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/gatewayapi-ssa/rollouts-plugin/rollout"
)

const planRollout = `apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: shop, namespace: prod}
spec:
  selector: {matchLabels: {app: shop}}
  template:
    metadata: {labels: {app: shop}}
    spec:
      containers: [{name: app, image: shop:v2, ports: [{name: http, containerPort: 8080}]}]
  strategy:
    canary:
      stableService: shop-stable
      canaryService: shop-canary
      trafficRouting:
        managedRoutes: [{name: beta}]
        plugins:
          argoproj-labs/gatewayAPI: {httpRoute: shop}
      steps:
      - setWeight: 10
      - experiment:
          templates:
          - {name: baseline, specRef: stable, weight: 5}
          - {name: candidate, specRef: canary, weight: 5}
      - setHeaderRoute:
          name: beta
          match: [{headerName: X-Canary, headerValue: {exact: "yes"}}]
      - pause: {}
      - setWeight: 50
`

const planRoutes = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: shop, namespace: prod, resourceVersion: "7"}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /}}]
    backendRefs:
    - {group: "", kind: Service, name: shop-stable, port: 80, weight: 100}
    - {group: "", kind: Service, name: shop-canary, port: 80, weight: 0}
---
apiVersion: v1
kind: Service
metadata: {name: shop-stable, namespace: prod}
spec:
  ports: [{name: http, port: 80, targetPort: 8080}]
`

func planOf(t *testing.T, manifest, files string) Plan {
	t.Helper()
	var ro v1alpha1.Rollout
	if err := yaml.Unmarshal([]byte(manifest), &ro); err != nil {
		t.Fatal(err)
	}
	f, err := ReadFiles("prod", strings.NewReader(files))
	if err != nil {
		t.Fatal(err)
	}
	return Compute(context.Background(), Input{Rollout: &ro, Process: rollout.Process{PluginName: "argoproj-labs/gatewayAPI", FieldManager: "argo-rollouts-gatewayapi"},
		Reader: f, Services: f})
}

// weightsAfter summarises the route after each step.
func weightsAfter(p Plan) []string {
	var out []string
	for i, after := range p.After {
		var parts []string
		for j, rule := range after[0].Rules {
			for _, b := range rule.BackendRefs() {
				parts = append(parts, fmt.Sprintf("%d/%s=%d", j, b.Target("prod").Name, b.Weight()))
			}
		}
		out = append(out, p.Steps[i].Name+": "+strings.Join(parts, " "))
	}
	return out
}

func TestPlanEveryStep(t *testing.T) {
	p := planOf(t, planRollout, planRoutes)
	if len(p.Problems) > 0 {
		t.Fatalf("problems: %+v", p.Problems)
	}
	want := []string{
		"setWeight 10: 0/shop-stable=90 0/shop-canary=10",
		"experiment baseline 5, candidate 5: 0/shop-stable=80 0/shop-canary=10 0/shop-baseline=5 0/shop-candidate=5",
		"setHeaderRoute beta: 0/shop-stable=90 0/shop-canary=10 1/shop-canary=1",
		"pause: 0/shop-stable=90 0/shop-canary=10 1/shop-canary=1",
		"setWeight 50: 0/shop-stable=50 0/shop-canary=50 1/shop-canary=1",
		"promotion: every step done: 0/shop-stable=0 0/shop-canary=100 1/shop-canary=1",
		"promotion: the new version is stable: 0/shop-stable=100 0/shop-canary=0",
		"abort (from the last step): 0/shop-stable=100 0/shop-canary=0",
	}
	if diff := cmp.Diff(want, weightsAfter(p)); diff != "" {
		t.Errorf("route after each step (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"SetHeaderRoute(beta)", "SetWeight(10)"}, p.Steps[2].Calls); diff != "" {
		t.Errorf("calls of the header step (-want +got):\n%s", diff)
	}
	if !p.Steps[3].Routes[0].Unchanged {
		t.Errorf("the pause changed the route: %v", p.Steps[3].Routes[0].Changes)
	}
	// At the end the plugin gives the route back: no claims, no label, no ownership.
	end := p.After[6][0]
	if len(end.Labels) > 0 || len(end.Annotations) > 0 || end.ManagedFields.OwnsAnything("argo-rollouts-gatewayapi") {
		t.Errorf("after promotion: labels %v, annotations %v, managedFields %v", end.Labels, end.Annotations, end.ManagedFields.Entries())
	}
}

func TestPlanFindsTheStepThatFails(t *testing.T) {
	var refs strings.Builder
	for i := range 13 {
		fmt.Fprintf(&refs, "    - {group: \"\", kind: Service, name: other-%d, port: 80, weight: 0}\n", i)
	}
	crowded := strings.Replace(planRoutes, "    - {group: \"\", kind: Service, name: shop-canary, port: 80, weight: 0}\n",
		"    - {group: \"\", kind: Service, name: shop-canary, port: 80, weight: 0}\n"+refs.String(), 1)
	for name, tc := range map[string]struct {
		rollout, routes string
		step, reason    string
	}{
		"an experiment over 16 backendRefs": {planRollout, crowded, "step 2 (experiment baseline 5, candidate 5)", "rule 0 would hold 17 backendRefs"},
		"a route without the canary":        {planRollout, strings.Replace(planRoutes, "name: shop-canary", "name: other", 1), "step 1 (setWeight 10)", "has no rule whose backendRefs include both"},
		"a missing route":                   {strings.Replace(planRollout, "httpRoute: shop", "httpRoute: shopp", 1), planRoutes, "routes", "HTTPRoute prod/shopp not found"},
		"a header step not in managedRoutes": {strings.Replace(planRollout, "managedRoutes: [{name: beta}]", "managedRoutes: [{name: gamma}]", 1), planRoutes,
			"step 3 (setHeaderRoute beta)", `setHeaderRoute "beta" is not listed in spec.strategy.canary.trafficRouting.managedRoutes`},
	} {
		t.Run(name, func(t *testing.T) {
			p := planOf(t, tc.rollout, tc.routes)
			for _, pr := range p.Problems {
				if pr.Step == tc.step && strings.Contains(pr.Reason, tc.reason) {
					return
				}
			}
			t.Errorf("no problem at %q mentioning %q; problems: %+v", tc.step, tc.reason, p.Problems)
		})
	}
}

// The abort starts from where the last step left the routes, not from the
// promoted ones.
func TestPlanAbortFromTheLastStep(t *testing.T) {
	p := planOf(t, planRollout, planRoutes)
	abort := p.Steps[len(p.Steps)-1]
	if abort.Routes[0].Unchanged || !slices.Contains(abort.Routes[0].Changes, "− rule beta") {
		t.Errorf("the abort does not take the header rule and the weights back: %+v", abort.Routes[0])
	}
}

// stickyAfter summarises the route after each step for stickyCanary: each
// rule's name ("-" unnamed) and, per backendRef, its Service with a "+cookie"
// when it carries a filter.
func stickyAfter(p Plan) []string {
	var out []string
	for i, after := range p.After {
		var parts []string
		for _, rule := range after[0].Rules {
			name := rule.Name()
			if name == "" {
				name = "-"
			}
			var refs []string
			for _, b := range rule.BackendRefs() {
				ref := b.Target("prod").Name
				if filters, _ := b["filters"].([]any); len(filters) > 0 {
					ref += "+cookie"
				}
				refs = append(refs, ref)
			}
			parts = append(parts, name+"["+strings.Join(refs, " ")+"]")
		}
		out = append(out, p.Steps[i].Name+": "+strings.Join(parts, " "))
	}
	return out
}

// plan shows what stickyCanary adds at each step, from the Rollout's
// current revisions: the cookie filters and the two cookie rules while both
// sides have weight, none once the canary is promoted or aborted.
func TestPlanShowsStickyCanaryRules(t *testing.T) {
	head, _, found := strings.Cut(planRollout, "      steps:\n")
	if !found {
		t.Fatal("planRollout has no steps to replace")
	}
	rollout := strings.Replace(head, "argoproj-labs/gatewayAPI: {httpRoute: shop}",
		"argoproj-labs/gatewayAPI: {httpRoute: shop, stickyCanary: {cookieName: shop-v}}", 1) + `      steps:
      - setWeight: 20
      - pause: {}
status: {currentPodHash: bbb222, stableRS: aaa111}
`
	p := planOf(t, rollout, planRoutes)
	if len(p.Problems) > 0 {
		t.Fatalf("problems: %+v", p.Problems)
	}
	sticky := "shop-sticky-canary[shop-canary] shop-sticky-stable[shop-stable]"
	want := []string{
		"setWeight 20: -[shop-stable+cookie shop-canary+cookie] " + sticky,
		"pause: -[shop-stable+cookie shop-canary+cookie] " + sticky,
		"promotion: every step done: -[shop-stable shop-canary]",
		"promotion: the new version is stable: -[shop-stable shop-canary]",
		"abort (from the last step): -[shop-stable shop-canary]",
	}
	if diff := cmp.Diff(want, stickyAfter(p)); diff != "" {
		t.Errorf("route after each step (-want +got):\n%s", diff)
	}
	// The cookies name the Rollout's current revisions.
	for _, rule := range p.After[0][0].Rules {
		hash := map[string]string{"shop-sticky-canary": "shop-v=canary-bbb222", "shop-sticky-stable": "shop-v=stable-aaa111"}[rule.Name()]
		if got := fmt.Sprint(rule["matches"]); hash != "" && !strings.Contains(got, hash) {
			t.Errorf("rule %s matches %s; want the cookie %s", rule.Name(), got, hash)
		}
	}
}

// A route in another namespace than the Rollout's is planned only where that
// namespace grants the Rollout's: without a grant the plan plans no step and
// says which ReferenceGrant to create; with it, it plans every step.
func TestPlanListsTheReferenceGrantsARolloutLacks(t *testing.T) {
	shared := strings.Replace(planRoutes, "metadata: {name: shop, namespace: prod, resourceVersion: \"7\"}", "metadata: {name: shop, namespace: shared, resourceVersion: \"7\"}", 1)
	shared = strings.Replace(shared, "name: shop-stable, port", "name: shop-stable, namespace: prod, port", 1)
	shared = strings.Replace(shared, "name: shop-canary, port", "name: shop-canary, namespace: prod, port", 1)
	rollout := strings.Replace(planRollout, "{httpRoute: shop}", "{httpRoute: shop, namespace: shared}", 1)

	p := planOf(t, rollout, shared)
	if len(p.Steps) > 0 {
		t.Errorf("planned %d steps on a route the Rollout may not reach", len(p.Steps))
	}
	wantGrant := `- apiVersion: gateway.networking.k8s.io/v1beta1
  kind: ReferenceGrant
  metadata:
    name: rollouts-of-prod
    namespace: shared
  spec:
    from:
    - group: argoproj.io
      kind: Rollout
      namespace: prod
    to:
    - group: gateway.networking.k8s.io
      kind: HTTPRoute
      name: shop
`
	got, err := yaml.Marshal(p.MissingGrants)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantGrant, string(got)); diff != "" {
		t.Errorf("missing grants (-want +got):\n%s", diff)
	}
	if len(p.Problems) != 1 || p.Problems[0].Step != "ReferenceGrants" || !strings.Contains(p.Problems[0].Reason, "namespace shared does not grant Rollouts of namespace prod") {
		t.Errorf("problems: %+v", p.Problems)
	}

	// The grant it printed, applied, is enough.
	var granted strings.Builder
	for _, g := range p.MissingGrants {
		data, _ := yaml.Marshal(g)
		granted.WriteString("---\n" + string(data))
	}
	p = planOf(t, rollout, shared+granted.String())
	if len(p.Problems) > 0 || len(p.MissingGrants) > 0 || len(p.Steps) == 0 {
		t.Errorf("with the grant: %d steps, problems %+v, missing grants %+v", len(p.Steps), p.Problems, p.MissingGrants)
	}
}
