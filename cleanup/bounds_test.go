package cleanup

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// goneRoutes are routes r0..r<n-1>, each claimed by Rollouts g0..g<m-1>,
// none of which exists.
func goneRoutes(t *testing.T, n, m int) *fakeCluster {
	t.Helper()
	var splits []split
	for j := range m {
		splits = append(splits, split{fmt.Sprintf("/g%d", j), fmt.Sprintf("g%d", j), 30})
	}
	f := newFakeCluster(t)
	for i := range n {
		f.Add(route(t, fmt.Sprintf("r%d", i), splits...))
	}
	return f
}

// countClaimReads counts, until the test ends, the reads of a route's
// claims annotation by the sweep, per route.
func countClaimReads(t *testing.T) map[routes.Ref]int {
	reads := map[routes.Ref]int{}
	t.Cleanup(func() { readClaims = routes.ReadClaims })
	readClaims = func(r routes.Route) (routes.Claims, error) {
		reads[r.Ref]++
		return routes.ReadClaims(r)
	}
	return reads
}

// Four routes carry the claims of three deleted Rollouts: a sweep that
// undoes them reads each route's claims annotation once, not once per
// Rollout (the claims may name as many Rollouts as a route's owner wrote).
func TestASweepReadsEachRoutesClaimsOnce(t *testing.T) {
	f := goneRoutes(t, 4, 3)
	s := &Sweeper{Cleaner: newCleaner(t, f), Interval: sweepInterval}
	ctx := testContext(t)
	s.Sweep(ctx, start)
	reads := countClaimReads(t)
	s.Sweep(ctx, start.Add(sweepInterval))
	if n := len(f.Written()); n == 0 {
		t.Fatal("the second sweep undid nothing")
	}
	if len(reads) != 4 {
		t.Errorf("claims of %d routes read; want 4", len(reads))
	}
	for ref, n := range reads {
		if n != 1 {
			t.Errorf("%s: its claims read %d times in one sweep; want once", ref, n)
		}
	}
}

// cancelAt cancels when the log says text.
type cancelAt struct {
	text   string
	cancel context.CancelFunc
}

func (c cancelAt) Levels() []logrus.Level { return logrus.AllLevels }
func (c cancelAt) Fire(e *logrus.Entry) error {
	if strings.Contains(e.Message, c.text) {
		c.cancel()
	}
	return nil
}

// A sweep whose context ends (its interval passed, the plugin stops)
// between two deleted Rollouts undoes no more of them: it says so once and
// leaves the rest to the next sweep, instead of failing on every route left.
func TestASweepStopsWhereItsContextEnds(t *testing.T) {
	f := goneRoutes(t, 1, 3)
	c := newCleaner(t, f)
	logger, hook := logtest.NewNullLogger()
	c.Log = logrus.NewEntry(logger)
	s := &Sweeper{Cleaner: c, Interval: sweepInterval}
	s.Sweep(testContext(t), start)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	logger.AddHook(cancelAt{text: "undid the claims of a deleted Rollout", cancel: cancel})
	hook.Reset()
	s.Sweep(ctx, start.Add(sweepInterval))
	var said []string
	for _, e := range hook.AllEntries() {
		said = append(said, e.Message)
	}
	want := []string{"cleanup sweep: undid the claims of a deleted Rollout", "cleanup sweep: stopped before it was done; the next sweep carries on"}
	if strings.Join(said, "\n") != strings.Join(want, "\n") {
		t.Errorf("the sweep logged:\n%s\nwant:\n%s", strings.Join(said, "\n"), strings.Join(want, "\n"))
	}
	if w := f.Written(); len(w) != 1 {
		t.Errorf("the sweep wrote %v; want one apply, for the first Rollout", w)
	}
}
