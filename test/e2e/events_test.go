//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/e2e/cluster"
	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// The plugin's Events with the real controller: a Rollout whose config has
// a key the plugin refuses shows the plugin's Warning within seconds (the
// controller records nothing: it calls RemoveManagedRoutes first, and
// returns its error without an Event); two minutes of that failing step
// are one Event whose count rises, not a storm; fixed, the Rollout says
// once that it works again. A walk's changes are on the route's Events.

func count(e eventsv1.Event) int32 {
	if e.Series != nil {
		return e.Series.Count
	}
	return 1
}

// kubectl runs kubectl against the cluster and returns what it prints.
func kubectl(c *cluster.Cluster, args ...string) string {
	out, err := exec.Command("kubectl", append([]string{"--kubeconfig", c.Kubeconfig}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// runRefusedConfigEvents: the refused config key, seen, counted for two
// minutes, fixed.
func runRefusedConfigEvents(t *testing.T, c *cluster.Cluster) {
	sc := scenario{name: "events-refused-config"}
	r := &run{c: c, sc: sc}
	ns := "e2e-" + sc.name
	ctx := context.Background()
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	objects := service("evbad-stable", "evbad", 80) + service("evbad-canary", "evbad", 80) + httpRoute("evbad", "evbad-stable", "evbad-canary") +
		rolloutYAML("evbad", `
stableService: evbad-stable
canaryService: evbad-canary
trafficRouting:
  plugins:
    argoproj-labs/gatewayAPI:
      httpRoute: evbad
      httpRout: evbad
steps:
- setWeight: 30
- pause: {}`)
	created := time.Now()
	if err := c.CreateObjects(ctx, ns, objects, "e2e-create"); err != nil {
		t.Fatal(err)
	}

	// Seen within seconds, through the Events API.
	var first []eventsv1.Event
	err := c.Await(ctx, time.Minute, func() (string, error) {
		evs, err := harness.PluginEvents(ctx, c.Kube, fieldManager, ns, "Rollout", "evbad")
		first = evs
		if err != nil || len(evs) == 0 {
			return "no Event of the plugin on the Rollout yet", err
		}
		return "", nil
	})
	if err != nil {
		t.Fatalf("the plugin's Warning did not come: %v", err)
	}
	seen := time.Since(created)
	e := first[0]
	if e.Type != "Warning" || e.Reason != "InvalidConfig" || !strings.Contains(e.Note, `unknown key "httpRout"`) {
		t.Errorf("the first Event: %s %s %s", e.Type, e.Reason, e.Note)
	}
	r.record(t, fmt.Sprintf("a refused config key: the plugin's Warning %s on the Rollout %.1fs after it was created (%s: %.90s…)",
		e.Reason, seen.Seconds(), e.Action, e.Note))

	// Two minutes of it: sample every second; every new resourceVersion of
	// an Event is one write of the plugin's to the Events API.
	failingFor := 2 * time.Minute
	start := time.Now()
	errorsBefore := len(c.ControllerLog.FindLines(100000, cluster.PluginError, "rollout="+ns+"/evbad"))
	versions := map[string]bool{}
	type minute struct{ objects, writes int }
	perMinute := make([]minute, 2)
	known := map[string]bool{}
	total := func(evs []eventsv1.Event) (n int32) {
		for _, e := range evs {
			n += count(e)
		}
		return n
	}
	var countAtStart int32 = -1
	var last []eventsv1.Event
	for time.Since(start) < failingFor {
		evs, err := harness.PluginEvents(ctx, c.Kube, fieldManager, ns, "Rollout", "evbad")
		if err != nil {
			t.Fatal(err)
		}
		if countAtStart < 0 {
			countAtStart = total(evs)
		}
		m := min(int(time.Since(start)/time.Minute), 1)
		for _, e := range evs {
			if !known[e.Name] {
				known[e.Name] = true
				if e.CreationTimestamp.After(start) {
					perMinute[m].objects++
				}
			}
			if !versions[e.Name+"@"+e.ResourceVersion] {
				versions[e.Name+"@"+e.ResourceVersion] = true
				if time.Since(start) > time.Second {
					perMinute[m].writes++
				}
			}
		}
		last = evs
		time.Sleep(time.Second)
	}
	calls := len(c.ControllerLog.FindLines(100000, cluster.PluginError, "rollout="+ns+"/evbad")) - errorsBefore
	var summary []string
	for _, e := range last {
		summary = append(summary, fmt.Sprintf("%s %s %s x%d", e.Type, e.Reason, e.Action, count(e)))
	}
	r.record(t, fmt.Sprintf("the step failing for %s: %d failed calls logged by the plugin, the Events' count from %d to %d; Events created: %d in the first minute, %d in the second; "+
		"writes to the Events API (new resourceVersions seen): %d and %d; on the Rollout now: %s",
		failingFor, calls, countAtStart, total(last), perMinute[0].objects, perMinute[1].objects, perMinute[0].writes, perMinute[1].writes, strings.Join(summary, ", ")))
	for _, m := range perMinute {
		if m.objects > 0 || m.writes > 13 { // a series' count at most every 5 s: 12 a minute, plus one
			t.Errorf("an Event storm: %+v per minute", perMinute)
		}
	}
	describe := kubectl(c, "describe", "rollout", "evbad", "-n", ns)
	if _, events, ok := strings.Cut(describe, "\nEvents:"); ok {
		t.Logf("kubectl describe rollout evbad:\nEvents:%s", events)
		r.record(t, "kubectl describe rollout evbad -n "+ns+", its Events:"+strings.ReplaceAll(events, "\n", "\n    "))
	} else {
		t.Errorf("kubectl describe rollout shows no Events:\n%s", describe)
	}

	// Fixed: the controller's next call works, and the Rollout says so once.
	fixed := time.Now()
	patch := `[{"op":"remove","path":"/spec/strategy/canary/trafficRouting/plugins/argoproj-labs~1gatewayAPI/httpRout"}]`
	if _, err := c.Dynamic.Resource(cluster.RolloutsGVR).Namespace(ns).Patch(ctx, "evbad", types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	var recovered []eventsv1.Event
	err = c.Await(ctx, time.Minute, func() (string, error) {
		evs, err := harness.PluginEvents(ctx, c.Kube, fieldManager, ns, "Rollout", "evbad")
		recovered = slices.DeleteFunc(evs, func(e eventsv1.Event) bool { return e.Reason != "Recovered" })
		if err != nil || len(recovered) == 0 {
			return "no Recovered Event yet", err
		}
		return "", nil
	})
	if err != nil {
		t.Fatalf("fixed, the Rollout did not say it works again: %v", err)
	}
	var notes []string
	for _, e := range recovered {
		notes = append(notes, e.Note)
	}
	r.record(t, fmt.Sprintf("the key removed: %d Recovered Event(s) %.1fs later: %s", len(recovered), time.Since(fixed).Seconds(), strings.Join(notes, " | ")))
	time.Sleep(10 * time.Second)
	evs, err := harness.PluginEvents(ctx, c.Kube, fieldManager, ns, "Rollout", "evbad")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(slices.DeleteFunc(evs, func(e eventsv1.Event) bool { return e.Reason != "Recovered" })); n != len(recovered) {
		t.Errorf("%d Recovered Events 10 s later, %d before: it should say so once per failing call", n, len(recovered))
	}
}

// runWalkEvents: a canary walked by the controller leaves, on its route,
// one WeightsChanged Event per write the plugin logged, and OwnershipReleased
// when the rollout ends.
func runWalkEvents(t *testing.T, c *cluster.Cluster) {
	sc := scenario{
		name: "events-walk",
		objects: service("evw-stable", "evw", 80) + service("evw-canary", "evw", 80) + httpRoute("evw", "evw-stable", "evw-canary") +
			rolloutYAML("evw", `
stableService: evw-stable
canaryService: evw-canary
trafficRouting:
  plugins:
    argoproj-labs/gatewayAPI:
      httpRoute: evw
steps:
- setWeight: 30
- pause: {}
- setWeight: 60
- pause: {}`),
		rollout: "evw",
		route:   routeRef{"HTTPRoute", "evw"},
		steps: []step{
			installed(map[string]int64{"evw-stable": 100, "evw-canary": 0}),
			{name: "image v2: canary 30, paused", do: img("evw", "v2"),
				want: want{phase: "Paused", stepIndex: index(1), weights: map[string]int64{"evw-stable": 70, "evw-canary": 30}}},
			{name: "promote: canary 60, paused", do: action{kind: promote},
				want: want{phase: "Paused", stepIndex: index(3), weights: map[string]int64{"evw-stable": 40, "evw-canary": 60}}},
			{name: "promote: fully promoted", do: action{kind: promote},
				want: want{phase: "Healthy", promoted: true, stepIndex: index(4), weights: map[string]int64{"evw-stable": 100, "evw-canary": 0}}},
		},
	}
	runScenario(t, c, sc)
	ns := "e2e-" + sc.name
	ctx := context.Background()
	rolloutName := "rollout=" + ns + "/evw"
	var evs []eventsv1.Event
	var applied, released int
	err := c.Await(ctx, time.Minute, func() (string, error) {
		var err error
		if evs, err = harness.PluginEvents(ctx, c.Kube, fieldManager, ns, "HTTPRoute", "evw"); err != nil {
			return "", err
		}
		applied = len(c.ControllerLog.FindLines(100000, "applied route", rolloutName))
		released = len(c.ControllerLog.FindLines(100000, "released route", rolloutName))
		weights, releases := 0, 0
		for _, e := range evs {
			switch e.Reason {
			case "WeightsChanged":
				weights++
			case "OwnershipReleased":
				releases++
			}
		}
		if weights != applied || releases != released || released == 0 {
			return fmt.Sprintf("%d WeightsChanged Events for %d writes, %d OwnershipReleased for %d releases", weights, applied, releases, released), nil
		}
		return "", nil
	})
	var lines []string
	for _, e := range evs {
		lines = append(lines, fmt.Sprintf("%s %s x%d: %s", e.Type, e.Reason, count(e), e.Note))
	}
	if err != nil {
		t.Errorf("the route's Events do not match the plugin's writes: %v\n%s", err, strings.Join(lines, "\n"))
	}
	(&run{sc: sc}).record(t, append([]string{fmt.Sprintf("the route's Events after the walk (%d writes, %d release logged by the plugin):", applied, released)}, lines...)...)
	t.Logf("kubectl describe httproute evw:\n%s", kubectl(c, "describe", "httproute", "evw", "-n", ns))
	checkPluginMetrics(t, c, &run{sc: sc}, applied)
}
