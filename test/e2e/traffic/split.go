package traffic

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// Hit is the answer to one request.
type Hit struct {
	At time.Time
	// Backend is the X-Backend header of the answer: the Service whose
	// backend answered; "" when none did.
	Backend string
	// Status is the HTTP status; 0 when the request got no answer.
	Status int
	// SetCookie is the first Set-Cookie header of an HTTP answer.
	SetCookie string
}

// Key is what a hit counts under: the backend, or in parentheses why there
// was none (the gateway answering by itself, e.g. 500 for a Service without
// endpoints, or no answer at all).
func (h Hit) Key() string {
	switch {
	case h.Status == 0:
		return "(no answer)"
	case h.Backend == "":
		return fmt.Sprintf("(gateway %d)", h.Status)
	case h.Status != 200:
		return fmt.Sprintf("(%s %d)", h.Backend, h.Status)
	}
	return h.Backend
}

// Counts is how many requests each backend answered (see Hit.Key).
type Counts map[string]int

// Count counts hits by Key.
func Count(hits []Hit) Counts {
	c := Counts{}
	for _, h := range hits {
		c[h.Key()]++
	}
	return c
}

// Total is the number of requests counted.
func (c Counts) Total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// Tolerance is how far a backend's share of the requests may be from its
// share of the weights: one percentage point. Traefik's weighted round robin
// is deterministic, so over 1,000 requests it is met exactly or nearly so.
const Tolerance = 0.01

// share is each backend's fraction of the weights.
func share(weights map[string]int64) (map[string]float64, error) {
	var sum int64
	for name, w := range weights {
		if w < 0 {
			return nil, fmt.Errorf("backend %s has negative weight %d", name, w)
		}
		sum += w
	}
	if sum == 0 {
		return nil, fmt.Errorf("the weights %v sum to 0: no backend should get traffic", weights)
	}
	out := make(map[string]float64, len(weights))
	for name, w := range weights {
		out[name] = float64(w) / float64(sum)
	}
	return out, nil
}

// Mismatches compares counts with weights: every backend's share of the
// requests must be within tolerance of its share of the weights, and a
// backend with weight 0, or one the weights do not name (another backend,
// an error), must get no request at all: weighted round robin never sends it
// one, so a single request there is traffic the weights do not explain.
// Empty when the split matches.
func (c Counts) Mismatches(weights map[string]int64, tolerance float64) []string {
	want, err := share(weights)
	if err != nil {
		return []string{err.Error()}
	}
	total := c.Total()
	if total == 0 {
		return []string{"no requests counted"}
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(unionKeys(c, want))) {
		got := float64(c[name]) / float64(total)
		if math.Abs(got-want[name]) > tolerance+1e-9 || (want[name] == 0 && c[name] > 0) {
			out = append(out, fmt.Sprintf("%s got %d of %d (%.1f%%), want %.1f%%", name, c[name], total, 100*got, 100*want[name]))
		}
	}
	return out
}

func unionKeys(c Counts, want map[string]float64) map[string]bool {
	keys := map[string]bool{}
	for k := range c {
		keys[k] = true
	}
	for k := range want {
		keys[k] = true
	}
	return keys
}

// Describe is the split in one line, next to the weights:
// "stable 700 (70.0%, weight 70), canary 300 (30.0%, weight 30)".
func (c Counts) Describe(weights map[string]int64) string {
	total := c.Total()
	var parts []string
	for _, name := range order(c, weights) {
		pct := 0.0
		if total > 0 {
			pct = 100 * float64(c[name]) / float64(total)
		}
		part := fmt.Sprintf("%s %d (%.1f%%", name, c[name], pct)
		if w, ok := weights[name]; ok {
			part += fmt.Sprintf(", weight %d", w)
		}
		parts = append(parts, part+")")
	}
	return strings.Join(parts, ", ")
}

// order lists the weights' backends in name order, then whatever else
// answered.
func order(c Counts, weights map[string]int64) []string {
	out := slices.Sorted(maps.Keys(weights))
	for _, k := range slices.Sorted(maps.Keys(c)) {
		if _, ok := weights[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}

// Bars draws the split as one bar per backend, next to its weight on the
// route, for a person to read:
//
//	rollouts-demo-stable  ██████████████████░░  90.0%  (900 of 1000)  route weight 90
func Bars(c Counts, weights map[string]int64, width int) []string {
	total := c.Total()
	names := order(c, weights)
	pad := 0
	for _, n := range names {
		pad = max(pad, len(n))
	}
	var out []string
	for _, name := range names {
		frac := 0.0
		if total > 0 {
			frac = float64(c[name]) / float64(total)
		}
		full := int(math.Round(frac * float64(width)))
		line := fmt.Sprintf("%-*s  %s%s  %5.1f%%  (%d of %d)", pad, name,
			strings.Repeat("█", full), strings.Repeat("░", width-full), 100*frac, c[name], total)
		if w, ok := weights[name]; ok {
			line += fmt.Sprintf("  route weight %d", w)
		} else {
			line += "  not on the route"
		}
		out = append(out, line)
	}
	return out
}

// windowSlack is how many requests a backend's count in one window may be
// off its share: weighted round robin interleaves smoothly, so every window
// is within about one request of the weights.
const windowSlack = 1

// DefaultWindow is the window MovedAt slides over the hits.
const DefaultWindow = 20

// MovedAt finds when the traffic followed the weights: the time of the first
// hit after the last window of consecutive hits that does not match them
// (each backend within windowSlack requests of its share; nothing else, and
// no backend of weight 0, answering). From that hit on, every window matches. ok is false when the
// hits never settle (the last window does not match, or there are fewer
// than window hits). The true switch lies within window hits before the
// time returned, so the time is an upper bound, precise to one window.
func MovedAt(hits []Hit, weights map[string]int64, window int) (at time.Time, ok bool) {
	want, err := share(weights)
	if err != nil || window <= 0 || len(hits) < window {
		return time.Time{}, false
	}
	lastBad := -1
	counts := Counts{}
	for i, h := range hits {
		counts[h.Key()]++
		if i >= window {
			counts[hits[i-window].Key()]--
		}
		if i >= window-1 && !windowMatches(counts, want, window) {
			lastBad = i - window + 1
		}
	}
	switch {
	case lastBad == -1:
		return hits[0].At, true
	case lastBad+window >= len(hits):
		return time.Time{}, false
	}
	return hits[lastBad+window].At, true
}

func windowMatches(counts Counts, want map[string]float64, window int) bool {
	for name, n := range counts {
		if n == 0 {
			continue
		}
		if _, ok := want[name]; !ok {
			return false
		}
	}
	for name, s := range want {
		if math.Abs(float64(counts[name])-s*float64(window)) > windowSlack+1e-9 || (s == 0 && counts[name] > 0) {
			return false
		}
	}
	return true
}

// After returns the first n hits at or after t (fewer if the hits end).
func After(hits []Hit, t time.Time, n int) []Hit {
	i, _ := slices.BinarySearchFunc(hits, t, func(h Hit, t time.Time) int { return h.At.Compare(t) })
	return hits[i:min(len(hits), i+n)]
}

// Since returns the hits at or after t.
func Since(hits []Hit, t time.Time) []Hit {
	i, _ := slices.BinarySearchFunc(hits, t, func(h Hit, t time.Time) int { return h.At.Compare(t) })
	return hits[i:]
}
