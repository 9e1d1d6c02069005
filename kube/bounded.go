package kube

import "container/list"

// What a Cluster remembers for calls is kept in bounded maps: a Rollout's
// author decides which names a call reads, so no map of them may grow with
// what one tenant asks for (DESIGN.md, contract 10). Each forgets the entry
// used least recently once it holds its bound; what it forgets costs a
// request later, never a wrong answer.

// The bounds of what a Cluster remembers.
const (
	// maxReadByCalls bounds the routes whose watch caches keep them whole:
	// ten times the routes one call may work on (maxRoutesPerCall), so
	// every Rollout of a large installation keeps its own. A route
	// forgotten is kept slim from its next event on and read with a GET
	// when a call uses it again.
	maxReadByCalls = 10_000
	// maxMissing bounds the named routes remembered as missing.
	maxMissing = 1_000
	// maxPredecessors bounds the argoproj-labs plugin's ConfigMaps whose
	// reads are remembered: one per namespace with Rollouts that moved
	// from that plugin.
	maxPredecessors = 1_000
)

// bounded is a map of at most max entries that forgets the entry used least
// recently (put or touched) when it would hold more. It is not safe for
// concurrent use: the Cluster's lock guards it.
type bounded[K comparable, V any] struct {
	max   int
	order *list.List // of *boundedEntry, the most recently used first
	items map[K]*list.Element
}

type boundedEntry[K comparable, V any] struct {
	key K
	val V
}

func newBounded[K comparable, V any](max int) *bounded[K, V] {
	return &bounded[K, V]{max: max, order: list.New(), items: map[K]*list.Element{}}
}

// get is the entry of k, without counting it as a use.
func (b *bounded[K, V]) get(k K) (V, bool) {
	if e, ok := b.items[k]; ok {
		return e.Value.(*boundedEntry[K, V]).val, true
	}
	var zero V
	return zero, false
}

// put sets k's entry and counts it as used; the keys it forgot to stay
// within its bound are returned.
func (b *bounded[K, V]) put(k K, v V) (forgot []K) {
	if e, ok := b.items[k]; ok {
		e.Value.(*boundedEntry[K, V]).val = v
		b.order.MoveToFront(e)
		return nil
	}
	b.items[k] = b.order.PushFront(&boundedEntry[K, V]{key: k, val: v})
	for b.order.Len() > b.max {
		oldest := b.order.Back()
		key := oldest.Value.(*boundedEntry[K, V]).key
		b.order.Remove(oldest)
		delete(b.items, key)
		forgot = append(forgot, key)
	}
	return forgot
}

// delete forgets k.
func (b *bounded[K, V]) delete(k K) {
	if e, ok := b.items[k]; ok {
		b.order.Remove(e)
		delete(b.items, k)
	}
}

// len is how many entries it holds.
func (b *bounded[K, V]) len() int { return len(b.items) }

// deleteIf forgets every entry whose key of says so.
func (b *bounded[K, V]) deleteIf(of func(K) bool) {
	for k, e := range b.items {
		if of(k) {
			b.order.Remove(e)
			delete(b.items, k)
		}
	}
}

// keys are the keys it holds, the most recently used first.
func (b *bounded[K, V]) keys() []K {
	out := make([]K, 0, b.order.Len())
	for e := b.order.Front(); e != nil; e = e.Next() {
		out = append(out, e.Value.(*boundedEntry[K, V]).key)
	}
	return out
}
