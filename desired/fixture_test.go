package desired

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes/routestest"
)

// The scenarios run on an in-memory route whose managedFields follow what the
// apiserver does (DESIGN.md §2): spec.rules is one atomic field, so whoever
// changes it with a forced apply or an Update becomes its sole owner, and an
// apply of exactly the live value shares it; label and annotation keys are
// owned one by one, and an applier's key it stops sending goes away unless
// someone else owns it too. envtest proves the same on a real apiserver
// (test/ownership_test.go); these tests prove the decisions.

const (
	ns     = "shop"
	plugin = "argo-rollouts-gatewayapi"
)

// owner is what one manager owns on the route.
type owner struct {
	op          metav1.ManagedFieldsOperationType
	rules       bool
	labels      map[string]bool
	annotations map[string]bool
}

// server is the route as an apiserver would hold it.
type server struct {
	t      *testing.T
	route  routes.Route
	rv     int
	owners map[string]*owner
	writes int // applies the plugin sent
	// schema is what the installed CRD defines: an apply of a field it lacks
	// fails the test, as the apiserver refuses it.
	schema routes.Schema
}

func newServer(t *testing.T, kind routes.Kind, rules ...routes.Rule) *server {
	s := &server{t: t, owners: map[string]*owner{},
		route: routes.Route{Ref: routes.Ref{Kind: kind, Namespace: ns, Name: "route"}, Version: "v1"}}
	s.route.Rules = rules
	s.bump()
	return s
}

// live is the route as a reader returns it: a copy, managedFields rendered.
func (s *server) live() routes.Route {
	r := s.route.DeepCopy()
	r.ResourceVersion = fmt.Sprint(s.rv)
	r.Schema = s.schema
	var entries []metav1.ManagedFieldsEntry
	for _, m := range slices.Sorted(maps.Keys(s.owners)) {
		o := s.owners[m]
		fields := map[string]any{}
		meta := map[string]any{}
		for what, keys := range map[string]map[string]bool{"f:labels": o.labels, "f:annotations": o.annotations} {
			if len(keys) > 0 {
				set := map[string]any{}
				for k := range keys {
					set["f:"+k] = map[string]any{}
				}
				meta[what] = set
			}
		}
		if len(meta) > 0 {
			fields["f:metadata"] = meta
		}
		if o.rules {
			fields["f:spec"] = map[string]any{"f:rules": map[string]any{}}
		}
		if len(fields) == 0 {
			continue // the apiserver drops an entry that owns nothing
		}
		data, _ := json.Marshal(fields)
		entries = append(entries, metav1.ManagedFieldsEntry{Manager: m, Operation: o.op,
			APIVersion: routes.Group + "/v1", FieldsV1: metav1.NewFieldsV1(string(data))})
	}
	r.ManagedFields = routes.NewManagedFields(append(r.ManagedFields.Entries(), entries...))
	return r
}

func (s *server) bump() { s.rv++ }

func (s *server) ownerOf(manager string, op metav1.ManagedFieldsOperationType) *owner {
	o := s.owners[manager]
	if o == nil {
		o = &owner{labels: map[string]bool{}, annotations: map[string]bool{}}
		s.owners[manager] = o
	}
	o.op = op
	return o
}

// setRules changes spec.rules as manager: a change makes it the sole owner,
// the same value (by an applier) makes it a co-owner.
func (s *server) setRules(manager string, op metav1.ManagedFieldsOperationType, rules []routes.Rule) {
	changed := !reflect.DeepEqual(s.route.Rules, rules)
	if changed {
		for m, o := range s.owners {
			if m != manager {
				o.rules = false
			}
		}
	}
	if changed || op == metav1.ManagedFieldsOperationApply {
		s.ownerOf(manager, op).rules = true
	}
	s.route.Rules = routes.CopyRules(rules)
}

// applyKeys is a forced apply of a map of metadata keys by manager.
func applyKeys(live map[string]string, mine map[string]bool, want map[string]string, others func(string) bool) map[string]string {
	out := maps.Clone(live)
	if out == nil {
		out = map[string]string{}
	}
	for k := range mine {
		if _, keep := want[k]; !keep && !others(k) {
			delete(out, k)
		}
	}
	clear(mine)
	for k, v := range want {
		out[k] = v
		mine[k] = true
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// pluginApply is the plugin's forced apply of a Result.
func (s *server) pluginApply(r Result) {
	s.writes++
	s.refuseUndeclared(r.Rules)
	o := s.ownerOf(plugin, metav1.ManagedFieldsOperationApply)
	othersOwn := func(pick func(*owner) map[string]bool) func(string) bool {
		return func(k string) bool {
			for m, other := range s.owners {
				if m != plugin && pick(other)[k] {
					return true
				}
			}
			return false
		}
	}
	s.route.Labels = applyKeys(s.route.Labels, o.labels, r.Labels, othersOwn(func(o *owner) map[string]bool { return o.labels }))
	s.route.Annotations = applyKeys(s.route.Annotations, o.annotations, r.Annotations, othersOwn(func(o *owner) map[string]bool { return o.annotations }))
	s.setRules(plugin, metav1.ManagedFieldsOperationApply, r.Rules)
	s.bump()
}

// refuseUndeclared fails the test for an apply of a field the CRD lacks:
// the apiserver would refuse it ("field not declared in schema").
func (s *server) refuseUndeclared(rules []routes.Rule) {
	s.t.Helper()
	for i, r := range rules {
		if _, ok := r["name"]; ok && s.schema.LacksRuleNames {
			s.t.Errorf("the plugin applied .spec.rules[%d].name, which the CRD does not declare", i)
		}
		filters, _ := r["filters"].([]any)
		for j, f := range filters {
			m, _ := f.(map[string]any)["requestMirror"].(map[string]any)
			if _, ok := m["percent"]; ok && s.schema.LacksMirrorPercent {
				s.t.Errorf("the plugin applied .spec.rules[%d].filters[%d].requestMirror.percent, which the CRD does not declare", i, j)
			}
		}
	}
}

// release drops the plugin's managedFields entry and keeps every value.
func (s *server) release() {
	if _, ok := s.owners[plugin]; ok {
		delete(s.owners, plugin)
		s.bump()
	}
}

// weights summarises the rules: "<rule>/<service>" → weight.
func (s *server) weights() map[string]int64 {
	out := map[string]int64{}
	for i, r := range s.route.Rules {
		for _, b := range r.BackendRefs() {
			key := fmt.Sprintf("%d/%s", i, b.Target(ns).Name)
			if n := r.Name(); n != "" {
				key = fmt.Sprintf("%d:%s/%s", i, n, b.Target(ns).Name)
			}
			out[key] = b.Weight()
		}
	}
	return out
}

// rulesOwners lists the managers owning spec.rules.
func (s *server) rulesOwners() []string {
	var out []string
	for m, o := range s.owners {
		if o.rules {
			out = append(out, m)
		}
	}
	sort.Strings(out)
	return out
}

// Route fixtures, in the form the apiserver serves them (defaults included:
// package routestest; the scenarios' Services listen on port 80).

// gitRules is the route as kept in Git: all traffic on stable, and a static rule.
func gitRules(stable, canary int64) []routes.Rule {
	return []routes.Rule{
		routestest.Rule("/", routestest.BackendOn("stable", 80, stable), routestest.BackendOn("canary", 80, canary)),
		routestest.Rule("/static", routestest.BackendOn("static", 80, 1)),
	}
}

func svc(name string) routes.ObjectRef { return routes.ServiceRef(ns, name) }

func contains(s string, subs []string) (string, bool) {
	for _, w := range subs {
		if !strings.Contains(s, w) {
			return w, false
		}
	}
	return "", true
}

// checked is c decided as orchestrator.Decide decides it, with the cluster
// read through fakes: parents (nil: none) when the result needs a feature,
// imported (nil: every ServiceImport exists) for each ServiceImport it adds,
// up to the first missing or failed.
type checked struct {
	c        Intent
	parents  func() []routes.Gateway
	imported func(routes.ObjectRef) (bool, error)
}

func (k checked) Desired(live routes.Route, env Env) (Result, error) {
	res, err := k.c.Desired(live, env)
	if err != nil || res.Unchanged {
		return res, err
	}
	var facts Facts
	if len(res.Needs) > 0 && k.parents != nil {
		facts.Gateways = k.parents()
	}
	for _, ref := range newImports(res, live, env) {
		exists, err := true, error(nil)
		if k.imported != nil {
			exists, err = k.imported(ref)
		}
		facts.Imports = append(facts.Imports, ImportRead{Import: ref, Exists: exists, Err: err})
		if err != nil || !exists {
			break
		}
	}
	return Check(res, live, env, facts)
}
