package traffic

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// hits makes one hit per character, a millisecond apart from t0: 's' is
// stable, 'c' canary, 'b' baseline, 'x' a request the gateway answered with
// 500, '-' a request without an answer.
func hits(pattern string) []Hit {
	names := map[rune]Hit{'s': {Backend: "stable", Status: 200}, 'c': {Backend: "canary", Status: 200},
		'b': {Backend: "baseline", Status: 200}, 'x': {Status: 500}, '-': {}}
	var out []Hit
	for i, r := range pattern {
		h := names[r]
		h.At = t0.Add(time.Duration(i) * time.Millisecond)
		out = append(out, h)
	}
	return out
}

func TestCount(t *testing.T) {
	got := Count(hits("ssc-xs"))
	want := Counts{"stable": 3, "canary": 1, "(no answer)": 1, "(gateway 500)": 1}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("-want +got:\n%s", d)
	}
	if got.Total() != 6 {
		t.Fatalf("total %d, want 6", got.Total())
	}
}

func TestMismatches(t *testing.T) {
	for _, tc := range []struct {
		name    string
		counts  Counts
		weights map[string]int64
		want    []string
	}{
		{name: "exact", counts: Counts{"stable": 700, "canary": 300},
			weights: map[string]int64{"stable": 70, "canary": 30}},
		{name: "within one point", counts: Counts{"stable": 709, "canary": 291},
			weights: map[string]int64{"stable": 70, "canary": 30}},
		{name: "off by more than one point", counts: Counts{"stable": 712, "canary": 288},
			weights: map[string]int64{"stable": 70, "canary": 30},
			want:    []string{"canary got 288 of 1000 (28.8%), want 30.0%", "stable got 712 of 1000 (71.2%), want 70.0%"}},
		{name: "the old split", counts: Counts{"stable": 1000},
			weights: map[string]int64{"stable": 70, "canary": 30},
			want:    []string{"canary got 0 of 1000 (0.0%), want 30.0%", "stable got 1000 of 1000 (100.0%), want 70.0%"}},
		{name: "a zero weight gets nothing", counts: Counts{"stable": 1000},
			weights: map[string]int64{"stable": 100, "canary": 0}},
		{name: "a zero weight that answers, even within one point", counts: Counts{"stable": 996, "canary": 4},
			weights: map[string]int64{"stable": 100, "canary": 0},
			want:    []string{"canary got 4 of 1000 (0.4%), want 0.0%"}},
		{name: "a backend not on the route, even within one point", counts: Counts{"stable": 998, "experiment": 2},
			weights: map[string]int64{"stable": 100},
			want:    []string{"experiment got 2 of 1000 (0.2%), want 0.0%"}},
		{name: "errors are not a backend", counts: Counts{"stable": 980, "(gateway 500)": 20},
			weights: map[string]int64{"stable": 100, "canary": 0},
			want:    []string{"(gateway 500) got 20 of 1000 (2.0%), want 0.0%", "stable got 980 of 1000 (98.0%), want 100.0%"}},
		{name: "weights that are not percentages", counts: Counts{"stable": 600, "canary": 100, "baseline": 50, "exp": 250},
			weights: map[string]int64{"stable": 600000, "canary": 100000, "baseline": 50000, "exp": 250000}},
		{name: "no requests", counts: Counts{}, weights: map[string]int64{"stable": 100},
			want: []string{"no requests counted"}},
		{name: "weights sum to zero", counts: Counts{"stable": 1}, weights: map[string]int64{"stable": 0},
			want: []string{"the weights map[stable:0] sum to 0: no backend should get traffic"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.counts.Mismatches(tc.weights, Tolerance)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Fatalf("-want +got:\n%s", d)
			}
		})
	}
}

func TestDescribeAndBars(t *testing.T) {
	c := Counts{"stable": 700, "canary": 300}
	w := map[string]int64{"stable": 70, "canary": 30}
	if got, want := c.Describe(w), "canary 300 (30.0%, weight 30), stable 700 (70.0%, weight 70)"; got != want {
		t.Fatalf("Describe: %q, want %q", got, want)
	}
	got := Bars(Counts{"stable": 900, "(gateway 500)": 100}, map[string]int64{"stable": 90, "canary": 10}, 10)
	want := []string{
		"canary         ░░░░░░░░░░    0.0%  (0 of 1000)  route weight 10",
		"stable         █████████░   90.0%  (900 of 1000)  route weight 90",
		"(gateway 500)  █░░░░░░░░░   10.0%  (100 of 1000)  not on the route",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("-want +got:\n%s", d)
	}
}

func TestMovedAt(t *testing.T) {
	thirty := map[string]int64{"stable": 70, "canary": 30}
	// 70/30 interleaved smoothly, as weighted round robin does.
	smooth := strings.Repeat("sscsscsscs", 6)
	for _, tc := range []struct {
		name    string
		hits    []Hit
		weights map[string]int64
		window  int
		wantAt  int // index of the hit MovedAt returns; -1: not settled
	}{
		{name: "already there", hits: hits(smooth), weights: thirty, window: 10, wantAt: 0},
		{name: "moves after 25 stable-only hits", hits: hits(strings.Repeat("s", 25) + smooth), weights: thirty, window: 10,
			// The last window that fails starts at hit 20 (five stable-only
			// hits, then sscss: one canary hit where 3±1 are due).
			wantAt: 30},
		{name: "never moves", hits: hits(strings.Repeat("s", 60)), weights: thirty, window: 10, wantAt: -1},
		{name: "errors on the way", hits: hits("sxsxsx" + smooth), weights: thirty, window: 10, wantAt: 15},
		{name: "a backend not in the weights answers at the end", hits: hits(smooth + "b"), weights: thirty, window: 10, wantAt: -1},
		{name: "fewer hits than a window", hits: hits("ssc"), weights: thirty, window: 10, wantAt: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at, ok := MovedAt(tc.hits, tc.weights, tc.window)
			if tc.wantAt == -1 {
				if ok {
					t.Fatalf("settled at %v, want never", at.Sub(t0))
				}
				return
			}
			if !ok || !at.Equal(tc.hits[tc.wantAt].At) {
				t.Fatalf("MovedAt = %v (ok %v), want hit %d at %v", at.Sub(t0), ok, tc.wantAt, tc.hits[tc.wantAt].At.Sub(t0))
			}
		})
	}
}

func TestAfterAndSince(t *testing.T) {
	h := hits("sscsc")
	if d := cmp.Diff(h[2:4], After(h, t0.Add(2*time.Millisecond), 2)); d != "" {
		t.Fatalf("After: -want +got:\n%s", d)
	}
	if d := cmp.Diff(h[3:], After(h, t0.Add(2500*time.Microsecond), 10)); d != "" {
		t.Fatalf("After past the end: -want +got:\n%s", d)
	}
	if d := cmp.Diff(h[4:], Since(h, t0.Add(4*time.Millisecond))); d != "" {
		t.Fatalf("Since: -want +got:\n%s", d)
	}
}
