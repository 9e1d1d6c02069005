package kube

import (
	"maps"
	"slices"
	"strings"
	"sync"
)

// labelPairs are the labels of a route as a slim cache entry keeps them:
// key, value, key, value, ..., sorted by key. A label selector reads them
// (labels.Labels) as it reads a map; they take a fraction of a map's
// memory, and entries with the same labels share one slice (labelSets).
type labelPairs []string

// Has says whether the label is there.
func (l labelPairs) Has(key string) bool {
	_, ok := l.Lookup(key)
	return ok
}

// Get is the label's value ("" if it is not there).
func (l labelPairs) Get(key string) string {
	v, _ := l.Lookup(key)
	return v
}

// Lookup is the label's value, and whether it is there.
func (l labelPairs) Lookup(key string) (string, bool) {
	for i := 0; i+1 < len(l); i += 2 {
		if l[i] == key {
			return l[i+1], true
		}
	}
	return "", false
}

// asMap is the labels as a map of their own.
func (l labelPairs) asMap() map[string]string {
	if l == nil {
		return nil
	}
	m := make(map[string]string, len(l)/2)
	for i := 0; i+1 < len(l); i += 2 {
		m[l[i]] = l[i+1]
	}
	return m
}

// labelSets hands out one labelPairs per distinct set of labels: in a
// namespace of thousands of routes, most share a few sets.
type labelSets struct {
	mu   sync.Mutex
	sets map[string]labelPairs
}

// of is the shared labelPairs of m (nil for no labels).
func (s *labelSets) of(m map[string]string) labelPairs {
	if len(m) == 0 {
		return nil
	}
	pairs := make(labelPairs, 0, 2*len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		pairs = append(pairs, k, m[k])
	}
	key := strings.Join(pairs, "\x00")
	s.mu.Lock()
	defer s.mu.Unlock()
	if shared, ok := s.sets[key]; ok {
		return shared
	}
	if s.sets == nil {
		s.sets = map[string]labelPairs{}
	}
	s.sets[key] = pairs
	return pairs
}
