package kubeclient

import (
	"context"
	"net/http"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// untilRefused counts the requests of the clients sent with ctx before the
// rate limiter refuses one: with a bucket that refills once in 1,000 s and
// a context of a minute, a request that would wait for a token is refused
// at once.
func untilRefused(t *testing.T, c Clients, ctx context.Context, most int) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for n := 0; n < most; n++ {
		if err := c.Gateway.GatewayV1().RESTClient().Get().AbsPath("/version").Do(ctx).Error(); err != nil {
			return n
		}
	}
	return most
}

// A sweep that walks the whole cluster takes at most a quarter of the
// clients' burst (ForSweeps), and the calls keep the rest: with a burst of
// 8, the sweep's third request waits while the calls still send six.
func TestASweepTakesAtMostItsShareOfTheTokenBucket(t *testing.T) {
	s := newServer(t, func(int, http.ResponseWriter, *http.Request) {})
	c, err := NewClients(&rest.Config{Host: s.URL, QPS: 0.001, Burst: 8}, testPolicy, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	if n := untilRefused(t, c, ForSweeps(context.Background()), 100); n != 2 {
		t.Errorf("the sweep sent %d requests at once; want 2, a quarter of the burst", n)
	}
	if n := untilRefused(t, c, context.Background(), 100); n != 6 {
		t.Errorf("the calls sent %d requests after the sweep's; want the 6 left of the burst", n)
	}
}
