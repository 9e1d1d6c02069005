package events

import (
	"hash/maphash"
	"iter"
	"maps"
)

// seriesSet holds the series by their key. A key (the object reference,
// type, reason and note) is larger than the 128 bytes a Go map keeps in
// place, so a map[key]*series held a copy of every key in an allocation of
// its own: a quarter of what a series cost (BenchmarkRecorderHolds). So the
// set is a map by a 64-bit hash of the key, each series checked against the
// key it is looked up by, and a series whose hash another one already has
// is kept by its whole key, apart.
type seriesSet struct {
	seed     maphash.Seed
	byHash   map[uint64]*series
	collided map[key]*series
	// sum, when set, hashes instead of hash (a test's collisions).
	sum func(*key) uint64
}

func newSeriesSet() *seriesSet {
	return &seriesSet{seed: maphash.MakeSeed(), byHash: map[uint64]*series{}}
}

func (m *seriesSet) hash(k *key) uint64 {
	if m.sum != nil {
		return m.sum(k)
	}
	var h maphash.Hash
	h.SetSeed(m.seed)
	r := &k.regarding
	for _, s := range [...]string{r.APIVersion, r.Kind, r.Namespace, r.Name, string(r.UID), r.ResourceVersion, r.FieldPath, k.typ, k.reason, k.note} {
		h.WriteString(s)
		h.WriteByte(0)
	}
	return h.Sum64()
}

// get is the series of k.
func (m *seriesSet) get(k key) (*series, bool) {
	if s := m.byHash[m.hash(&k)]; s != nil && s.key() == k {
		return s, true
	}
	s, ok := m.collided[k]
	return s, ok
}

// put adds s, whose key k the set does not hold.
func (m *seriesSet) put(k key, s *series) {
	h := m.hash(&k)
	if m.byHash[h] == nil {
		m.byHash[h] = s
		return
	}
	if m.collided == nil {
		m.collided = map[key]*series{}
	}
	m.collided[k] = s
}

// delete drops the series of k.
func (m *seriesSet) delete(k key) {
	h := m.hash(&k)
	if s := m.byHash[h]; s != nil && s.key() == k {
		delete(m.byHash, h)
		return
	}
	delete(m.collided, k)
}

func (m *seriesSet) len() int { return len(m.byHash) + len(m.collided) }

// all is every series; a series may be deleted while they are iterated.
func (m *seriesSet) all() iter.Seq[*series] {
	return func(yield func(*series) bool) {
		for s := range maps.Values(m.byHash) {
			if !yield(s) {
				return
			}
		}
		for s := range maps.Values(m.collided) {
			if !yield(s) {
				return
			}
		}
	}
}
