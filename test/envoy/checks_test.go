//go:build envoy

package envoy

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/google/go-cmp/cmp"
)

// The checks: each compares Envoy's configuration, as Envoy Gateway
// translated the live route, with what the step asked for, and returns an
// error saying what differs.

// checkWeights: every xDS route of the route's rule (each match and
// hostname; for TCP, TLS and UDP routes, the route's one cluster) sends
// to the backends with the weights want gives, each and in total. Envoy
// leaves out a backend of weight 0, so want's zeros are absent there.
func checkWeights(c *envoyConfig, ns string, r ref, rule int, want map[string]int64) error {
	wantEnvoy, total := map[string]uint32{}, uint32(0)
	for b, w := range want {
		if w != 0 {
			wantEnvoy[b] = uint32(w)
			total += uint32(w)
		}
	}
	compare := func(where string, got map[string]uint32) error {
		if diff := cmp.Diff(wantEnvoy, got); diff != "" {
			return fmt.Errorf("%s: Envoy's split (-want +got):\n%s", where, diff)
		}
		if sum := sumOf(got); sum != total {
			return fmt.Errorf("%s: Envoy's total weight %d, want %d", where, sum, total)
		}
		return nil
	}
	if r.l4() {
		cluster := fmt.Sprintf("%s/%s/%s/rule/-1", strings.ToLower(r.Kind), ns, r.Name)
		if !slices.ContainsFunc(keys(c.ListenerClusters), func(l string) bool { return slices.Contains(c.ListenerClusters[l], cluster) }) {
			return fmt.Errorf("no listener proxies to cluster %s (listeners: %v)", cluster, c.ListenerClusters)
		}
		got, err := c.split(cluster)
		if err != nil {
			return err
		}
		return compare("cluster "+cluster, got)
	}
	routes := c.routesOf(ns, r, rule)
	if len(routes) == 0 {
		return fmt.Errorf("no xDS route of %s rule %d", r, rule)
	}
	for _, xr := range routes {
		got, err := c.served(xr)
		if err != nil {
			return err
		}
		if err := compare("route "+xr.Name, got); err != nil {
			return err
		}
	}
	return nil
}

func sumOf(m map[string]uint32) uint32 {
	var s uint32
	for _, w := range m {
		s += w
	}
	return s
}

// routesOf are the xDS routes Envoy Gateway made of a rule, in every virtual host.
func (c *envoyConfig) routesOf(ns string, r ref, rule int) []*xdsRoute {
	var out []*xdsRoute
	for i := range c.VirtualHosts {
		for j := range c.VirtualHosts[i].Routes {
			xr := &c.VirtualHosts[i].Routes[j]
			if n, ok := ruleOf(xr.Name, r.Kind, ns, r.Name); ok && n == rule {
				out = append(out, xr)
			}
		}
	}
	return out
}

// ruleName is the rule name Envoy Gateway keeps in an xDS route's metadata.
func ruleName(xr *xdsRoute) string {
	if xr.Metadata == nil {
		return ""
	}
	for _, r := range xr.Metadata.FilterMetadata["envoy-gateway"].Resources {
		return r.SectionName
	}
	return ""
}

// taken is what Envoy does with a request: the rule (its name, or its
// index when it has none) whose xDS route it takes, the backends that
// answer, and where it is mirrored.
type taken struct {
	Rule    string
	Served  map[string]uint32
	Mirrors []mirrorShare `cmp:",omitempty"`
}

// mirrorShare is a mirror policy as the share of requests, in percent, it copies.
type mirrorShare struct {
	Backend string
	Percent float64
}

// checkTaken: Envoy's route table gives the request the rule, backends and
// mirrors want says.
func checkTaken(c *envoyConfig, ns string, r ref, req request, want taken) error {
	xr, err := c.pick(req)
	if err != nil {
		return err
	}
	if xr == nil {
		return fmt.Errorf("%s: no xDS route takes it", req)
	}
	got := taken{Rule: ruleName(xr)}
	if n, ok := ruleOf(xr.Name, r.Kind, ns, r.Name); ok && got.Rule == "" {
		got.Rule = fmt.Sprint(n)
	} else if !ok {
		got.Rule = xr.Name
	}
	if got.Served, err = c.served(xr); err != nil {
		return err
	}
	ms, err := c.mirrors(xr)
	if err != nil {
		return err
	}
	for _, m := range ms {
		got.Mirrors = append(got.Mirrors, mirrorShare{m.Backend, float64(m.Numerator) * 100 / float64(m.Denominator)})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		return fmt.Errorf("%s takes xDS route %s (-want +got):\n%s", req, xr.Name, diff)
	}
	return nil
}

// checkCookies: in every xDS route of the rule, each backend's answers get
// the Set-Cookie want gives ("" for none), and no other backend answers.
// Envoy Gateway carries a backendRef's ResponseHeaderModifier on that
// backend's weighted cluster (responseHeadersToAdd).
func checkCookies(c *envoyConfig, ns string, r ref, rule int, want map[string]string) error {
	routes := c.routesOf(ns, r, rule)
	if len(routes) == 0 {
		return fmt.Errorf("no xDS route of %s rule %d", r, rule)
	}
	for _, xr := range routes {
		got := map[string]string{}
		served, err := c.served(xr)
		if err != nil {
			return err
		}
		for b := range served {
			got[b] = ""
		}
		if xr.Route.WeightedClusters != nil {
			for _, wc := range xr.Route.WeightedClusters.Clusters {
				s, err := c.split(wc.Name)
				if err != nil {
					return err
				}
				for b := range s {
					got[b] = setCookie(wc.ResponseHeadersToAdd)
				}
			}
		}
		for b := range got {
			if v := setCookie(xr.ResponseHeadersToAdd); v != "" {
				got[b] = v
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			return fmt.Errorf("route %s: Set-Cookie by backend (-want +got):\n%s", xr.Name, diff)
		}
	}
	return nil
}

func setCookie(hs []headerToAdd) string {
	var vs []string
	for _, h := range hs {
		if strings.EqualFold(h.Header.Key, "Set-Cookie") {
			vs = append(vs, h.Header.Value)
		}
	}
	return strings.Join(vs, ", ")
}

// checkNoMirror: no xDS route mirrors anything.
func checkNoMirror(c *envoyConfig) error {
	var errs []error
	for _, vh := range c.VirtualHosts {
		for _, xr := range vh.Routes {
			if xr.Route != nil && len(xr.Route.RequestMirrorPolicies) > 0 {
				errs = append(errs, fmt.Errorf("xDS route %s still mirrors to %s", xr.Name, xr.Route.RequestMirrorPolicies[0].Cluster))
			}
		}
	}
	return errors.Join(errs...)
}

// checkNoRule: no xDS route comes from a rule of that name.
func checkNoRule(c *envoyConfig, name string) error {
	for _, vh := range c.VirtualHosts {
		for _, xr := range vh.Routes {
			if ruleName(&xr) == name {
				return fmt.Errorf("xDS route %s is still there for rule %q", xr.Name, name)
			}
		}
	}
	return nil
}

// checkAccepted: Envoy Gateway accepts the route on every parent and
// resolves its references.
func checkAccepted(tr *translation, r ref) error {
	status, ok := tr.status[r.String()]
	if !ok {
		return fmt.Errorf("Envoy Gateway gave %s no status", r)
	}
	got := conditions(status)
	if diff := cmp.Diff([]string{"Accepted=True", "ResolvedRefs=True"}, got); diff != "" {
		return fmt.Errorf("%s's conditions (-want +got):\n%s\n%v", r, diff, status)
	}
	return nil
}

// ledger is the table of checks the scenarios ran, printed at the end.
type ledger struct {
	mu   sync.Mutex
	rows []checkRow
}

type checkRow struct {
	scenario, step, check string
	failed                bool
}

var checks ledger

func (l *ledger) record(scenario, step, check string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rows = append(l.rows, checkRow{scenario, step, check, err != nil})
}

// table is one line per scenario: its steps, the checks made after them
// (how many times) and how many passed.
func (l *ledger) table() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	type agg struct {
		steps, checks []string
		count         map[string]int
		passed, all   int
	}
	var order []string
	by := map[string]*agg{}
	for _, r := range l.rows {
		a := by[r.scenario]
		if a == nil {
			a = &agg{count: map[string]int{}}
			by[r.scenario] = a
			order = append(order, r.scenario)
		}
		if len(a.steps) == 0 || a.steps[len(a.steps)-1] != r.step {
			a.steps = append(a.steps, r.step)
		}
		if a.count[r.check] == 0 {
			a.checks = append(a.checks, r.check)
		}
		a.count[r.check]++
		a.all++
		if !r.failed {
			a.passed++
		}
	}
	var b strings.Builder
	b.WriteString("\n| scenario | steps | checks in Envoy's terms (times) | passed |\n| --- | --- | --- | --- |\n")
	for _, s := range order {
		a := by[s]
		var cs []string
		for _, c := range a.checks {
			cs = append(cs, fmt.Sprintf("%s (%d)", c, a.count[c]))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d/%d |\n", s, strings.Join(a.steps, ", "), strings.Join(cs, "; "), a.passed, a.all)
	}
	return b.String()
}
