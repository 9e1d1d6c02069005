package events

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// Series whose keys hash the same are each found by their own key, before
// and after one of them is dropped.
func TestSeriesSetCollisions(t *testing.T) {
	m := newSeriesSet()
	m.sum = func(*key) uint64 { return 7 } // every key collides
	mk := func(note string) *series {
		return &series{ev: Event{Regarding: webRef, Type: corev1.EventTypeNormal, Reason: reasonWeightsChanged, Note: note}}
	}
	a, b, c := mk("a"), mk("b"), mk("c")
	for _, s := range []*series{a, b, c} {
		m.put(s.key(), s)
	}
	found := func(want ...*series) {
		t.Helper()
		for _, s := range []*series{a, b, c, mk("d")} {
			got, ok := m.get(s.key())
			if in := slices.Contains(want, s); ok != in || (ok && got != s) {
				t.Errorf("get(%q) = %p, %v; want it held: %v", s.ev.Note, got, ok, in)
			}
		}
		if m.len() != len(want) || len(slices.Collect(m.all())) != len(want) {
			t.Errorf("len %d, all %d; want %d", m.len(), len(slices.Collect(m.all())), len(want))
		}
	}
	found(a, b, c)
	m.delete(a.key()) // the one kept by its hash
	found(b, c)
	m.put(a.key(), a)
	found(a, b, c)
	m.delete(c.key()) // one kept apart
	found(a, b)
	for s := range m.all() { // dropped while iterated, as flush does
		m.delete(s.key())
	}
	found()
}
