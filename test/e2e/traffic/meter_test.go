package traffic

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeGateway answers like a gateway whose weights change after `switchAt`
// requests: stable only, then 7 stable to 3 canary, interleaved.
func fakeGateway(t *testing.T, switchAt int) *Meter {
	t.Helper()
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		i := n
		n++
		mu.Unlock()
		backend := "stable"
		if i >= switchAt && "sscsscsscs"[(i-switchAt)%10] == 'c' {
			backend = "canary"
		}
		if r.Host != "app.example.com" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.Header().Set(BackendHeader, backend)
	}))
	t.Cleanup(srv.Close)
	m, err := NewMeter(strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

var seventyThirty = map[string]int64{"stable": 70, "canary": 30}

func TestConvergeWaitsForTheSwitch(t *testing.T) {
	m := fakeGateway(t, 250)
	since := time.Now()
	c, err := m.Converge(context.Background(), Request{Host: "app.example.com"}, seventyThirty, 100, since, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Rounds of 100: the first three hold stable-only requests, the fourth
	// (requests 300..399) is the first whole round after the switch.
	if c.Requests != 400 || c.Counts["stable"] != 70 || c.Counts["canary"] != 30 || c.Already {
		t.Fatalf("Converge = %+v, want 400 requests, 70/30 in the last round, not already there", c)
	}
	if c.Moved <= 0 || c.Moved > c.Matched {
		t.Fatalf("moved %s, matched %s: want 0 < moved <= matched", c.Moved, c.Matched)
	}
}

func TestConvergeAlreadyThere(t *testing.T) {
	m := fakeGateway(t, 0)
	c, err := m.Converge(context.Background(), Request{Host: "app.example.com"}, seventyThirty, 100, time.Now(), 10*time.Second)
	if err != nil || !c.Already || c.Requests != 100 {
		t.Fatalf("Converge = %+v, %v; want the first round, already there", c, err)
	}
}

func TestConvergeGivesUp(t *testing.T) {
	m := fakeGateway(t, 1<<30)
	_, err := m.Converge(context.Background(), Request{Host: "app.example.com"}, seventyThirty, 100, time.Now(), 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "the split did not match") || !strings.Contains(err.Error(), "stable 100 (100.0%, weight 70)") {
		t.Fatalf("error %v, want one with the last round's split", err)
	}
}

func TestSamplerKeepsEveryAnswer(t *testing.T) {
	m := fakeGateway(t, 0)
	s := m.Sample(context.Background(), Request{Host: "app.example.com"}, 50, 0)
	got, err := s.WaitFor(context.Background(), time.Time{}, 50)
	if err != nil {
		t.Fatal(err)
	}
	all := s.Stop()
	if len(all) != 50 || len(got) != 50 {
		t.Fatalf("%d answers (%d waited for), want 50: the sampler stops at its maximum", len(all), len(got))
	}
	if m := Count(all).Mismatches(seventyThirty, Tolerance); len(m) > 0 {
		t.Fatal(m)
	}
}

func TestNewMeterRefusesAnythingButLoopback(t *testing.T) {
	for _, addr := range []string{"192.0.2.2:80", "10.213.0.2:8080", "[::ffff:192.0.2.2]:80"} {
		if _, err := NewMeter(addr); err == nil {
			t.Errorf("NewMeter(%s) accepted a non-loopback entrypoint", addr)
		}
	}
	if _, err := NewMeter("127.0.0.1:18000"); err != nil {
		t.Error(err)
	}
}
