package desired

import (
	"strings"
	"testing"
	"time"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const traefik = "traefik.io/gateway-controller"

// seStatusAt is a route whose status, reported by controller, the apiserver
// recorded as written at the given time; its spec was written earlier.
func seStatusAt(controller string, written time.Time) routes.Route {
	st := stGood(stGateway, 3)
	st.ControllerName = controller
	r := stRoute([]routes.ParentRef{stGateway}, st)
	r.ManagedFields = routes.NewManagedFields([]metav1.ManagedFieldsEntry{
		{Manager: "argo-rollouts-gatewayapi", Operation: metav1.ManagedFieldsOperationApply, Time: &metav1.Time{Time: written.Add(-time.Minute)}},
		{Manager: "traefik", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", Time: &metav1.Time{Time: written}},
	})
	return r
}

func TestSettleFor(t *testing.T) {
	five := 5 * time.Second
	zero := time.Duration(0)
	other := stGood(stParent("other"), 3)
	other.ControllerName = traefik
	tests := []struct {
		name     string
		route    routes.Route
		override *time.Duration
		want     Settle
	}{
		{name: "Traefik", route: seStatusAt(traefik, time.Now()),
			want: Settle{Wait: 4 * time.Second, Source: "settle time of traefik.io/gateway-controller"}},
		{name: "a controller not measured waits nothing", route: seStatusAt("example.com/gateway-controller", time.Now()),
			want: Settle{}},
		{name: "the Rollout's verifyWeightSettle wins", route: seStatusAt(traefik, time.Now()), override: &five,
			want: Settle{Wait: five, Source: "verifyWeightSettle"}},
		{name: "verifyWeightSettle 0s turns it off", route: seStatusAt(traefik, time.Now()), override: &zero,
			want: Settle{Wait: 0, Source: "verifyWeightSettle"}},
		{name: "status for a parent the spec no longer names does not count",
			route: stRoute([]routes.ParentRef{stGateway}, stGood(stGateway, 3), other), want: Settle{}},
		{name: "several controllers: the longest", route: stRoute([]routes.ParentRef{stGateway, stParent("other")}, stGood(stGateway, 3), other),
			want: Settle{Wait: 4 * time.Second, Source: "settle time of traefik.io/gateway-controller"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, SettleFor(tc.route, tc.override)); d != "" {
				t.Fatalf("-want +got:\n%s", d)
			}
		})
	}
}

func TestSettleRemaining(t *testing.T) {
	// The apiserver truncates managedFields times to the second.
	written := time.Date(2025, 6, 1, 12, 0, 7, 0, time.UTC)
	threeSeconds := Settle{Wait: 3 * time.Second, Source: "test"}
	tests := []struct {
		name    string
		settle  Settle
		route   routes.Route
		now     time.Time
		want    time.Duration
		wantErr string
	}{
		// The write happened in [12:00:07, 12:00:08): the wait ends at 12:00:11.
		{name: "right after the status write", settle: threeSeconds, route: seStatusAt(traefik, written),
			now: written.Add(200 * time.Millisecond), want: 3800 * time.Millisecond},
		{name: "one second of resolution counts as waited for", settle: threeSeconds, route: seStatusAt(traefik, written),
			now: written.Add(3 * time.Second), want: time.Second},
		{name: "passed", settle: threeSeconds, route: seStatusAt(traefik, written), now: written.Add(4 * time.Second), want: 0},
		{name: "long passed", settle: threeSeconds, route: seStatusAt(traefik, written), now: written.Add(time.Hour), want: 0},
		{name: "no settle needs no status write", settle: Settle{}, route: stRoute([]routes.ParentRef{stGateway}, stGood(stGateway, 3)),
			now: written, want: 0},
		{name: "a settle without a recorded status write is an error", settle: threeSeconds,
			route: stRoute([]routes.ParentRef{stGateway}, stGood(stGateway, 3)), now: written,
			wantErr: "HTTPRoute shop/web: metadata.managedFields records no write of the status subresource"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.settle.Remaining(tc.route, tc.now)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("remaining %s, want %s", got, tc.want)
			}
		})
	}
}

func TestStatusWrittenTakesTheNewestStatusEntry(t *testing.T) {
	r := seStatusAt(traefik, time.Date(2025, 6, 1, 12, 0, 7, 0, time.UTC))
	newer := time.Date(2025, 6, 1, 12, 0, 9, 0, time.UTC)
	r.ManagedFields = routes.NewManagedFields(append(r.ManagedFields.Entries(),
		metav1.ManagedFieldsEntry{Manager: "other-gateway", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", Time: &metav1.Time{Time: newer}},
		// A newer spec write is not a status write.
		metav1.ManagedFieldsEntry{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, Time: &metav1.Time{Time: newer.Add(time.Hour)}}))
	got, ok := statusWritten(r)
	if !ok || !got.Equal(newer.Add(time.Second)) {
		t.Fatalf("statusWritten = %v, %v; want %v", got, ok, newer.Add(time.Second))
	}
}
